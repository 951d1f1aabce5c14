"""faultline's benchmark suite: one Markdown report per run, every contender measured in the same
run on the same machine, so the ratios hold on a noisy machine. Sections and targets: bench/README.md.
Usage: python bench/suite.py [--size ci] [--sections parse,overhead,fleet,scaling,queries]"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import measure  # noqa: E402
from bench_parse import ere_prefilter  # noqa: E402
from mixed_log import generate  # noqa: E402

SECTIONS = ("parse", "overhead", "fleet", "scaling", "queries", "density")
GIB = 2**30
MIB = 2**20

# --- sizes ---------------------------------------------------------------------------------
# full: the targets' sizes. ci: the same code paths on tiny inputs (tests/system/test_bench.py).
# (ci sizes are ones whose simulation has at least one fault: `faultline simulate` fails on a
# fleet-day without any, e.g. --scenario scale --nodes 50.)
SIZES = {
    "full": dict(
        demo_nodes=96,
        parse_mb=512,
        naive_mb=64,
        drain_lines=1_000_000,
        reps=3,
        fleet_nodes=12_500,
        fleet_providers=None,
        fleet_noise=None,
        year_nodes=64,
        year_providers=2,
        year_days=365,
        year_noise=4_000,
        query_runs=7,
        report_runs=3,
        density_nodes=1024,
        density_mb=1024,
        densities=(0.001, 0.01, 0.1, 0.3),
        flood_nodes=32,
        flood_scale=1.0,
    ),
    "ci": dict(
        demo_nodes=24,
        parse_mb=4,
        naive_mb=1,
        drain_lines=5_000,
        reps=1,
        fleet_nodes=400,
        fleet_providers=2,
        fleet_noise=2_000,
        year_nodes=16,
        year_providers=1,
        year_days=7,
        year_noise=2_000,
        query_runs=2,
        report_runs=1,
        density_nodes=4,
        density_mb=2,
        densities=(0.001, 0.3),
        flood_nodes=4,
        flood_scale=0.01,
    ),
}
FULL_FLEET_NODES = 12_500  # the scale scenario's fleet (100,000 GPUs)

# --- targets, for 2-core machines (bench/README.md) ------------------------------------------
TARGETS = {
    "parse_vs_grep": (">=", 0.6, "faultline MB/s / grep MB/s"),
    "fleet_wall_s": ("<=", 600.0, "fleet-day nightly wall (s)"),
    "fleet_rss_bytes": ("<=", 4 * GIB, "fleet-day peak RSS"),
    "linear_dev": ("<=", 0.15, "deviation from linear"),
    "overhead": ("<=", 1.5, "Dagster ingest wall / bare parse wall"),
    "query_p95_s": ("<=", 1.0, "named query p95 (s)"),
    "density_bare_vs_grep": (">=", 0.5, "bare parse MB/s / grep MB/s, every density"),
    "density_run_vs_grep": (">=", 0.25, "faultline run MB/s / grep MB/s, the 1 GB day"),
    "flood_run_s": ("<=", 8.0, "flood day through faultline run (s)"),
    "flood_bare_vs_grep": (">=", 0.25, "flood day bare parse MB/s / grep MB/s"),
    "flood_report_s": ("<=", 10.0, "flood day report render (s)"),
    "flood_lake_share": ("<=", 0.10, "flood day lake bytes / raw bytes"),
}

# required query parameters, filled from the data (the warehouse's views)
PARAM_SOURCES = {
    "job_id": "SELECT job_id FROM job_failures ORDER BY gpu_hours_lost DESC NULLS LAST, job_id LIMIT 1",
    "node": "SELECT node FROM events WHERE node IS NOT NULL GROUP BY node ORDER BY count(*) DESC, node LIMIT 1",
}

T0 = time.perf_counter()


def say(msg: str) -> None:
    print(f"[{time.perf_counter() - T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def met(key: str, value: float) -> bool:
    op, bound, _ = TARGETS[key]
    return value >= bound if op == ">=" else value <= bound


def target_text(key: str, fmt) -> str:
    op, bound, _ = TARGETS[key]
    return f"{'≥' if op == '>=' else '≤'} {fmt(bound)}"


def yes_no(ok: bool) -> str:
    return "yes" if ok else "**no**"


# --- formatting -----------------------------------------------------------------------------


def f_bytes(n: float) -> str:
    if n >= GIB:
        return f"{n / GIB:.2f} GiB"
    if n >= MIB:
        return f"{n / MIB:.0f} MiB"
    return f"{n / 1024:.0f} KiB"


def f_mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB" if n < 1e9 else f"{n / 1e9:.2f} GB"


def f_s(s: float) -> str:
    if s >= 60:
        m, r = divmod(round(s), 60)
        return f"{s:,.1f} s ({m} min {r:02d} s)"
    return f"{s:.2f} s" if s < 10 else f"{s:.1f} s"


def f_ms(s: float) -> str:
    return f"{s * 1000:,.0f} ms" if s >= 0.01 else f"{s * 1000:.1f} ms"


def f_rate(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:,.1f}" if x >= 1 else f"{x:.3f}"


def f_pct(x: float) -> str:
    return f"{x * 100:.1f}%"


def table(head: list[str], rows: list[list]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "|".join(" --- " for _ in head) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return out


def nearest_rank(xs: list[float], q: float) -> float:
    """Percentile by nearest rank (p95 of 7 runs is their maximum)."""
    s = sorted(xs)
    return s[max(0, math.ceil(q * len(s)) - 1)]


# --- data preparation (cached in the work folder when its parameters match) -----------------


def _stamp_ok(folder: Path, params: dict) -> bool:
    stamp = folder / ".bench-params.json"
    try:
        return json.loads(stamp.read_text()) == params
    except (OSError, ValueError):
        return False


def _stamp(folder: Path, params: dict) -> None:
    (folder / ".bench-params.json").write_text(json.dumps(params))


def faultline_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "faultline.cli", *args]


def simulate(out: Path, **kw) -> dict:
    """``faultline simulate`` into ``out`` (reused when a previous run wrote the same)."""
    params = {k: v for k, v in kw.items() if v is not None}
    if _stamp_ok(out, params):
        say(f"reusing {out}")
        return {"reused": True, "seconds": 0.0}
    if out.exists():
        shutil.rmtree(out)
    args = ["simulate", "--out", str(out), "--json"]
    for k, v in params.items():
        args += [f"--{k.replace('_', '-')}", str(v)]
    say("faultline " + " ".join(args[:1] + args[3:]))
    t = time.perf_counter()
    res = subprocess.run(faultline_cmd(*args), capture_output=True, text=True)
    if res.returncode:
        raise RuntimeError(f"simulate failed:\n{res.stderr[-4000:]}")
    info = json.loads(res.stdout[res.stdout.index("{") :])
    info["wall_s"] = time.perf_counter() - t
    _stamp(out, params)
    return info


def landing_bytes(landing: Path) -> tuple[int, int]:
    """Bytes and files the pipeline reads (not ``_truth/`` or other hidden names)."""
    total = files = 0
    for root, dirs, names in os.walk(landing):
        dirs[:] = [d for d in dirs if not d.startswith(("_", "."))]
        for n in names:
            if not n.startswith(("_", ".")):
                total += os.path.getsize(os.path.join(root, n))
                files += 1
    return total, files


def warm(landing: Path) -> None:
    """Read the landing once so every contender starts with the same (warm) page cache."""
    for root, dirs, names in os.walk(landing):
        dirs[:] = [d for d in dirs if not d.startswith(("_", "."))]
        for n in names:
            with open(os.path.join(root, n), "rb") as f:
                while f.read(1 << 22):
                    pass


def env_workers(workers: int) -> dict:
    return {**os.environ, "FAULTLINE_WORKERS": str(workers), "PYTHONUNBUFFERED": "1"}


# --- section: parse -------------------------------------------------------------------------


def section_parse(cfg: dict, work: Path) -> dict:
    path = work / "parse" / "mixed.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    params = {"mb": cfg["parse_mb"], "seed": 0}
    if _stamp_ok(path.parent, params) and path.exists():
        say(f"reusing {path}")
    else:
        say(f"generating a {cfg['parse_mb']} MiB mixed log")
        generate(str(path), cfg["parse_mb"] << 20)
        _stamp(path.parent, params)
    size = path.stat().st_size
    subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True)  # warm the page cache
    pattern = ere_prefilter()
    py = sys.executable
    contender = str(HERE / "contenders.py")
    grep_runs, fl_runs = [], []
    grep_env = {**os.environ, "LC_ALL": "C"}
    for i in range(cfg["reps"]):  # interleaved, so both see the same load
        say(f"parse: grep and faultline, round {i + 1} of {cfg['reps']}")
        grep_runs.append(_grep(pattern, path, grep_env))
        fl_runs.append(measure.run([py, contender, "parse", str(path)]))
    lines = fl_runs[0].json()["lines"]
    say(f"parse: per-line Python loop over the first {cfg['naive_mb']} MiB")
    naive = measure.run([py, contender, "naive", str(path), str(cfg["naive_mb"] << 20)])
    say(f"parse: Drain3 over the first {cfg['drain_lines']:,} lines")
    drain = measure.run([py, contender, "drain3", str(path), str(cfg["drain_lines"])])

    def row(name: str, s: float, nbytes: int, nlines: int, rss: int, note: str = "") -> dict:
        return {
            "name": name,
            "seconds": s,
            "bytes": nbytes,
            "lines": nlines,
            "mb_s": nbytes / 1e6 / s,
            "lines_s": nlines / s,
            "peak_rss": rss,
            "note": note,
        }

    g_s = statistics.median(m.wall_s for m in grep_runs)
    f_json = [m.json() for m in fl_runs]
    f_s_ = statistics.median(j["s"] for j in f_json)
    nj, dj = naive.json(), drain.json()
    rows = [
        row(
            "grep -cE, same prefilter literals (LC_ALL=C)",
            g_s,
            size,
            lines,
            max(m.maxrss for m in grep_runs),
            f"{int(grep_runs[0].stdout.strip() or 0):,} matching lines",
        ),
        row(
            "faultline parse + classify",
            f_s_,
            size,
            lines,
            max(j["hwm"] for j in f_json),
            f"{f_json[0]['events']:,} events, balanced={f_json[0]['balanced']}",
        ),
        row(
            f"Python per-line regex loop (first {f_mb(nj['bytes'])}; rate extrapolated)",
            nj["s"],
            nj["bytes"],
            nj["lines"],
            nj["hwm"],
            "keyword regex, then the rules",
        ),
        row(
            f"Drain3 {_drain_version()} TemplateMiner, default config (first {dj['lines']:,} lines; rate extrapolated)",
            dj["s"],
            dj["bytes"],
            dj["lines"],
            dj["hwm"],
            f"{dj['clusters']:,} templates mined",
        ),
    ]
    ratio = rows[1]["mb_s"] / rows[0]["mb_s"]
    return {
        "file_bytes": size,
        "file_lines": lines,
        "reps": cfg["reps"],
        "contenders": rows,
        "faultline_process_wall_s": statistics.median(m.wall_s for m in fl_runs),
        "faultline_vs_grep_process_wall": g_s / statistics.median(m.wall_s for m in fl_runs),
        "grep_runs_s": [m.wall_s for m in grep_runs],
        "faultline_runs_s": [j["s"] for j in f_json],
        "faultline_vs_grep": ratio,
        "faultline_vs_loop": rows[1]["mb_s"] / rows[2]["mb_s"],
        "faultline_vs_drain3": rows[1]["mb_s"] / rows[3]["mb_s"],
        "target_met": met("parse_vs_grep", ratio),
    }


def _grep(pattern: str, path: Path, env: dict) -> measure.Measured:
    """One ``grep -cE`` run; its peak RSS is sampled every 5 ms, its own process only (a short
    run can end before the first sample after its exec: then it runs again, up to three times)."""
    exe = os.path.basename(os.path.realpath(shutil.which("grep") or "grep"))
    for _ in range(3):
        g = measure.run(
            ["grep", "-cE", "-e", pattern, str(path)], env=env, check=False, interval=0.005, hwm_exe=exe, tree=False
        )
        if g.rc not in (0, 1):
            raise RuntimeError(f"grep failed: {g.stderr[-2000:]}")
        if g.maxrss:
            break
    return g


def _drain_version() -> str:
    try:
        from importlib.metadata import version

        return version("drain3")
    except Exception:  # noqa: BLE001 - only a label
        return ""


# --- sections: fleet and scaling ------------------------------------------------------------


def measure_fleet(cfg: dict, work: Path, nodes: int, workers: int) -> dict:
    """Simulate the fleet-day at ``nodes``, then time the bare parse and ``faultline run``."""
    base = work / f"fleet-{nodes}"
    landing, warehouse = base / "landing", base / "warehouse"
    sim = simulate(
        landing, scenario="scale", nodes=nodes, providers=cfg["fleet_providers"], noise=cfg["fleet_noise"], seed=0
    )
    nbytes, nfiles = landing_bytes(landing)
    warm(landing)
    say(f"fleet {nodes} nodes: bare parse ({workers} workers)")
    bare = measure.run(
        [sys.executable, str(HERE / "bare_parse.py"), str(landing), "--workers", str(workers)],
        env=env_workers(workers),
        io=True,
    )
    bj = bare.json()
    if warehouse.exists():
        shutil.rmtree(warehouse)
    say(f"fleet {nodes} nodes: faultline run ({workers} workers)")
    run = measure.run(
        faultline_cmd("run", "--landing", str(landing), "--warehouse", str(warehouse)),
        env=env_workers(workers),
        io=True,
    )
    audit_bytes = _audit_bytes(warehouse)
    return {
        "nodes": nodes,
        "gpus": nodes * 8,
        "partitions": bj["partitions"],
        "files": nfiles,
        "lines": bj["lines"],
        "landing_bytes": nbytes,
        "audit_bytes": audit_bytes,
        "simulate_s": sim.get("wall_s", 0.0),
        "workers": workers,
        "pipeline_s": run.wall_s,
        "pipeline_peak_rss": run.peak_rss,
        "pipeline_rchar": run.rchar,
        "bare_s": bare.wall_s,
        "bare_inner_s": bj["seconds"],
        "bare_peak_rss": bare.peak_rss,
        "bare_rchar": bare.rchar,
        "ratio": run.wall_s / bare.wall_s,
        "pipeline_mb_s": nbytes / 1e6 / run.wall_s,
    }


def section_overhead(cfg: dict, work: Path, workers: int) -> dict:
    """Bare parse vs the Dagster ingest vs ``faultline run`` on the demo scenario, each
    ``reps`` times interleaved (medians)."""
    landing = work / "demo" / "landing"
    simulate(landing, scenario="demo", nodes=cfg["demo_nodes"], seed=0)
    nbytes, nfiles = landing_bytes(landing)
    warm(landing)
    bare, plain, ingest, full = [], [], [], []
    for i in range(cfg["reps"]):
        say(f"overhead: demo, round {i + 1} of {cfg['reps']} ({workers} workers)")
        bare.append(
            measure.run(
                [sys.executable, str(HERE / "bare_parse.py"), str(landing), "--workers", str(workers)],
                env=env_workers(workers),
            )
        )
        wh = work / "demo" / "warehouse"
        shutil.rmtree(wh, ignore_errors=True)
        plain.append(
            measure.run(
                [sys.executable, str(HERE / "plain_pipeline.py"), str(landing), str(wh), "--workers", str(workers)],
                env=env_workers(workers),
            )
        )
        shutil.rmtree(wh, ignore_errors=True)
        ingest.append(
            measure.run(
                [sys.executable, str(HERE / "ingest_only.py"), str(landing), str(wh), "--workers", str(workers)],
                env=env_workers(workers),
            )
        )
        shutil.rmtree(wh, ignore_errors=True)
        full.append(
            measure.run(
                faultline_cmd("run", "--landing", str(landing), "--warehouse", str(wh)), env=env_workers(workers)
            )
        )
    med = lambda xs: statistics.median(x.wall_s for x in xs)  # noqa: E731
    out = {
        "partitions": bare[0].json()["partitions"],
        "files": nfiles,
        "landing_bytes": nbytes,
        "workers": workers,
        "reps": cfg["reps"],
        "bare_s": med(bare),
        "plain_s": med(plain),
        "ingest_s": med(ingest),
        "run_s": med(full),
    }
    out["ratio"] = out["ingest_s"] / out["bare_s"]
    out["plain_ratio"] = out["plain_s"] / out["bare_s"]
    out["dagster_ratio"] = out["ingest_s"] / out["plain_s"]
    out["run_ratio"] = out["run_s"] / out["bare_s"]
    out["target_met"] = met("overhead", out["ratio"])
    return out


def _audit_bytes(warehouse: Path) -> int:
    from faultline.lake import queries

    con = queries.connect(warehouse)
    try:
        return int(con.sql("SELECT coalesce(sum(bytes), 0) FROM ingest_audit").fetchall()[0][0])
    finally:
        con.close()


def linearity(points: list[tuple[float, float]]) -> dict:
    """Least-squares line through (size, cost); the largest residual relative to the measured
    cost (curvature: 0 for a straight line), and the per-unit cost of each point against the
    largest one's (proportionality: a fixed start-up cost shows here)."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0
    icpt = my - slope * mx
    dev = max(abs(y - (icpt + slope * x)) / y for x, y in points)
    xl, yl = max(points)
    prop = max(abs((y / x) / (yl / xl) - 1) for x, y in points)
    return {"fit_intercept": icpt, "fit_slope": slope, "fit_max_dev": dev, "proportional_max_dev": prop}


