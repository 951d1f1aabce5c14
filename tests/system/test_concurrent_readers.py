"""Readers in another process query ``faultline.duckdb`` all through a pipeline run: the
file is swapped, never locked, so not one query fails."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from faultline.launch.local import run_pipeline

# the DuckDB command-line shell (PyPI ``duckdb-cli``, a dev dependency) beside this Python
DUCKDB_CLI = shutil.which("duckdb", path=str(Path(sys.executable).parent)) or shutil.which("duckdb")

READER = r"""
import json, os, sys, duckdb
from faultline.lake import queries
from faultline.lake.views import connect_readonly
db, stop, out = sys.argv[1], sys.argv[2], sys.argv[3]
wh = os.path.dirname(db)
ok, named, adhoc, errors, counts = 0, 0, 0, [], set()
while not os.path.exists(stop):
    try:                                                  # reopened for every query
        con = duckdb.connect(db, read_only=True) if ok % 2 else connect_readonly(wh)
        n = con.execute("select count(*) from events").fetchone()[0]
        con.execute("select kind, sum(lines_read) from ingest_audit group by kind").fetchall()
        con.execute("select count(*) from jobs join steps using (job_id)").fetchall()
        con.close()
        counts.add(n)
        ok += 1
        # what `faultline sql --query NAME` and `faultline sql "SELECT ..."` do
        queries.run_query(wh, "quarantine_summary")
        queries.run_query(wh, "top_failing_nodes", {"max_rows": 5})
        named += 2
        hc = queries.connect(wh)
        queries.run_sql(hc, "SELECT provider, count(*) FROM events GROUP BY provider")
        hc.close()
        adhoc += 1
    except Exception as exc:
        errors.append(repr(exc)[:300])
json.dump({"ok": ok, "named": named, "adhoc": adhoc, "errors": errors, "counts": sorted(counts)}, open(out, "w"))
"""


class CliReader(threading.Thread):
    """``duckdb -readonly faultline.duckdb -c ...`` in a loop: the shell a person would use."""

    SQL = "select count(*) from events; select kind, sum(lines_read) from ingest_audit group by kind;"

    def __init__(self, db: Path):
        super().__init__(daemon=True)
        self.db, self.stop, self.ok, self.errors = db, threading.Event(), 0, []

    def run(self) -> None:
        while not self.stop.is_set():
            p = subprocess.run(
                [DUCKDB_CLI, "-readonly", "-csv", str(self.db), "-c", self.SQL],
                capture_output=True,
                text=True,
                timeout=60,
            )
            if p.returncode == 0 and not p.stderr.strip():
                self.ok += 1
            else:
                self.errors.append((p.returncode, p.stderr.strip()[:300]))


def test_readonly_queries_never_fail_during_a_run(landing, warehouse, tmp_path):
    assert DUCKDB_CLI, "the duckdb shell is missing: pip install -e '.[dev]' (duckdb-cli)"
    run_pipeline(landing, warehouse, clusters=["bluepeak/west-2"])  # a first view file to read
    stop, out = tmp_path / "stop", tmp_path / "reader.json"
    reader = subprocess.Popen([sys.executable, "-c", READER, str(warehouse / "faultline.duckdb"), str(stop), str(out)])
    cli = CliReader(warehouse / "faultline.duckdb")
    cli.start()
    try:
        time.sleep(0.5)
        run_pipeline(landing, warehouse)
        run_pipeline(landing, warehouse, dates=["2026-11-24"])  # reruns replace files under readers
    finally:
        stop.touch()
        cli.stop.set()
        reader.wait(timeout=30)
        cli.join(60)
    result = json.loads(out.read_text())
    assert result["errors"] == [], result["errors"][:5]
    assert cli.errors == [], cli.errors[:5]
    assert result["ok"] >= 10 and result["named"] >= 10 and result["adhoc"] >= 5 and cli.ok >= 5, (result, cli.ok)
    print(
        f"reader: {result['ok']} view rounds, {result['named']} named and {result['adhoc']} ad-hoc queries, "
        f"{cli.ok} duckdb shell rounds, 0 errors"
    )
    assert result["counts"][-1] == 10 and min(result["counts"]) >= 1
