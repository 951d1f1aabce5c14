"""Tests for faultline.ingest.hostlist and faultline.ingest.sacct: host lists and ``sacct -P`` parsing."""

from __future__ import annotations

from datetime import datetime, timezone

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from faultline.ingest import sacct as sacct_mod
from faultline.ingest.hostlist import MAX_HOSTS, compress_hostlist, count_hostlist, expand_hostlist
from faultline.ingest.sacct import parse_elapsed, parse_sacct, parse_slurm_stamp
from faultline.schema import QUARANTINE, SACCT_JOBS, SACCT_STEPS

UTC = timezone.utc


def utc(*a: int) -> datetime:
    return datetime(*a, tzinfo=UTC)


# =========================================================================== host lists


@pytest.mark.parametrize(
    "expr, expected",
    [
        ("", []),
        ("   ", []),
        ("node-a17", ["node-a17"]),
        ("node-a17,node-b02", ["node-a17", "node-b02"]),
        (
            "node-[001-004,017],gpu-b[7-8]",
            ["node-001", "node-002", "node-003", "node-004", "node-017", "gpu-b7", "gpu-b8"],
        ),
        ("r[1-2]-n[01-02]", ["r1-n01", "r1-n02", "r2-n01", "r2-n02"]),
        ("n[8-10]", ["n8", "n9", "n10"]),
        ("n[08-10]", ["n08", "n09", "n10"]),
        ("n[098-101]", ["n098", "n099", "n100", "n101"]),
        ("n[7]", ["n7"]),
        ("gpu[1-2]a", ["gpu1a", "gpu2a"]),
        ("[1-3]", ["1", "2", "3"]),
        ("a.b_c-1", ["a.b_c-1"]),
        ("n[1-2],n[1-2]", ["n1", "n2", "n1", "n2"]),  # order kept, no dedup (as Slurm)
        (
            "rack[1-2]-node[1,3],login1",
            ["rack1-node1", "rack1-node3", "rack2-node1", "rack2-node3", "login1"],
        ),
    ],
)
def test_expand_hostlist_exact(expr, expected):
    assert expand_hostlist(expr) == expected
    assert count_hostlist(expr) == len(expected)


