"""The DuckDB view file over the lake; one writer at a time (pool ``duckdb_writer``)."""

import dagster as dg

from ...launch.owner import POOL
from ..partitions import BATCH, landing_partitions
from ..resources import LakeResource


def warn_no_snapshot(context: dg.AssetExecutionContext, report) -> None:
    """Say so when the views read the live lake files (``views.BuildReport.snapshot_error``)."""
    if report.snapshot_error:
        context.log.warning(
            "the views read the live lake files, so a query running while a file is "
            f"rewritten may fail: {report.snapshot_error}"
        )


@dg.asset(
    partitions_def=landing_partitions,
    kinds={"duckdb"},
    group_name="out",
    pool=POOL,
    backfill_policy=BATCH,
    deps=[
        "core_events",
        "core_jobs",
        "core_inventory",
        "raw_slurm_accounting",
        "raw_flight_recorder",
        "raw_job_markers",
        "ingest_audit",
        "quarantine",
    ],
)
def out_warehouse(context: dg.AssetExecutionContext, lake: LakeResource) -> dg.MaterializeResult:
    """Compact the lake's closed months, then rebuild ``faultline.duckdb`` (views only) aside
    and swap it in: readers never wait."""
    packed, report = lake.publish()
    for month, err in packed.failed.items():
        context.log.warning(f"compaction of {month} failed (its views read the day files): {err}")
    warn_no_snapshot(context, report)
    for name, err in report.errors.items():
        context.log.error(f"sql/views/{name}.sql: {err}")
    result = dg.MaterializeResult(
        metadata={
            "path": dg.MetadataValue.path(str(report.path)),
            "snapshot": dg.MetadataValue.text(str(report.snapshot or "")),
            "snapshot_error": dg.MetadataValue.text(report.snapshot_error or ""),
            "snapshots_removed": dg.MetadataValue.int(len(report.collected)),
            "views": dg.MetadataValue.json(report.views + report.sql_views),
            "view_errors": dg.MetadataValue.json(report.errors),
            "views_waiting": dg.MetadataValue.json(report.skipped),
            "compacted_months_written": dg.MetadataValue.int(len(packed.written)),
            "compacted_months_removed": dg.MetadataValue.int(len(packed.removed)),
        }
    )
    if report.errors:
        raise dg.Failure(
            f"{len(report.errors)} view file(s) failed: {sorted(report.errors)}; the lake views were still published",
            metadata=result.metadata,
        )
    return result
