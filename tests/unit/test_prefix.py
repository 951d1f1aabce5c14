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


# Real lines (models/corpus/dev.jsonl) whose prefixes the synthetic cases above do not cover:
# (line, ts (UTC, ISO) or None, ts_source, node, message).
REAL = [
    (
        "[Ter Set 19 06:01:41 2017] pciehp 0000:02:05.0:pcie24: slot(6): Link Down event",
        "2017-09-19T06:01:41",
        "naive_utc",
        None,
        "pciehp 0000:02:05.0:pcie24: slot(6): Link Down event",
    ),
    (
        "[Sun Dec  1 14:54:40 2024] ny2g1r12hh2 kernel: mlx5_core 0000:5c:00.0: mlx5_pcie_event:299:(pid 268269): "
        "Detected insufficient power on the PCIe slot (27W).",
        "2024-12-01T14:54:40",
        "naive_utc",
        "ny2g1r12hh2",
        "mlx5_core 0000:5c:00.0: mlx5_pcie_event:299:(pid 268269): Detected insufficient power on the PCIe slot (27W).",
    ),
    (
        "daemon:info  : [Fri Apr  7 00:05:31 2023] systemd[1]: Starting Load Kernel Module pstore_zone...",
        "2023-04-07T00:05:31",
        "naive_utc",
        None,
        "systemd[1]: Starting Load Kernel Module pstore_zone...",
    ),
    (
        "kernel: [16450076.435584] NVRM: Xid (PCI:0002:00:00): 145, RLW_REMAP Nonfatal XC1 i0 Link 10 "
        "(0x00000004 0x00000040 0x00000000 0x00000000 0x00000000 0x00000000)",
        None,
        "no_boot_time",
        None,
        "NVRM: Xid (PCI:0002:00:00): 145, RLW_REMAP Nonfatal XC1 i0 Link 10 "
        "(0x00000004 0x00000040 0x00000000 0x00000000 0x00000000 0x00000000)",
    ),
    (
        "kernel: NVRM: knvlinkDiscoverPostRxDetLinks_GB100_REV2: Getting peer17 postRxDetLinkMask failed!",
        None,
        "none",
        None,
        "NVRM: knvlinkDiscoverPostRxDetLinks_GB100_REV2: Getting peer17 postRxDetLinkMask failed!",
    ),
    (
        "kernel: Jan 21 11:18:36 kernel: mlx5_core 0000:01:00.0: mlx5_pcie_event:326:(pid 165): "
        "Detected insufficient power on the PCIe slot (27W).",
        "2026-01-21T11:18:36",
        "yearless",
        None,
        "mlx5_core 0000:01:00.0: mlx5_pcie_event:326:(pid 165): Detected insufficient power on the PCIe slot (27W).",
    ),
    (
        "css2-g55-001: 2024-11-23_03:04:13.799+0800: [N] This node will be expelled from cluster gpfscluster.gpfs "
        "due to expel msg from 10.192.1.1",
        "2024-11-22T19:04:13.799000",
        "absolute",
        "css2-g55-001",
        "[N] This node will be expelled from cluster gpfscluster.gpfs due to expel msg from 10.192.1.1",
    ),
    (
        "192.168.11.119: kern: warning: [2026-04-22T21:27:51.291660856Z]: NVRM: kflcnCoreDumpNondestructive_IMPL: "
        "TRACE: 08 = 0x0000000004d4b1a0",
        "2026-04-22T21:27:51.291660",
        "absolute",
        "192.168.11.119",
        "NVRM: kflcnCoreDumpNondestructive_IMPL: TRACE: 08 = 0x0000000004d4b1a0",
    ),
    (
        "11月 15 14:15:47 leon-NF5468M6 nv-fabricmanager[4177]: request to query NVSwitch device information from "
        "NVSwitch driver failed with error:WARNING Nothing to do [NV_WARN_NOTHING_TO_DO]",
        "2026-11-15T14:15:47",
        "yearless",
        "leon-NF5468M6",
        "request to query NVSwitch device information from NVSwitch driver failed with error:WARNING Nothing to do "
        "[NV_WARN_NOTHING_TO_DO]",
    ),
    # grep's file name in front (grep -r over /var/log; aws-parallelcluster#1150)
    (
        "messages:Jun 17 20:18:09 ip-172-31-27-211 kernel: INFO: task strat1_sim:80601 blocked for more than 120 seconds.",
        "2026-06-17T20:18:09",
        "yearless",
        "ip-172-31-27-211",
        "INFO: task strat1_sim:80601 blocked for more than 120 seconds.",
    ),
    (
        "/var/log/slurm/slurmctld.log-20240715:[2024-07-13T02:01:00.083] _slurm_rpc_kill_job: REQUEST_KILL_JOB JobId=11334268 uid 0",
        "2024-07-13T02:01:00.083000",
        "naive_utc",
        None,
        "_slurm_rpc_kill_job: REQUEST_KILL_JOB JobId=11334268 uid 0",
    ),
    (
        f"/var/log/kern.log:1234:Nov 24 03:14:07 node-a17 kernel: {MSG}",
        "2026-11-24T03:14:07",
        "yearless",
        "node-a17",
        MSG,
    ),
    # a syslog line whose host and "kernel:" were cut: NVRM: stays message (open-gpu-kernel-modules#1146)
    (
        "Sep 18 20:07:01 NVRM: Xid (PCI:0000:02:00): 109, pid=8494,   name=RenderThread, channel 0x0000000d, CTX SWITCH TIMEOUT, Info 0x14c011",
        "2026-09-18T20:07:01",
        "yearless",
        None,
        "NVRM: Xid (PCI:0000:02:00): 109, pid=8494,   name=RenderThread, channel 0x0000000d, CTX SWITCH TIMEOUT, Info 0x14c011",
    ),
    (f"Nov 24 03:14:07 node-a17 {MSG}", "2026-11-24T03:14:07", "yearless", "node-a17", MSG),
    # a French journal's month, as glibc abbreviates it ("avril"; systemd/systemd#32304)
    (
        "avril 16 21:08:50 systemd-oomd[93234]: Considered 97 cgroups for killing, top candidates were:",
        "2026-04-16T21:08:50",
        "yearless",
        None,
        "Considered 97 cgroups for killing, top candidates were:",
    ),
    (
        "2025-08-16T00:03:04.070671-04:00 localhost (udev-worker)[106246]: nvidia: Process '/sbin/modprobe nvidia-drm' "
        "failed with exit code 1.",
        "2025-08-16T04:03:04.070671",
        "absolute",
        "localhost",
        "nvidia: Process '/sbin/modprobe nvidia-drm' failed with exit code 1.",
    ),
    # ssrg-vt/popcorn-kernel#85: the printk caller id (CONFIG_PRINTK_CALLER) after the stamp
    (
        "[   57.658354][  T650] BUG: unable to handle page fault for address: ffff888058a67000",
        None,
        "no_boot_time",
        None,
        "BUG: unable to handle page fault for address: ffff888058a67000",
    ),
    # journalctl -o short-precise (Neroued/ninfer#12); SONiC's rsyslog severity before the tag
    # (aristanetworks/sonic#76, sonic-net/sonic-buildimage#7310)
    (
        "Aug 10 22:40:59.883581 anthill kernel: NVRM: nvAssertFailedNoLog: Assertion failed: (status == NV_OK) || "
        "(status == NV_ERR_GPU_IN_FULLCHIP_RESET) @ rs_server.c:1375",
        "2026-08-10T22:40:59.883581",
        "yearless",
        "anthill",
        "NVRM: nvAssertFailedNoLog: Assertion failed: (status == NV_OK) || (status == NV_ERR_GPU_IN_FULLCHIP_RESET) "
        "@ rs_server.c:1375",
    ),
    (
        "Jan 30 01:09:50.688299 str2-7804-lc7-1 WARNING kernel: [87721.072616]  (scd_smbus_master_xfer:398)",
        "2026-01-30T01:09:50.688299",
        "yearless",
        "str2-7804-lc7-1",
        " (scd_smbus_master_xfer:398)",
    ),
    (
        "Apr  9 21:05:38.103350 str-s6100-acs-4 NOTICE swss#portsyncd: :- onMsg: nlmsg type:16 key:eth0 admin:1 "
        "oper:0 addr:34:17:eb:49:61:00 ifindex:2 master:0",
        "2026-04-09T21:05:38.103350",
        "yearless",
        "str-s6100-acs-4",
        ":- onMsg: nlmsg type:16 key:eth0 admin:1 oper:0 addr:34:17:eb:49:61:00 ifindex:2 master:0",
    ),
    # RFC 3339 without a zone (raspberrypi/linux#5239); Talos' padded level (siderolabs/talos#8733);
    # Go's log package (kubernetes/minikube#6912); a Korean journal's month (DualCoder/vgpu_unlock#110)
    (
        "2022-11-04T14:09:31 server kernel:[75215.928881] NETDEV WATCHDOG: eth1 (r8152): transmit queue 0 timed out",
        "2022-11-04T14:09:31",
        "naive_utc",
        "server",
        "NETDEV WATCHDOG: eth1 (r8152): transmit queue 0 timed out",
    ),
    (
        "109.200.197.196: kern:    info: [2024-04-16T18:19:30.92421418Z]: XFS (sdb5): Ending clean mount",
        "2024-04-16T18:19:30.924214",
        "absolute",
        "109.200.197.196",
        "XFS (sdb5): Ending clean mount",
    ),
    (
        "2020/05/26 14:26:03 Failed to initialize NVML: could not load NVML library.",
        "2020-05-26T14:26:03",
        "naive_utc",
        None,
        "Failed to initialize NVML: could not load NVML library.",
    ),
    (
        "11월 15 16:00:51 nvidia-vgpu-mgr[3472905]: notice: vmiop_log: Driver Version: 510.85.03",
        "2026-11-15T16:00:51",
        "yearless",
        None,
        "notice: vmiop_log: Driver Version: 510.85.03",
    ),
    (
        "[2020-12-14T09:44:58.306] [63532.0] done with job",
        "2020-12-14T09:44:58.306000",
        "naive_utc",
        None,
        "[63532.0] done with job",
    ),
]


