"""Named queries, ad-hoc SQL and ``faultline sql`` against one real (simulated) warehouse.

The warehouse is built once per session (``demo_warehouse``; also used by test_report.py and
test_browser.py): a small demo fleet whose landing folder gets hostile strings injected
before the pipeline runs (job names, users, log lines, node and rack names), so every test
also runs over data that tries to break out of its context.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import duckdb
import polars as pl
import pytest
from click.testing import CliRunner
from helpers.hostile import ANSI, BIDI, HOSTILE, HOSTILE_NODE, HOSTILE_RACK, IMG, SCRIPT, build_demo_warehouse  # noqa: F401
from polars.testing import assert_frame_equal

from faultline.commands.sql import sql
from faultline.lake import queries as Q
from faultline.lake import views as W


@pytest.fixture(scope="session")
def demo(tmp_path_factory) -> tuple[Path, dict]:
    return build_demo_warehouse(tmp_path_factory.getbasetemp() / "faultline-demo")


@pytest.fixture(scope="session")
def wh(demo) -> Path:
    return demo[0]


@pytest.fixture()
def con(wh):
    c = Q.connect(wh)
    yield c
    c.close()


def _cli(*args, wh: Path | None = None):
    full = [*args] + (["--warehouse", str(wh)] if wh is not None else [])
    return CliRunner().invoke(sql, full)


# -- the hostile strings really are in the warehouse -----------------------------------------


def test_injected_strings_reach_the_warehouse(con, demo):
    _, info = demo
    jf = Q.run_sql(con, "SELECT * FROM job_failures WHERE job_name LIKE '%<script>%'")
    assert set(jf["job_id"]) == set(info["jobs"])
    assert jf["evidence"].str.contains("<script>", literal=True).any()
    assert (
        Q.run_sql(con, "SELECT count(*) AS n FROM inventory_latest WHERE node = $n", {"n": HOSTILE_NODE})["n"][0] == 1
    )


# -- views -------------------------------------------------------------------------------------


def test_sql_views_exist_and_agree(con):
    inv = Q.run_sql(con, "SELECT provider, cluster, node, count(*) AS n FROM inventory_latest GROUP BY ALL")
    assert inv.height > 0 and inv["n"].max() == 1
    x = Q.run_sql(con, "SELECT * FROM xid_events")
    assert x.height > 0 and x["gpu_model"].null_count() < x.height
    daily = Q.run_sql(con, "SELECT sum(failed_jobs) AS a FROM daily_failures")["a"][0]
    summary = Q.run_sql(con, "SELECT sum(failed_jobs) AS a FROM daily_summary")["a"][0]
    total = Q.run_sql(con, "SELECT count(*) AS a FROM job_failures")["a"][0]
    assert daily == summary == total


# -- named queries -----------------------------------------------------------------------------

REQUIRED = {"job_root_cause": "job_id", "node_timeline": "node"}
REQUIRED_QUERIES = {
    "top_failing_nodes",
    "rack_hotspots",
    "provider_comparison",
    "failure_causes_over_time",
    "job_root_cause",
    "xid_by_gpu_model",
    "new_signatures",
    "quarantine_summary",
    "lemon_nodes",
    "node_timeline",
}


def test_library_has_the_promised_queries_with_headers():
    qs = Q.load_queries()
    assert REQUIRED_QUERIES <= set(qs)
    for q in qs.values():
        assert q.description, q.name
        assert Path(q.file).stem == q.name
        for p in q.params:
            assert f"getvariable('{p.name}')" in q.sql, (q.name, p.name)
            if not p.required and p.default is not None:
                assert f"coalesce(getvariable('{p.name}'), " in q.sql, (q.name, p.name)


def _required_values(con, demo) -> dict:
    _, info = demo
    return {"job_id": info["jobs"][0], "node": info["nodes"][0]}


@pytest.mark.parametrize("name", sorted(Q.load_queries()))
def test_every_query_runs_with_defaults_and_with_bound_params(con, demo, name):
    q = Q.get_query(name)
    needed = {p.name: _required_values(con, demo)[p.name] for p in q.params if p.required}
    df = Q.run_query(con, q, needed)
    assert isinstance(df, pl.DataFrame) and df.width > 0
    # the same with every optional parameter bound to something of its type
    last = Q.run_sql(con, "SELECT max(date) AS d FROM ingest_audit")["d"][0]
    sample = {"text": None, "int": 3, "float": 1.5, "bool": True, "date": last}
    values = dict(needed)
    for p in q.params:
        if p.required:
            continue
        if p.choices:
            values[p.name] = p.choices[-1]
        elif p.name == "provider":
            values[p.name] = "northwind"
        elif p.type != "text":
            values[p.name] = sample[p.type]
    bound = Q.run_query(con, q, values)
    assert bound.columns == df.columns
    if "provider" in values and "provider" in bound.columns and bound.height:
        assert set(bound["provider"].drop_nulls()) <= {"northwind"}
    if q.param("max_rows") is not None:
        assert bound.height <= 3


def test_required_queries_return_the_right_rows(con, demo):
    _, info = demo
    job = Q.run_query(con, "job_root_cause", {"job_id": info["jobs"][0]})
    assert job.height == 1 and job["root_cause"][0] == "gpu_bus_lost"
    assert job["culprit_node"][0] == info["nodes"][0]
    tl = Q.run_query(con, "node_timeline", {"node": info["nodes"][0]})
    assert tl.height > 0 and tl["ts"].drop_nulls().is_sorted()
    assert {"event", "incident", "job_end"} <= set(tl["kind"])
    jt = Q.run_query(con, "job_timeline", {"job_id": info["jobs"][0]})
    assert jt["deciding"].any() and (jt["origin"] == "scheduler").sum() == 2
    weekly = Q.run_query(con, "failure_causes_over_time", {"grain": "week"})
    daily = Q.run_query(con, "failure_causes_over_time")
    assert weekly["failed_jobs"].sum() == daily["failed_jobs"].sum()


def test_header_defaults_match_the_sql_defaults(wh, demo):
    """A query run with no variable set (the DuckDB CLI) equals faultline's run with the
    header's defaults: the two spellings of each default agree."""
    raw = duckdb.connect(str(W.db_path(wh)), read_only=True)
    try:
        raw.execute("SET TimeZone = 'UTC'")
        con = Q.connect(wh)
        try:
            for q in Q.load_queries().values():
                if any(p.required for p in q.params):
                    continue
                # floats compared with a tolerance: parallel sums may differ in the last bit
                try:
                    assert_frame_equal(raw.sql(q.sql).pl(), Q.run_query(con, q), check_exact=False)
                except AssertionError as exc:
                    raise AssertionError(f"{q.name}: {exc}") from None
        finally:
            con.close()
    finally:
        raw.close()