@pytest.mark.parametrize(
    "expr, message",
    [
        ("node-[001-004", "unbalanced '['"),
        ("node-001-004]", "unbalanced ']'"),
        ("node-[[1-2]]", "nested '['"),
        ("node-[5-3]", "reversed range"),
        ("node-[]", "empty '[]'"),
        ("node-[1-]", "bad range"),
        ("node-[a-b]", "bad range"),
        ("node-[1,,2]", "bad range"),
        ("a,,b", "stray ','"),
        ("a,", "stray ','"),
        ("node 1", "not allowed"),
        ("node|1", "not allowed"),
        ("n[0-100000]", "more than 100,000 hosts"),
        ("n[1-1000]-x[1-1000]", "more than 100,000 hosts"),
        ("n[1-99999999999999999999999]", "too long"),
    ],
)
def test_expand_hostlist_errors(expr, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        expand_hostlist(expr)
    with pytest.raises(ValueError):
        count_hostlist(expr)


def test_expand_hostlist_bound_is_checked_before_expanding():
    # Ten groups of 10 would be 10**10 names: must fail fast, not allocate.
    expr = "n" + "[0-9]" * 10
    with pytest.raises(ValueError, match="more than"):
        expand_hostlist(expr)
    # exactly at the bound is allowed
    assert count_hostlist(f"n[1-{MAX_HOSTS}]") == MAX_HOSTS


def test_expand_hostlist_type_error():
    with pytest.raises(TypeError):
        expand_hostlist(None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "names, expected",
    [
        ([], ""),
        (["node-a17"], "node-a17"),
        (
            ["node-003", "node-001", "node-002", "node-004", "node-017", "gpu-b8", "gpu-b7"],
            "gpu-b[7-8],node-[001-004,017]",
        ),
        (["n9", "n10", "n11"], "n[9-11]"),
        (["n09", "n10"], "n[09-10]"),
        (["n1", "n01"], "n[01,1]"),
        (["n2", "n2", "n1"], "n[1-2]"),
        (["login", "n1", "n3"], "login,n[1,3]"),
        (["r1-n01", "r1-n02", "r2-n01", "r2-n02"], "r1-n[01-02],r2-n[01-02]"),
        (["gpu1a", "gpu2a", "gpu3b"], "gpu[1-2]a,gpu3b"),
    ],
)
def test_compress_hostlist_exact(names, expected):
    assert compress_hostlist(names) == expected
    assert sorted(expand_hostlist(expected)) == sorted(set(names))


def test_compress_hostlist_rejects_bad_names():
    with pytest.raises(ValueError):
        compress_hostlist(["node[1]"])
    with pytest.raises(ValueError):
        compress_hostlist(["a,b"])
    with pytest.raises(ValueError):
        compress_hostlist([""])
    with pytest.raises(TypeError):
        compress_hostlist("node1")  # type: ignore[arg-type]


_host = st.from_regex(r"[a-z]{1,3}(-?[0-9]{1,3}){0,2}[a-z]?", fullmatch=True)


@given(st.lists(_host, max_size=40))
@settings(max_examples=200, deadline=None)
def test_compress_expand_roundtrip(names):
    compressed = compress_hostlist(names)
    expanded = expand_hostlist(compressed)
    assert sorted(expanded) == sorted(set(names))
    assert len(expanded) == len(set(names))
    # canonical: compressing again gives the same text
    assert compress_hostlist(expanded) == compressed


@given(st.text(alphabet=st.sampled_from(list("ab-01789[],_. |x")), max_size=60) | st.text(max_size=60))
@settings(max_examples=400, deadline=None)
def test_expand_hostlist_never_explodes(s):
    try:
        out = expand_hostlist(s)
    except ValueError:
        return
    assert isinstance(out, list)
    assert len(out) <= MAX_HOSTS
    assert all(isinstance(h, str) and h for h in out)


# =========================================================================== sacct

HEADER = "JobID|JobName|User|Partition|NodeList|NNodes|AllocTRES|Submit|Start|End|Elapsed|State|ExitCode|Reason"

# Shaped like real `sacct -P --format=<HEADER>` output (jobs followed by their steps).
SACCT = "\n".join(
    [
        HEADER,
        # 2: multi-node job killed by a node failure; its batch/extern/srun steps follow
        "12345|pretrain-7b|alice|gpu|node-[001-004,017]|5|billing=320,cpu=320,gres/gpu=40,mem=4000G,node=5|2026-11-24T01:00:00|2026-11-24T01:00:05|2026-11-24T03:14:07|02:14:02|NODE_FAIL|0:0|None",
        "12345.batch|batch|||node-001|1|cpu=64,gres/gpu=8,mem=800G,node=1|2026-11-24T01:00:05|2026-11-24T01:00:05|2026-11-24T03:14:09|02:14:04|CANCELLED|0:15|",
        "12345.extern|extern|||node-[001-004,017]|5|billing=320,cpu=320,gres/gpu=40,mem=4000G,node=5|2026-11-24T01:00:05|2026-11-24T01:00:05|2026-11-24T03:14:07|02:14:02|COMPLETED|0:0|",
        "12345.0|python3|||node-[001-004,017]|5|cpu=320,gres/gpu=40,mem=4000G,node=5|2026-11-24T01:00:06|2026-11-24T01:00:06|2026-11-24T03:14:08|02:14:02|FAILED|1:0|",
        "",
        # 7: pending array range, and one finished task of it with a step
        "22000_[5-8%2]|sweep|bob|gpu|None assigned|1||2026-11-24T02:00:00|Unknown|Unknown|00:00:00|PENDING|0:0|JobArrayTaskLimit",
        "22000_7|sweep|bob|gpu|gpu-b[7-8]|2|billing=16,cpu=16,gres/gpu:h100=2,mem=200G,node=2|2026-11-24T02:00:00|2026-11-24T02:35:00|2026-11-25T04:35:01|1-02:00:01|TIMEOUT|0:0|None",
        "22000_7.batch|batch|||gpu-b7|1|cpu=8,gres/gpu:h100=1,mem=100G,node=1|2026-11-24T02:35:00|2026-11-24T02:35:00|2026-11-25T04:35:03|1-02:00:03|CANCELLED|0:15|",
        # 10: heterogeneous job: two components and a step of the first
        "30000+0|hetjob|carol|gpu|r1-n[01-02]|2|billing=16,cpu=16,gres/gpu=16,mem=500G,node=2|2026-11-24T04:00:00|2026-11-24T04:00:02|2026-11-24T04:10:02|00:10:00|COMPLETED|0:0|None",
        "30000+1|hetjob|carol|cpu|r2-n01|1|billing=64,cpu=64,mem=250G,node=1|2026-11-24T04:00:00|2026-11-24T04:00:02|2026-11-24T04:10:02|00:10:00|COMPLETED|0:0|None",
        "30000+0.batch|batch|||r1-n01|1|cpu=8,gres/gpu=8,mem=250G,node=1|2026-11-24T04:00:02|2026-11-24T04:00:02|2026-11-24T04:10:02|00:10:00|COMPLETED|0:0|",
        # 13: cancelled by an admin (uid 1234), multiple bracket groups in one name
        "40000|interactive|dave|gpu|r[1-2]-n[01-02]|4|billing=32,cpu=32,gres/gpu=32,mem=1000G,node=4|2026-11-24T05:00:00|2026-11-24T05:00:10|2026-11-24T06:00:00|00:59:50|CANCELLED by 1234|0:0|None",
        "40000.extern|extern|||r[1-2]-n[01-02]|4|billing=32,cpu=32,gres/gpu=32,mem=1000G,node=4|2026-11-24T05:00:10|2026-11-24T05:00:10|2026-11-24T06:00:01|00:59:51|CANCELLED|0:15|",
        # 15: still running: End Unknown; step OOM-killed
        "50000|eval|erin|gpu|node-042|1|billing=8,cpu=8,gres/gpu=8,mem=250G,node=1|2026-11-24T06:00:00|2026-11-24T06:00:01|Unknown|00:30:00|RUNNING|0:0|None",
        "50000.0|python3|||node-042|1|cpu=8,gres/gpu=8,mem=250G,node=1|2026-11-24T06:00:02|2026-11-24T06:00:02|2026-11-24T06:20:00|00:19:58|OUT_OF_MEMORY|0:125|",
        # 17-21: bad rows
        "60000|broken|frank|gpu|node-[001-003|3|gres/gpu=24|2026-11-24T07:00:00|2026-11-24T07:00:01|2026-11-24T07:10:00|00:09:59|FAILED|1:0|None",
        "60001|broken|frank|gpu|node-[005-003]|3|gres/gpu=24|2026-11-24T07:00:00|2026-11-24T07:00:01|2026-11-24T07:10:00|00:09:59|FAILED|1:0|None",
        "60002|bad-time|frank|gpu|node-001|1|gres/gpu=8|2026-11-24T07:00:00|2026-13-45T99:00:00|2026-11-24T07:10:00|00:09:59|FAILED|1:0|None",
        "60003|job|with|pipe|in|name|frank|gpu|node-001|1|gres/gpu=8|2026-11-24T07:00:00|2026-11-24T07:00:01|2026-11-24T07:10:00|00:09:59|FAILED|1:0|None",
        "not-a-job|x|frank|gpu|node-001|1|gres/gpu=8|2026-11-24T07:00:00|2026-11-24T07:00:01|2026-11-24T07:10:00|00:09:59|FAILED|1:0|None",
        # 22: a requeued job that later failed with a signal
        "70000|train|gina|gpu|node-[101-102]|2|billing=16,cpu=16,gres/gpu=16,mem=500G,node=2|2026-11-24T08:00:00|2026-11-24T08:00:05|2026-11-24T09:00:05|01:00:00|FAILED|0:9|None",
        "",
    ]
)


@pytest.fixture(scope="module")
def parsed():
    return parse_sacct(SACCT.encode(), source="aws/c1/2026-11-24/slurm/sacct.txt")


def test_sacct_schemas(parsed):
    assert parsed.jobs.schema == SACCT_JOBS
    assert parsed.steps.schema == SACCT_STEPS
    assert parsed.quarantine.schema == QUARANTINE
    assert parsed.columns == HEADER.split("|")
    assert parsed.error is None


def test_sacct_accounting(parsed):
    # 22 physical lines: header, 8 jobs, 7 steps, 5 quarantined, 1 blank
    assert parsed.lines_read == 22
    assert parsed.accounted == {"header": 1, "jobs": 8, "steps": 7, "quarantined": 5, "blank": 1}
    assert parsed.balanced
    assert parsed.lines_read == 1 + parsed.jobs.height + parsed.steps.height + parsed.quarantine.height + 1


def test_sacct_jobs_rows(parsed):
    cols = [
        "job_id",
        "array_job_id",
        "array_task_id",
        "het_job_id",
        "het_job_offset",
        "job_name",
        "user",
        "partition",
        "nodelist",
        "nodes",
        "n_nodes",
        "gpus",
        "state",
        "cancelled_by",
        "exit_code",
        "signal",
        "reason",
        "line_no",
    ]
    assert parsed.jobs.select(cols).rows() == [
        (
            "12345",
            None,
            None,
            None,
            None,
            "pretrain-7b",
            "alice",
            "gpu",
            "node-[001-004,017]",
            ["node-001", "node-002", "node-003", "node-004", "node-017"],
            5,
            40,
            "NODE_FAIL",
            None,
            0,
            0,
            None,
            2,
        ),
        (
            "22000_[5-8%2]",
            "22000",
            None,
            None,
            None,
            "sweep",
            "bob",
            "gpu",
            "None assigned",
            [],
            1,
            None,
            "PENDING",
            None,
            0,
            0,
            "JobArrayTaskLimit",
            7,
        ),
        (
            "22000_7",
            "22000",
            7,
            None,
            None,
            "sweep",
            "bob",
            "gpu",
            "gpu-b[7-8]",
            ["gpu-b7", "gpu-b8"],
            2,
            2,
            "TIMEOUT",
            None,
            0,
            0,
            None,
            8,
        ),
        (
            "30000+0",
            None,
            None,
            "30000",
            0,
            "hetjob",
            "carol",
            "gpu",
            "r1-n[01-02]",
            ["r1-n01", "r1-n02"],
            2,
            16,
            "COMPLETED",
            None,
            0,
            0,
            None,
            10,
        ),
        (
            "30000+1",
            None,
            None,
            "30000",
            1,
            "hetjob",
            "carol",
            "cpu",
            "r2-n01",
            ["r2-n01"],
            1,
            None,
            "COMPLETED",
            None,
            0,
            0,
            None,
            11,
        ),
        (
            "40000",
            None,
            None,
            None,
            None,
            "interactive",
            "dave",
            "gpu",
            "r[1-2]-n[01-02]",
            ["r1-n01", "r1-n02", "r2-n01", "r2-n02"],
            4,
            32,
            "CANCELLED",
            "1234",
            0,
            0,
            None,
            13,
        ),
        (
            "50000",
            None,
            None,
            None,
            None,
            "eval",
            "erin",
            "gpu",
            "node-042",
            ["node-042"],
            1,
            8,
            "RUNNING",
            None,
            0,
            0,
            None,
            15,
        ),
        (
            "70000",
            None,
            None,
            None,
            None,
            "train",
            "gina",
            "gpu",
            "node-[101-102]",
            ["node-101", "node-102"],
            2,
            16,
            "FAILED",
            None,
            0,
            9,
            None,
            22,
        ),
    ]


def test_sacct_jobs_times(parsed):
    rows = parsed.jobs.select("job_id", "submit", "start", "end", "elapsed_s").rows()
    assert rows == [
        ("12345", utc(2026, 11, 24, 1, 0, 0), utc(2026, 11, 24, 1, 0, 5), utc(2026, 11, 24, 3, 14, 7), 8042),
        ("22000_[5-8%2]", utc(2026, 11, 24, 2, 0, 0), None, None, 0),
        ("22000_7", utc(2026, 11, 24, 2, 0, 0), utc(2026, 11, 24, 2, 35, 0), utc(2026, 11, 25, 4, 35, 1), 93601),
        ("30000+0", utc(2026, 11, 24, 4, 0, 0), utc(2026, 11, 24, 4, 0, 2), utc(2026, 11, 24, 4, 10, 2), 600),
        ("30000+1", utc(2026, 11, 24, 4, 0, 0), utc(2026, 11, 24, 4, 0, 2), utc(2026, 11, 24, 4, 10, 2), 600),
        ("40000", utc(2026, 11, 24, 5, 0, 0), utc(2026, 11, 24, 5, 0, 10), utc(2026, 11, 24, 6, 0, 0), 3590),
        ("50000", utc(2026, 11, 24, 6, 0, 0), utc(2026, 11, 24, 6, 0, 1), None, 1800),
        ("70000", utc(2026, 11, 24, 8, 0, 0), utc(2026, 11, 24, 8, 0, 5), utc(2026, 11, 24, 9, 0, 5), 3600),
    ]
    assert parsed.jobs["source"].unique().to_list() == ["aws/c1/2026-11-24/slurm/sacct.txt"]


def test_sacct_steps_exact(parsed):
    assert parsed.steps.drop("source").rows() == [
        ("12345", "batch", "CANCELLED", 0, 15, utc(2026, 11, 24, 1, 0, 5), utc(2026, 11, 24, 3, 14, 9), "node-001", 3),
        (
            "12345",
            "extern",
            "COMPLETED",
            0,
            0,
            utc(2026, 11, 24, 1, 0, 5),
            utc(2026, 11, 24, 3, 14, 7),
            "node-[001-004,017]",
            4,
        ),
        (
            "12345",
            "0",
            "FAILED",
            1,
            0,
            utc(2026, 11, 24, 1, 0, 6),
            utc(2026, 11, 24, 3, 14, 8),
            "node-[001-004,017]",
            5,
        ),
        ("22000_7", "batch", "CANCELLED", 0, 15, utc(2026, 11, 24, 2, 35, 0), utc(2026, 11, 25, 4, 35, 3), "gpu-b7", 9),
        ("30000+0", "batch", "COMPLETED", 0, 0, utc(2026, 11, 24, 4, 0, 2), utc(2026, 11, 24, 4, 10, 2), "r1-n01", 12),
        (
            "40000",
            "extern",
            "CANCELLED",
            0,
            15,
            utc(2026, 11, 24, 5, 0, 10),
            utc(2026, 11, 24, 6, 0, 1),
            "r[1-2]-n[01-02]",
            14,
        ),
        (
            "50000",
            "0",
            "OUT_OF_MEMORY",
            0,
            125,
            utc(2026, 11, 24, 6, 0, 2),
            utc(2026, 11, 24, 6, 20, 0),
            "node-042",
            16,
        ),
    ]


def test_sacct_quarantine_exact(parsed):
    q = parsed.quarantine
    assert q["line_no"].to_list() == [17, 18, 19, 20, 21]
    assert set(q["reason"]) == {"sacct_bad_row"}
    assert q["detail"].to_list() == [
        "bad NodeList: unbalanced '[' (no closing ']') in host list 'node-[001-003'",
        "bad NodeList: reversed range '005-003' (5 > 3) in host list 'node-[005-003]'",
        "bad Start time '2026-13-45T99:00:00'",
        "expected 14 '|'-separated fields, got 18",
        "bad JobID 'not-a-job'",
    ]
    lines = SACCT.split("\n")
    assert q["preview"].to_list() == lines[16:21]
    assert set(q["source"].to_list()) == {"aws/c1/2026-11-24/slurm/sacct.txt"}


def test_sacct_timezone():
    data = (
        HEADER
        + "\n"
        + "1|a|u|p|n1|1|gres/gpu=8|2026-11-24T01:00:00|2026-07-01T12:00:00|Unknown|00:00:01|RUNNING|0:0|None\n"
    ).encode()
    r = parse_sacct(data, tz="America/New_York")
    row = r.jobs.row(0, named=True)
    assert row["submit"] == utc(2026, 11, 24, 6, 0, 0)  # EST, UTC-5
    assert row["start"] == utc(2026, 7, 1, 16, 0, 0)  # EDT, UTC-4
    assert row["end"] is None
    assert r.jobs.schema["start"] == pl.Datetime("us", "UTC")
    with pytest.raises(ValueError, match="unknown time zone"):
        parse_sacct(data, tz="Mars/Olympus")


def test_sacct_other_column_order_and_missing_columns():
    data = (
        b"State|JobID|End|NodeList\nCOMPLETED|42|2026-11-24T01:00:00|n[1-2]\nFAILED|42.0|2026-11-24T01:00:00|n[1-2]\n"
    )
    r = parse_sacct(data)
    assert r.balanced
    row = r.jobs.row(0, named=True)
    assert row["job_id"] == "42"
    assert row["state"] == "COMPLETED"
    assert row["nodes"] == ["n1", "n2"]
    assert row["n_nodes"] == 2  # derived from the node list when NNodes is absent
    for col in (
        "job_name",
        "user",
        "partition",
        "gpus",
        "submit",
        "start",
        "elapsed_s",
        "exit_code",
        "signal",
        "reason",
    ):
        assert row[col] is None, col
    assert row["end"] == utc(2026, 11, 24, 1, 0, 0)
    assert r.steps.select("job_id", "step", "state").rows() == [("42", "0", "FAILED")]


def test_sacct_no_nodelist_column_gives_null_nodes():
    r = parse_sacct(b"JobID|State\n42|COMPLETED\n")
    assert r.jobs.select("job_id", "nodelist", "nodes", "n_nodes").rows() == [("42", None, None, None)]


def test_sacct_trailing_pipe_crlf_and_repeated_header():
    # `sacct -p` ends every line with '|'; files pasted from Windows have CRLF; two outputs
    # concatenated repeat the header.
    data = b"JobID|State|ExitCode|\r\n1|COMPLETED|0:0|\r\nJobID|State|ExitCode|\r\n2|FAILED|2:0|\r\n\r\n"
    r = parse_sacct(data)
    assert r.jobs.select("job_id", "state", "exit_code", "line_no").rows() == [
        ("1", "COMPLETED", 0, 2),
        ("2", "FAILED", 2, 4),
    ]
    assert r.accounted == {"header": 2, "jobs": 2, "steps": 0, "quarantined": 0, "blank": 1}
    assert r.lines_read == 5 and r.balanced


def test_sacct_garbled_header_quarantines_everything():
    data = ("\n" + SACCT.split("\n", 1)[1]).encode()  # header line replaced by a blank
    r = parse_sacct(data)
    assert r.jobs.height == 0 and r.steps.height == 0
    assert r.error is not None and "header" in r.error
    assert r.quarantine["line_no"][0] == 2
    assert "missing or garbled sacct header" in r.quarantine["detail"][0]
    assert set(r.quarantine["detail"][1:].to_list()) == {"no usable sacct header in file (see line 2)"}
    assert r.balanced
    assert r.accounted["header"] == 0


def test_sacct_header_without_jobid():
    r = parse_sacct(b"JobName|State\nx|COMPLETED\n")
    assert r.quarantine.height == 2 and r.jobs.height == 0 and r.balanced


def test_sacct_empty_and_blank_files():
    r = parse_sacct(b"")
    assert r.lines_read == 0 and r.balanced and r.error == "empty file"
    assert r.jobs.schema == SACCT_JOBS
    r = parse_sacct(b"\n  \n\n")
    assert r.lines_read == 3 and r.accounted["blank"] == 3 and r.balanced


def test_sacct_header_only():
    r = parse_sacct((HEADER + "\n").encode())
    assert r.lines_read == 1 and r.accounted["header"] == 1 and r.jobs.height == 0 and r.balanced


def test_sacct_bad_values_each_quarantined():
    rows = [
        "1|a|u|p|n1|1||2026-11-24T01:00:00|2026-11-24T01:00:00|2026-11-24T01:00:00|xx:yy|COMPLETED|0:0|None",
        "2|a|u|p|n1|one||2026-11-24T01:00:00|2026-11-24T01:00:00|2026-11-24T01:00:00|00:00:00|COMPLETED|0:0|None",
        "3|a|u|p|n1|1||2026-11-24T01:00:00|2026-11-24T01:00:00|2026-11-24T01:00:00|00:00:00|COMPLETED|zero|None",
        "4|a|u|p|n1|1||yesterday|2026-11-24T01:00:00|2026-11-24T01:00:00|00:00:00|COMPLETED|0:0|None",
        "5|a|u|p|n1|1||2026-11-24T01:00:00|2026-11-24T01:00:00|soon|00:00:00|COMPLETED|0:0|None",
        "|a|u|p|n1|1||2026-11-24T01:00:00|2026-11-24T01:00:00|2026-11-24T01:00:00|00:00:00|COMPLETED|0:0|None",
    ]
    r = parse_sacct(("\n".join([HEADER, *rows]) + "\n").encode())
    assert r.quarantine.select("line_no", "detail").rows() == [
        (2, "bad Elapsed 'xx:yy'"),
        (3, "bad NNodes 'one'"),
        (4, "bad ExitCode 'zero'"),
        (5, "bad Submit time 'yesterday'"),
        (6, "bad End time 'soon'"),
        (7, "empty JobID"),
    ]
    assert r.balanced


def test_sacct_raw_is_truncated():
    r = parse_sacct(("JobID|State\n" + "x" * 2000 + "\n").encode())
    assert len(r.quarantine["preview"][0]) == 512


def test_sacct_node_budget(monkeypatch):
    monkeypatch.setattr(sacct_mod, "MAX_TOTAL_NODES", 5)
    data = "JobID|NodeList\n1|n[1-3]\n2|n[4-6]\n3|None assigned\n3.0|n[1-9]\n"
    r = parse_sacct(data.encode())
    assert r.jobs["job_id"].to_list() == ["1", "3"]
    assert r.steps.height == 1
    assert r.quarantine["line_no"].to_list() == [3]
    assert "budget" in r.quarantine["detail"][0]
    assert r.balanced


def test_sacct_accepts_str_and_invalid_utf8():
    r = parse_sacct(HEADER + "\n")
    assert r.balanced
    r = parse_sacct(b"JobID|JobName\n1|caf\xe9\n")
    assert r.jobs["job_name"].to_list() == ["caf\ufffd"]


def test_parse_slurm_stamp_and_elapsed():
    assert parse_slurm_stamp("2026-11-24T03:14:07") == utc(2026, 11, 24, 3, 14, 7)
    assert parse_slurm_stamp("2026-11-24T03:14:07", tz="Europe/Berlin") == utc(2026, 11, 24, 2, 14, 7)
    assert parse_slurm_stamp("Unknown") is None
    assert parse_slurm_stamp("") is None
    assert parse_slurm_stamp(None) is None
    with pytest.raises(ValueError):
        parse_slurm_stamp("24/11/2026")
    assert parse_elapsed("02:14:02") == 8042
    assert parse_elapsed("1-02:00:01") == 93601
    assert parse_elapsed("05:03") == 303
    assert parse_elapsed("INVALID") is None
    with pytest.raises(ValueError):
        parse_elapsed("abc")


# --------------------------------------------------------------------------- properties

_field_text = st.text(alphabet=st.sampled_from(list("0123456789_+.[]-,:%|TUnkow aby\\\r\t")), max_size=24)


@given(st.binary(max_size=2000))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_sacct_arbitrary_bytes_never_raise_and_balance(data):
    r = parse_sacct(data)
    assert r.balanced
    assert r.jobs.schema == SACCT_JOBS
    assert r.steps.schema == SACCT_STEPS
    assert r.quarantine.schema == QUARANTINE


@given(st.lists(st.lists(_field_text, min_size=12, max_size=16), max_size=20), st.binary(max_size=50))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_sacct_fuzzed_rows_balance(rows, tail):
    text = HEADER + "\n" + "\n".join("|".join(r) for r in rows) + "\n"
    r = parse_sacct(text.encode() + tail)
    assert r.balanced
    # every line number appears exactly once across the outputs (plus header/blank lines)
    seen = r.jobs["line_no"].to_list() + r.steps["line_no"].to_list() + r.quarantine["line_no"].to_list()
    assert len(seen) == len(set(seen))
    assert 1 not in seen