# --- section: queries -----------------------------------------------------------------------


def section_queries(cfg: dict, work: Path, workers: int) -> dict:
    from faultline.lake import queries
    from faultline.report import render

    base = work / "year"
    landing, warehouse = base / "landing", base / "warehouse"
    params = dict(
        scenario="scale",
        providers=cfg["year_providers"],
        nodes=cfg["year_nodes"],
        days=cfg["year_days"],
        noise=cfg["year_noise"],
        seed=0,
        start_date="2025-12-01",
    )
    sim = simulate(landing, **params)
    nbytes, nfiles = landing_bytes(landing)
    build_s = None
    if _stamp_ok(warehouse, params) and queries.db_exists_hint(warehouse) is None:
        say(f"reusing {warehouse}")
    else:
        if warehouse.exists():
            shutil.rmtree(warehouse)
        say(
            f"queries: building a year of history ({cfg['year_days']} days, {cfg['year_nodes']} nodes, "
            f"{workers} workers)"
        )
        m = measure.run(
            faultline_cmd("run", "--landing", str(landing), "--warehouse", str(warehouse)), env=env_workers(workers)
        )
        build_s = m.wall_s
        _stamp(warehouse, params)
    con = queries.connect(warehouse)
    try:
        fill = {}
        for name, sql in PARAM_SOURCES.items():
            r = (con.sql(sql).fetchall() or [None])[0]
            fill[name] = r[0] if r else None
        counts = con.sql(
            "SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM jobs), "
            "(SELECT count(*) FROM job_failures), (SELECT count(DISTINCT date) FROM ingest_audit), "
            "(SELECT count(*) FROM (SELECT DISTINCT provider, cluster, date FROM ingest_audit))"
        ).fetchall()[0]
    finally:
        con.close()
    rows = []
    for q in queries.load_queries().values():
        values = {}
        for p in q.params:
            if p.required:
                if p.name not in fill:
                    raise RuntimeError(
                        f"query {q.name!r} needs {p.name!r}: add a source for it to PARAM_SOURCES in bench/suite.py"
                    )
                if fill[p.name] is None:
                    raise RuntimeError(f"no value for {p.name!r} in the year's warehouse (query {q.name!r})")
                values[p.name] = fill[p.name]
        say(f"queries: {q.name}")
        queries.run_query(warehouse, q, values)  # warm-up
        times, n_rows = [], 0
        for _ in range(cfg["query_runs"]):
            t = time.perf_counter()
            df = queries.run_query(warehouse, q, values)  # a fresh read-only connection, as `faultline sql`
            times.append(time.perf_counter() - t)
            n_rows = df.height
        p95 = nearest_rank(times, 0.95)
        rows.append(
            {
                "name": q.name,
                "params": values,
                "rows": n_rows,
                "runs": len(times),
                "p50_s": nearest_rank(times, 0.50),
                "p95_s": p95,
                "target_met": met("query_p95_s", p95),
            }
        )
    report = {}
    for fmt in ("html", "md"):
        say(f"report: rendering {fmt}")
        times, size = [], 0
        for _ in range(cfg["report_runs"]):
            t = time.perf_counter()
            text = render(warehouse, fmt=fmt)
            times.append(time.perf_counter() - t)
            size = len(text.encode())
        report[fmt] = {"median_s": statistics.median(times), "first_s": times[0], "runs": len(times), "bytes": size}
    max_p95 = max(r["p95_s"] for r in rows)
    return {
        "year": {
            **params,
            "partitions": counts[4],
            "files": nfiles,
            "landing_bytes": nbytes,
            "days_in_warehouse": counts[3],
            "events": counts[0],
            "jobs": counts[1],
            "failed_jobs": counts[2],
            "simulate_s": sim.get("wall_s", 0.0),
            "build_s": build_s,
        },
        "queries": rows,
        "max_p95_s": max_p95,
        "target_met": met("query_p95_s", max_p95),
        "report": report,
    }