def test_duckdb_cli_approach_on_a_read_only_connection(wh, demo):
    """What sql/README.md tells CLI users to type, through the duckdb API on a read_only file."""
    _, info = demo
    raw = duckdb.connect(str(W.db_path(wh)), read_only=True)
    try:
        raw.execute("SET TimeZone = 'UTC'")
        raw.execute(f"SET VARIABLE job_id = '{info['jobs'][0]}'")  # as typed at the D prompt
        text = (Path(__file__).parents[2] / "sql" / "queries" / "job_root_cause.sql").read_text()
        via_cli = raw.sql(text).pl()
        raw.execute("SET VARIABLE provider = 'northwind'")
        raw.execute("SET VARIABLE max_rows = 2")
        raw.execute(f"SET VARIABLE day = DATE '{info['day']}'")
        failed = raw.sql((Path(__file__).parents[2] / "sql" / "queries" / "failed_jobs.sql").read_text()).pl()
        raw.execute("RESET VARIABLE max_rows")
        with pytest.raises(duckdb.Error):
            raw.execute("CREATE TABLE t (x INT)")  # the file really is read-only
    finally:
        raw.close()
    via_faultline = Q.run_query(wh, "job_root_cause", {"job_id": info["jobs"][0]})
    assert_frame_equal(via_cli, via_faultline, check_exact=False)
    assert failed.height == 2 and set(failed["provider"]) == {"northwind"}
    assert_frame_equal(
        failed,
        Q.run_query(
            wh, "failed_jobs", {"provider": "northwind", "max_rows": 2, "day": dt.date.fromisoformat(info["day"])}
        ),
        check_exact=False,
    )


# -- parameters are data -----------------------------------------------------------------------

INJECTIONS = [
    "northwind' OR '1'='1",
    "x'); DROP TABLE events; --",
    "'; COPY (SELECT 1) TO '/tmp/pwn.csv'; --",
    "$provider",
    "getvariable('provider')",
    HOSTILE,
]


