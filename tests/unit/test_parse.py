"""parse_file / classify end to end: joins, bad input, accounting, loghub samples."""

import datetime as dt
import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from faultline.ingest.lines import per_line_records
from faultline.ingest.parse import SourceContext, parse_file

DAY = dt.date(2026, 11, 24)
LOGHUB = Path(__file__).resolve().parents[1] / "fixtures" / "loghub"


def _parse(tmp_path, text, kind="kernel", name="k.log", full=False, **kw):
    p = tmp_path / name
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    ctx = SourceContext(source=name, kind=kind, ref_date=DAY, full=full, **kw)
    res = parse_file(p, ctx)
    assert res.balanced, (res.lines_read, res.event_lines, res.benign, res.quarantined)
    return res


def test_wrapped_fell_off_the_bus_is_one_event(tmp_path):
    res = _parse(
        tmp_path,
        (
            "Nov 24 03:14:08 node-a17 kernel: NVRM: The NVIDIA GPU 0000:3b:00.0\n"
            "Nov 24 03:14:08 node-a17 kernel: NVRM: (PCI ID: 10de:2330) installed in this system has\n"
            "Nov 24 03:14:08 node-a17 kernel: NVRM: fallen off the bus and is not responding to commands.\n"
            "Nov 24 03:14:09 node-a17 kernel: usb 1-1: new high-speed USB device number 2 using xhci_hcd\n"
        ),
        node="node-a17",
    )
    ev = res.events.row(0, named=True)
    assert len(res.events) == 1
    assert (ev["category"], ev["line_no"], ev["line_count"], ev["gpu_pci"], ev["node"]) == (
        "gpu_bus_lost",
        1,
        3,
        "0000:3b:00",
        "node-a17",
    )
    assert ev["ts"] == dt.datetime(2026, 11, 24, 3, 14, 8, tzinfo=dt.timezone.utc)
    assert (res.event_lines, res.benign) == (3, 1)


def test_sxid_with_continuations_is_one_event(tmp_path):
    res = _parse(
        tmp_path,
        (
            "[Tue Nov 24 03:14:07 2026] nvidia-nvswitch2: SXid (PCI:0000:a5:00.0): 20034, Fatal, Link 30 LTSSM Fault Up\n"
            "[Tue Nov 24 03:14:07 2026] nvidia-nvswitch2: SXid (PCI:0000:a5:00.0): 20034, Severity 1 Engine instance 30 Sub-engine instance 00\n"
            "[Tue Nov 24 03:14:07 2026] nvidia-nvswitch2: SXid (PCI:0000:a5:00.0): 20034, Data {0x00000000, 0x00000000}\n"
        ),
    )
    assert len(res.events) == 1
    ev = res.events.row(0, named=True)
    assert (ev["category"], ev["sxid"], ev["line_count"]) == ("nvlink", 20034, 3)


def test_job_log_traceback_joins_and_takes_the_cuda_cause(tmp_path):
    res = _parse(
        tmp_path,
        (
            "[rank3]:Traceback (most recent call last):\n"
            '[rank3]:  File "/workspace/train.py", line 211, in <module>\n'
            "[rank3]:    loss.backward()\n"
            "[rank3]:RuntimeError: CUDA error: an illegal memory access was encountered\n"
            "2026-11-24 03:14:07,123 INFO step 100 loss 2.31\n"
        ),
        kind="job",
        name="job.log",
        job_id="12345",
    )
    ev = res.events.row(0, named=True)
    assert (len(res.events), ev["category"], ev["line_count"], ev["rank"], ev["job_id"]) == (
        1,
        "user_app",
        4,
        3,
        "12345",
    )


def test_nccl_warn_network_with_and_without_file_line(tmp_path):
    res = _parse(
        tmp_path,
        (
            "node-a17:20412:20533 [3] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.1.2.3<51234> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.1.2.4 remoteGid ::ffff:10.1.2.3\n"
            "node-b02:1234:1290 [1] NCCL WARN NET/IB : Got completion from peer 10.1.2.9<51234> with status=12 opcode=0 len=0 vendor err 129 (Recv)\n"
            "node-a17:20412:20412 [0] NCCL INFO Init COMPLETE comm 0x55d5 rank 0 nranks 16\n"
        ),
        kind="job",
        name="job.log",
    )
    assert res.events["category"].to_list() == ["network", "network"]
    assert res.events["node"].to_list() == ["node-a17", "node-b02"]
    assert res.events["nccl_status"].to_list() == ["12", "12"]
    assert res.benign == 1


