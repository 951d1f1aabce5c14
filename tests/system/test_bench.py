"""The benchmark suite (bench/suite.py) at CI size: every section runs, its table has every
row, every figure is finite and positive, and the JSON parses. No timing assertions: the
point is that the suite cannot rot, not how fast this machine is."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from faultline.lake.queries import load_queries

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "bench" / "suite.py"
sys.path.insert(0, str(ROOT / "bench"))


def _positive(value, what: str) -> None:
    assert isinstance(value, (int, float)) and not isinstance(value, bool), f"{what}: {value!r} is not a number"
    assert math.isfinite(value) and value > 0, f"{what}: {value!r} is not finite and positive"


@pytest.fixture(scope="module")
def ci_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    js = out / "bench.json"
    res = subprocess.run(
        [sys.executable, str(SUITE), "--size", "ci", "--json", str(js), "--workdir", str(out / "work")],
        capture_output=True,
        text=True,
        cwd=out,
        timeout=900,
    )
    assert res.returncode == 0, f"the suite failed:\n{res.stderr[-6000:]}"
    return res.stdout, json.loads(js.read_text())


@pytest.mark.slow
def test_table_has_every_section_and_row(ci_run):
    table, data = ci_run
    assert data["table"].strip("\n") == table.strip("\n")
    assert table.startswith("## faultline benchmark suite (ci size)")
    assert "CPUs (" in table and "GiB RAM" in table
    for heading in (
        "### Parse and classify",
        "### Orchestration overhead",
        "### Nightly pipeline, fleet-day",
        "### Scaling",
        "### Named queries over",
        "### Event density and floods",
        "### Targets",
    ):
        assert heading in table, heading
    for row in (
        "| grep -cE",
        "| faultline parse + classify",
        "| Python per-line regex loop",
        "| Drain3 ",
        "| wall, `faultline run`",
        "| peak RSS (summed",
        "| bytes read: landing",
        "| bytes read: rchar",
        "| bare parse (`ingest_partition`",
        "| pipeline wall / bare parse wall",
        "| 1/4 |",
        "| 1/2 |",
        "| 1x |",
        "| pipeline: deviation from a straight line",
        "| pipeline: deviation from proportional",
        "| **max p95** |",
        "| render html",
        "| render md",
        "| Dagster ingest (range runs",
        "| `faultline run` (ingest + analytics",
        "| orchestration overhead ≤ 1.5x (demo) |",
        "| parse ≥ 0.6x grep |",
        "| fleet-day nightly ≤ 10 min |",
        "| fleet-day peak RSS ≤ 4 GiB |",
        "| linear within 15% (straight-line fit) |",
        "| named queries p95 ≤ 1 s over a year |",
        "| 0.1% event lines |",
        "| 30% event lines |",
        "| flood day |",
        "| day | start-up alone | grep / start-up |",
        "| bare parse ≥ 0.5x grep at every density |",
        "| flood day through faultline run ≤ 8 s |",
    ):
        assert row in table, row
    for name in load_queries():
        assert f"| `{name}` |" in table, name
    assert not re.search(r"\b(nan|inf|-inf)\b", table, re.IGNORECASE)
    # every target row says whether it was met, from a measurement
    targets = table.split("### Targets", 1)[1]
    assert targets.count("| yes |") + targets.count("| **no** |") == 13


@pytest.mark.slow
def test_figures_are_finite_and_positive(ci_run):
    _, data = ci_run
    assert set(data["sections"]) == {"parse", "overhead", "fleet", "scaling", "queries", "density"}
    m = data["machine"]
    _positive(m["cpus"], "cpus")
    _positive(m["ram_bytes"], "ram")

    p = data["parse"]
    assert [c["name"].split()[0] for c in p["contenders"]] == ["grep", "faultline", "Python", "Drain3"]
    for c in p["contenders"]:
        for k in ("seconds", "bytes", "lines", "mb_s", "lines_s", "peak_rss"):
            _positive(c[k], f"parse {c['name']} {k}")
    for k in ("faultline_vs_grep", "faultline_vs_loop", "faultline_vs_drain3"):
        _positive(p[k], k)
    assert isinstance(p["target_met"], bool)

    o = data["overhead"]
    for k in (
        "partitions",
        "files",
        "landing_bytes",
        "bare_s",
        "plain_s",
        "ingest_s",
        "run_s",
        "ratio",
        "run_ratio",
        "plain_ratio",
        "dagster_ratio",
    ):
        _positive(o[k], f"overhead {k}")
    assert o["run_s"] > o["ingest_s"] and isinstance(o["target_met"], bool)
    assert o["dagster_ratio"] == o["ingest_s"] / o["plain_s"]

    point_keys = (
        "nodes",
        "partitions",
        "files",
        "lines",
        "landing_bytes",
        "audit_bytes",
        "pipeline_s",
        "pipeline_peak_rss",
        "pipeline_rchar",
        "bare_s",
        "bare_peak_rss",
        "bare_rchar",
        "ratio",
    )
    f = data["fleet"]
    for k in point_keys:
        _positive(f[k], f"fleet {k}")
    # every partition file read (the landing also holds inventory.csv, which is not audited)
    assert 0.9 * f["landing_bytes"] <= f["audit_bytes"] <= f["landing_bytes"]
    assert isinstance(f["wall_met"], bool) and isinstance(f["rss_met"], bool)

    s = data["scaling"]
    assert [pt["label"] for pt in s["points"]] == ["1/4", "1/2", "1x"]
    assert [pt["nodes"] for pt in s["points"]] == [f["nodes"] // 4, f["nodes"] // 2, f["nodes"]]
    for pt in s["points"]:
        for k in point_keys:
            _positive(pt[k], f"scaling {pt['label']} {k}")
    for k in ("fit_max_dev", "proportional_max_dev"):
        assert math.isfinite(s["pipeline"][k]) and s["pipeline"][k] >= 0
        assert math.isfinite(s["bare"][k]) and s["bare"][k] >= 0

    q = data["queries"]
    assert {r["name"] for r in q["queries"]} == set(load_queries())
    for r in q["queries"]:
        _positive(r["p50_s"], f"{r['name']} p50")
        _positive(r["p95_s"], f"{r['name']} p95")
        assert r["p95_s"] >= r["p50_s"]
    _positive(q["max_p95_s"], "max p95")
    for y in ("events", "jobs", "failed_jobs", "days_in_warehouse", "partitions", "landing_bytes", "build_s"):
        _positive(q["year"][y], f"year {y}")
    for fmt in ("html", "md"):
        _positive(q["report"][fmt]["median_s"], f"report {fmt}")
        _positive(q["report"][fmt]["bytes"], f"report {fmt} bytes")

    dn = data["density"]
    assert [d["density"] for d in dn["days"]] == [0.001, 0.3]
    for d in [*dn["days"], dn["flood"]]:
        for k in (
            "bytes",
            "lines",
            "events",
            "grep_s",
            "startup_s",
            "bare_s",
            "run_s",
            "bare_vs_grep",
            "run_vs_grep",
            "report_s",
        ):
            _positive(d[k], f"density {d['name']} {k}")
    assert dn["days"][1]["events"] > 100 * dn["days"][0]["events"] / 30  # the denser day has more events
    assert dn["flood"]["xid95_incidents"] == 1 and dn["flood"]["lemons"] == 0 and dn["flood"]["hotspots"] == 0


def test_linearity_and_percentiles():
    import suite

    straight = suite.linearity([(1.0, 12.0), (2.0, 22.0), (4.0, 42.0)])  # 2 s fixed + 10 s per unit
    assert straight["fit_max_dev"] == pytest.approx(0.0, abs=1e-12)
    assert straight["fit_intercept"] == pytest.approx(2.0)
    assert straight["proportional_max_dev"] == pytest.approx((12.0 / (42.0 / 4)) - 1)
    bent = suite.linearity([(1.0, 10.0), (2.0, 20.0), (4.0, 80.0)])  # superlinear
    assert bent["fit_max_dev"] > 0.15
    assert suite.nearest_rank([5, 1, 4, 2, 3, 7, 6], 0.95) == 7
    assert suite.nearest_rank([5, 1, 4, 2, 3, 7, 6], 0.50) == 4


def test_unknown_section_is_refused(capsys):
    import suite

    with pytest.raises(SystemExit):
        suite.main(["--sections", "parse,nope"])
    assert "unknown section" in capsys.readouterr().err
