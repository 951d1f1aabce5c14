"""Where the commands' output goes and how wide it is: table width from the terminal (or
--wide), a missing --out folder is an error unless --mkdir, a date outside the data says so,
and error messages name only tables, views and queries that exist."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner
from helpers.hostile import build_demo_warehouse

from faultline.cli import main
from faultline.lake import queries as Q


@pytest.fixture(scope="module")
def wh(tmp_path_factory):
    return build_demo_warehouse(tmp_path_factory.getbasetemp() / "faultline-demo")[0]


def _run(*args, env=None):
    return CliRunner().invoke(main, [str(a) for a in args], env=env)


def _width(text: str) -> int:
    return max(len(line) for line in text.splitlines() if line.startswith(("┌", "│", "╞", "└")))


def test_tables_take_the_terminal_width_or_all_of_it_with_wide(wh):
    query = ["sql", "--warehouse", wh, "SELECT job_id, root_cause, evidence FROM job_failures ORDER BY job_id"]
    narrow, wider = _run(*query, env={"COLUMNS": "100"}), _run(*query, env={"COLUMNS": "260"})
    assert narrow.exit_code == wider.exit_code == 0, narrow.output
    assert _width(narrow.output) <= 100 < _width(wider.output) <= 260
    wide = _run(*query, "--wide", "--rows", "-1", env={"COLUMNS": "100"})
    assert wide.exit_code == 0 and _width(wide.output) > 260
    evidence = Q.run_query(wh, "failed_jobs", {})["evidence"].drop_nulls()
    longest = max(evidence.to_list(), key=len)
    assert len(longest) > 80 and longest.split("\n")[0][:200] in wide.output  # whole strings, not cut at 80


@pytest.mark.parametrize(
    "command",
    [
        ["report", "--out", "{dir}/x.html"],
        ["export", "prometheus", "--out", "{dir}/x.prom"],
        ["sql", "--format", "csv", "--out", "{dir}/x.csv", "SELECT 1 AS one"],
    ],
)
def test_a_missing_output_folder_is_an_error_unless_mkdir(wh, tmp_path, command):
    folder = tmp_path / "no" / "such" / "dir"
    args = [a.replace("{dir}", str(folder)) for a in command]
    where = args[:1] + ["--warehouse", str(wh)] if args[0] != "export" else args[:2] + ["--warehouse", str(wh)]
    rest = args[1:] if args[0] != "export" else args[2:]
    res = _run(*where, *rest)
    assert res.exit_code == 2 and "does not exist (create it, or pass --mkdir)" in res.output, res.output
    assert not (tmp_path / "no").exists()
    res = _run(*where, *rest, "--mkdir")
    assert res.exit_code == 0, res.output
    assert len(list(folder.iterdir())) == 1


def test_a_date_outside_the_data_says_so(wh):
    days = Q.run_sql(Q.connect(wh), "SELECT min(date) AS a, max(date) AS b FROM ingest_audit").row(0)
    res = _run("export", "prometheus", "--warehouse", wh, "--date", "2030-01-01")
    assert res.exit_code == 1
    assert f"2030-01-01 is not in the warehouse (it covers {days[0]} to {days[1]}" in res.output
    assert "faultline_failures_24h" not in res.output


@pytest.mark.parametrize(
    "sql, named",
    [
        ("SELECT * FROM scoreboard", ["provider_scoreboard"]),
        ("SELECT * FROM job_failure", ["job_failures"]),
        ("SELECT * FROM no_such_thing_at_all", []),
    ],
)
def test_error_messages_name_only_what_exists(wh, sql, named):
    res = _run("sql", "--warehouse", wh, sql)
    assert res.exit_code == 1
    con = Q.connect(wh)
    try:
        tables = set(Q.run_sql(con, "SELECT table_name FROM information_schema.tables")["table_name"])
    finally:
        con.close()
    hint = res.output.split("does not exist!", 1)[1]
    suggested = set(re.findall(r"\b[a-z]+_[a-z_]+\b", hint)) - {"named_query"}
    assert set(named) <= suggested and suggested <= tables | set(Q.load_queries()), res.output
    if "scoreboard" in sql:
        assert "faultline sql --query scoreboard" in res.output  # it is a named query
