"""``faultline demo``: simulate a small fleet, run the nightly pipeline on it, show the results."""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import click

EXAMPLES = [
    ("The night's failed jobs, costliest first", "faultline sql --query failed_jobs --param max_rows=10"),
    (
        "The night's infrastructure failures (hardware, network, driver) and their culprits",
        'faultline sql "SELECT job_id, provider, root_cause, culprit_node, round(gpu_hours_lost, 1) AS gpu_h '
        "FROM counted_failed_jobs WHERE infrastructure AND day = (SELECT max(date) FROM ingest_audit) "
        'ORDER BY gpu_h DESC"',
    ),
    (
        "Provider scoreboard (failures per 1,000 node-days, 95% CI)",
        "faultline sql --query scoreboard --param level=provider",
    ),
    ("Nodes that fail most", "faultline sql --query top_failing_nodes --param max_rows=5"),
]


def _serve_hint(home: str, landing: Path, warehouse: Path) -> str:
    """The command that opens the Dagster UI on what the demo built."""
    return (
        f"DAGSTER_HOME={home} faultline serve --landing {landing} --warehouse {warehouse}, then http://127.0.0.1:3000"
    )


@click.command()
@click.option(
    "--dir",
    "workdir",
    type=click.Path(path_type=Path),
    default="demo",
    show_default=True,
    help="Where the simulated landing folder goes (DIR/landing, truth in DIR/landing/_truth).",
)
@click.option(
    "--warehouse",
    type=click.Path(path_type=Path),
    envvar="FAULTLINE_WAREHOUSE",
    default="warehouse",
    show_default=True,
    help="Where the lake, the analytics and faultline.duckdb go.",
)
@click.option("--seed", type=int, default=0, show_default=True)
def demo(workdir: Path, warehouse: Path, seed: int):
    """Simulate the demo fleet (3 providers, ~100 nodes, 7 days), run the pipeline and the
    analytics on it, write the nightly report, then print where everything is, the counts and
    queries to try.

    \b
    The runs are recorded in the Dagster instance of DAGSTER_HOME, else in a fresh one in
    DIR/dagster_home, so the Dagster UI (faultline serve) shows what the demo built."""
    from ..lake.queries import covered_day
    from ..launch.local import run_pipeline
    from ..launch.serve import prepare_home
    from ..report.counts import counts, sentence
    from ..simulate import simulate
    from ..simulate.evaluate import evaluate
    from .sql import open_warehouse

    t0 = time.perf_counter()
    landing = workdir / "landing"
    home = os.environ.get("DAGSTER_HOME")
    own_home = not home
    if own_home:  # the demo's own instance, rebuilt with its landing folder, for this command only
        home = str((workdir / "dagster_home").resolve())
        shutil.rmtree(home, ignore_errors=True)
        prepare_home(home)
    click.echo(f"1/3 simulating the demo fleet into {landing} ...", err=True)
    sim = simulate(landing, scenario="demo", seed=seed, overwrite=True)
    click.echo(
        f"    {sim['nodes']} nodes, {sim['jobs']} jobs ({sim['failed_jobs']} failed), {sim['faults']} faults, "
        f"{sim['files']} files, {sim['bytes'] / 1e6:.0f} MB",
        err=True,
    )
    click.echo("2/3 running the pipeline (ingest every partition, then the analytics and the report) ...", err=True)
    tty = sys.stderr.isatty()

    def progress(done, total, part, stats):
        if tty:
            click.echo(f"\r    [{done}/{total}] {part.relpath:40}", nl=False, err=True)
        elif done == total or done % 10 == 0:
            click.echo(f"    [{done}/{total}] partitions", err=True)

    if own_home:
        os.environ["DAGSTER_HOME"] = home
    try:
        summary = run_pipeline(landing, warehouse, progress=progress, notice=lambda text: click.echo(text, err=True))
    finally:
        if own_home:  # a caller in the same process (a test) keeps its own environment
            os.environ.pop("DAGSTER_HOME", None)
    if tty:
        click.echo("", err=True)
    click.echo(
        f"    {summary['partitions']} partitions, {summary['lines']:,} lines, {summary['events']:,} events, "
        f"{summary['quarantined']} quarantined; {len(summary.get('analytics', {}))} analytics tables written "
        "(the counts are below)",
        err=True,
    )
    click.echo("3/3 scoring against the simulator's truth ...", err=True)
    report_html, report_md = warehouse / "report.html", warehouse / "report.md"  # written by out_report
    fig = evaluate(landing / "_truth", warehouse)["figures"]
    con = open_warehouse(warehouse)
    try:
        night = covered_day(con)
        total, last = counts(con), counts(con, night)
    finally:
        con.close()
    click.echo(f"\nfaultline demo done in {time.perf_counter() - t0:.0f}s\n")
    click.echo(f"  landing folder  {landing}   (truth: {landing / '_truth'})")
    click.echo(f"  lake            {warehouse / 'lake'}   (hive-partitioned Parquet)")
    click.echo(f"  analytics       {warehouse / 'analytics'}")
    click.echo(
        f"  DuckDB views    {warehouse / 'faultline.duckdb'}   (duckdb -readonly {warehouse / 'faultline.duckdb'})"
    )
    click.echo(f"  report          {report_html}  (Markdown: {report_md})")
    click.echo(f"  Dagster runs    {home}   (the UI: {_serve_hint(home, landing, warehouse)})")
    click.echo(f"\n  every covered day  {sentence(total)}")
    click.echo(f"  the night {night}  {sentence(last)}")
    click.echo(
        f"\n  root-cause macro-F1 {fig['root_cause_macro_f1']:.2f} over {fig['failed_jobs']} failed jobs, "
        f"culprit accuracy {fig['culprit_top1_hw_net']:.2f} on hardware/network failures "
        f"(full figures: faultline evaluate --truth {landing / '_truth'} --warehouse {warehouse})"
    )
    click.echo("\nTry:")
    for title, cmd in EXAMPLES:
        wh = f" --warehouse {warehouse}" if str(warehouse) != "warehouse" else ""
        click.echo(f"  # {title}\n  {cmd.replace('faultline sql', 'faultline sql' + wh, 1)}\n")