# --- the table ------------------------------------------------------------------------------


# --- section: density sweep and flood day ---------------------------------------------------


def _grep_dir(pattern: str, folder: Path, env: dict) -> measure.Measured:
    """``grep -rcE`` over every file of a landing folder (one process, like the suite's parse row)."""
    g = measure.run(["grep", "-rcE", "-e", pattern, str(folder)], env=env, check=False, interval=0.005, tree=False)
    if g.rc not in (0, 1):
        raise RuntimeError(f"grep failed: {g.stderr[-2000:]}")
    return g


#: the density section's grep: a keyword prefilter, as an SRE would grep a cluster-day (the rules'
#: own literals slow grep down by orders of magnitude where most lines hold one)
KEYWORD_GREP = "error|fail|timeout|Xid|NVRM|warn"
#: what a Python parser pays before its first byte: interpreter, imports, rules
STARTUP_CMD = "import faultline.ingest.partition as _p, faultline.classify.ruleset as r; r.load_ruleset()"


def _lake_bytes(warehouse: Path) -> int:
    return sum(p.stat().st_size for p in (warehouse / "lake").rglob("*.parquet"))


def _cluster_day(cfg: dict, work: Path, workers: int, name: str, gen_args: list[str]) -> dict:
    """One generated cluster-day: grep, the bare parse and ``faultline run``, interleaved."""
    from faultline.lake import queries as Q

    landing = work / "density" / name / "landing"
    if not landing.exists():
        measure.run([sys.executable, str(HERE / "density_day.py"), str(landing), *gen_args])
    nbytes, nfiles = landing_bytes(landing)
    warm(landing)
    env = {**os.environ, "LC_ALL": "C"}
    greps, starts, bares, runs = [], [], [], []
    wh = work / "density" / name / "warehouse"
    for i in range(cfg["reps"]):
        say(f"density {name}: grep, bare parse and faultline run, round {i + 1} of {cfg['reps']}")
        greps.append(_grep_dir(KEYWORD_GREP, landing, env))
        starts.append(measure.run([sys.executable, "-c", STARTUP_CMD]))
        bares.append(
            measure.run(
                [sys.executable, str(HERE / "bare_parse.py"), str(landing), "--workers", str(workers)],
                env=env_workers(workers),
            )
        )
        shutil.rmtree(wh, ignore_errors=True)
        runs.append(
            measure.run(
                faultline_cmd("run", "--landing", str(landing), "--warehouse", str(wh)), env=env_workers(workers)
            )
        )
    g, st, b, r = (statistics.median(m.wall_s for m in ms) for ms in (greps, starts, bares, runs))
    bj = bares[0].json()
    out = {
        "name": name,
        "bytes": nbytes,
        "files": nfiles,
        "lines": bj["lines"],
        "events": bj["event_lines"],
        "event_rows_parsed": bj["events"],
        "grep_s": g,
        "bare_s": b,
        "run_s": r,
        "bare_vs_grep": g / b,
        "startup_s": st,
        "run_vs_grep": g / r,
        "bare_peak_rss": max(m.peak_rss for m in bares),
        "run_peak_rss": max(m.peak_rss for m in runs),
        "lake_bytes": _lake_bytes(wh),
    }
    con = Q.connect(wh)
    try:
        out["event_rows"] = con.execute("SELECT count(*) FROM events").fetchone()[0]
        out["xid95_incidents"] = con.execute("SELECT count(*) FROM incidents WHERE list_contains(xids, 95)").fetchone()[
            0
        ]
        out["lemons"] = con.execute("SELECT count(*) FROM lemon_nodes").fetchone()[0]
        out["hotspots"] = con.execute("SELECT count(*) FROM rack_hotspots").fetchone()[0]
    finally:
        con.close()
    t = time.perf_counter()
    measure.run(faultline_cmd("report", "--warehouse", str(wh), "--out", str(work / "density" / name / "r.html")))
    out["report_s"] = time.perf_counter() - t
    return out


