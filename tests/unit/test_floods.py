"""A flood (one message repeated thousands of times) is one event per burst that stands for
every repeated line: counted, timed from first to last, with both lines kept as evidence."""

from __future__ import annotations

import datetime as dt

import polars as pl

from faultline.ingest import parse
from faultline.ingest.parse import SourceContext, parse_file

# the uncontained-ECC line shape of NVIDIA's Xid 95 (driver R535+), and a benign kernel line
XID95 = "Nov 24 03:{m:02d}:{s:02d} node-a01 kernel: NVRM: Xid (PCI:0000:5d:00): 95, pid=20412, name=python3, Uncontained: FBHUB. RST: Yes, D-RST: No"
NOISE = "Nov 24 03:{m:02d}:{s:02d} node-a01 kernel: IPv6: ADDRCONF(NETDEV_CHANGE): veth1a2b3c: link becomes ready"
CTX = SourceContext(source="k/node-a01.log", kind="kernel", ref_date=dt.date(2026, 11, 24), node="node-a01")


def _write(tmp_path, n: int, noise_every: int = 7):
    lines = []
    for i in range(n):
        m, s = divmod(i // 10, 60)
        lines.append(XID95.format(m=m % 60, s=s))
        if i % noise_every == 3:
            lines.append(NOISE.format(m=m % 60, s=s))
    path = tmp_path / "node-a01.log"
    path.write_text("\n".join(lines) + "\n")
    return path, len(lines)


def test_a_flood_is_one_event_that_counts_every_line(tmp_path):
    path, total = _write(tmp_path, 3000)
    res = parse_file(path, CTX)
    assert res.balanced and res.lines_read == total
    ev = res.events
    assert ev.height == 1 and res.event_lines == 3000
    row = ev.row(0, named=True)
    assert (row["xid"], row["repeats"], row["line_count"], row["line_no"]) == (95, 3000, 3000, 1)
    assert row["ts"] == dt.datetime(2026, 11, 24, 3, 0, 0, tzinfo=dt.timezone.utc)
    assert row["last_ts"] == dt.datetime(2026, 11, 24, 3, 4, 59, tzinfo=dt.timezone.utc)
    assert row["raw"].startswith("Nov 24 03:00:00") and row["last_raw"].startswith("Nov 24 03:04:59")


def test_short_repeats_stay_separate_events(tmp_path):
    path, _ = _write(tmp_path, parse.FLOOD_MIN - 1)
    ev = parse_file(path, CTX).events
    assert ev.height == parse.FLOOD_MIN - 1
    assert ev["repeats"].to_list() == [1] * ev.height and ev["last_ts"].null_count() == ev.height


def test_bursts_far_apart_and_other_ranks_are_not_merged(tmp_path):
    burst = [XID95.format(m=0, s=i % 60) for i in range(parse.FLOOD_MIN)]
    gap = [NOISE.format(m=1, s=0)] * (parse.FLOOD_LINE_GAP + 1)
    later = [XID95.format(m=30, s=i % 60) for i in range(parse.FLOOD_MIN)]
    path = tmp_path / "node-a01.log"
    path.write_text("\n".join(burst + gap + later) + "\n")
    ev = parse_file(path, CTX).events
    assert ev["repeats"].to_list() == [parse.FLOOD_MIN, parse.FLOOD_MIN]
    # job output: the same watchdog line from two ranks is two ranks' evidence, not one flood
    wd = (
        "[rank{r}]:[E1124 03:14:07.123456789 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=88214, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, "
        "Timeout(ms)=600000) ran for 600032 milliseconds before timing out."
    )
    job = tmp_path / "train.log"
    job.write_text("\n".join(wd.format(r=r % 2) for r in range(2 * parse.FLOOD_MIN)) + "\n")
    jctx = SourceContext(source="jobs/1/train.log", kind="job", ref_date=dt.date(2026, 11, 24), job_id="1")
    jev = parse_file(job, jctx).events
    assert sorted(jev.select("rank", "repeats").rows()) == [(0, parse.FLOOD_MIN), (1, parse.FLOOD_MIN)]


def test_classify_still_gives_every_line_its_verdict(tmp_path):
    path, total = _write(tmp_path, 500)
    full = parse_file(path, SourceContext(**{**CTX.__dict__, "full": True}))
    per_line = full.per_line.sort("line_no")
    assert per_line.height == total
    assert per_line.filter(pl.col("raw").str.contains("Xid"))["category"].unique().to_list() == ["gpu_memory"]