def test_bad_input_is_quarantined_and_the_rest_kept(tmp_path):
    blob = (
        b"Nov 24 03:14:07 n1 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=python3, GPU has fallen off the bus.\r\n"
        b"\x00\x01\x02\xff\xfe garbage\n"
        b"\xff\xfe\xfd\n" + b"A" * (2 << 20) + b"\n"
        b"Nov 24 03:14:09 n1 kernel: EXT4-fs error (device nvme0n1p2): ext4_find_entry:1455: inode #2: comm python3: reading directory lblock 0\n"
    )
    res = _parse(tmp_path, blob, node="n1")
    assert res.events["category"].to_list() == ["gpu_bus_lost", "storage"]
    reasons = sorted(res.quarantine["reason"].to_list())
    assert reasons == ["binary_or_invalid_utf8", "binary_or_invalid_utf8", "line_too_long"]
    assert res.lines_read == 5


def test_truncated_gzip_reports_and_keeps_earlier_lines(tmp_path):
    body = b"".join(
        b"Nov 24 03:%02d:00 n1 kernel: NVRM: Xid (PCI:0000:3b:00): 95, pid=1, name=x, Uncontained\n" % (i % 60)
        for i in range(3000)
    )
    blob = gzip.compress(body)
    res = _parse(tmp_path, blob[: len(blob) * 2 // 3], name="k.log.gz", node="n1")
    assert 0 < len(res.events) < 3000
    assert "truncated or corrupt gzip" in (res.message or "")
    assert res.quarantine.filter(res.quarantine["reason"] == "unreadable_rest").height == 1


@pytest.mark.parametrize("head", [b"x\x01", b"x\x9c", b"x\xda"])
def test_plain_text_starting_like_a_zlib_stream_is_read_as_text(tmp_path, head):
    """polars' CSV reader would decompress a buffer that starts with zlib's magic bytes."""
    from faultline.ingest.parse import parse_files

    p = tmp_path / "j.log"
    p.write_bytes(head + b"\x04\x00\nRuntimeError: CUDA error: an illegal memory access was encountered\n")
    ctx = SourceContext(source="j.log", kind="job", ref_date=dt.date(2026, 11, 24), job_id="7")
    for res in (parse_files([(p, ctx)])[0], parse_file(p, ctx)):
        assert (res.lines_read, res.balanced, res.message) == (2, True, None)
        assert res.events.select("line_no", "category").rows() == [(2, "user_app")]


def test_empty_file(tmp_path):
    res = _parse(tmp_path, b"")
    assert (res.lines_read, len(res.events), res.quarantined) == (0, 0, 0)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=3000))
def test_any_bytes_never_crash_and_always_balance(tmp_path, blob):
    for full in (False, True):
        res = _parse(tmp_path, blob, full=full)
        if full:
            per_line = per_line_records(res, "k.log")
            assert per_line["line_no"].to_list() == list(range(1, res.lines_read + 1))


@pytest.mark.parametrize("name", ["BGL_2k.log", "HPC_2k.log", "Thunderbird_2k.log"])
def test_loghub_samples_account_for_every_line(tmp_path, name):
    res = parse_file(LOGHUB / name, SourceContext(source=name, kind="kernel", ref_date=DAY))
    assert res.lines_read == 2000
    assert res.balanced
    assert res.events.height > 0  # real HPC error lines are found (as unknown or a category)


