"""Every kernel-log and job-log prefix variant (docs/classify.md): exact time, host and message."""

import datetime as dt

import polars as pl
import pytest

from faultline.ingest.prefix import derive_timestamps, split_prefix

BOOT = dt.datetime(2026, 11, 24, 0, 0, 0, tzinfo=dt.timezone.utc)
MSG = "NVRM: Xid (PCI:0000:3b:00): 79, pid=20412, name=python3, GPU has fallen off the bus."

CASES = [
    # (line, expected ts (UTC, ISO) or None, ts_source, host, message)
    (f"[ 8812.334455] {MSG}", "2026-11-24T02:26:52.334455", "boot_offset", None, MSG),
    (f"<4>[ 8812.334455] {MSG}", "2026-11-24T02:26:52.334455", "boot_offset", None, MSG),
    (f"4,1337,8812334455,-;{MSG}", "2026-11-24T02:26:52.334455", "boot_offset", None, MSG),
    (f"[Tue Nov 24 03:14:07 2026] {MSG}", "2026-11-24T03:14:07", "naive_utc", None, MSG),
    (f"[Nov24 03:14] {MSG}", "2026-11-24T03:14:00", "yearless", None, MSG),
    (f"[  +0.000812] {MSG}", None, "none", None, MSG),
    (f"2026-11-24T03:14:07,123456+00:00 {MSG}", "2026-11-24T03:14:07.123456", "absolute", None, MSG),
    (f"kern  :warn  : 2026-11-24T03:14:07,123456+00:00 {MSG}", "2026-11-24T03:14:07.123456", "absolute", None, MSG),
    (f"Nov 24 03:14:07 node-a17 kernel: [ 8812.334455] {MSG}", "2026-11-24T03:14:07", "yearless", "node-a17", MSG),
    (f"Nov  4 03:14:07 node-a17 kernel: {MSG}", "2026-11-04T03:14:07", "yearless", "node-a17", MSG),
    (f"Dez  4 03:14:07 node-a17 kernel: {MSG}", "2026-12-04T03:14:07", "yearless", "node-a17", MSG),
    (
        f"2026-11-24T03:14:07.123456+00:00 node-a17 kernel: {MSG}",
        "2026-11-24T03:14:07.123456",
        "absolute",
        "node-a17",
        MSG,
    ),
    (
        f"2026-11-24T05:14:07.123456+02:00 node-a17 kernel: {MSG}",
        "2026-11-24T03:14:07.123456",
        "absolute",
        "node-a17",
        MSG,
    ),
    (f"2026-11-24T03:14:07+0000 node-a17 kernel: {MSG}", "2026-11-24T03:14:07", "absolute", "node-a17", MSG),
    (f"2026-11-24T03:14:07+0000 kernel: {MSG}", "2026-11-24T03:14:07", "absolute", None, MSG),
    (
        f"<14>1 2026-11-24T03:14:07.123Z node-a17 kernel - - - {MSG}",
        "2026-11-24T03:14:07.123000",
        "absolute",
        "node-a17",
        MSG,
    ),
    (f"node-a17: Nov 24 03:14:07 node-a17 kernel: {MSG}", "2026-11-24T03:14:07", "yearless", "node-a17", MSG),
    (f"node-b02: [ 8812.334455] {MSG}", "2026-11-24T02:26:52.334455", "boot_offset", "node-b02", MSG),
    (f"  12  Nov 24 03:14:07 node-a17 kernel: {MSG}", "2026-11-24T03:14:07", "yearless", "node-a17", MSG),
    (
        "[rank3]:[E1124 03:14:07.123456789 ProcessGroupNCCL.cpp:632] [Rank 3] Watchdog caught collective operation timeout",
        "2026-11-24T03:14:07.123456",
        "yearless",
        None,
        "[Rank 3] Watchdog caught collective operation timeout",
    ),
    (
        "E1124 03:14:07.123456 33266 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1)",
        "2026-11-24T03:14:07.123456",
        "yearless",
        None,
        "failed (exitcode: 1)",
    ),
    (
        "E1124 03:14:07.123456  1234 ProcessGroupNCCL.cpp:632] [Rank 3] Watchdog",
        "2026-11-24T03:14:07.123456",
        "yearless",
        None,
        "[Rank 3] Watchdog",
    ),
    (
        "[2026-11-24T03:14:07.123] error: Nodes node-a17 not responding, setting DOWN",
        "2026-11-24T03:14:07.123000",
        "naive_utc",
        None,
        "error: Nodes node-a17 not responding, setting DOWN",
    ),
    (
        "[Nov 24 2026 03:14:07] [ERROR] [tid 812] detected NVSwitch fatal error 20034",
        "2026-11-24T03:14:07",
        "naive_utc",
        None,
        "[ERROR] [tid 812] detected NVSwitch fatal error 20034",
    ),
    (
        "[2026-11-24 03:14:07,123] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -6)",
        "2026-11-24T03:14:07.123000",
        "naive_utc",
        None,
        "torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -6)",
    ),
    (
        "node-a17:20412:20533 [3] NCCL WARN NET/IB : Got completion",
        None,
        "none",
        None,
        "node-a17:20412:20533 [3] NCCL WARN NET/IB : Got completion",
    ),
    ('  File "train.py", line 12, in <module>', None, "none", None, '  File "train.py", line 12, in <module>'),
    (
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        None,
        "none",
        None,
        "RuntimeError: CUDA error: an illegal memory access was encountered",
    ),
]


