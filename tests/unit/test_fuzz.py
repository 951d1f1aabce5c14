"""Property tests (hypothesis) for the readers of untrusted input: kernel logs and job output
through ``parse_files``, ``parse_sacct``, ``load_dump`` and ``faultline classify``.

Examples are kept few (CI budget); ``bench/fuzz.py`` runs the same checks for as long as
you like on mutated real-format lines.
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import badinput as bi
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from faultline.cli import main as cli
from faultline.ingest.flight_recorder import FlightRecorderError, load_dump, summarize_dumps
from faultline.ingest.parse import SourceContext, parse_files
from faultline.ingest.reader import physical_lines
from faultline.ingest.sacct import parse_sacct

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

REAL_LINES = [ln.encode() for ln in (bi.good_kernel("node-a01") + bi.GOOD_JOB).splitlines()] + [
    b"Nov 24 03:14:08 node-a17 kernel: NVRM: The NVIDIA GPU 0000:3b:00.0",
    b"Nov 24 03:14:08 node-a17 kernel: NVRM: (PCI ID: 10de:2330) installed in this system has",
    b"Nov 24 03:14:08 node-a17 kernel: NVRM: fallen off the bus and is not responding to commands.",
    b"[Tue Nov 24 03:14:07 2026] nvidia-nvswitch2: SXid (PCI:0000:a5:00.0): 20034, Fatal, Link 30 LTSSM Fault Up",
    b"[Tue Nov 24 03:14:07 2026] nvidia-nvswitch2: SXid (PCI:0000:a5:00.0): 20034, Data {0x00000000, 0x00000000}",
    b"[rank3]:Traceback (most recent call last):",
    b'[rank3]:  File "/workspace/train.py", line 211, in <module>',
    b"[rank3]:RuntimeError: CUDA error: an illegal memory access was encountered",
    b"[Nov24 03:14] NVRM: Xid (PCI:0000:3b:00): 63, pid=1, name=x, Row Remapper: New row marked for remapping",
    b"[  +0.000812] NVRM: Xid (PCI:0000:3b:00): 64, pid=1, name=x, Row Remapper Error",
    b"6,1234,8812334455,-;NVRM: Xid (PCI:0000:3b:00): 95, pid=1, name=x, Uncontained: FBHUB.",
    b"[ 8812.334455] INFO: task python3:20412 blocked for more than 120 seconds.",
]
NASTY = [
    b"\x00",
    b"\x00" * 64,
    b"\r",
    b"\r\n",
    b"\x1f",
    b"\xff",
    b"\xc0\xaf",
    b"\xed\xa0\x80",
    b"\xe2\x82",
    b"|",
    b"\x1b[31m",
    b"\t",
    b" ",
    b"\x7f",
    b"\xef\xbb\xbf",
    b"\\",
    b'"',
    b"A" * 300,
]


line_pieces = st.lists(
    st.one_of(st.sampled_from(REAL_LINES), st.sampled_from(NASTY), st.binary(max_size=40)), max_size=4
).map(b"".join)
documents = st.one_of(
    st.binary(max_size=3000),
    st.tuples(st.lists(line_pieces, max_size=40), st.sampled_from([b"\n", b"\r\n", b"\r", b"\n\n"]), st.booleans()).map(
        lambda t: t[1].join(t[0]) + (t[1] if t[2] else b"")
    ),
)


MAGIC = (b"\x1f\x8b", b"\x28\xb5\x2f\xfd")  # gzip, zstd: read as archives whatever the file name


def _check(res, data: bytes) -> None:
    assert res.balanced, (res.lines_read, res.event_lines, res.benign, res.quarantined)
    if not data.startswith(MAGIC):
        assert res.lines_read == physical_lines(data)
    lines = res.events["line_no"].to_list()
    assert lines == sorted(set(lines))  # events in line order, one per first line
    assert all(1 <= n <= res.lines_read for n in lines)
    assert int(res.events["line_count"].sum() or 0) == res.event_lines
    q = [n for n in res.quarantine["line_no"].to_list() if n is not None]
    assert all(1 <= n <= res.lines_read + 1 for n in q)
    assert not set(q) & set(lines)  # a quarantined line starts no event


# --------------------------------------------------------------------------- (1) parse_files


@settings(max_examples=60, **SETTINGS)
@given(kernel=documents, job=documents)
@example(kernel=b"\x00\x01\x02 x\nok\n", job=b"\r\r\r")
@example(kernel=b"Nov 24 03:14:07 n kernel: NVRM: Xid (PCI:0000:3b:00): 79, x\r\n\x1f\xff\r\n", job=b"\x1f|\x1f\n\n")
def test_parse_files_never_raises_balances_and_keeps_line_order(tmp_path, kernel, job):
    kp, jp = tmp_path / "k.log", tmp_path / "j.log"
    kp.write_bytes(kernel)
    jp.write_bytes(job)
    day = dt.date(2026, 12, 31)
    items = [
        (kp, SourceContext(source="k.log", kind="kernel", ref_date=day, node="node-a01")),
        (jp, SourceContext(source="j.log", kind="job", ref_date=day, job_id="12345")),
    ]
    together = parse_files(items)
    for res, data in zip(together, (kernel, job)):
        _check(res, data)
    # a file parsed in a batch gives what it gives alone
    for item, res in zip(items, together):
        alone = parse_files([item])[0]
        assert (
            alone.events.select("line_no", "category", "line_count").rows()
            == res.events.select("line_no", "category", "line_count").rows()
        )
        assert alone.quarantine.select("line_no", "reason").rows() == res.quarantine.select("line_no", "reason").rows()


@settings(max_examples=15, **SETTINGS)
@given(body=documents, cut=st.floats(0, 1), codec=st.sampled_from(["gz", "zst"]))
def test_compressed_and_cut_archives_never_raise(tmp_path, body, cut, codec):
    import zstandard

    blob = gzip.compress(body) if codec == "gz" else zstandard.ZstdCompressor().compress(body)
    blob = blob[: int(len(blob) * cut)] if cut < 1 else blob
    p = tmp_path / f"k.log.{codec}"
    p.write_bytes(blob)
    res = parse_files([(p, SourceContext(source=p.name, kind="kernel", ref_date=dt.date(2026, 11, 24)))])[0]
    assert res.balanced
    # a cut that leaves CRs but no LF reads as a CR-only file, which may split more lines
    readable_cr_only = b"\r" in body
    assert res.lines_read <= physical_lines(body) or readable_cr_only
    if cut == 1:
        _check(res, body)


# --------------------------------------------------------------------------- (2) sacct, flight recorder

sacct_docs = st.one_of(
    st.binary(max_size=2000),
    st.lists(
        st.one_of(
            st.sampled_from(
                [bi.SACCT_HEADER.encode()]
                + [r.format(n1="n1", n2="n[2-3]").encode() for r in bi.SACCT_GOOD_ROWS]
                + [r.encode() for r, _ in bi.SACCT_BAD_ROWS]
            ),
            line_pieces,
        ),
        max_size=30,
    ).map(lambda ls: b"\n".join(ls) + b"\n"),
)


@settings(max_examples=150, **SETTINGS)
@given(sacct_docs)
@example(b"JobID|State\n" + b"1|" + b"x" * 5000 + b"\n")
@example(b"\xef\xbb\xbfJobID|NodeList\n1|n[1-99999999]\n")
def test_parse_sacct_never_raises_and_balances(data):
    res = parse_sacct(data)
    assert res.balanced, res.accounted
    lines = data.decode("utf-8", "replace").removeprefix("\ufeff").split("\n")  # a BOM is not a line
    assert res.lines_read == len(lines) - (lines[-1] == "")
    assert res.jobs.height + res.steps.height + res.quarantine.height <= res.lines_read


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "rank",
                    "entries",
                    "pg_status",
                    "pg_config",
                    "version",
                    "0",
                    "state",
                    "collective_seq_id",
                    "pg_id",
                    "last_completed_collective",
                    "last_started_collective",
                    "profiling_name",
                ]
            )
            | st.text(max_size=5),
            inner,
            max_size=5,
        )
    ),
    max_leaves=20,
)
dump_docs = st.one_of(
    st.binary(max_size=2000),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.dictionaries(
        st.sampled_from(["rank", "entries", "pg_status", "pg_config", "version"]), json_values, min_size=1
    ).map(lambda v: json.dumps(v).encode()),
    json_values.map(lambda v: pickle.dumps(v, protocol=4)),
    json_values.map(lambda v: pickle.dumps(v, protocol=0)),
)


@settings(max_examples=200, **SETTINGS)
@given(dump_docs, st.booleans())
@example(b"PK\x03\x04", False)
@example(bi.evil_pickle(Path("/nonexistent/faultline-fuzz-marker")), True)
def test_load_dump_raises_only_flight_recorder_errors(data, allow_pickle):
    try:
        dump = load_dump(data, allow_restricted_pickle=allow_pickle)
    except FlightRecorderError:
        return
    assert isinstance(dump, dict)
    # what load_dump accepts, the pipeline can summarize (rank 0: out-of-range ranks are a
    # known bug, see test_hardening::test_flight_recorder_rank_out_of_range_is_quarantined)
    summary = summarize_dumps({0: dump})
    assert summary.height == 1


# --------------------------------------------------------------------------- (3) classify CLI


def _jsonl_lines(out: str, data: bytes) -> None:
    rows = out.split("\n")
    assert rows[-1] == "" or not out
    rows = [json.loads(r) for r in rows[:-1]]
    assert all(isinstance(r, dict) for r in rows)
    assert [r["line_no"] for r in rows] == list(range(1, physical_lines(data) + 1))
    assert all(r["source"] == "-" for r in rows)


@settings(max_examples=30, **SETTINGS)
@given(documents)
@example(b"")
@example(b"\x1f\x8b\x08\x00garbage that is not gzip\n")
@example(b"a\rb\rc")
def test_classify_stdin_prints_one_json_object_per_line(data):
    res = CliRunner().invoke(cli, ["classify", "--date", "2026-11-24", "-"], input=data)
    assert res.exit_code == 0, (res.output, res.exception)
    if data.startswith(MAGIC):  # read as an archive (here a broken one)
        return
    _jsonl_lines(res.stdout, data)


@pytest.mark.parametrize(
    "data",
    [
        b"\x00\xff\xfe garbage\r\nNov 24 03:14:07 n kernel: NVRM: Xid (PCI:0000:3b:00): 79, x\r\n\x1f\x1f|\n\n\xe2\x82",
        gzip.compress(b"Nov 24 03:14:07 n kernel: usb 1-1: new device\n" * 3),
    ],
    ids=["garbage", "gzip"],
)
def test_classify_cli_process_on_stdin(data):
    """The real command (a process, bytes on stdin): exit 0, one JSON object per line."""
    out = subprocess.run(
        [sys.executable, "-m", "faultline.cli", "classify", "--date", "2026-11-24", "-"],
        input=data,
        capture_output=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    _jsonl_lines(out.stdout.decode("utf-8"), gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)


def test_classify_compressed_stdin_leaves_no_temp_file(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    data = gzip.compress(b"Nov 24 03:14:07 n kernel: usb 1-1: new device\n")
    res = CliRunner().invoke(cli, ["classify", "--date", "2026-11-24", "-"], input=data)
    assert res.exit_code == 0 and len(res.stdout.splitlines()) == 1
    assert list(tmp_path.iterdir()) == []
