"""``faultline diagnose``: the root cause of one job from its output, no warehouse needed."""

from __future__ import annotations

import json
import sys

import click

from ._options import parse_boots, parse_date


@click.command()
@click.argument("logs", nargs=-1, required=True, type=click.Path(allow_dash=True))
@click.option(
    "--kernel", "kernel", multiple=True, type=click.Path(), help="Kernel log of a node of the job; repeatable."
)
@click.option(
    "--node",
    "nodes",
    multiple=True,
    help="A node of the job; repeatable. With one --node, every --kernel log is that node's.",
)
@click.option("--sacct", type=click.Path(), help="`sacct -P` output holding the job (its nodes, times and state).")
@click.option(
    "--date",
    "ref_date",
    callback=parse_date,
    help="UTC day the logs are from (YYYY-MM-DD): gives year-less stamps their year. Default: the job's end, or today.",
)
@click.option(
    "--boot",
    "boots",
    multiple=True,
    callback=parse_boots,
    help="Boot time (ISO-8601 UTC) of the --kernel logs' node, to place raw dmesg [seconds] lines; repeatable.",
)
@click.option("--format", "fmt", type=click.Choice(["text", "json", "md"]), default="text", show_default=True)
def diagnose(logs, kernel, nodes, sacct, ref_date, boots, fmt):
    """Why the job whose output is LOGS (plain, .gz, .zst; '-': stdin) failed: verdict, culprit,
    deciding lines, next steps; the nightly attribution on this one job (docs/diagnose.md).
    Exit 0 with a verdict (unknown included), 2 when an input cannot be read."""
    from ..analytics.diagnose import DiagnoseError, render_markdown, render_text, to_json
    from ..analytics.diagnose import diagnose as run

    try:
        d = run(list(logs), kernel=list(kernel), nodes=list(nodes), sacct=sacct, ref_date=ref_date, boots=boots)
    except DiagnoseError as exc:
        click.echo(f"faultline diagnose: {exc}", err=True)
        sys.exit(2)
    if fmt == "json":
        click.echo(json.dumps(to_json(d), ensure_ascii=False))
    else:
        click.echo(render_markdown(d) if fmt == "md" else render_text(d))
