"""A partition's files parsed in two processes give exactly what one process gives."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from faultline.ingest import pool
from faultline.ingest.parse import SourceContext, parse_files

REAL = Path(__file__).parents[1] / "fixtures" / "real"
JOBS = Path(__file__).parents[1] / "fixtures" / "jobs" / "dev"


def test_shares_balance_bytes_and_keep_every_file_once():
    parts = pool.shares([100, 1, 50, 50, 2, 0], 2)
    assert sorted(i for p in parts for i in p) == [0, 1, 2, 3, 4, 5]
    loads = sorted(sum([100, 1, 50, 50, 2, 0][i] for i in p) for p in parts)
    assert loads == [101, 102] and all(p == sorted(p) for p in parts)
    assert pool.shares([5], 3) == [[0]]


def test_two_processes_give_what_one_gives(monkeypatch):
    day = dt.date(2026, 11, 30)
    items = [
        (REAL / name, SourceContext(source=name, kind=kind, ref_date=day, node="vm", job_id=None))
        for name, kind in (
            ("dmesg_T.log", "kernel"),
            ("dmesg_iso.log", "kernel"),
            ("torch_nccl.log", "job"),
            ("dmesg_raw.log", "kernel"),
            ("torch_oom.log", "job"),
        )
    ]
    # real job outputs with progress lines: their job_markers rows come back too
    items += [
        (JOBS / case / "output.log", SourceContext(source=case, kind="job", ref_date=day, job_id=case))
        for case in ("bs-tr1-ecc-uncorrectable", "colossalai-5798-ckpt-write-failed")
    ]
    monkeypatch.setattr(pool, "SPLIT_BYTES", 1)  # split even these small files
    split = pool.parse_partition_files(items, workers=2)
    alone = parse_files(items)
    assert len(split) == len(alone) == 7
    for a, b in zip(alone, split):
        assert a.events.equals(b.events) and a.quarantine.equals(b.quarantine)
        assert (a.markers is None and b.markers is None) or a.markers.equals(b.markers)
        assert (a.lines_read, a.event_lines, a.benign, a.quarantined) == (
            b.lines_read,
            b.event_lines,
            b.benign,
            b.quarantined,
        )
    assert sum(r.events.height for r in split) > 0 and sum(r.lines_read for r in split) > 1000
    assert [r.markers["marker"].to_list() for r in split[5:]] == [["progress"], ["progress"]]
