"""``faultline simulate``: a landing folder of a realistic fleet, plus its ``_truth/``."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ._options import parse_date


@click.command(
    help="Write a simulated landing folder (kernel, Slurm and job logs in real formats) and a "
    "_truth/ folder the pipeline never reads. Same arguments and seed: byte-identical output.",
    epilog="Scenarios: demo (3 providers, ~100 nodes, 7 days: seconds), lottery (5 providers, 512 nodes, "
    "30 days: strong provider differences, for `faultline evaluate`), scale (12,500 nodes = "
    "100,000 GPUs, 1 day: volume).",
)
@click.option("--out", type=click.Path(path_type=Path), required=True, help="Landing folder to write.")
@click.option("--scenario", default="demo", show_default=True, help="demo | lottery | scale (see below).")
@click.option("--providers", type=int, help="Providers (default: the scenario's).")
@click.option("--nodes", type=int, help="8-GPU nodes in the fleet (default: the scenario's).")
@click.option("--days", type=int, help="Days of logs (default: the scenario's).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--start-date", callback=parse_date, help="First UTC day (YYYY-MM-DD).")
@click.option("--noise", type=int, help="Benign noise multiplier (bytes of noise per node-day).")
@click.option("--overwrite", is_flag=True, help="Replace OUT if it already holds a simulated landing folder.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def simulate(out, scenario, providers, nodes, days, seed, start_date, noise, overwrite, as_json):
    from ..simulate import SCENARIOS
    from ..simulate import simulate as run_sim

    if scenario not in SCENARIOS:
        raise click.BadParameter(
            f"unknown scenario {scenario!r}; choose from {', '.join(SCENARIOS)}", param_hint="--scenario"
        )
    try:
        summary = run_sim(
            out,
            scenario=scenario,
            providers=providers,
            nodes=nodes,
            days=days,
            seed=seed,
            start_date=start_date.isoformat() if start_date else None,
            noise=noise,
            overwrite=overwrite,
            progress=lambda msg: click.echo(msg, err=True),
        )
    except (FileExistsError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        click.echo(json.dumps(summary, default=str, indent=1))
    else:
        click.echo(
            f"{summary['nodes']} nodes ({summary['gpus']} GPUs), {summary['days']} days, {summary['jobs']} jobs "
            f"({summary['failed_jobs']} failed), {summary['faults']} faults -> {out} "
            f"({summary['files']} files, {summary['bytes'] / 1e6:.0f} MB in {summary['seconds']:.1f}s)"
        )
