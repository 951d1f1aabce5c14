"""``faultline classify``."""

from __future__ import annotations

import sys

import click

from ._options import parse_boots, parse_date


@click.command()
@click.argument("files", nargs=-1, type=click.Path(allow_dash=True))
@click.option(
    "--kind",
    type=click.Choice(["kernel", "job", "slurmctld"]),
    default="kernel",
    show_default=True,
    help="What the files are: kernel logs (dmesg/syslog/journald), job output, or slurmctld logs.",
)
@click.option(
    "--date",
    "ref_date",
    callback=parse_date,
    help="UTC day the logs are from (YYYY-MM-DD): gives year-less stamps their year. Default: today.",
)
@click.option(
    "--boot",
    "boots",
    multiple=True,
    callback=parse_boots,
    help="Boot time (ISO-8601 UTC) to place raw dmesg [seconds] lines in time; repeatable.",
)
@click.option("--format", "fmt", type=click.Choice(["jsonl", "table"]), default="jsonl", show_default=True)
@click.option("--events-only", is_flag=True, help="Print only lines that are not benign.")
def classify(files, kind, ref_date, boots, fmt, events_only):
    """Classify every line of FILES (plain, .gz, .zst; '-' or nothing for stdin).
    Writes one JSON object per input line, in input order: line_no, family, category, severity,
    action, xid, node, gpu_pci, ts and more (the contract: docs/classify.md)."""
    import polars as pl

    from ..ingest.lines import classify_path, per_line_records, write_jsonl

    status = 0
    for path in files or ("-",):
        try:
            res = classify_path(path, kind=kind, ref_date=ref_date, boots=boots or None)
        except OSError as exc:
            click.echo(f"faultline classify: cannot read {path}: {exc.strerror or exc}", err=True)
            status = 1
            continue
        df = per_line_records(res, path)
        if events_only:
            df = df.filter(pl.col("category") != "benign")
        if fmt == "jsonl":
            write_jsonl(df, sys.stdout)
        else:
            with pl.Config(
                tbl_rows=-1,
                tbl_cols=-1,
                fmt_str_lengths=40,
                tbl_width_chars=200,
                tbl_hide_dataframe_shape=True,
                tbl_hide_column_data_types=True,
            ):
                click.echo(
                    df.select(
                        "line_no", "ts", "node", "family", "category", "severity", "action", "xid", "gpu_pci", "rule_id"
                    )
                )
        summary = (
            f"{path}: {res.lines_read} lines: {res.event_lines} in {len(res.events)} events, "
            f"{res.benign} benign, {res.quarantined} quarantined"
        )
        if res.message:
            summary += f"; {res.message}"
        click.echo(summary, err=True)
    sys.exit(status)
