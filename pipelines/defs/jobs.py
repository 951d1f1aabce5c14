"""The ingest job: everything that turns one landing partition into lake tables and views."""

import dagster as dg

from .ingest.assets import LAKE_ASSETS
from .ingest.checks import LAKE_CHECKS
from .views.assets import out_warehouse

INGEST_ASSETS = [*LAKE_ASSETS, out_warehouse]
INGEST_CHECKS = LAKE_CHECKS

#: a run worker that died (killed, out of memory, its host restarted) is retried from the
#: start, twice at most; a failing asset is not (``run_retries`` in deploy/dagster.yaml).
#: Partitions are replaced atomically, so a rerun gives the same tables.
RETRIES = {"dagster/max_retries": "2", "dagster/retry_strategy": "ALL_STEPS"}

# The steps of a run are sequential (raw -> core -> out): one process per run, not per step.
ingest_job = dg.define_asset_job(
    "ingest_job",
    selection=dg.AssetSelection.assets(*INGEST_ASSETS),
    executor_def=dg.in_process_executor,
    tags=RETRIES,
    description="Ingest one landing partition (date x cluster) and refresh the DuckDB views.",
)

from .analytics.assets import out_analytics, out_report  # noqa: E402

analytics_job = dg.define_asset_job(
    "analytics_job",
    selection=dg.AssetSelection.assets(out_analytics, out_report),
    executor_def=dg.in_process_executor,
    tags=RETRIES,
    description="Recompute incidents, job-failure attribution, rates and lemons over the whole lake; write the report.",
)
