"""Bad input through the full pipeline (``run_pipeline`` on a landing folder): the run never
crashes, good files beside bad ones keep their events, whatever cannot be read is in
``quarantine`` with a clear reason, and ``ingest_audit`` balances for every file.

One landing folder holds every case of ``badinput`` (a cluster per case) and is run once;
cases that need their own run (a rerun, a changed limit, input that crashes the run) build
a small landing folder of their own.
"""

from __future__ import annotations

import datetime as dt
import functools
import gzip
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from helpers import badinput as bi
from helpers.hashes import lake_hashes

from faultline.cli import main
from faultline.ingest import reader
from faultline.ingest.flight_recorder import FlightRecorderRefused, load_dump
from faultline.lake import files as lake
from faultline.launch.local import run_pipeline

UTC = dt.timezone.utc
TABLES = (
    "ingest_audit",
    "quarantine",
    "raw_kernel_events",
    "raw_job_events",
    "events",
    "raw_slurm_jobs",
    "steps",
    "flight_recorder",
    "inventory",
)


class Lake:
    """The lake tables of one run, and per-case views of them."""

    def __init__(self, landing: Path, warehouse: Path, cases: dict[str, bi.Case], summary: dict):
        self.landing, self.warehouse, self.cases, self.summary = landing, warehouse, cases, summary
        self.t = {name: lake.read_table(warehouse, name) for name in TABLES}

    def table(self, name: str, case: str, date: str | None = None) -> pl.DataFrame:
        df = self.t[name].filter(pl.col("cluster") == case)
        return df.filter(pl.col("date") == dt.date.fromisoformat(date)) if date else df

    def audit(self, case: str, rel: str, date: str | None = None) -> dict:
        src = self.cases[case].source(rel, date)
        rows = self.t["ingest_audit"].filter(pl.col("source") == src)
        assert rows.height == 1, f"{src}: {rows.height} audit rows"
        return rows.row(0, named=True)

    def quarantine(self, case: str, rel: str, date: str | None = None) -> pl.DataFrame:
        return self.t["quarantine"].filter(pl.col("source") == self.cases[case].source(rel, date)).sort("line_no")

    def events(self, case: str, rel: str, date: str | None = None, table: str = "events") -> pl.DataFrame:
        return self.t[table].filter(pl.col("source") == self.cases[case].source(rel, date)).sort("line_no")


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Lake:
    base = tmp_path_factory.mktemp("hardening")
    landing, outside, marker = base / "landing", base / "outside", base / "pickle-ran"
    cases = bi.build_corpus(landing, outside, marker)
    summary = run_pipeline(landing, base / "warehouse")
    out = Lake(landing, base / "warehouse", cases, summary)
    out.marker, out.outside = marker, outside
    return out


def _unbalanced(audit: pl.DataFrame) -> pl.DataFrame:
    return audit.filter(pl.col("lines_read") != pl.col("event_lines") + pl.col("benign") + pl.col("quarantined"))


def _good_signature(df: pl.DataFrame) -> list[tuple]:
    return df.select("line_no", "line_count", "category", "xid", pl.col("ts").dt.time()).rows()


# --------------------------------------------------------------------------- every case


def test_every_partition_ran_and_every_file_balances(run):
    want = {f"{bi.PROVIDER}/{c.name}/{d}" for c in run.cases.values() for d in c.dates}
    assert {r["partition"] for r in run.summary["rows"]} == want
    audit = run.t["ingest_audit"]
    assert _unbalanced(audit).height == 0, _unbalanced(audit)
    # per file, the quarantined count is the number of its line-level quarantine rows
    q = (
        run.t["quarantine"]
        .filter(pl.col("line_no").is_not_null() & (pl.col("reason") != "unreadable_rest"))
        .group_by("source")
        .len()
    )
    joined = audit.join(q, on="source", how="left").with_columns(pl.col("len").fill_null(0))
    off = joined.filter((pl.col("kind") != "flight_recorder") & (pl.col("quarantined") != pl.col("len")))
    assert off.height == 0, off.select("source", "quarantined", "len")


