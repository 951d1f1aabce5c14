"""``faultline export prometheus``: the latest night as a node_exporter textfile-collector file."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path

import click

from ._options import check_out, mkdir_option, parse_date
from .sql import open_warehouse, warehouse_option


def label_value(value) -> str:
    """A label value escaped per the Prometheus text exposition format (\\, " and newline),
    after ``sanitize``: no escape sequence or bidi control reaches a terminal or a dashboard."""
    from ..report.sanitize import sanitize

    text = sanitize(value)
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(**labels) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{label_value(v)}"' for k, v in labels.items()) + "}"


def _value(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "NaN"
    if isinstance(v, float) and math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        return str(v)
    return repr(float(v))


class Exposition:
    """Metric families in order, each with HELP and TYPE once, then its samples."""

    def __init__(self) -> None:
        self.families: dict[str, tuple[str, str, list[str]]] = {}

    def add(self, name: str, help_text: str, labels: dict, value, kind: str = "gauge") -> None:
        fam = self.families.setdefault(name, (help_text, kind, []))
        fam[2].append(f"{name}{_labels(**labels)} {_value(value)}")

    def text(self) -> str:
        out = []
        for name, (help_text, kind, samples) in self.families.items():
            escaped = help_text.replace("\\", "\\\\").replace("\n", "\\n")
            out += [f"# HELP {name} {escaped}", f"# TYPE {name} {kind}", *samples]
        return "\n".join(out) + "\n"


def prometheus_text(con, day: dt.date | None = None) -> str:
    """Build the exposition for the UTC day ``day`` (default: the last day in the warehouse)."""
    import polars as pl

    from ..lake.queries import covered_day, run_query, run_sql

    day = covered_day(con, day)
    end = dt.datetime.combine(day + dt.timedelta(days=1), dt.time(), tzinfo=dt.timezone.utc)
    window = f"the 24 hours of UTC day {day.isoformat()}"
    nodes = run_sql(con, "SELECT provider, cluster, rack, node FROM inventory_latest")
    inc = run_sql(
        con,
        "SELECT provider, cluster, node FROM counted_incidents WHERE day = $day",
        {"day": day},
    )
    fails = run_query(con, "failed_jobs", {"day": day, "max_rows": 10_000_000})
    per_node = inc.group_by("provider", "cluster", "node").agg(pl.len().alias("n"))
    nodes = nodes.join(per_node, on=["provider", "cluster", "node"], how="full", coalesce=True).with_columns(
        pl.col("n").fill_null(0)
    )
    blamed = (
        fails.filter(pl.col("culprit_node").is_not_null() & pl.col("infrastructure"))
        .group_by("provider", "cluster", pl.col("culprit_node").alias("node"))
        .agg(pl.len().alias("jobs"))
    )
    nodes = nodes.join(blamed, on=["provider", "cluster", "node"], how="left").with_columns(pl.col("jobs").fill_null(0))

    e = Exposition()
    name = "faultline_failures_24h"
    help_failures = (
        f"Incidents (counted_incidents: hardware/software faults of severity error or critical) that began "
        f"in {window}, per node, rack, cluster and provider."
    )
    for r in nodes.sort("provider", "cluster", "node").iter_rows(named=True):
        e.add(
            name,
            help_failures,
            {
                "level": "node",
                "provider": r["provider"],
                "cluster": r["cluster"],
                "rack": r["rack"] or "",
                "node": r["node"],
            },
            int(r["n"]),
        )
    racks = nodes.filter(pl.col("rack").is_not_null()).group_by("provider", "cluster", "rack").agg(pl.col("n").sum())
    for r in racks.sort("provider", "cluster", "rack").iter_rows(named=True):
        e.add(
            name,
            help_failures,
            {"level": "rack", "provider": r["provider"], "cluster": r["cluster"], "rack": r["rack"]},
            int(r["n"]),
        )
    for r in (
        nodes.group_by("provider", "cluster").agg(pl.col("n").sum()).sort("provider", "cluster").iter_rows(named=True)
    ):
        e.add(
            name, help_failures, {"level": "cluster", "provider": r["provider"], "cluster": r["cluster"]}, int(r["n"])
        )
    for r in nodes.group_by("provider").agg(pl.col("n").sum()).sort("provider").iter_rows(named=True):
        e.add(name, help_failures, {"level": "provider", "provider": r["provider"]}, int(r["n"]))

    help_blamed = f"Failed jobs whose hardware/software root cause was on this node, ended in {window}."
    for r in nodes.filter(pl.col("jobs") > 0).sort("provider", "cluster", "node").iter_rows(named=True):
        e.add(
            "faultline_failed_jobs_blamed_24h",
            help_blamed,
            {"level": "node", "provider": r["provider"], "cluster": r["cluster"], "node": r["node"]},
            int(r["jobs"]),
        )

    per_cluster = fails.group_by("provider", "cluster").agg(
        pl.len().alias("jobs"),
        pl.col("infrastructure").sum().alias("infra"),
        pl.col("gpu_hours_lost").sum().alias("hours"),
    )
    clusters = (
        nodes.select("provider", "cluster")
        .unique()
        .join(per_cluster, on=["provider", "cluster"], how="left")
        .with_columns(pl.col("jobs").fill_null(0), pl.col("infra").fill_null(0), pl.col("hours").fill_null(0.0))
    )
    for level, keys in (("cluster", ["provider", "cluster"]), ("provider", ["provider"])):
        g = clusters.group_by(keys).agg(pl.col("jobs").sum(), pl.col("infra").sum(), pl.col("hours").sum()).sort(keys)
        for r in g.iter_rows(named=True):
            labels = {"level": level, **{k: r[k] for k in keys}}
            e.add(
                "faultline_failed_jobs_24h", f"Jobs that did not complete, ended in {window}.", labels, int(r["jobs"])
            )
            e.add(
                "faultline_infra_failed_jobs_24h",
                f"Failed jobs with a hardware or software root cause, ended in {window}.",
                labels,
                int(r["infra"]),
            )
            e.add(
                "faultline_gpu_hours_lost_24h",
                f"GPU-hours of failed jobs that ended in {window}.",
                labels,
                round(float(r["hours"]), 3),
            )

    for r in run_query(con, "scoreboard", {"level": "all"}).iter_rows(named=True):
        labels = {"level": r["level"], "provider": r["provider"]}
        if r["level"] == "cluster":
            labels["cluster"] = r["cluster"]
        what = "Node failures (serious incidents and interrupted jobs) per 1,000 node-days over every covered day"
        e.add("faultline_failure_rate_per_1k_node_days", f"{what}.", labels, r["rate_per_1k"])
        e.add(
            "faultline_failure_rate_ci_low_per_1k_node_days",
            f"{what}: lower end of the exact 95% interval.",
            labels,
            r["ci_low"],
        )
        e.add(
            "faultline_failure_rate_ci_high_per_1k_node_days",
            f"{what}: upper end of the exact 95% interval.",
            labels,
            r["ci_high"],
        )

    for r in run_query(con, "lemon_nodes", {"max_rows": 1_000_000}).iter_rows(named=True):
        e.add(
            "faultline_lemon",
            "1 for a lemon node: fails more than its cluster (BH-corrected) or one GPU repeats "
            "user-looking Xids across jobs; recommended action drain_node.",
            {
                "provider": r["provider"],
                "cluster": r["cluster"],
                "rack": r["rack"] or "",
                "node": r["node"],
                "evidence": r["evidence_kind"],
            },
            1,
        )
    for r in run_query(con, "rack_hotspots", {"only_hotspots": True, "max_rows": 1_000_000}).iter_rows(named=True):
        e.add(
            "faultline_rack_hotspot",
            "1 for a rack that fails more than its cluster or whose nodes fail together.",
            {"provider": r["provider"], "cluster": r["cluster"], "rack": r["rack"], "action": r["action"]},
            1,
        )

    e.add(
        "faultline_window_end_timestamp_seconds",
        "End of the 24-hour window these metrics cover (Unix time).",
        {},
        int(end.timestamp()),
    )
    return e.text()


@click.group("export")
def export() -> None:
    """Export warehouse metrics for other systems."""


@export.command("prometheus")
@warehouse_option
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write here (atomically, for node_exporter's textfile collector: use a .prom name); default stdout.",
)
@click.option(
    "--date", "day", callback=parse_date, help="UTC day to export (YYYY-MM-DD). Default: the last day in the warehouse."
)
@mkdir_option
def export_prometheus(warehouse: Path, out: Path | None, day, mkdir: bool):
    """Per-node, rack, cluster and provider failures of the last day, rates with 95% intervals
    and lemon flags, in the Prometheus text format (node_exporter textfile collector)."""
    from ..lake.queries import QueryError

    check_out(out, mkdir)
    con = open_warehouse(warehouse)
    try:
        text = prometheus_text(con, day)
    except QueryError as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        con.close()
    if out is None:
        click.echo(text, nl=False)
        return
    # the collector reads *.prom files: write aside and rename so it never sees half a file
    from ..lake.files import atomic_write_text

    atomic_write_text(out, text)
    click.echo(f"{text.count(chr(10))} lines -> {out}", err=True)
