"""Landing partition -> lake tables: raw_ (as parsed) then core_ (combined, enriched)."""

import datetime as dt

import dagster as dg
import polars as pl

from ...ingest import partition as ingest
from ...landing import LandingError
from ...tables import TABLES
from ..metadata import table_metadata
from ..partitions import landing_partitions, partition_of
from ..resources import LakeResource, LandingResource

KINDS = {"polars", "parquet"}
EVENT_COLS = ["ts", "node", "job_id", "category", "severity", "xid", "template"]

#: asset -> (lake table, preview columns) for the tables one landing parse produces
RAW_TABLES = {
    "raw_kernel_events": [("raw_kernel_events", "kernel_events", EVENT_COLS)],
    "raw_job_events": [("raw_job_events", "job_events", EVENT_COLS)],
    "raw_slurm_accounting": [("raw_slurm_jobs", "jobs", ["job_id", "state", "nodelist", "start", "end"]),
                             ("steps", "steps", ["job_id", "step", "state", "exit_code"])],
    "raw_flight_recorder": [("flight_recorder", "flight", ["job_id", "rank", "last_completed", "suspect_rank"])],
    "ingest_audit": [("ingest_audit", "audit", ["source", "kind", "lines_read", "events", "benign", "quarantined"])],
    "quarantine": [("quarantine", "quarantine", ["source", "line_no", "reason", "preview"])],
}
GROUPS = {"ingest_audit": "ingest", "quarantine": "ingest"}
# the nightly run starts 02:15 UTC; events not updated between 02:00 and 04:00 are late
NIGHTLY = dg.FreshnessPolicy.cron(deadline_cron="0 4 * * *", lower_bound_delta=dt.timedelta(hours=2))


@dg.multi_asset(
    specs=[dg.AssetSpec(key, kinds=KINDS, group_name=GROUPS.get(key, "raw"),
                        description=f"lake table(s) {', '.join(t for t, _, _ in tables)}")
           for key, tables in RAW_TABLES.items()],
    partitions_def=landing_partitions,
    can_subset=False,
)
def raw_landing(context: dg.AssetExecutionContext, landing: LandingResource, lake: LakeResource):
    """Parse one landing partition once (``ingest_partition``) and write its raw tables."""
    part = partition_of(context)
    tables = landing.ingest(part)
    for key, outputs in RAW_TABLES.items():
        meta = {}
        for table, attr, cols in outputs:
            df = getattr(tables, attr)
            path = lake.write(table, df, part)
            meta.update({f"{table}/{k}" if len(outputs) > 1 else k: v
                         for k, v in table_metadata(df, path, cols).items()})
        if key == "ingest_audit":
            meta["lines_read"] = dg.MetadataValue.int(int(tables.audit["lines_read"].sum()))
        yield dg.MaterializeResult(asset_key=key, metadata=meta)


@dg.asset(partitions_def=landing_partitions, kinds=KINDS, group_name="core",
          deps=["raw_kernel_events", "raw_job_events", "ingest_audit"], freshness_policy=NIGHTLY)
def core_events(context: dg.AssetExecutionContext, lake: LakeResource) -> dg.MaterializeResult:
    """Every event of the partition (kernel, job, controller), one per event_id, by time."""
    part = partition_of(context)
    df = ingest.core_events(lake.read("raw_kernel_events", part), lake.read("raw_job_events", part))
    path = lake.write("events", df, part)
    by_cat = df.group_by("category").len().sort("len", descending=True).head(8)
    return dg.MaterializeResult(metadata=table_metadata(
        df, path, EVENT_COLS, categories=dg.MetadataValue.json(dict(by_cat.iter_rows()))))


@dg.asset(partitions_def=landing_partitions, kinds=KINDS, group_name="core",
          deps=["raw_slurm_accounting", "raw_flight_recorder", "ingest_audit"])
def core_jobs(context: dg.AssetExecutionContext, lake: LakeResource) -> dg.MaterializeResult:
    """Jobs that ended that day with step counts and the flight recorder's suspect rank."""
    part = partition_of(context)
    df = ingest.core_jobs(lake.read("raw_slurm_jobs", part), lake.read("steps", part),
                          lake.read("flight_recorder", part))
    path = lake.write("jobs", df, part)
    return dg.MaterializeResult(metadata=table_metadata(
        df, path, ["job_id", "state", "n_nodes", "n_steps", "failed_steps", "fr_suspect_rank"]))


@dg.asset(partitions_def=landing_partitions, kinds=KINDS, group_name="core")
def core_inventory(context: dg.AssetExecutionContext, landing: LandingResource,
                   lake: LakeResource) -> dg.MaterializeResult:
    """The cluster's nodes from ``inventory.csv`` as of this day's run (a daily snapshot)."""
    part = partition_of(context)
    try:
        inv, note = landing.inventory(), "inventory.csv"
    except LandingError as exc:           # logs are still worth ingesting without it
        context.log.warning(str(exc))
        inv, note = pl.DataFrame(schema=TABLES["inventory"]).drop("date"), f"missing: {exc}"
    inv = inv.filter((pl.col("provider") == part.provider) & (pl.col("cluster") == part.cluster))
    path = lake.write("inventory", inv, part)
    return dg.MaterializeResult(metadata=table_metadata(
        inv, path, ["rack", "node", "gpus", "gpu_model"], source=dg.MetadataValue.text(note)))
