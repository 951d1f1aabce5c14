"""Landing partition -> lake tables: raw_ (as parsed) then core_ (combined, enriched). Every
asset handles all the partitions of its run: one for the schedule and the sensor, a range of
one cluster's days for backfills and ``faultline run`` (``partitions.BATCH``)."""

import datetime as dt

import dagster as dg
import polars as pl

from ...ingest import partition as ingest
from ...ingest.landing import LandingError
from ...schema import TABLES
from ..metadata import Written, batch_metadata
from ..partitions import BATCH, landing_partitions, partitions_of
from ..resources import LakeResource, LandingResource

KINDS = {"polars", "parquet"}
EVENT_COLS = ["ts", "node", "job_id", "category", "severity", "xid", "template"]

#: asset -> (lake table, preview columns) for the tables one landing parse produces
RAW_TABLES = {
    "raw_kernel_events": [("raw_kernel_events", "kernel_events", EVENT_COLS)],
    "raw_job_events": [("raw_job_events", "job_events", EVENT_COLS)],
    "raw_slurm_accounting": [
        ("raw_slurm_jobs", "jobs", ["job_id", "state", "nodelist", "start", "end"]),
        ("steps", "steps", ["job_id", "step", "state", "exit_code"]),
    ],
    "raw_flight_recorder": [("flight_recorder", "flight", ["job_id", "rank", "last_completed", "suspect_rank"])],
    "raw_job_markers": [("job_markers", "markers", ["job_id", "ts", "marker", "step", "path"])],
    "ingest_audit": [("ingest_audit", "audit", ["source", "kind", "lines_read", "events", "benign", "quarantined"])],
    "quarantine": [("quarantine", "quarantine", ["source", "line_no", "reason", "preview"])],
}
GROUPS = {"ingest_audit": "ingest", "quarantine": "ingest"}
# the nightly run starts 02:15 UTC; events not updated between 02:00 and 04:00 are late
NIGHTLY = dg.FreshnessPolicy.cron(deadline_cron="0 4 * * *", lower_bound_delta=dt.timedelta(hours=2))


@dg.multi_asset(
    specs=[
        dg.AssetSpec(
            key,
            kinds=KINDS,
            group_name=GROUPS.get(key, "raw"),
            description=f"lake table(s) {', '.join(t for t, _, _ in tables)}",
        )
        for key, tables in RAW_TABLES.items()
    ],
    partitions_def=landing_partitions,
    backfill_policy=BATCH,
    can_subset=False,
)
def raw_landing(context: dg.AssetExecutionContext, landing: LandingResource, lake: LakeResource):
    """Parse each landing partition once (``ingest_partition``) and write its raw tables."""
    written: dict[str, list] = {t: [] for outputs in RAW_TABLES.values() for t, _, _ in outputs}
    lines = 0
    with lake.writer() as out:  # the next partition parses while this one is written
        for part in partitions_of(context):
            tables = landing.ingest(part)
            frames = {table: getattr(tables, attr) for outputs in RAW_TABLES.values() for table, attr, _ in outputs}
            for table, path in out.write(frames, part).items():
                written[table].append(Written.of(part.relpath, frames[table], path))
            lines += int(tables.audit["lines_read"].sum())
    for key, outputs in RAW_TABLES.items():
        meta = {}
        for table, _, cols in outputs:
            meta.update(
                {f"{table}/{k}" if len(outputs) > 1 else k: v for k, v in batch_metadata(written[table], cols).items()}
            )
        if key == "ingest_audit":
            meta["lines_read"] = dg.MetadataValue.int(lines)
        yield dg.MaterializeResult(asset_key=key, metadata=meta)


@dg.asset(
    partitions_def=landing_partitions,
    kinds=KINDS,
    group_name="core",
    backfill_policy=BATCH,
    deps=["raw_kernel_events", "raw_job_events", "ingest_audit"],
    freshness_policy=NIGHTLY,
)
def core_events(context: dg.AssetExecutionContext, lake: LakeResource) -> dg.MaterializeResult:
    """Every event of the partition (kernel, job, controller), one per event_id, by time."""
    written, cats = [], {}
    with lake.writer() as out:
        for part in partitions_of(context):
            df = ingest.core_events(lake.read("raw_kernel_events", part), lake.read("raw_job_events", part))
            written.append(Written.of(part.relpath, df, out.write({"events": df}, part)["events"]))
            for cat, n in df.group_by("category").len().iter_rows():
                cats[cat] = cats.get(cat, 0) + n
    top = dict(sorted(cats.items(), key=lambda kv: (-kv[1], str(kv[0])))[:8])
    return dg.MaterializeResult(metadata=batch_metadata(written, EVENT_COLS, categories=dg.MetadataValue.json(top)))


@dg.asset(
    partitions_def=landing_partitions,
    kinds=KINDS,
    group_name="core",
    backfill_policy=BATCH,
    deps=["raw_slurm_accounting", "raw_flight_recorder", "ingest_audit"],
)
def core_jobs(context: dg.AssetExecutionContext, lake: LakeResource) -> dg.MaterializeResult:
    """Jobs that ended that day with step counts and the flight recorder's suspect rank."""
    written = []
    with lake.writer() as out:
        for part in partitions_of(context):
            df = ingest.core_jobs(
                lake.read("raw_slurm_jobs", part), lake.read("steps", part), lake.read("flight_recorder", part)
            )
            written.append(Written.of(part.relpath, df, out.write({"jobs": df}, part)["jobs"]))
    return dg.MaterializeResult(
        metadata=batch_metadata(written, ["job_id", "state", "n_nodes", "n_steps", "failed_steps", "fr_suspect_rank"])
    )


@dg.asset(partitions_def=landing_partitions, kinds=KINDS, group_name="core", backfill_policy=BATCH)
def core_inventory(
    context: dg.AssetExecutionContext, landing: LandingResource, lake: LakeResource
) -> dg.MaterializeResult:
    """The cluster's nodes from ``inventory.csv`` as of this day's run (a daily snapshot)."""
    try:
        inv, problems = landing.inventory()
        note = "inventory.csv" + (f" ({len(problems)} rows left out or values ignored)" if problems else "")
        for line in problems:
            context.log.warning(line)
    except LandingError as exc:  # logs are still worth ingesting without it
        context.log.warning(str(exc))
        inv, note = pl.DataFrame(schema=TABLES["inventory"]).drop("date"), f"missing: {exc}"
    written = []
    with lake.writer() as out:
        for part in partitions_of(context):
            df = inv.filter((pl.col("provider") == part.provider) & (pl.col("cluster") == part.cluster))
            written.append(Written.of(part.relpath, df, out.write({"inventory": df}, part)["inventory"]))
    return dg.MaterializeResult(
        metadata=batch_metadata(written, ["rack", "node", "gpus", "gpu_model"], source=dg.MetadataValue.text(note))
    )


#: what one landing partition becomes in the lake (the view file is ``out_warehouse``'s)
LAKE_ASSETS = [raw_landing, core_events, core_jobs, core_inventory]