def _parse(lines, ref=dt.date(2026, 11, 24), boots=(BOOT,)):
    df = pl.DataFrame({"raw": lines}).with_columns(p=split_prefix(pl.col("raw"))).unnest("p")
    return derive_timestamps(df, ref, list(boots) if boots else None)


@pytest.mark.parametrize("line,ts,src,host,msg", CASES, ids=[c[0][:40] for c in CASES])
def test_prefix_variant(line, ts, src, host, msg):
    row = _parse([line]).row(0, named=True)
    got_ts = row["ts"].replace(tzinfo=None).isoformat() if row["ts"] else None
    assert got_ts == ts
    assert row["ts_source"] == src
    assert (row["pdsh"] or row["host_iso"] or row["host_bsd"] or row["host5424"]) == host
    assert row["msg"] == msg


def test_yearless_rollover_both_ways():
    # a December partition holding early-January lines, and a January one holding late December
    dec = _parse(["Jan  1 00:00:01 n1 kernel: x"], ref=dt.date(2026, 12, 31))
    jan = _parse(["Dec 31 23:59:59 n1 kernel: x"], ref=dt.date(2027, 1, 1))
    assert dec["ts"][0] == dt.datetime(2027, 1, 1, 0, 0, 1, tzinfo=dt.timezone.utc)
    assert jan["ts"][0] == dt.datetime(2026, 12, 31, 23, 59, 59, tzinfo=dt.timezone.utc)


def test_raw_dmesg_without_boot_time_is_flagged_not_guessed():
    row = _parse(["[ 8812.334455] x"], boots=()).row(0, named=True)
    assert row["ts"] is None and row["ts_source"] == "no_boot_time"


def test_reboot_in_the_day_uses_the_next_boot():
    boots = [
        dt.datetime(2026, 11, 23, 12, tzinfo=dt.timezone.utc),
        dt.datetime(2026, 11, 24, 6, tzinfo=dt.timezone.utc),
    ]
    df = _parse(["[50000.000000] before", "[ 10.500000] after reboot"], boots=boots)
    assert df["ts"].to_list() == [
        dt.datetime(2026, 11, 24, 1, 53, 20, tzinfo=dt.timezone.utc),
        dt.datetime(2026, 11, 24, 6, 0, 10, 500000, tzinfo=dt.timezone.utc),
    ]
