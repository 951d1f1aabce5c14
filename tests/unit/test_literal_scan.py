"""The Hyperscan fast path (``literal_scan``) keeps exactly the lines the polars prefilter
keeps: same events, counts and quarantine, block by block, on clean and dirty input."""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path

import pytest

from faultline.ingest import literal_scan, parse, reader
from faultline.ingest.parse import SourceContext, parse_file

ROOT = Path(__file__).resolve().parents[2]
REAL = Path(__file__).parents[1] / "fixtures" / "real"
sys.path.insert(0, str(ROOT / "bench"))

pytestmark = pytest.mark.skipif(not literal_scan.available(), reason="no hyperscan wheel on this platform")


def _both(path, ctx, monkeypatch):
    """Parse with and without Hyperscan; the fast path must run on kernel logs and must not on
    job logs (their continuation lines come from a regex)."""
    monkeypatch.setattr(parse, "SMALL_FILE_BYTES", 0)  # the block scanner
    monkeypatch.setattr(reader, "BLOCK_SIZE", 1 << 14)  # many blocks: all but the first take the fast path
    used = []
    real = literal_scan.matching_lines
    monkeypatch.setattr(literal_scan, "matching_lines", lambda *a: used.append(real(*a)) or used[-1])
    fast = parse_file(path, ctx)
    assert bool(used) == (ctx.kind != "job"), f"fast path used {len(used)} times on a {ctx.kind} log"
    monkeypatch.setattr(literal_scan, "matching_lines", real)
    with monkeypatch.context() as m:
        m.setattr(literal_scan, "hyperscan", None)
        slow = parse_file(path, ctx)
    return fast, slow


def _same(fast, slow):
    assert (fast.lines_read, fast.event_lines, fast.benign, fast.quarantined) == (
        slow.lines_read,
        slow.event_lines,
        slow.benign,
        slow.quarantined,
    )
    assert fast.events.equals(slow.events)
    assert fast.quarantine.equals(slow.quarantine)


@pytest.mark.parametrize("kind", ["kernel", "job"])
def test_generated_mixed_log(tmp_path, monkeypatch, kind):
    from mixed_log import generate

    path = tmp_path / "mixed.log"
    generate(str(path), 2 << 20, seed=3, fault_rate=0.01)
    ctx = SourceContext(
        source="m.log", kind=kind, ref_date=dt.date(2026, 11, 24), node="n1", job_id="7" if kind == "job" else None
    )
    fast, slow = _both(path, ctx, monkeypatch)
    _same(fast, slow)
    assert len(fast.events) > 100


def test_dirty_blocks_fall_back_and_agree(tmp_path, monkeypatch):
    """Control bytes, CR, non-ASCII and an overlong line in later blocks."""
    from mixed_log import generate

    path = tmp_path / "mixed.log"
    generate(str(path), 1 << 20, seed=5, fault_rate=0.01)
    data = bytearray(path.read_bytes())
    for pos, junk in (
        (200_000, b"\x00\x07garbage"),
        (400_000, b"\r"),
        (600_000, "é".encode()),
        (800_000, b"x" * (reader.MAX_LINE_BYTES + 10)),
    ):
        data[pos:pos] = junk
    path.write_bytes(bytes(data))
    ctx = SourceContext(source="d.log", kind="kernel", ref_date=dt.date(2026, 11, 24), node="n1")
    fast, slow = _both(path, ctx, monkeypatch)
    _same(fast, slow)
    assert fast.quarantined >= 1


@pytest.mark.parametrize("name", ["dmesg_T.log", "dmesg_iso.log", "dmesg_raw.log", "torch_nccl.log", "torch_oom.log"])
def test_real_captures(tmp_path, monkeypatch, name):
    path = tmp_path / name
    path.write_bytes((REAL / name).read_bytes() * 100)
    kind = "job" if name.startswith("torch") else "kernel"
    ctx = SourceContext(
        source=name, kind=kind, ref_date=dt.date(2026, 11, 24), node="n1", job_id="9" if kind == "job" else None
    )
    _same(*_both(path, ctx, monkeypatch))


def test_lines_are_found_where_the_match_ends():
    buf = b"alpha\nbeta NVRM x\n \t\ngamma Xid\nzeta\n"
    ends = literal_scan.line_ends(buf)
    assert ends.tolist() == [5, 17, 20, 30, 35]
    assert literal_scan.matching_lines(buf, ends, ("NVRM", "Xid", "\t")).tolist() == [1, 2, 3]


def test_the_literal_database_never_misses_a_literal():
    """Randomized: every prefilter literal planted in random text (line breaks, brackets,
    digits: what broke Hyperscan's regex matching) is found, on the right line."""
    import random

    from faultline.classify.ruleset import load_ruleset

    lits = load_ruleset().prefilter_literals
    rng = random.Random(20261130)
    alphabet = "abcdefgh ijk:[]{}0123456789\n"
    for _ in range(1500):
        text = "".join(
            "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
            + (rng.choice(lits) if rng.random() < 0.5 else "")
            for _ in range(rng.randint(1, 12))
        )
        lines = text.split("\n")
        buf = ("\n".join(lines) + "\n").encode()
        want = [i for i, line in enumerate(lines) if any(x in line for x in lits)]
        assert literal_scan.matching_lines(buf, literal_scan.line_ends(buf), lits).tolist() == want, text
