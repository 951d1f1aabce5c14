"""The promise of sql/README.md: every named query gives the same answer in the shipped DuckDB
shell (PyPI ``duckdb-cli``, a dev dependency) as in ``faultline sql``, on the demo warehouse."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from helpers.demo import demo_warehouse

from faultline.lake import queries as Q

DUCKDB_CLI = shutil.which("duckdb", path=str(Path(sys.executable).parent)) or shutil.which("duckdb")
QUERIES = sorted(Q.load_queries())
EMPTY_OK = {
    "quarantine_summary": "the demo quarantines no line",
    "new_signatures": "the rules name every line the simulator writes: the demo has no unknown line",
}


@pytest.fixture(scope="module")
def wh(tmp_path_factory) -> Path:
    return demo_warehouse(tmp_path_factory.getbasetemp() / "faultline-cli-demo")[1]


@pytest.fixture(scope="module")
def params(wh) -> dict[str, dict]:
    """The required parameters, from the warehouse: the night's costliest infrastructure
    failure and the node that fails most."""
    con = Q.connect(wh)
    try:
        job = Q.run_sql(
            con,
            "SELECT job_id FROM counted_failed_jobs WHERE infrastructure AND day = (SELECT max(date) FROM ingest_audit) "
            "ORDER BY gpu_hours_lost DESC, job_id LIMIT 1",
        )["job_id"][0]
        node = Q.run_query(con, "top_failing_nodes", {"max_rows": 1})["node"][0]
    finally:
        con.close()
    return {"job_root_cause": {"job_id": job}, "job_timeline": {"job_id": job}, "node_timeline": {"node": node}}


def _literal(value) -> str:
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return str(value)


def _shell(wh: Path, query: Q.NamedQuery, values: dict, out: Path) -> pl.DataFrame:
    """The query in the DuckDB shell, read-only, its variables set as sql/README.md says."""
    lines = ["SET TimeZone = 'UTC';"]
    lines += [f"SET VARIABLE {k} = {_literal(v)};" for k, v in values.items()]
    lines.append(f"COPY ({query.sql.strip().rstrip(';')}) TO '{out}' (FORMAT parquet);")
    res = subprocess.run(
        [DUCKDB_CLI, "-readonly", str(wh / "faultline.duckdb")],
        input="\n".join(lines),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0 and not res.stderr.strip(), res.stderr
    return pl.read_parquet(out)


def _rows(df: pl.DataFrame) -> list[str]:
    """Rows as comparable text, in a fixed order (ties may come out in either order)."""
    return sorted(repr(tuple(r)) for r in df.rows())


def test_the_shell_is_shipped():
    assert DUCKDB_CLI, "the duckdb shell is missing: pip install -e '.[dev]' (duckdb-cli)"
    version = subprocess.run([DUCKDB_CLI, "--version"], capture_output=True, text=True, timeout=60).stdout
    assert version.startswith("v1."), version


@pytest.mark.parametrize("name", QUERIES)
def test_named_query_gives_the_same_answer_in_the_duckdb_shell(name, wh, params, tmp_path):
    query = Q.get_query(name)
    values = params.get(name, {})
    ours = Q.run_query(wh, query, values)
    if name not in EMPTY_OK:
        assert ours.height > 0, f"{name} returns nothing on the demo: the comparison would prove nothing"
    theirs = _shell(wh, query, values, tmp_path / f"{name}.parquet")
    assert theirs.columns == ours.columns
    theirs = theirs.select(pl.col(c).cast(t) for c, t in ours.schema.items())
    assert _rows(theirs) == _rows(ours), f"{name}: the DuckDB shell disagrees with faultline sql"