@pytest.mark.parametrize("line,ts,src,node,msg", REAL, ids=[c[0][:40] for c in REAL])
def test_real_prefix_variant(line, ts, src, node, msg):
    import io

    from faultline.ingest.parse import SourceContext, parse_stream

    ctx = SourceContext(source="x", kind="kernel", ref_date=dt.date(2026, 11, 24), full=True)
    row = parse_stream(io.BytesIO((line + "\n").encode()), ctx).per_line.row(0, named=True)
    got_ts = row["ts"].replace(tzinfo=None).isoformat() if row["ts"] else None
    assert (got_ts, row["ts_source"], row["node"], row["msg"]) == (ts, src, node, msg)


# NVIDIA/gpu-operator#1146, as a flood would repeat it (many lines a second, one writer)
FLOOD_LINE = (
    "Dec  2 11:38:{s:02d} worker4 kernel: [  219.471050] NVRM: Xid (PCI:0000:07:00): 64, pid='<unknown>', "
    "name=<unknown>, Dynamic Page Retirement: Blacklisting failed.  Page should have been blacklisted on boot"
    "(0x00000000007fffa8)."
)


@pytest.mark.parametrize("job", [False, True])
def test_repeating_prefixes_split_once_each_as_line_by_line(job):
    from faultline.ingest import prefix

    lines = [FLOOD_LINE.format(s=i // 600) for i in range(6000)] + ["[rank3]:" + FLOOD_LINE.format(s=59)] * 100
    raw = pl.Series("raw", lines)
    assert prefix._repeating(raw, prefix._JOB_HEAD_RE if job else prefix._HEAD_RE)
    assert not prefix._repeating(pl.Series([f"[{i}.000001] x" for i in range(6000)]), prefix._HEAD_RE)
    got = pl.DataFrame({"raw": raw}).select(p=split_prefix(pl.col("raw"), job=job)).unnest("p")
    # slices under the repeat test's size take the capturing regex line by line
    one_by_one = pl.concat(
        pl.DataFrame({"raw": raw[i : i + 500]}).select(p=split_prefix(pl.col("raw"), job=job)).unnest("p")
        for i in range(0, len(raw), 500)
    )
    assert got.equals(one_by_one)
    assert got["host_bsd"].unique().to_list() == ["worker4"] and got["msg"][0].startswith(
        "NVRM: Xid (PCI:0000:07:00): 64"
    )
    assert got["inner_mono"].unique().to_list() == ["219.471050"]
    rank = got["job_rank"] if job else got["rank_label"]
    assert rank.drop_nulls().to_list() == ["3"] * 100