def section_density(cfg: dict, work: Path, workers: int) -> dict:
    """Event density 0.1%-30% on one cluster-day of node files, and the flood day."""
    days = [
        _cluster_day(
            cfg,
            work,
            workers,
            f"d{d:g}",
            ["--density", str(d), "--nodes", str(cfg["density_nodes"]), "--mb", str(cfg["density_mb"])],
        )
        for d in cfg["densities"]
    ]
    for day, d in zip(days, cfg["densities"]):
        day["density"] = d
    flood = _cluster_day(
        cfg, work, workers, "flood", ["--flood", "--nodes", str(cfg["flood_nodes"]), "--scale", str(cfg["flood_scale"])]
    )
    return {
        "days": days,
        "flood": flood,
        "bare_met": all(met("density_bare_vs_grep", d["bare_vs_grep"]) for d in days),
        "run_met": met("density_run_vs_grep", min(d["run_vs_grep"] for d in days)),
    }


def render_table(res: dict) -> str:
    m = res["machine"]
    out = [
        f"## faultline benchmark suite ({res['size']} size)",
        "",
        f"Machine: {m['cpus']} CPUs ({m['cpu_model']}), {m['ram_bytes'] / GIB:.1f} GiB RAM, Linux {m['kernel']}, "
        f"Python {m['python']}; 1-min load average {m['loadavg_at_start'][0]:.2f} at start, "
        f"{res['loadavg_at_end'][0]:.2f} at the end (other work on the machine shows here); "
        f"{res['date']}; workers {res['workers']}; suite wall {f_s(res['wall_s'])}.",
        "",
    ]
    summary = []
    if "parse" in res:
        p = res["parse"]
        out += [
            f"### Parse and classify: {f_mb(p['file_bytes'])} generated mixed log, {p['file_lines']:,} lines "
            f"(grep and faultline: median of {p['reps']} interleaved runs)",
            "",
        ]
        fl = p["contenders"][1]["mb_s"]
        out += table(
            ["contender", "MB/s", "lines/s", "peak RSS", "faultline is", "notes"],
            [
                [
                    c["name"],
                    f_rate(c["mb_s"]),
                    f"{c['lines_s']:,.0f}",
                    f_bytes(c["peak_rss"]),
                    "—" if i == 1 else f"{fl / c['mb_s']:.2f}x",
                    c["note"],
                ]
                for i, c in enumerate(p["contenders"])
            ],
        )
        out += [
            "",
            "grep: wall time of the process. Python contenders: time of the work itself, inside the "
            "process (interpreter start-up and imports left out; faultline with them: "
            f"{f_s(p['faultline_process_wall_s'])} per run, {p['faultline_vs_grep_process_wall']:.2f}x grep). "
            "Rates of the bounded contenders are extrapolated from the part they read.",
            "",
        ]
        out += table(
            ["target", "measured", "met"],
            [["faultline ≥ 0.6x grep's throughput", f"{p['faultline_vs_grep']:.2f}x", yes_no(p["target_met"])]],
        )
        out.append("")
        summary.append(["parse ≥ 0.6x grep", f"{p['faultline_vs_grep']:.2f}x", yes_no(p["target_met"])])
    if "overhead" in res:
        o = res["overhead"]
        out += [
            f"### Orchestration overhead: the demo scenario, {o['partitions']} partitions, {o['files']:,} files, "
            f"{f_mb(o['landing_bytes'])} ({o['workers']} workers, median of {o['reps']} interleaved runs)",
            "",
        ]
        out += table(
            ["run", "wall", "vs bare parse"],
            [
                ["bare parse (`ingest_partition` per partition, no Dagster, no lake)", f_s(o["bare_s"]), "1.00x"],
                [
                    "the ingest's work without Dagster (parse, lake tables, the checks' reads)",
                    f_s(o["plain_s"]),
                    f"{o['plain_ratio']:.2f}x",
                ],
                [
                    "Dagster ingest (range runs, lake writes, checks, view file)",
                    f_s(o["ingest_s"]),
                    f"{o['ratio']:.2f}x",
                ],
                [
                    "`faultline run` (ingest + analytics + report, process start)",
                    f_s(o["run_s"]),
                    f"{o['run_ratio']:.2f}x",
                ],
            ],
        ) + [""]
        out += [
            f"Dagster's own share: the Dagster ingest takes {o['dagster_ratio']:.2f}x the same work without it.",
            "",
        ]
        summary.append(["orchestration overhead ≤ 1.5x (demo)", f"{o['ratio']:.2f}x", yes_no(o["target_met"])])
    if "fleet" in res:
        f = res["fleet"]
        out += [
            f"### Nightly pipeline, fleet-day: {f['nodes']:,} nodes ({f['gpus']:,} GPUs), one day, "
            f"{f['partitions']} partitions, {f['files']:,} files, {f['lines']:,} lines",
            "",
        ]
        rows = [
            [
                "wall, `faultline run` (ingest, analytics, report)",
                f_s(f["pipeline_s"]),
                target_text("fleet_wall_s", f_s),
                yes_no(f["wall_met"]),
            ],
            [
                "peak RSS (summed over the process tree)",
                f_bytes(f["pipeline_peak_rss"]),
                target_text("fleet_rss_bytes", f_bytes),
                yes_no(f["rss_met"]),
            ],
            [
                "bytes read: landing files (ingest_audit: the partitions' files, without inventory.csv)",
                f"{f_mb(f['landing_bytes'])} (audit {f_mb(f['audit_bytes'])})",
                "",
                "",
            ],
            [
                "bytes read: rchar of the process tree (files, pipes, imports)",
                f_mb(f["pipeline_rchar"]) if f["pipeline_rchar"] is not None else "n/a",
                "",
                "",
            ],
            ["throughput (landing bytes / wall)", f"{f['pipeline_mb_s']:.1f} MB/s", "", ""],
            [
                f"bare parse (`ingest_partition`, {f['workers']} workers, no Dagster, no lake writes)",
                f"{f_s(f['bare_s'])}, peak RSS {f_bytes(f['bare_peak_rss'])}",
                "",
                "",
            ],
            ["pipeline wall / bare parse wall", f"{f['ratio']:.2f}x", "", ""],
        ]
        out += table(["figure", "measured", "target", "met"], rows) + [""]
        summary.append(["fleet-day nightly ≤ 10 min", f_s(f["pipeline_s"]), yes_no(f["wall_met"])])
        summary.append(["fleet-day peak RSS ≤ 4 GiB", f_bytes(f["pipeline_peak_rss"]), yes_no(f["rss_met"])])
    if "scaling" in res:
        s = res["scaling"]
        out += [f"### Scaling: 1/4, 1/2 and 1x of the fleet-day ({s['workers']} workers)", ""]
        rows = []
        for pt in s["points"]:
            rows.append(
                [
                    pt["label"],
                    f"{pt['nodes']:,}",
                    pt["partitions"],
                    f"{pt['files']:,}",
                    f_mb(pt["landing_bytes"]),
                    f_s(pt["pipeline_s"]),
                    f"{pt['pipeline_s'] / (pt['landing_bytes'] / 1e9):.0f} s/GB",
                    f_bytes(pt["pipeline_peak_rss"]),
                    f_mb(pt["pipeline_rchar"]) if pt["pipeline_rchar"] is not None else "n/a",
                    f_s(pt["bare_s"]),
                    f"{pt['ratio']:.2f}x",
                ]
            )
        out += table(
            [
                "fleet",
                "nodes",
                "partitions",
                "files",
                "landing",
                "pipeline wall",
                "wall per GB",
                "peak RSS",
                "rchar",
                "bare parse",
                "pipeline / bare",
            ],
            rows,
        )
        lp, lb = s["pipeline"], s["bare"]
        out += (
            [""]
            + table(
                ["figure", "measured", "target", "met"],
                [
                    [
                        "pipeline: deviation from a straight line (least-squares fit of wall vs landing bytes, "
                        "largest residual / wall)",
                        f_pct(lp["fit_max_dev"]),
                        target_text("linear_dev", f_pct),
                        yes_no(s["linear_met"]),
                    ],
                    [
                        "pipeline: the fit's fixed cost and marginal cost",
                        f"{lp['fit_intercept']:.1f} s + {lp['fit_slope'] * 1e9:.0f} s/GB",
                        "",
                        "",
                    ],
                    [
                        "pipeline: deviation from proportional (wall per byte vs 1x; includes the fixed cost)",
                        f_pct(lp["proportional_max_dev"]),
                        target_text("linear_dev", f_pct),
                        yes_no(s["proportional_met"]),
                    ],
                    [
                        "bare parse: deviation from a straight line / from proportional",
                        f"{f_pct(lb['fit_max_dev'])} / {f_pct(lb['proportional_max_dev'])}",
                        "",
                        "",
                    ],
                ],
            )
            + [""]
        )
        summary.append(["linear within 15% (straight-line fit)", f_pct(lp["fit_max_dev"]), yes_no(s["linear_met"])])
        summary.append(
            [
                "linear within 15% (proportional to bytes)",
                f_pct(lp["proportional_max_dev"]),
                yes_no(s["proportional_met"]),
            ]
        )
    if "queries" in res:
        q = res["queries"]
        y = q["year"]
        built = f"built by `faultline run` in {f_s(y['build_s'])}" if y["build_s"] is not None else "reused"
        out += [
            f"### Named queries over {y['days_in_warehouse']} days of history (simulated: `scale` scenario, "
            f"{y['providers']} providers, {y['nodes']} nodes, noise {y['noise']:,} B/node-day; "
            f"{y['files']:,} files, {f_mb(y['landing_bytes'])}, {y['events']:,} events, {y['jobs']:,} jobs, "
            f"{y['failed_jobs']:,} failed; {built})",
            "",
            f"Each query: 1 warm-up + {q['queries'][0]['runs']} timed runs, each on a fresh read-only "
            "connection (as `faultline sql`); p95 by nearest rank.",
            "",
        ]
        rows = [
            [
                f"`{r['name']}`",
                ", ".join(f"{k}={v}" for k, v in r["params"].items()) or "defaults",
                f"{r['rows']:,}",
                f_ms(r["p50_s"]),
                f_ms(r["p95_s"]),
                target_text("query_p95_s", f_ms),
                yes_no(r["target_met"]),
            ]
            for r in q["queries"]
        ]
        rows.append(
            ["**max p95**", "", "", "", f_ms(q["max_p95_s"]), target_text("query_p95_s", f_ms), yes_no(q["target_met"])]
        )
        out += table(["query", "parameters", "rows", "p50", "p95", "target", "met"], rows) + [""]
        out += table(
            ["report", "median", "first run", "runs", "size"],
            [
                [
                    f"render {k} (`faultline report`, latest night)",
                    f_ms(v["median_s"]),
                    f_ms(v["first_s"]),
                    v["runs"],
                    f_bytes(v["bytes"]),
                ]
                for k, v in q["report"].items()
            ],
        ) + [""]
        summary.append(["named queries p95 ≤ 1 s over a year", f_ms(q["max_p95_s"]), yes_no(q["target_met"])])
    if "density" in res:
        dn = res["density"]
        out += [
            f"### Event density and floods: one cluster-day of {dn['days'][0]['files']:,} node files "
            f"({f_mb(dn['days'][0]['bytes'])}); `bench/density_day.py` (median of {res['config']['reps']} interleaved runs)",
            "",
        ]
        rows = []
        for d in [*dn["days"], dn["flood"]]:
            label = "flood day" if d is dn["flood"] else f"{d['density'] * 100:g}% event lines"
            rows.append(
                [
                    label,
                    f_mb(d["bytes"]),
                    f"{d['lines']:,}",
                    f"{d['events']:,}",
                    f_s(d["grep_s"]),
                    f_s(d["bare_s"]),
                    f"{d['bare_vs_grep']:.2f}x",
                    f_s(d["run_s"]),
                    f"{d['run_vs_grep']:.2f}x",
                    f_bytes(d["run_peak_rss"]),
                    f"{d['lake_bytes'] / d['bytes']:.1%}",
                ]
            )
        out += table(
            [
                "day",
                "size",
                "lines",
                "events",
                "grep",
                "bare parse",
                "bare / grep",
                "faultline run",
                "run / grep",
                "run peak RSS",
                "lake / raw",
            ],
            rows,
        ) + [""]
        fl = dn["flood"]
        out += [
            f"Flood day: {fl['event_rows']:,} event rows for {fl['events']:,} events; incidents holding Xid 95: "
            f"{fl['xid95_incidents']}; lemons {fl['lemons']}, rack hotspots {fl['hotspots']}; report in {f_s(fl['report_s'])}.",
            "",
            f"grep: `LC_ALL=C grep -rcE '{KEYWORD_GREP}'` over the landing folder. For scale, Python's start-up "
            "alone (interpreter, imports, rules: what any parse in Python pays first), and the bare parse's wall "
            "per event line above the sparsest day:",
            "",
        ]
        base = dn["days"][0]
        krows = []
        for d in [*dn["days"], fl]:
            label = "flood day" if d is fl else f"{d['density'] * 100:g}% event lines"
            extra = d["events"] - base["events"]
            per_event = f"{(d['bare_s'] - base['bare_s']) / extra * 1e6:.1f} us" if extra > 0 and d is not fl else ""
            krows.append([label, f_s(d["startup_s"]), f"{d['grep_s'] / max(d['startup_s'], 1e-9):.2f}x", per_event])
        out += table(["day", "start-up alone", "grep / start-up", "bare parse per extra event line (wall)"], krows) + [
            ""
        ]
        worst_bare = min(d["bare_vs_grep"] for d in dn["days"])
        summary.append(["bare parse ≥ 0.5x grep at every density", f"{worst_bare:.2f}x", yes_no(dn["bare_met"])])
        worst_run = min(d["run_vs_grep"] for d in dn["days"])
        summary.append(["faultline run ≥ 0.25x grep (cluster-day)", f"{worst_run:.2f}x", yes_no(dn["run_met"])])
        summary.append(
            ["flood day through faultline run ≤ 8 s", f_s(fl["run_s"]), yes_no(met("flood_run_s", fl["run_s"]))]
        )
        summary.append(
            [
                "flood day bare parse ≥ 0.25x grep",
                f"{fl['bare_vs_grep']:.2f}x",
                yes_no(met("flood_bare_vs_grep", fl["bare_vs_grep"])),
            ]
        )
        summary.append(["flood day report ≤ 10 s", f_s(fl["report_s"]), yes_no(met("flood_report_s", fl["report_s"]))])
        share = fl["lake_bytes"] / fl["bytes"]
        summary.append(["flood day lake < 10% of raw", f"{share:.1%}", yes_no(met("flood_lake_share", share))])
    if summary:
        out += ["### Targets", ""] + table(["target", "measured", "met"], summary) + [""]
    return "\n".join(out)


