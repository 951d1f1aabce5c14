"""``faultline serve``: the Dagster daemon and UI of one host, started and stopped together."""

from __future__ import annotations

from pathlib import Path

import click

from ._options import location_option


@click.command()
@click.option(
    "--dagster-home",
    envvar="DAGSTER_HOME",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="The Dagster instance folder (runs, event log, schedules). Env: DAGSTER_HOME.",
)
@click.option(
    "--storage",
    type=click.Choice(["sqlite", "postgres"]),
    default="sqlite",
    show_default=True,
    help="The dagster.yaml written when DAGSTER_HOME has none: deploy/dagster.yaml (SQLite files "
    "in DAGSTER_HOME) or deploy/dagster-postgres.yaml (env DAGSTER_PG_HOST, _PORT, _DB, _USER, _PASSWORD).",
)
@location_option("landing", "landing", "Landing folder the schedule and the sensor read.")
@location_option("warehouse", "warehouse", "Warehouse folder the runs write.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address the UI listens on.")
@click.option("--port", type=int, default=3000, show_default=True, help="Port of the UI.")
@click.option(
    "--log-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write each process's output to DIR/<name>.log instead of this terminal.",
)
def serve(dagster_home: Path, storage: str, landing, warehouse, host: str, port: int, log_dir: Path | None):
    """Run the nightly deployment of this host: one code server for the code location,
    dagster-daemon (schedules, sensor, run queue, monitoring, retries) and dagster-webserver
    (the UI), until SIGTERM or Ctrl-C stops all three.

    \b
    A process that exits is restarted. Stopping interrupts the runs in flight: each is
    marked failed and retried at the next start."""
    import os

    from ..lake.storage import abspath
    from ..launch.serve import ServeError, prepare_home
    from ..launch.serve import serve as run_stack

    home, written = prepare_home(dagster_home, postgres=storage == "postgres")
    if written:
        click.echo(f"wrote {home / 'dagster.yaml'} ({storage} storage)", err=True)
    os.environ["DAGSTER_HOME"] = str(home)
    os.environ["FAULTLINE_LANDING"] = str(abspath(landing))
    os.environ["FAULTLINE_WAREHOUSE"] = str(abspath(warehouse))
    try:
        code = run_stack(home, host=host, port=port, log_dir=log_dir, say=lambda m: click.echo(m, err=True))
    except ServeError as exc:
        raise click.ClickException(str(exc)) from exc
    raise SystemExit(code)
