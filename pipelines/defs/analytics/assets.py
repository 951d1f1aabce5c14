"""Analytics over the whole history (incidents, attribution, rates, lemons) and the report."""

import dagster as dg

from ...analytics.build import build_analytics
from ...lake.storage import join
from ..resources import LakeResource
from ..views.assets import POOL, warn_no_snapshot


@dg.asset(
    kinds={"polars", "parquet"},
    group_name="out",
    pool=POOL,
    deps=["core_events", "core_jobs", "core_inventory", "raw_job_markers", "ingest_audit"],
)
def out_analytics(context: dg.AssetExecutionContext, lake: LakeResource) -> dg.MaterializeResult:
    """Recompute the analytics tables from the whole lake and publish their views. Not partitioned:
    attribution windows, rates and lemon tests span days and clusters; the nightly_analytics
    schedule runs it after the night's partitions."""
    counts = build_analytics(lake.warehouse, prices=lake.prices)
    report = lake.build_views()
    warn_no_snapshot(context, report)
    context.log.info(f"analytics: {counts}")
    return dg.MaterializeResult(
        metadata={
            **{f"rows_{k}": dg.MetadataValue.int(v) for k, v in counts.items()},
            "views": dg.MetadataValue.json(report.views),
            "snapshot": dg.MetadataValue.text(str(report.snapshot or "")),
            "snapshot_error": dg.MetadataValue.text(report.snapshot_error or ""),
        }
    )


@dg.asset(kinds={"html"}, group_name="out", deps=[out_analytics])
def out_report(context: dg.AssetExecutionContext, lake: LakeResource) -> dg.MaterializeResult:
    """The nightly root-cause report (``report.html`` and ``report.md`` in the warehouse)."""
    from ...report import build_reports

    # join: a Path, or a URL key; one read of the warehouse for both
    outs = {"html": join(lake.warehouse, "report.html"), "md": join(lake.warehouse, "report.md")}
    written = build_reports(lake.warehouse, outs)
    html, md = written["html"], written["md"]
    return dg.MaterializeResult(
        metadata={
            "html": dg.MetadataValue.path(str(html)),
            "markdown": dg.MetadataValue.path(str(md)),
            "html_bytes": dg.MetadataValue.int(html.stat().st_size),
        }
    )