def test_every_regular_file_is_audited_once(run):
    """Every plain file of the landing folder (not hidden, not reached through a link) has
    exactly one audit row; nothing else has one."""

    def walk(folder: Path):
        for p in sorted(folder.iterdir()):
            if p.is_symlink() or p.name.startswith((".", "_")):
                continue
            if p.is_dir():
                yield from walk(p)
            elif p.is_file():
                yield p.relative_to(run.landing).as_posix()

    refused = set(run.t["quarantine"].filter(pl.col("reason").str.starts_with("refused_"))["source"])
    on_disk = sorted(x for x in walk(run.landing) if x != "inventory.csv" and x not in refused)
    audited = run.t["ingest_audit"]["source"].to_list()
    assert sorted(audited) == on_disk


def test_good_neighbours_keep_their_events(run):
    control = _good_signature(run.events("control", "kernel/control-good1.log"))
    assert [(r[0], r[2]) for r in control] == bi.GOOD_KERNEL_EVENTS
    for name, case in run.cases.items():
        for src in case.good:
            got = run.t["events"].filter(pl.col("source") == src).sort("line_no")
            assert _good_signature(got) == control, (name, src)
            a = run.t["ingest_audit"].filter(pl.col("source") == src).row(0, named=True)
            assert (a["lines_read"], a["events"], a["quarantined"]) == (5, 3, 0), (name, src)


# --------------------------------------------------------------------------- bytes


def test_binary_garbage(run):
    junk = run.audit("binary", "kernel/binary-junk.log")
    assert junk["events"] == 0 and junk["lines_read"] > 200
    assert junk["quarantined"] >= 0.9 * junk["lines_read"]
    q = run.quarantine("binary", "kernel/binary-junk.log")
    assert set(q["reason"]) == {"binary_or_invalid_utf8"}
    assert q["detail"].unique().to_list() == ["line holds NUL/control bytes or invalid UTF-8"]
    assert q["preview"].str.len_bytes().max() <= 3 * reader.PREVIEW_BYTES
    mixed = run.events("binary", "kernel/binary-n1.log")
    assert mixed.select("line_no", "category").rows() == [(1, "gpu_bus_lost"), (3, "storage")]
    assert run.quarantine("binary", "kernel/binary-n1.log")["line_no"].to_list() == [2, 4]


def test_nul_bytes(run):
    ev = run.events("nul", "kernel/nul-n1.log")
    assert ev.select("line_no", "category").rows() == [(2, "gpu_bus_lost"), (5, "storage")]
    q = run.quarantine("nul", "kernel/nul-n1.log")
    assert q.select("line_no", "reason").rows() == [(3, "binary_or_invalid_utf8"), (4, "binary_or_invalid_utf8")]
    assert "\x00" not in "".join(q["preview"].to_list())  # previews are escaped
    a = run.audit("nul", "kernel/nul-n1.log")
    assert (a["lines_read"], a["event_lines"], a["benign"], a["quarantined"]) == (5, 2, 1, 2)


def test_nul_padding_does_not_hide_the_stamp(run):
    ev = run.events("nul", "kernel/nul-n1.log").row(0, named=True)
    assert (ev["ts"], ev["ts_source"]) == (dt.datetime(2026, 11, 24, 3, 0, 1, tzinfo=UTC), "yearless")


def test_invalid_utf8(run):
    ev = run.events("utf8", "kernel/utf8-n1.log")
    assert ev.select("line_no", "category", "xid").rows() == [(1, "storage", None), (5, "gpu_bus_lost", 79)]
    q = run.quarantine("utf8", "kernel/utf8-n1.log")
    assert q.select("line_no", "reason").rows() == [(n, "binary_or_invalid_utf8") for n in (2, 3, 4, 6)]
    assert run.quarantine("utf8", "kernel/utf8-n1.boot").select("line_no", "reason").rows() == [(2, "bad_boot_time")]
    boot = run.audit("utf8", "kernel/utf8-n1.boot")
    assert (boot["lines_read"], boot["benign"], boot["quarantined"]) == (2, 1, 1)


def test_ascii_control_bytes_are_quarantined(run):
    q = run.quarantine("ctrl", "kernel/ctrl-n1.log")
    assert q.select("line_no", "reason").rows() == [(2, "binary_or_invalid_utf8"), (3, "binary_or_invalid_utf8")]


