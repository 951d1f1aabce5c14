"""Checks on the lake: every line accounted for (blocking), files match their schema, the lake is
not behind the landing folder. Partitioned like their assets (a Dagster preview feature, its
warning silenced here); a result speaks for every partition of its run and names those at fault."""

import warnings

import dagster as dg
import polars as pl

from ...schema import PARTITION, TABLES
from ..metadata import preview_md
from ..partitions import landing_partitions, partitions_of
from ..resources import LakeResource, LandingResource
from .assets import RAW_TABLES

warnings.filterwarnings(
    "ignore", message="Specifying a partitions_def on an AssetCheckSpec", category=dg.PreviewWarning
)

#: asset -> the lake tables it writes (schema check)
WRITTEN = {
    **{k: [t for t, _, _ in v] for k, v in RAW_TABLES.items()},
    "core_events": ["events"],
    "core_jobs": ["jobs"],
    "core_inventory": ["inventory"],
}


@dg.asset_check(
    asset="ingest_audit",
    blocking=True,
    partitions_def=landing_partitions,
    description="lines read = event lines + benign + quarantined, for every file",
)
def lines_balanced(context: dg.AssetCheckExecutionContext, lake: LakeResource) -> dg.AssetCheckResult:
    audit = pl.concat([lake.read("ingest_audit", p) for p in partitions_of(context)])
    off = audit.with_columns(
        missing=pl.col("lines_read") - pl.col("event_lines") - pl.col("benign") - pl.col("quarantined")
    ).filter(pl.col("missing") != 0)
    return dg.AssetCheckResult(
        passed=off.height == 0,
        metadata={
            "files": audit.height,
            "unbalanced_files": off.height,
            "lines_read": int(audit["lines_read"].sum()),
            "unbalanced": dg.MetadataValue.md(
                preview_md(off, ["source", "lines_read", "event_lines", "benign", "quarantined", "missing"], 20)
            ),
        },
    )


@dg.multi_asset_check(
    specs=[
        dg.AssetCheckSpec(
            "lake_schema",
            asset=asset,
            partitions_def=landing_partitions,
            description="each file written matches its table's schema exactly",
        )
        for asset in WRITTEN
    ],
    can_subset=True,
)
def lake_schema(context: dg.AssetCheckExecutionContext, lake: LakeResource):
    """One step for every asset's schema check (a step per check would cost more than the check)."""
    parts = partitions_of(context)
    for key in context.selected_asset_check_keys:
        asset = key.asset_key.to_user_string()
        problems = {}
        for table in WRITTEN[asset]:
            want = {c: t for c, t in TABLES[table].items() if c not in PARTITION}
            for part in parts:
                got = lake.file_schema(table, part)
                where = table if len(parts) == 1 else f"{table} {part.relpath}"
                if got is None:
                    problems[where] = "file missing"
                elif dict(got) != want:
                    problems[where] = (
                        f"columns {list(got)} types {[str(t) for t in got.values()]} != "
                        f"{list(want)} {[str(t) for t in want.values()]}"
                    )[:500]
        yield dg.AssetCheckResult(
            asset_key=key.asset_key,
            check_name="lake_schema",
            passed=not problems,
            metadata={"tables": WRITTEN[asset], **problems},
        )


schema_checks = [lake_schema]


@dg.asset_check(
    asset="core_events",
    name="lake_fresh",
    partitions_def=landing_partitions,
    description="the lake is not behind the landing folder: same files and sizes as "
    "audited, none modified after the events file was written",
)
def lake_fresh(
    context: dg.AssetCheckExecutionContext, landing: LandingResource, lake: LakeResource
) -> dg.AssetCheckResult:
    files, stale = 0, []
    for part in partitions_of(context):
        now = landing.fingerprint(part)
        audited = dict(lake.read("ingest_audit", part).select("source", "bytes").iter_rows())
        written = lake.data_file("events", part)
        written_ns = written.stat().st_mtime_ns if written.is_file() else 0
        files += len(now)
        stale += sorted(
            {
                f
                for f in now.keys() | audited.keys()
                if f not in now or audited.get(f) != now[f][0] or now[f][1] > written_ns
            }
        )
    return dg.AssetCheckResult(
        passed=not stale,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={"landing_files": files, "stale_files": len(stale), "stale": stale[:20]},
    )


LAKE_CHECKS = [lines_balanced, *schema_checks, lake_fresh]
