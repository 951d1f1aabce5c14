"""A file read in many blocks (scanned several at a time) gives exactly what one block gives,
and small files scanned together give exactly what each scanned alone gives: the same
events with the same line numbers, the same counts, in order."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import polars as pl
import pytest

from faultline.ingest import parse, reader
from faultline.ingest.parse import SourceContext, parse_file

BENIGN = "Nov 24 {h:02d}:{m:02d}:{s:02d} node-a01 kernel: [ {t}.000001] IPv6: ADDRCONF(NETDEV_CHANGE): veth{i}: link becomes ready"
XID = (
    "Nov 24 {h:02d}:{m:02d}:{s:02d} node-a01 kernel: [ {t}.334455] NVRM: Xid (PCI:0000:3b:00): 79, pid={i}, "
    "name=python3, GPU has fallen off the bus."
)
WRAPPED = (
    "Nov 24 {h:02d}:{m:02d}:{s:02d} node-a01 kernel: [ {t}.334460] NVRM: The NVIDIA GPU 0000:3b:00.0\n"
    "Nov 24 {h:02d}:{m:02d}:{s:02d} node-a01 kernel: [ {t}.334461] NVRM: (PCI ID: 10de:2330) installed in this system has\n"
    "Nov 24 {h:02d}:{m:02d}:{s:02d} node-a01 kernel: [ {t}.334462] NVRM: fallen off the bus and is not responding to commands."
)


def _log(path, n=4000):
    lines = []
    for i in range(n):
        h, m, s, t = 3 + i // 3600, (i // 60) % 60, i % 60, 8000 + i
        tpl = XID if i % 97 == 5 else WRAPPED if i % 331 == 7 else BENIGN
        lines.append(tpl.format(h=h, m=m, s=s, t=t, i=i))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("full", [False, True])
def test_many_small_blocks_give_the_same_events_and_line_numbers(tmp_path, monkeypatch, full):
    path = _log(tmp_path / "node-a01.log")
    ctx = SourceContext(
        source="k/node-a01.log", kind="kernel", ref_date=dt.date(2026, 11, 24), node="node-a01", full=full
    )
    monkeypatch.setattr(parse, "SMALL_FILE_BYTES", 0)  # the block scanner, not the small-file batch
    whole = parse_file(path, ctx)
    monkeypatch.setattr(reader, "BLOCK_SIZE", 4096)  # ~110 blocks, several in flight
    blocks = parse_file(path, ctx)
    assert (blocks.lines_read, blocks.event_lines, blocks.benign, blocks.quarantined) == (
        whole.lines_read,
        whole.event_lines,
        whole.benign,
        whole.quarantined,
    )
    assert whole.lines_read == 4000 + 2 * len(range(7, 4000, 331))  # the wrapped notice is 3 lines
    assert blocks.events.equals(whole.events)
    xid = blocks.events.filter(pl.col("xid") == 79)
    assert xid.height == len(range(5, 4000, 97))
    assert xid["event_id"].str.extract(r":(\d+)$").cast(pl.Int64).is_sorted()
    assert blocks.events["ts"].is_sorted()


REAL = Path(__file__).parents[1] / "fixtures" / "real"


def test_small_files_scanned_together_equal_each_scanned_alone(tmp_path, monkeypatch):
    import gzip

    from helpers.landing import make_landing

    from faultline.ingest.partition import ingest_partition

    landing = make_landing(tmp_path / "landing")
    day = landing / "northwind" / "c1" / "2026-11-24"
    # real captures (dmesg -T, --time-format iso, raw), a CR-only file, a gzip one, one
    # without a final newline, one with a control byte (left to the block scanner)
    for name in ("dmesg_T.log", "dmesg_iso.log", "dmesg_raw.log"):
        (day / "kernel" / f"node-{name.split('.')[0].replace('_', '-')}.log").write_bytes((REAL / name).read_bytes())
    (day / "kernel" / "node-cr.log").write_bytes(_log(tmp_path / "x.log", 50).read_bytes().replace(b"\n", b"\r"))
    (day / "kernel" / "node-gz.log.gz").write_bytes(gzip.compress(_log(tmp_path / "y.log", 300).read_bytes()))
    (day / "kernel" / "node-tail.log").write_bytes(_log(tmp_path / "z.log", 20).read_bytes().rstrip(b"\n"))
    (day / "kernel" / "node-ctl.log").write_bytes(
        _log(tmp_path / "w.log", 20).read_bytes().replace(b"link", b"li\x07nk", 1)
    )
    for job in ("torch_nccl.log", "torch_oom.log", "torch_assert.log"):
        d = day / "jobs" / job.split(".")[0].replace("torch_", "9")
        d.mkdir(parents=True, exist_ok=True)
        (d / "slurm.log").write_bytes((REAL / job).read_bytes())
    batched = ingest_partition(landing, "northwind", "c1", "2026-11-24")
    monkeypatch.setattr(parse, "SMALL_FILE_BYTES", -1)
    alone = ingest_partition(landing, "northwind", "c1", "2026-11-24")
    for name in ("kernel_events", "job_events", "jobs", "steps", "flight", "quarantine", "audit"):
        assert getattr(batched, name).equals(getattr(alone, name)), name
    assert batched.audit.height >= 15 and batched.kernel_events.height > 10 and batched.job_events.height > 3
    cr = batched.audit.filter(pl.col("source").str.ends_with("node-cr.log")).row(0, named=True)
    assert cr["lines_read"] == 50 + 2 * len(range(7, 50, 331))


# real syslog lines with a localized (Chinese) month, from NVIDIA/gpu-operator#610
LOCALIZED = (
    "11月 15 14:15:47 leon-NF5468M6 systemd[1]: Starting NVIDIA fabric manager service...\n"
    "11月 15 14:15:47 leon-NF5468M6 systemd[1]: nvidia-fabricmanager.service: Control process exited, "
    "code=exited, status=1/FAILURE\n"
)


def test_utf8_and_overlong_files_are_batched_with_the_same_results(tmp_path, monkeypatch):
    """Valid UTF-8 text joins the small-file batch (only control bytes, invalid UTF-8 and U+FFFD
    send a file to the block scanner), and an overlong line in a batched file is quarantined
    exactly as the block scanner does it."""
    from helpers.landing import make_landing

    from faultline.ingest.partition import ingest_partition

    landing = make_landing(tmp_path / "landing")
    kern = landing / "northwind" / "c1" / "2026-11-24" / "kernel"
    (kern / "node-utf8.log").write_text(LOCALIZED + _log(tmp_path / "u.log", 30).read_text())
    (kern / "node-fffd.log").write_text("\ufffd" + LOCALIZED)
    (kern / "node-long.log").write_text(_log(tmp_path / "l.log", 10).read_text() + "x" * (3 << 20) + "\n")
    blocked: list[str] = []
    real_scan_file = parse.scan_file
    monkeypatch.setattr(parse, "scan_file", lambda p, *a: blocked.append(Path(p).name) or real_scan_file(p, *a))
    batched = ingest_partition(landing, "northwind", "c1", "2026-11-24")
    assert "node-utf8.log" not in blocked and "node-long.log" not in blocked and "node-fffd.log" in blocked
    monkeypatch.setattr(parse, "SMALL_FILE_BYTES", -1)
    alone = ingest_partition(landing, "northwind", "c1", "2026-11-24")
    for name in ("kernel_events", "quarantine", "audit"):
        assert getattr(batched, name).equals(getattr(alone, name)), name
    q = batched.quarantine.filter(pl.col("source").str.ends_with("node-long.log"))
    assert q.select("line_no", "reason").rows() == [(13, "line_too_long")]  # 10 lines, one of them 3
    assert len(q["preview"][0]) == reader.PREVIEW_BYTES