def test_ascii_control_bytes_do_not_break_the_file(run):
    a = run.audit("ctrl", "kernel/ctrl-n1.log")
    assert a["lines_read"] == 4
    assert run.events("ctrl", "kernel/ctrl-n1.log").select("line_no", "category").rows() == [(4, "storage")]


# --------------------------------------------------------------------------- line ends and sizes


@pytest.mark.parametrize("case", ["crlf", "cronly"])
def test_crlf_and_cr_only_line_ends(run, case):
    ref = run.events("control", "kernel/control-good1.log")
    got = run.events(case, f"kernel/{case}-n1.log")
    assert _good_signature(got) == _good_signature(ref)
    assert not any("\r" in r for r in got["raw"].to_list())
    assert run.audit(case, f"kernel/{case}-n1.log")["lines_read"] == 5
    job_ref = run.events("control", "jobs/777/train.log")
    job = run.events(case, "jobs/777/train.log")
    assert job.select("line_no", "category").rows() == job_ref.select("line_no", "category").rows()
    assert job["category"].to_list() == bi.GOOD_JOB_CATEGORIES
    assert run.audit(case, "jobs/777/train.log")["lines_read"] == 5


def test_crlf_sacct(run):
    jobs = run.table("raw_slurm_jobs", "crlf")
    assert jobs.select("job_id", "state", "reason").rows() == [("12345", "FAILED", None), ("12346", "COMPLETED", None)]
    assert run.table("steps", "crlf")["step"].to_list() == ["batch"]
    assert run.audit("crlf", "slurm/sacct.txt")["quarantined"] == 0


def test_ten_megabyte_single_line(run):
    for rel, lines in (("kernel/longline-n1.log", 1), ("kernel/longline-n2.log", 3)):
        a = run.audit("longline", rel)
        assert a["lines_read"] == lines and a["bytes_read"] == a["bytes"]
        q = run.quarantine("longline", rel)
        assert q.select("reason", "detail").rows() == [
            ("line_too_long", f"line longer than {reader.MAX_LINE_BYTES} bytes; only a preview is kept")
        ]
        assert 0 < q["preview"][0].__len__() <= reader.PREVIEW_BYTES
    assert run.events("longline", "kernel/longline-n2.log").select("line_no", "category").rows() == [
        (1, "gpu_bus_lost"),
        (3, "storage"),
    ]
    assert run.table("events", "longline")["raw"].str.len_bytes().max() < reader.MAX_LINE_BYTES


def test_empty_files(run):
    for rel in (
        "kernel/empty-n1.log",
        "kernel/empty-n2.log.gz",
        "kernel/empty-n3.log.zst",
        "kernel/empty-n1.boot",
        "jobs/777/train.log",
        "slurm/sacct.txt",
        "slurm/slurmctld.log",
    ):
        a = run.audit("empty", rel)
        assert (a["bytes"], a["lines_read"], a["events"], a["quarantined"]) == (0, 0, 0, 0), rel
    assert run.audit("empty", "slurm/sacct.txt")["message"] == "empty file"
    q = run.table("quarantine", "empty")
    by = {Path(s).name: (r, d) for s, r, d in q.select("source", "reason", "detail").rows()}
    assert set(by) == {"rank_0.json", "empty-n2.log.gz"}
    assert by["rank_0.json"][0] == "flight_recorder_invalid"
    # zero bytes are not a valid gzip stream: said so, not silently dropped
    assert by["empty-n2.log.gz"][0] == "unreadable_rest"
    assert by["empty-n2.log.gz"][1].startswith("truncated or corrupt gzip archive")


# --------------------------------------------------------------------------- archives


def _rest(run, case: str, rel: str) -> dict:
    q = run.quarantine(case, rel).filter(pl.col("reason") == "unreadable_rest")
    assert q.height == 1, (rel, run.quarantine(case, rel))
    return q.row(0, named=True)


