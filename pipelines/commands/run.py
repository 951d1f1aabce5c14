"""``faultline run``: ingest a landing folder into the lake and the DuckDB views."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from ._options import LOCATION, location_option, parse_date
from .known import known_issues_env, known_issues_option, load_registry


def _dates(ctx, param, values):
    return tuple(parse_date(ctx, param, v).isoformat() for v in values)


def _table(rows: list[dict], cols: list[str]) -> str:
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in cols}
    num = {c for c in cols if all(isinstance(r[c], (int, float)) for r in rows)}
    fmt = lambda r: "  ".join(
        str(r[c]).rjust(widths[c]) if c in num else str(r[c]).ljust(widths[c])  # noqa: E731
        for c in cols
    )
    head = "  ".join(c.rjust(widths[c]) if c in num else c.ljust(widths[c]) for c in cols)
    return "\n".join([head, "  ".join("-" * widths[c] for c in cols), *map(fmt, rows)])


@click.command()
@location_option("landing", "landing", "Landing folder (provider/cluster/YYYY-MM-DD/...), or an s3://... URL.")
@location_option(
    "warehouse",
    "warehouse",
    "Where the lake and faultline.duckdb go, or an s3://... URL for the lake (faultline.duckdb then goes "
    "to $FAULTLINE_DUCKDB, default a per-URL file in ~/.cache/faultline).",
)
@click.option("--date", "dates", multiple=True, callback=_dates, help="Only this day (YYYY-MM-DD); repeatable.")
@click.option(
    "--cluster",
    "clusters",
    multiple=True,
    help="Only this cluster (CLUSTER, PROVIDER/CLUSTER or PROVIDER:CLUSTER); repeatable.",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    envvar="FAULTLINE_WORKERS",
    help="Worker processes here (local executor). Env: FAULTLINE_WORKERS. Default: the CPU count (max 8).",
)
@click.option(
    "--executor",
    type=click.Choice(["local", "dask"]),
    default="local",
    show_default=True,
    envvar="FAULTLINE_EXECUTOR",
    help="local: worker processes on this machine; dask: Dagster runs whose steps are tasks on a Dask "
    "cluster (dagster-dask). Env: FAULTLINE_EXECUTOR.",
)
@click.option(
    "--dask-address",
    envvar="FAULTLINE_DASK_ADDRESS",
    help="Dask scheduler for --executor dask (tcp://HOST:8786). Env: FAULTLINE_DASK_ADDRESS.",
)
@known_issues_option
@click.option(
    "--prices",
    type=LOCATION,
    envvar="FAULTLINE_PRICES",
    help="prices.csv for the cost analytics (docs/costs.md). Default: LANDING/prices.csv when it exists. "
    "Env: FAULTLINE_PRICES.",
)
def run(landing: Path, warehouse: Path, dates, clusters, workers, executor, dask_address, known_issues, prices):
    """Ingest every landing partition (or the selected ones) into the lake, then refresh the DuckDB
    views; re-running a partition replaces its tables. The views read a snapshot of the lake, kept an
    hour after a newer build (env FAULTLINE_SNAPSHOT_GRACE_S, seconds; docs/architecture.md)."""
    from ..analytics.prices import PricesError, default_location, load_prices
    from ..ingest.landing import LandingError, inventory_warnings
    from ..lake.storage import is_url, isdir
    from ..lake.views import db_path
    from ..launch.local import run_pipeline, select_partitions

    if executor == "dask" and not dask_address:
        raise click.ClickException("--executor dask needs --dask-address tcp://HOST:8786 (or FAULTLINE_DASK_ADDRESS)")
    load_registry(known_issues, warehouse)  # a mistake in it stops the run before anything is written
    if not isdir(landing):
        raise click.ClickException(
            f"landing folder {str(landing)!r} does not exist (or is not a directory); "
            "pass --landing DIR or set FAULTLINE_LANDING"
        )
    try:
        todo = select_partitions(landing, dates, clusters)
    except LandingError as exc:
        raise click.ClickException(str(exc)) from exc
    price_file = str(prices) if prices else default_location(landing)
    try:  # a bad prices.csv stops the run before anything is ingested
        load_prices(price_file, required=prices is not None)
    except PricesError as exc:
        raise click.ClickException(str(exc)) from exc
    for line in inventory_warnings(landing):
        click.echo(f"warning: {line}", err=True)
    if not todo:
        raise click.ClickException(
            f"no partitions in {landing} match"
            + (f" --date {' '.join(dates)}" if dates else "")
            + (f" --cluster {' '.join(clusters)}" if clusters else "")
        )
    tty = sys.stderr.isatty()
    bar = (
        click.progressbar(length=len(todo), label="ingesting", file=sys.stderr, item_show_func=lambda p: p or "")
        if tty
        else None
    )

    def progress(done, total, part, stats):
        if bar is not None:
            bar.update(1, part.relpath)
        else:
            click.echo(
                f"[{done}/{total}] {part.relpath}: {stats['files']} files, {stats['lines']} lines, "
                f"{stats['events']} events, {stats['quarantined']} quarantined ({stats['seconds']:.1f}s)",
                err=True,
            )

    def go() -> dict:
        if executor == "dask":
            import dagster as dg

            from ..launch.dask import run_on_dask

            # several hosts need one shared Dagster instance ($DAGSTER_HOME); one host: a temporary one
            instance = dg.DagsterInstance.get() if os.environ.get("DAGSTER_HOME") else None
            return run_on_dask(
                landing,
                warehouse,
                dask_address,
                dates or None,
                clusters or None,
                progress=progress,
                instance=instance,
                prices=price_file,
            )
        return run_pipeline(
            landing,
            warehouse,
            dates or None,
            clusters or None,
            progress=progress,
            workers=workers,
            prices=price_file,
            notice=lambda text: click.echo(text, err=True),
        )

    try:
        with known_issues_env(known_issues):
            if bar is not None:
                with bar:
                    summary = go()
            else:
                summary = go()
    except Exception as exc:  # noqa: BLE001 - one clear line, the traceback is Dagster's
        raise click.ClickException(f"ingest failed: {type(exc).__name__}: {exc}") from exc
    rows = summary["rows"]
    if len(rows) > 40:  # a backfill: the per-cluster totals say more than hundreds of rows
        by = {}
        for r in rows:
            key = r["partition"].rsplit("/", 1)[0]
            acc = by.setdefault(
                key, {"partition": key + "/*", "files": 0, "lines": 0, "events": 0, "quarantined": 0, "seconds": 0.0}
            )
            for k in ("files", "lines", "events", "quarantined", "seconds"):
                acc[k] = round(acc[k] + r[k], 3)
        rows = list(by.values())
    rows = rows + [
        {"partition": "total", **{k: summary[k] for k in ("files", "lines", "events", "quarantined", "seconds")}}
    ]
    click.echo(_table(rows, ["partition", "files", "lines", "events", "quarantined", "seconds"]))
    if summary.get("analytics"):
        click.echo(
            "analytics tables (rows): "
            + ", ".join(f"{k} {v}" for k, v in summary["analytics"].items())
            + f" ({summary['analytics_seconds']:.1f}s)",
            err=True,
        )
    packed = summary.get("compaction") or {}
    if packed.get("written") or packed.get("failed") or packed.get("removed"):
        gone = f", {packed['removed']} removed (no day file left)" if packed.get("removed") else ""
        click.echo(
            f"compaction: {packed['written']} closed months rewritten, {packed['current']} current{gone} "
            f"({packed['seconds']:.1f}s)",
            err=True,
        )
        for month, why in packed["failed"].items():
            click.echo(f"compaction failed for {month}: {why} (its views read the day files)", err=True)
    if summary.get("snapshot_error"):
        click.echo(
            "warning: the views read the live lake files, so a query running while a file is rewritten "
            f"may fail: {summary['snapshot_error']}",
            err=True,
        )
    click.echo(
        f"{summary['partitions']} partitions in {summary['seconds']:.1f}s -> "
        f"{db_path(warehouse) if is_url(warehouse) else warehouse / 'faultline.duckdb'}",
        err=True,
    )
