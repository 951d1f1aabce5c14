"""Small pieces of the simulator: host lists, prefixes, bursts, drains around reboots."""

from __future__ import annotations

import polars as pl

from faultline.simulate import catalog, formats, kernel
from faultline.simulate.templates import expand, render

S = 1_000_000
T = 1_793_762_647_123_456  # 2026-11-04T03:24:07.123456Z


def test_kernel_prefixes_of_every_convention():
    row = pl.DataFrame({"lt": [T], "mono": [8812_334_455], "host": ["a1-r03-n07"], "msg": ["MSG"]})
    got = {c: row.select(formats.kernel_line(c)).item() for c in formats.CONVENTIONS}
    assert got == {
        "syslog": "Nov  4 03:24:07 a1-r03-n07 kernel: MSG",
        "syslog_mono": "Nov  4 03:24:07 a1-r03-n07 kernel: [ 8812.334455] MSG",
        "short_iso": "2026-11-04T03:24:07+0000 a1-r03-n07 kernel: MSG",
        "dmesg_T": "[Wed Nov  4 03:24:07 2026] MSG",
        "dmesg_raw": "[ 8812.334455] MSG",
        "rfc3339": "2026-11-04T03:24:07.123456+00:00 a1-r03-n07 kernel: MSG",
        "dmesg_iso": "2026-11-04T03:24:07,123456+00:00 MSG",
    }


def test_templates_render_columns_and_time_tokens():
    df = pl.DataFrame({"t": [T], "eseq": [3], "gpu_pci": ["0000:3a:00"], "rank": [3]})
    assert (
        df.select(render("NVRM: Xid (PCI:{gpu_pci}): 79, Data {0x1, 0x2}")).item()
        == "NVRM: Xid (PCI:0000:3a:00): 79, Data {0x1, 0x2}"
    )
    assert df.select(render("[rank{rank}]:[E{glog} X]")).item() == "[rank3]:[E1104 03:24:07.123456000 X]"
    rows = expand(df, [(0, "a {rank}"), (5, "b")], [])
    assert rows["t"].to_list() == [T, T + 5] and rows["msg"].to_list() == ["a 3", "b"]
    assert rows["seq"].n_unique() == 2


def test_xid95_burst_repeats_one_line_within_minutes():
    ev = pl.DataFrame(
        {
            "node_idx": [0],
            "t": [T],
            "kind": ["xid95"],
            "event_no": [0],
            "reps": [2500],
            "period_us": [40_000],
            "gpu_pci": ["0000:9a:00"],
            "pidname": ["pid=20412, name=python3"],
        }
    )
    rows = kernel.event_rows(ev)
    assert rows.height == 2500 and rows["msg"].n_unique() == 1
    assert (
        rows["msg"][0]
        == "NVRM: Xid (PCI:0000:9a:00): 95, pid=20412, name=python3, Uncontained: FBHUB. RST: Yes, D-RST: No"
    )
    span = (rows["t"].max() - rows["t"].min()) / S
    assert 60 < span < 200 and rows["seq"].n_unique() == 2500


def test_catalog_is_consistent():
    cats = {
        "gpu_bus_lost",
        "gpu_memory",
        "nvlink",
        "gpu_hardware",
        "driver_firmware",
        "user_app",
        "network",
        "host",
        "storage",
        "thermal_power",
        "collective_timeout",
    }
    assert {k.category for k in catalog.KINDS} == cats
    for k in catalog.KINDS:
        assert k.key_line < max(1, len(k.lines)), k.name
        if k.effect == "cuda":
            assert k.cuda_msg, k.name
        if k.effect == "io":
            assert k.io_msg.startswith("OSError"), k.name
    for comp, (_, kinds) in catalog.LEMON_COMPONENTS.items():
        assert all(x in catalog.BY_NAME for x in kinds), comp