def test_truncated_and_corrupt_gzip(run):
    a = run.audit("gz", "kernel/gz-n1.log.gz")
    assert 0 < a["lines_read"] < 20000
    assert a["event_lines"] == (a["lines_read"] + 9) // 10  # every 10th line of the readable part
    assert a["events"] == 1  # the same Xid line repeated: one flood event standing for them all
    rest = _rest(run, "gz", "kernel/gz-n1.log.gz")
    assert rest["line_no"] == a["lines_read"] + 1
    assert rest["detail"] == (
        "truncated or corrupt gzip archive: compressed file ended before the end-of-stream marker was reached"
    )
    assert a["message"] == rest["detail"]
    for rel, why in (
        ("kernel/gz-n2.log.gz", "Error -3 while decompressing data"),
        ("kernel/gz-n3.log.gz", "incorrect header check"),
    ):
        rest = _rest(run, "gz", rel)
        assert rest["detail"].startswith("truncated or corrupt gzip archive: ") and why in rest["detail"], rest
    ok = run.audit("gz", "kernel/gz-n4.log.gz")
    assert (ok["lines_read"], ok["events"], ok["message"]) == (10, 1, None)


def test_gzip_with_trailing_garbage_keeps_its_lines(run):
    a = run.audit("gztrail", "kernel/gztrail-n1.log.gz")
    assert (a["lines_read"], a["events"]) == (100, 10)
    assert _rest(run, "gztrail", "kernel/gztrail-n1.log.gz")["line_no"] == 101


def test_gzip_with_trailing_garbage_is_reported(run):
    assert _rest(run, "gztrail", "kernel/gztrail-n1.log.gz")["detail"].startswith("truncated or corrupt gzip archive")


def test_corrupt_zstd(run):
    for rel, why in (
        ("kernel/zst-n1.log.zst", "Data corruption detected"),
        ("kernel/zst-n2.log.zst", "Unknown frame descriptor"),
    ):
        rest = _rest(run, "zst", rel)
        assert rest["detail"].startswith("truncated or corrupt zstd archive: ") and rest["detail"].endswith(why)
        assert run.audit("zst", rel)["message"] == rest["detail"]
    ok = run.audit("zst", "kernel/zst-n3.log.zst")
    assert (ok["lines_read"], ok["events"], ok["message"]) == (10, 1, None)


def test_truncated_zstd_keeps_what_it_could_read(run):
    a = run.audit("zsttrunc", "kernel/zsttrunc-n1.log.zst")
    assert 0 < a["lines_read"] < 20000 and a["events"] > 0


def test_truncated_zstd_is_reported(run):
    a = run.audit("zsttrunc", "kernel/zsttrunc-n1.log.zst")
    rest = _rest(run, "zsttrunc", "kernel/zsttrunc-n1.log.zst")
    assert rest["detail"].startswith("truncated or corrupt zstd archive") and rest["line_no"] == a["lines_read"] + 1