def _floats(text: str) -> tuple[float, ...]:
    return tuple(float(x) for x in text.split(",") if x.strip())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", choices=sorted(SIZES), default="full")
    ap.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated subset of {','.join(SECTIONS)}")
    ap.add_argument("--json", help="also write every figure here")
    ap.add_argument("--workdir", help="folder for generated data (default: a temporary folder)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder (and reuse its data next time)")
    ap.add_argument(
        "--workers",
        type=int,
        help="pipeline and bare-parse worker processes (default: FAULTLINE_WORKERS, else the CPU count, max 8)",
    )
    for k, v in SIZES["full"].items():
        kind = _floats if isinstance(v, tuple) else float if isinstance(v, float) else int  # tuples: "0.1,0.3"
        shown = ",".join(map(str, v)) if isinstance(v, tuple) else v
        ap.add_argument(f"--{k.replace('_', '-')}", type=kind, default=None, help=f"override (full: {shown})")
    a = ap.parse_args(argv)
    sections = [s.strip() for s in a.sections.split(",") if s.strip()]
    bad = [s for s in sections if s not in SECTIONS]
    if bad:
        ap.error(f"unknown section(s) {', '.join(bad)}; choose from {', '.join(SECTIONS)}")
    cfg = dict(SIZES[a.size])
    for k in cfg:
        if getattr(a, k) is not None:
            cfg[k] = getattr(a, k)
    from faultline.launch.local import default_workers

    workers = a.workers or default_workers()

    if a.workdir:
        work = Path(a.workdir).resolve()
        work.mkdir(parents=True, exist_ok=True)
    else:
        work = Path(tempfile.mkdtemp(prefix="faultline-bench-"))
    res: dict = {
        "size": a.size,
        "sections": sections,
        "config": cfg,
        "workers": workers,
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": measure.machine(),
        "workdir": str(work),
    }
    try:
        if "parse" in sections:
            res["parse"] = section_parse(cfg, work)
        if "overhead" in sections:
            res["overhead"] = section_overhead(cfg, work, workers)
        full_point = None
        if "fleet" in sections or "scaling" in sections:
            full_point = measure_fleet(cfg, work, cfg["fleet_nodes"], workers)
        if "fleet" in sections:
            f = dict(full_point)
            f["wall_met"] = met("fleet_wall_s", f["pipeline_s"])
            f["rss_met"] = met("fleet_rss_bytes", f["pipeline_peak_rss"])
            res["fleet"] = f
        if "scaling" in sections:
            n = cfg["fleet_nodes"]
            pts = [
                dict(measure_fleet(cfg, work, max(1, n // 4), workers), label="1/4"),
                dict(measure_fleet(cfg, work, max(1, n // 2), workers), label="1/2"),
                dict(full_point, label="1x"),
            ]
            lp = linearity([(p["landing_bytes"], p["pipeline_s"]) for p in pts])
            lb = linearity([(p["landing_bytes"], p["bare_s"]) for p in pts])
            res["scaling"] = {
                "workers": workers,
                "points": pts,
                "pipeline": lp,
                "bare": lb,
                "linear_met": met("linear_dev", lp["fit_max_dev"]),
                "proportional_met": met("linear_dev", lp["proportional_max_dev"]),
            }
        if "queries" in sections:
            res["queries"] = section_queries(cfg, work, workers)
        if "density" in sections:
            res["density"] = section_density(cfg, work, workers)
    finally:
        if not a.keep and not a.workdir:
            shutil.rmtree(work, ignore_errors=True)
        elif not a.keep:
            for sub in ("parse", "demo", "year", "density", *[p.name for p in work.glob("fleet-*")]):
                shutil.rmtree(work / sub, ignore_errors=True)
    res["wall_s"] = time.perf_counter() - T0
    res["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    text = render_table(res)
    print(text)
    res["table"] = text
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
