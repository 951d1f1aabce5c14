"""The ingest job: everything that turns one landing partition into lake tables and views."""

import dagster as dg

from .ingest.assets import LAKE_ASSETS
from .ingest.checks import LAKE_CHECKS
from .views.assets import out_warehouse

INGEST_ASSETS = [*LAKE_ASSETS, out_warehouse]
INGEST_CHECKS = LAKE_CHECKS

ingest_job = dg.define_asset_job(
    "ingest_job",
    selection=dg.AssetSelection.assets(*INGEST_ASSETS),
    description="Ingest one landing partition (date x cluster) and refresh the DuckDB views.",
)

from .analytics.assets import out_analytics, out_report  # noqa: E402

analytics_job = dg.define_asset_job(
    "analytics_job",
    selection=dg.AssetSelection.assets(out_analytics, out_report),
    description="Recompute incidents, job-failure attribution, rates and lemons over the whole lake; write the report.",
)