@pytest.mark.parametrize("value", INJECTIONS)
def test_injection_in_a_param_value_is_treated_as_data(con, value):
    df = Q.run_query(con, "top_failing_nodes", {"provider": value})
    assert df.height == 0
    df = Q.run_query(con, "job_root_cause", {"job_id": value})
    assert df.height == 0
    assert Q.run_sql(con, "SELECT count(*) AS n FROM events")["n"][0] > 0
    assert not Path("/tmp/pwn.csv").exists()


def test_param_values_are_type_checked():
    with pytest.raises(Q.QueryError, match="'max_rows' \\(int\\)"):
        Q.bind(Q.get_query("top_failing_nodes"), {"max_rows": "5; DROP TABLE x"})
    with pytest.raises(Q.QueryError, match="YYYY-MM-DD"):
        Q.bind(Q.get_query("new_signatures"), {"as_of": "yesterday"})
    with pytest.raises(Q.QueryError, match="one of day, week, month"):
        Q.bind(Q.get_query("failure_causes_over_time"), {"grain": "'day'); --"})
    with pytest.raises(Q.QueryError, match="no parameter 'limit'"):
        Q.bind(Q.get_query("top_failing_nodes"), {"limit": 5})
    with pytest.raises(Q.QueryError, match="needs parameter 'job_id'"):
        Q.bind(Q.get_query("job_root_cause"), {})
    with pytest.raises(Q.QueryError, match="did you mean top_failing_nodes"):
        Q.get_query("top_failing_node")
    b = Q.bind(Q.get_query("rack_hotspots"), {"only_hotspots": "yes", "max_rows": "7", "provider": "NULL"})
    assert b == {"provider": None, "cluster": None, "only_hotspots": True, "max_rows": 7}


def test_parse_query_header():
    q = Q.parse_query(
        "-- name: demo\n-- description: d\n-- param: a (int, default: 3)\n"
        "-- param: b (x|y, default: y) pick\n-- param: c (text, required) must\nSELECT 1\n"
    )
    assert [(p.name, p.type, p.default, p.required, p.choices) for p in q.params] == [
        ("a", "int", 3, False, ()),
        ("b", "text", "y", False, ("x", "y")),
        ("c", "text", None, True, ()),
    ]
    with pytest.raises(Q.QueryError, match="unknown type"):
        Q.parse_query("-- name: x\n-- param: a (blob, default: 1)\nSELECT 1")


# -- ad-hoc SQL is read-only -------------------------------------------------------------------

WRITES = {
    "INSERT INTO events SELECT * FROM events LIMIT 1": "INSERT",
    "CREATE TABLE t AS SELECT 1": "CREATE",
    "CREATE VIEW v AS SELECT 1": "CREATE",
    "COPY (SELECT 1) TO '{tmp}/out.csv'": "COPY",
    "COPY events TO '{tmp}/events.parquet'": "COPY",
    "ATTACH '{tmp}/other.duckdb' AS other": "ATTACH",
    "INSTALL httpfs": "INSTALL",
    "LOAD httpfs": "LOAD",
    "SET enable_external_access = true": "SET",
    "DROP VIEW events": "DROP",
    "EXPORT DATABASE '{tmp}/dump'": "EXPORT",
    "SELECT 1; DELETE FROM events": "one statement",
}


@pytest.mark.parametrize("statement", list(WRITES))
def test_ad_hoc_sql_cannot_write(wh, tmp_path, statement):
    sql_text = statement.format(tmp=tmp_path)
    res = _cli(sql_text, wh=wh)
    assert res.exit_code == 1
    assert "read-only" in res.output and WRITES[statement] in res.output
    assert not any(tmp_path.iterdir())


def test_the_connection_itself_cannot_write_or_reach_files(con, tmp_path):
    # below the statement check: attached read-only, no file access outside the warehouse
    for stmt in (
        f"COPY (SELECT 1) TO '{tmp_path}/x.csv'",
        "CREATE TABLE faultline.main.t (x INT)",
        "SELECT * FROM read_csv('/etc/passwd')",
        f"ATTACH '{tmp_path}/y.duckdb'",
        "SET lock_configuration = false",
    ):
        with pytest.raises(duckdb.Error):
            con.execute(stmt)
    assert not any(tmp_path.iterdir())
    with pytest.raises(Q.QueryError, match="Permission"):
        Q.run_sql(con, "SELECT * FROM read_text('/etc/hostname')")