def test_classify_cli_jsonl_contract(tmp_path):
    p = tmp_path / "k.log"
    p.write_text(
        "Nov 24 03:14:08 node-a17 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=python3, GPU has fallen off the bus.\n"
        "Nov 24 03:14:09 node-a17 kernel: usb 1-1: new device\n"
    )
    out = subprocess.run(
        [sys.executable, "-m", "faultline.cli", "classify", "--date", "2026-11-24", str(p)],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    rows = [json.loads(x) for x in out.stdout.splitlines()]
    assert [r["line_no"] for r in rows] == [1, 2]
    assert {k: rows[0][k] for k in ("family", "category", "severity", "action", "xid", "node", "gpu_pci", "ts")} == {
        "family": "nvrm",
        "category": "gpu_bus_lost",
        "severity": "critical",
        "action": "reboot_node",
        "xid": 79,
        "node": "node-a17",
        "gpu_pci": "0000:3b:00",
        "ts": "2026-11-24T03:14:08.000000Z",
    }
    assert rows[1]["category"] == "benign"
    assert "2 lines" in out.stderr


def test_files_parsed_in_chunks_give_what_one_batch_gives(monkeypatch):
    """A dense partition's files are parsed a few at a time (bounded memory): same results."""
    from faultline.ingest import parse

    real = Path(__file__).parents[1] / "fixtures" / "real"
    items = [
        (real / name, SourceContext(name, kind, dt.date(2026, 11, 24), "h1", job_id="7" if kind == "job" else None))
        for name, kind in [
            ("dmesg_T.log", "kernel"),
            ("torch_nccl.log", "job"),
            ("dmesg_iso.log", "kernel"),
            ("torch_oom.log", "job"),
            ("torch_assert.log", "job"),
        ]
    ]
    whole = parse.parse_files(items)
    monkeypatch.setattr(parse, "PARSE_CHUNK_ROWS", 1)
    calls, real_scans = [], parse.parse_scans
    monkeypatch.setattr(
        parse, "parse_scans", lambda scans, rs, **kw: calls.append(len(scans)) or real_scans(scans, rs, **kw)
    )
    chunked = parse.parse_files(items)
    assert calls == [1] * len(items)
    assert sum(r.events.height for r in whole) > 0
    for a, b in zip(whole, chunked):
        assert a.events.equals(b.events) and a.quarantine.equals(b.quarantine)
        assert (a.lines_read, a.event_lines, a.benign) == (b.lines_read, b.event_lines, b.benign)


def test_chunks_of_one_partition_classify_each_distinct_message_once(monkeypatch):
    """A message an earlier chunk classified is not classified again (a verdict depends on the
    message alone): the second copy of a log costs no classification and gets the same verdicts."""
    from faultline.classify import engine
    from faultline.ingest import parse

    real = Path(__file__).parents[1] / "fixtures" / "real" / "dmesg_iso.log"
    items = [(real, SourceContext(f"n{i}", "kernel", dt.date(2026, 11, 24), f"n{i}")) for i in range(2)]
    monkeypatch.setattr(parse, "PARSE_CHUNK_ROWS", 1)
    classified, real_distinct = [], engine._classify_distinct
    monkeypatch.setattr(
        engine, "_classify_distinct", lambda msgs, *a, **k: classified.append(len(msgs)) or real_distinct(msgs, *a, **k)
    )
    parse.parse_files(items[:1])
    once = list(classified)
    classified.clear()
    first, second = parse.parse_files(items)
    assert once and sum(once) > 0 and classified == once
    cols = ["line_no", "category", "rule_id", "xid", "message"]
    assert first.events.height > 0 and first.events.select(cols).equals(second.events.select(cols))


def test_a_daemon_line_is_read_with_its_syslog_tag_where_its_message_alone_names_no_rule(tmp_path):
    # real lines (models/corpus: a Fedora journal; ossec-docs' smartd samples): the rules that
    # name rngd and smartd read the tag the syslog prefix split off; a message a rule names alone keeps it
    res = _parse(
        tmp_path,
        (
            "Feb 14 20:49:45 localhost.localdomain rngd[252]: [hwrng ]: Initialization Failed\n"
            "Jun 16 19:04:31 Lab8 smartd[2842]: Device: /dev/sda [SAT], SMART Prefailure Attribute: 7 Seek_Error_Rate changed from 200 to 100\n"
            "Jun 16 12:32:40 Lab9 smartd[2881]: Device: /dev/sda [SAT], 1 Currently unreadable (pending) sectors\n"
        ),
        full=True,
    )
    rows = res.per_line.select("line_no", "category", "rule_id").rows()
    assert rows == [
        (1, "benign", "absent_device_probe_noise"),
        (2, "benign", "smartd_attribute_changed"),
        (3, "storage", "smartd_bad_sectors"),
    ]