def test_decompression_bombs_are_bounded(run):
    for rel, what in (("kernel/bomb-n1.log.zst", "zstd"), ("kernel/bomb-n2.log.gz", "gzip")):
        a = run.audit("bomb", rel)
        limit = max(reader.MAX_RATIO * a["bytes"], 1 << 20)
        assert a["bytes"] * reader.MAX_RATIO < bi.BOMB_BYTES  # it really is a bomb
        assert a["bytes_read"] == limit < bi.BOMB_BYTES
        rest = _rest(run, "bomb", rel)
        assert rest["detail"] == (
            f"decompression bound reached ({limit} bytes); possible decompression bomb, rest of {what} archive skipped"
        )
        assert rest["line_no"] == a["lines_read"] + 1
        assert a["lines_read"] == -(-limit // len(bi.BOMB_LINE))  # the cut line counts as read


def test_decompression_bound_is_configurable(tmp_path, monkeypatch):
    """``open_log``'s max_bytes and max_ratio bound what one archive may expand to: here one
    archive stops at max_bytes, the other at max_ratio x its size."""
    landing = tmp_path / "landing"
    case = bi._case(landing, "bound")
    day = case.day(landing) / "kernel"
    big, small = bi.noisy_kernel_body("bound-n1", 40000), bi.noisy_kernel_body("bound-n2", 25000)
    bi.write(day / "bound-n1.log.gz", gzip.compress(big))
    bi.write(day / "bound-n2.log.gz", gzip.compress(small))
    bi.write_inventory(landing, [case])
    max_bytes, max_ratio = 2_500_000, 2
    limits = {}
    for node, body in (("bound-n1", big), ("bound-n2", small)):
        size = (day / f"{node}.log.gz").stat().st_size
        limits[node] = min(max_bytes, max(max_ratio * size, 1 << 20))
        assert limits[node] < len(body)
    assert limits["bound-n1"] == max_bytes and limits["bound-n2"] < max_bytes  # one bound each
    monkeypatch.setattr(
        reader, "open_log", functools.partial(reader.open_log, max_bytes=max_bytes, max_ratio=max_ratio)
    )
    run_pipeline(landing, tmp_path / "warehouse")
    audit = lake.read_table(tmp_path / "warehouse", "ingest_audit")
    q = lake.read_table(tmp_path / "warehouse", "quarantine")
    for node, limit in limits.items():
        a = audit.filter(pl.col("source") == case.source(f"kernel/{node}.log.gz")).row(0, named=True)
        assert a["bytes_read"] == limit
        assert q.filter(pl.col("source") == a["source"])["detail"].to_list() == [
            f"decompression bound reached ({limit} bytes); possible decompression bomb, rest of gzip archive skipped"
        ]
    assert _unbalanced(audit).height == 0


# --------------------------------------------------------------------------- delivery


def test_file_delivered_twice_is_audited_twice_with_one_checksum(run):
    a, b = run.audit("dup", "jobs/777/train.log"), run.audit("dup", "jobs/777/train-retry1.log")
    assert a["checksum"] == b["checksum"] and a["lines_read"] == b["lines_read"] == 5
    plain, gz = run.audit("dup", "kernel/dup-n1.log"), run.audit("dup", "kernel/dup-n1.log.gz")
    assert plain["bytes_read"] == gz["bytes_read"] and plain["events"] == gz["events"] == 3


def test_file_delivered_twice_counts_once(run):
    job = run.table("raw_job_events", "dup")
    assert job.height == len(bi.GOOD_JOB_CATEGORIES)
    node = run.table("raw_kernel_events", "dup").filter(pl.col("node") == "dup-n1")
    assert node.height == 3
    assert run.table("quarantine", "dup")["reason"].to_list().count("duplicate_file") == 2


def _small_landing(root: Path, names: list[str]) -> list[bi.Case]:
    cases = [bi._case(root, n) for n in names]
    for c in cases:
        bi.write(c.day(root) / "jobs" / "777" / "train.log", bi.GOOD_JOB)
    bi.write_inventory(root, cases)
    return cases


def test_file_changed_after_ingest_reruns_only_its_partition(tmp_path):
    landing, wh = tmp_path / "landing", tmp_path / "warehouse"
    a, b, c = _small_landing(landing, ["ca", "cb", "cc"])
    run_pipeline(landing, wh)
    before = lake_hashes(wh)
    changed = b.day(landing) / "kernel" / "cb-good1.log"
    changed.write_text(changed.read_text() + bi.line(bi.XID79, "cb-good1", "06:00:00") + "\n")
    run_pipeline(landing, wh)
    after = lake_hashes(wh)
    assert before.keys() == after.keys()
    diff = sorted(k for k in after if after[k] != before[k])
    assert diff and all("/cluster=cb/" in k for k in diff), diff
    assert {k.split("/")[0] for k in diff} >= {"raw_kernel_events", "events", "ingest_audit"}
    ev = lake.read_table(wh, "events").filter(pl.col("source") == b.source("kernel/cb-good1.log"))
    assert ev["line_no"].to_list() == [2, 3, 4, 6]


# --------------------------------------------------------------------------- formats and time


def test_unknown_formats_and_files_outside_the_layout(run):
    for rel, lines in (("kernel/unknown-n1.log", 20), ("kernel/unknown-n2.log", 10)):
        a = run.audit("unknown", rel)
        assert (a["format"], a["lines_read"], a["benign"], a["quarantined"]) == ("unknown", lines, lines, 0)
    q = run.table("quarantine", "unknown")
    got = sorted((s.split("/", 3)[3], r) for s, r in q.select("source", "reason").rows())
    assert got == [
        ("README.md", "unexpected_file"),
        ("kernel/bad name.log", "unexpected_file"),
        ("kernel/unknown-n3.log.bz2", "unexpected_file"),
        ("kernel/unknown-n3.txt", "unexpected_file"),
        ("slurm/sacct.csv", "unexpected_file"),
    ]
    assert set(q.filter(pl.col("reason") == "unexpected_file")["detail"]) == {
        "not part of the landing layout; not read"
    }


def test_time_jumping_backwards_and_forwards(run):
    ev = run.events("timejump", "kernel/timejump-n1.log", table="raw_kernel_events")
    want = [dt.datetime.fromisoformat(s).replace(tzinfo=UTC) for s in bi.TIME_JUMP_STAMPS]
    assert ev["ts"].to_list() == want
    assert ev["line_no"].to_list() == list(range(1, 9))
    assert set(ev["ts_source"]) == {"absolute"} and set(ev["date"]) == {dt.date(2026, 11, 24)}
    # the time-ordered table has them all too, sorted by time
    core = run.events("timejump", "kernel/timejump-n1.log").sort("ts")
    assert core["ts"].to_list() == sorted(want)


def test_nodes_with_clocks_skewed_by_hours(run):
    ev = run.table("events", "skew").filter(pl.col("node").str.starts_with("skew-") & (pl.col("category") != "benign"))
    got = sorted(ev.filter(~pl.col("node").str.contains("good")).select("node", "ts").rows())
    assert got == [
        ("skew-ahead", dt.datetime(2026, 11, 25, 22, 0, tzinfo=UTC)),
        ("skew-behind", dt.datetime(2026, 11, 23, 0, 0, 1, tzinfo=UTC)),
    ]
    assert set(ev["date"]) == {dt.date(2026, 11, 24)}  # kept in the day they were delivered for


def test_year_boundary_in_year_less_formats(run):
    def ts(date, rel):
        return run.events("yearend", rel, date)["ts"].to_list()

    dec, jan = "2026-12-31", "2027-01-01"
    assert ts(dec, "kernel/yearend-n1.log") == [
        dt.datetime(2026, 12, 31, 23, 59, 58, tzinfo=UTC),
        dt.datetime(2027, 1, 1, 0, 0, 5, tzinfo=UTC),
    ]
    assert ts(jan, "kernel/yearend-n1.log") == [
        dt.datetime(2026, 12, 31, 23, 59, 59, tzinfo=UTC),
        dt.datetime(2027, 1, 1, 0, 0, 7, tzinfo=UTC),
    ]
    assert ts(dec, "jobs/888/train.log") == [dt.datetime(2027, 1, 1, 0, 10, 0, 123456, tzinfo=UTC)]
    assert ts(jan, "jobs/889/train.log") == [dt.datetime(2026, 12, 31, 23, 50, 0, 123456, tzinfo=UTC)]


def test_nodes_missing_from_the_inventory(run):
    ghost = run.events("noinv", "kernel/noinv-ghost.log")
    assert _good_signature(ghost) == _good_signature(run.events("control", "kernel/control-good1.log"))
    assert "noinv-ghost" not in run.table("inventory", "noinv")["node"].to_list()
    jobs = run.table("raw_slurm_jobs", "noinv")
    assert jobs.filter(pl.col("job_id") == "12345")["nodes"].to_list() == [["noinv-ghost", "noinv-ghost2"]]
    incidents = pl.read_parquet(lake.analytics_root(run.warehouse) / "incidents.parquet")
    mine = incidents.filter(pl.col("node") == "noinv-ghost")
    assert sorted(mine["category"]) == ["gpu_bus_lost", "network"] and mine["rack"].is_null().all()


# --------------------------------------------------------------------------- slurm and flight recorder


def test_malformed_sacct_rows(run):
    q = run.quarantine("sacct", "slurm/sacct.txt")
    assert set(q["reason"]) == {"sacct_bad_row"}
    want = [(3 + i, why) for i, (_, why) in enumerate(bi.SACCT_BAD_ROWS)]
    got = q.select("line_no", "detail").rows()
    assert [n for n, _ in got] == [n for n, _ in want]
    for (_, d), (_, w) in zip(got, want):
        assert d == w if w else d.startswith("bad NodeList: "), d
    assert run.table("raw_slurm_jobs", "sacct", bi.DAY).select("job_id", "line_no").rows() == [
        ("12345", 2),
        ("12346", 12),
    ]
    a = run.audit("sacct", "slurm/sacct.txt")
    assert (a["lines_read"], a["events"], a["benign"], a["quarantined"]) == (13, 3, 2, 8)


def test_sacct_with_a_garbled_header(run):
    date = "2026-11-25"
    q = run.quarantine("sacct", "slurm/sacct.txt", date)
    assert q["line_no"].to_list() == [1, 2, 3, 4]
    assert q["detail"][0].startswith("missing or garbled sacct header: line 1 does not name the columns")
    assert set(q["detail"][1:]) == {"no usable sacct header in file (see line 1)"}
    a = run.audit("sacct", "slurm/sacct.txt", date)
    assert (a["lines_read"], a["quarantined"]) == (4, 4) and a["message"].startswith("missing or garbled sacct header")
    assert run.table("raw_slurm_jobs", "sacct", date).height == 0


def test_flight_recorder_pickles_are_refused_and_never_run(run):
    assert not run.marker.exists(), "a pickle payload ran"
    q = run.table("quarantine", "pickle")
    got = {Path(s).name: (r, d) for s, r, d in q.select("source", "reason", "detail").rows()}
    assert {k: v[0] for k, v in got.items()} == {
        "rank_3.pkl": "flight_recorder_refused",
        "rank_4.json": "flight_recorder_refused",
        "rank_5.json": "flight_recorder_refused",
        "rank_6.pt": "flight_recorder_refused",
        "rank_7.json": "flight_recorder_invalid",
    }
    for name in ("rank_3.pkl", "rank_4.json", "rank_5.json"):
        assert got[name][1].startswith("dump is a Python pickle; pickles are refused for safety")
    assert got["rank_6.pt"][1].startswith("dump is a zip archive (torch.save format")
    fr = run.table("flight_recorder", "pickle")
    assert fr.select("rank", "suspect_rank").rows() == [(0, 2), (1, 2), (2, 2)]
    assert run.events("pickle", "jobs/12345/train.log")["category"].to_list() == bi.GOOD_JOB_CATEGORIES


def test_restricted_pickle_reader_refuses_the_payload_too(tmp_path):
    marker = tmp_path / "ran"
    for allow in (False, True):
        with pytest.raises(FlightRecorderRefused):
            load_dump(bi.evil_pickle(marker), allow_restricted_pickle=allow)
    assert not marker.exists()


def _tiny_run(tmp_path: Path, build) -> tuple[Path, Path, bi.Case]:
    landing, wh = tmp_path / "landing", tmp_path / "warehouse"
    case = bi._case(landing, "tiny")
    bi.write(case.day(landing) / "jobs" / "1" / "train.log", bi.GOOD_JOB)
    build(landing, case)
    if not (landing / "inventory.csv").exists():
        bi.write_inventory(landing, [case])
    run_pipeline(landing, wh)
    return landing, wh, case


def test_flight_recorder_rank_out_of_range_is_quarantined(tmp_path):
    def build(landing, case):
        fr = case.day(landing) / "jobs" / "1" / "flight_recorder"
        bi.write(fr / "rank_0.json", bi.fr_dump(0, 10))
        bi.write(fr / "rank_1.json", bi.fr_dump(1, 10))
        bi.write(fr / "rank_x.json", '{"rank": 99999999999999999999999, "entries": []}')
        bi.write(fr / "rank_99999999999999999999999.json", '{"entries": []}')

    _, wh, case = _tiny_run(tmp_path, build)
    q = lake.read_table(wh, "quarantine").filter(pl.col("source").str.contains("flight_recorder"))
    assert q.height == 2 and set(q["reason"]) <= {"flight_recorder_invalid", "flight_recorder_no_rank"}
    assert lake.read_table(wh, "flight_recorder")["rank"].to_list() == [0, 1]


def test_ragged_inventory_row_does_not_stop_the_run(tmp_path):
    def build(landing, case):
        bi.write_inventory(landing, [case])
        with open(landing / "inventory.csv", "a") as f:
            f.write("hard,tiny,r9,tiny-extra,8,H100,leaf-9,2026-01-01,2027-01-01,surplus-field\n")

    landing, wh, case = _tiny_run(tmp_path, build)
    assert lake.read_table(wh, "events").filter(pl.col("source").str.contains("tiny-good1")).height == 3
    # the other rows stay: the ragged one alone is left out, and `faultline run` says where it is
    nodes = lake.read_table(wh, "inventory")["node"].to_list()
    assert nodes and "tiny-extra" not in nodes
    res = CliRunner().invoke(main, ["run", "--landing", str(landing), "--warehouse", str(tmp_path / "wh2")])
    assert res.exit_code == 0, res.output
    line = next(x for x in res.stderr.splitlines() if x.startswith("warning: "))
    assert line.endswith(f"inventory.csv:{len(nodes) + 2}: 10 fields where the header has 8; row left out")


# --------------------------------------------------------------------------- links and special files


def test_symlinks_and_dotdot_are_never_followed(run):
    q = run.table("quarantine", "links")
    got = sorted((s.split("/", 3)[3], r) for s, r in q.select("source", "reason").rows())
    assert got == [
        ("jobs/999", "refused_symlink"),
        ("kernel/links-abs.log", "refused_symlink"),
        ("kernel/links-fifo.log", "refused_not_a_file"),
        ("kernel/links-inside.log", "refused_symlink"),
        ("kernel/links-rel.log", "refused_symlink"),
    ]
    assert q["line_no"].is_null().all()
    # nothing behind a link was read: no audit row, no event names the outside files' nodes or jobs
    assert run.table("ingest_audit", "links")["source"].to_list() == [run.cases["links"].good[0]]
    assert run.t["events"].filter(pl.col("node") == "secret").height == 0
    assert run.t["events"].filter(pl.col("source").str.contains("999|secret|leak")).height == 0


def test_refused_special_file_has_its_own_detail(run):
    q = run.quarantine("links", "kernel/links-fifo.log")
    assert "symlink" not in q["detail"][0]


def test_symlinked_day_folder_is_not_read(run):
    assert not any(r["partition"].endswith("linkday/2026-11-25") for r in run.summary["rows"])
    assert run.t["events"].filter(pl.col("node") == "linkday-x").height == 0
    assert run.t["ingest_audit"].filter(pl.col("source").str.contains("linkday-x")).height == 0


def test_symlinked_day_folder_is_reported(run):
    q = run.t["quarantine"].filter(pl.col("source") == f"{bi.PROVIDER}/linkday/2026-11-25")
    assert q["reason"].to_list() == ["refused_symlink"]


# --------------------------------------------------------------------------- absurd stamps

XID_TAIL = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=python3, GPU has fallen off the bus."
ABSURD_STAMPS = {
    # raw dmesg seconds past int64 microseconds: the strict cast in derive_timestamps raises
    "mono_overflow": (f"[99999999999999.000000] {XID_TAIL}", False),
    # seconds since boot that land past year 9999: polars holds it, Python conversion
    # (the asset's metadata preview) raises OverflowError
    "mono_past_9999": (f"[300000000000.000000] {XID_TAIL}", True),
    # boot + seconds wraps int64: a negative time, and a pyo3 PanicException on conversion
    "mono_wraps": (f"[9222000000000.000000] {XID_TAIL}", True),
    # a zone offset that pushes 9999-12-31 into year 10000
    "iso_past_9999": (f"9999-12-31T23:59:59-23:59 tiny-n1 kernel: {XID_TAIL}", False),
}


@pytest.mark.parametrize("name", sorted(ABSURD_STAMPS))
def test_absurd_kernel_stamps_do_not_crash_the_run(tmp_path, name):
    text, with_boot = ABSURD_STAMPS[name]

    def build(landing, case):
        bi.write(case.day(landing) / "kernel" / "tiny-n1.log", text + "\n")
        if with_boot:
            bi.write(case.day(landing) / "kernel" / "tiny-n1.boot", "2026-11-24T00:00:00Z\n")

    try:
        _, wh, case = _tiny_run(tmp_path, build)
    except BaseException as exc:  # a pyo3 PanicException is a BaseException: report it as a failure
        raise AssertionError(f"{type(exc).__name__}: {exc}") from None
    ev = lake.read_table(wh, "events")
    assert ev.filter(pl.col("source").str.ends_with("tiny-good1.log")).height == 3
    bad = ev.filter(pl.col("source").str.ends_with("tiny-n1.log"))
    assert bad["category"].to_list() == ["gpu_bus_lost"]
    ts = bad["ts"].cast(pl.Int64)[0]
    assert ts is None or 0 <= ts < 7258118400 * 10**6  # null, or between 1970 and 2200