def test_select_flavours_are_allowed(wh):
    for stmt in (
        "SELECT 1 AS x",
        "WITH a AS (SELECT 1 AS x) SELECT * FROM a",
        "FROM inventory_latest LIMIT 1",
        "DESCRIBE events",
        "SHOW TABLES",
    ):
        res = _cli(stmt, wh=wh)
        assert res.exit_code == 0, (stmt, res.output)


# -- the command -------------------------------------------------------------------------------


def test_cli_formats(wh, tmp_path):
    q = "SELECT job_id, provider, ended, gpu_hours_lost FROM job_failures ORDER BY job_id LIMIT 5"
    res = _cli(q, "--format", "json", wh=wh)
    assert res.exit_code == 0, res.output
    rows = json.loads(res.output)
    assert (
        isinstance(rows, list) and len(rows) == 5 and set(rows[0]) == {"job_id", "provider", "ended", "gpu_hours_lost"}
    )
    res = _cli(q, "--format", "csv", wh=wh)
    assert res.output.splitlines()[0] == "job_id,provider,ended,gpu_hours_lost" and len(res.output.splitlines()) == 6
    out = tmp_path / "x.parquet"
    res = _cli(q, "--format", "parquet", "--out", str(out), wh=wh)
    assert res.exit_code == 0 and pl.read_parquet(out).height == 5
    res = _cli(q, "--format", "parquet", wh=wh)
    assert res.exit_code == 2 and "--out" in res.output
    # nested columns survive CSV as JSON text
    res = _cli("SELECT incident_id, xids FROM incidents LIMIT 3", "--format", "csv", wh=wh)
    assert res.exit_code == 0 and "[" in res.output
    res = _cli("SELECT 1 AS x WHERE false", "--format", "json", wh=wh)
    assert json.loads(res.output) == []


def test_cli_named_query_and_list(wh, demo):
    _, info = demo
    res = _cli("--query", "job_root_cause", "--param", f"job_id={info['jobs'][0]}", "--format", "json", wh=wh)
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)[0]["root_cause"] == "gpu_bus_lost"
    res = _cli("--query", "top_failing_nodes", "-p", "max_rows=2", wh=wh)
    assert res.exit_code == 0 and "(2 row(s))" in res.output
    res = CliRunner().invoke(sql, ["--list"])
    assert (
        res.exit_code == 0 and "top_failing_nodes" in res.output and "--param max_rows (int, default: 20)" in res.output
    )
    items = json.loads(CliRunner().invoke(sql, ["--list", "--format", "json"]).output)
    assert REQUIRED_QUERIES <= {i["name"] for i in items}


def test_cli_errors_are_clear(wh, tmp_path):
    res = _cli("--query", "top_failing_node", wh=wh)
    assert res.exit_code == 1 and "did you mean top_failing_nodes" in res.output
    res = _cli("--query", "job_root_cause", wh=wh)
    assert "needs parameter 'job_id'" in res.output
    res = _cli("--query", "lemon_nodes", "--param", "nope=1", wh=wh)
    assert "has no parameter 'nope'" in res.output
    res = _cli("--query", "lemon_nodes", "--param", "max_rows", wh=wh)
    assert res.exit_code == 2 and "NAME=VALUE" in res.output
    res = _cli("SELECT 1", wh=tmp_path / "nowhere")
    assert res.exit_code == 1 and "run `faultline run`" in res.output
    res = CliRunner().invoke(sql, [], env={"FAULTLINE_WAREHOUSE": str(wh)})
    assert res.exit_code == 2


def test_cli_table_output_strips_terminal_escapes(wh):
    res = _cli("SELECT job_name, user FROM job_failures WHERE job_name LIKE '%<script>%'", wh=wh)
    assert res.exit_code == 0
    assert "\x1b" not in res.output and BIDI not in res.output and "[U+202E]" in res.output


def test_analytics_tables_are_written_in_their_declared_schema_with_unique_keys(wh):
    from faultline import schema

    for t in schema.ANALYTICS_TABLES:
        df = pl.read_parquet(wh / "analytics" / f"{t.name}.parquet")
        assert df.schema == t.schema, t.name
        assert df.select(t.key).is_duplicated().sum() == 0, t.name
