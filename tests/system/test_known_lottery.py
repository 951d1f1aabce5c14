"""The morning workflow on a lottery fleet: `known suggest` proposes an entry for each injected
bad rack; once pasted and applied, the report shows those failures as known with their cost.

A reduced lottery (96 nodes, 14 days, seed 4: one bad rack, northwind/a1/r06, 3 flap
episodes, 11 flaps, 4 failed jobs) so that the run fits a CI test; the full month (512 nodes,
30 days) behaves the same (docs/known-issues.md)."""

from __future__ import annotations

import datetime as dt
import re

import polars as pl
import pytest
from click.testing import CliRunner

from faultline.cli import main
from faultline.launch.local import run_pipeline
from faultline.simulate import simulate


@pytest.fixture(scope="module")
def lottery(tmp_path_factory):
    base = tmp_path_factory.mktemp("lottery")
    landing, wh = base / "landing", base / "warehouse"
    simulate(landing, scenario="lottery", nodes=96, days=14, seed=4, overwrite=True)
    run_pipeline(landing, wh, workers=2)
    return landing, wh


def cli(*args: str) -> str:
    res = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.output


@pytest.mark.slow
def test_suggest_names_each_bad_rack_and_the_report_then_counts_it_as_known(lottery, tmp_path):
    landing, wh = lottery
    truth = pl.read_parquet(landing / "_truth" / "bad_racks.parquet")
    assert truth.height == 1
    text = cli("known", "suggest", "--warehouse", str(wh))
    path = tmp_path / "known_issues.yaml"
    path.write_text("version: 1\nissues:\n" + text)
    ids = re.findall(r"^- id: (\S+)$", text, re.M)
    for bad in truth.iter_rows(named=True):
        want = f"{bad['provider']}-{bad['cluster']}-{bad['rack']}-mlx5_link_down"
        assert want in ids, text
        block = text[text.index(f"- id: {want}") :]
        assert f"rack: {bad['rack']}" in block.split("- id:")[1]
        assert f"# {bad['flap_faults']} time(s) on {bad['nodes']} node(s)" in text
    cli("known", "apply", "--known-issues", str(path), "--warehouse", str(wh))
    k = pl.read_parquet(wh / "analytics" / "known_issues.parquet")
    for bad in truth.iter_rows(named=True):
        row = k.filter(pl.col("known_issue_id") == f"{bad['provider']}-{bad['cluster']}-{bad['rack']}-mlx5_link_down")
        r = row.row(0, named=True)
        assert (r["status"], r["incidents"], r["jobs"]) == ("open", bad["flap_faults"], bad["job_failures"])
        assert r["gpu_hours_lost_since_opened"] == r["gpu_hours_lost"] > 0
        m = pl.read_parquet(wh / "analytics" / "known_issue_matches.parquet").filter(
            (pl.col("known_issue_id") == r["known_issue_id"]) & (pl.col("kind") == "job_failure")
        )
        night: dt.date = m["ts"].max().date()
        report = tmp_path / f"{night}.md"
        cli("report", "--warehouse", str(wh), "--date", night.isoformat(), "--out", str(report))
        md = report.read_text()
        known = md[md.index("#### Known: entries that matched tonight") : md.index("#### Open known issues")]
        esc = r["known_issue_id"].replace("_", "\\_")
        assert f"| {esc} |" in known
        opened = md[md.index("#### Open known issues") :]
        hours = f"{r['gpu_hours_lost_since_opened']:,.1f}"
        assert re.search(rf"\| {re.escape(esc)} \|.*\| {re.escape(hours)} \| {re.escape(hours)} \|", opened)
        new = md[md.index("#### New: no known issue") : md.index("#### Known: entries")]
        assert f"| {bad['provider']}/{bad['cluster']} | network | mlx5\\_link\\_down |" not in new  # known now
