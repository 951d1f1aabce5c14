"""Multi-line kernel events on real excerpts of models/corpus/dev.jsonl: every line of the excerpt
carries its label (dumps join the event above them, headers the event below), and the pipeline
(prefiltered lines only) makes the events they stand for."""

from __future__ import annotations

import datetime as dt
import io

import pytest

from faultline.classify import corpus
from faultline.ingest.parse import SourceContext, parse_stream

EXCERPTS = {
    "hung task and its dump": ("aufs_umount_hung@", 1),
    "oops with registers and raw stack words": ("problems/null_pointer@", 1),
    "Xid 119 with GSP RPC history and a kernel stack": ("dmesg-with-xid-119.log@", 1),
    "identity header before an Xid 79": ("https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1151", 1),
    "Xid 120 with its RISC-V dump": ("https://github.com/zen-browser/desktop/issues/8303", 1),
    "wrapped API mismatch": ("https://github.com/negativo17/nvidia-driver/issues/43", 1),
    "SXid block cut at its start": ("https://github.com/NVIDIA/nvtrust/issues/124", 1),
    "fatal AER on a GPU root port": ("https://github.com/rwth-i6/returnn/issues/1500", 1),
    "OOM report": ("https://github.com/equinor/ert/issues/7797", 1),
    "init failure of one GPU after an ECC Xid of another": ("https://github.com/NVIDIA/gpu-operator/issues/1146", 2),
}


def _excerpt(source_part: str, excerpt: int) -> list[dict]:
    recs = [r for r in corpus.load("dev") if source_part in r["source"] and r["excerpt"] == excerpt]
    assert recs and len({r["source"] for r in recs}) == 1
    return recs


def _parse(recs: list[dict], full: bool):
    data = ("\n".join(r["text"] for r in recs) + "\n").encode()
    ctx = SourceContext(source="x", kind="kernel", ref_date=dt.date(2025, 1, 1), full=full)
    return parse_stream(io.BytesIO(data), ctx)


@pytest.mark.parametrize("name", EXCERPTS)
def test_every_line_carries_its_label(name):
    recs = _excerpt(*EXCERPTS[name])
    got = _parse(recs, full=True).per_line.sort("line_no")["category"].to_list()
    assert got == [r["category"] for r in recs]


def test_identity_header_and_xid_are_one_event_with_the_gpu_uuid():
    ev = _parse(_excerpt(*EXCERPTS["identity header before an Xid 79"]), full=False).events
    assert ev.select("line_no", "line_count", "xid", "gpu_uuid", "gpu_serial", "category").row(0) == (
        1,
        3,
        79,
        "GPU-0b6b7808-c002-f593-ac86-cd8e57757b94",
        "0",
        "gpu_bus_lost",
    )


def test_a_line_naming_another_gpu_starts_its_own_event():
    ev = _parse(_excerpt(*EXCERPTS["init failure of one GPU after an ECC Xid of another"]), full=False).events
    assert ev.select("line_no", "line_count", "gpu_pci", "category", "xid").rows() == [
        (1, 3, "0000:0a:00", "gpu_hardware", None),
        (4, 1, "0000:07:00", "gpu_memory", 48),
        (5, 1, "0000:07:00", "gpu_memory", 64),
        (6, 4, "0000:0a:00", "gpu_hardware", None),
    ]
