"""The lake job the launchers run: the ingest assets and checks, less ``out_warehouse`` (the
caller rebuilds the view file once, as the one DuckDB writer), resources pointed at folders."""

import dagster as dg

from ..resources import LakeResource, LandingResource
from .assets import LAKE_ASSETS
from .checks import LAKE_CHECKS


def build_lake_job(
    landing: str,
    warehouse: str,
    models_dir: str | None = None,
    *,
    name: str = "faultline_lake",
    executor_def: dg.ExecutorDefinition | None = None,
    description: str | None = None,
) -> dg.JobDefinition:
    """The resolved job (what ``dg.materialize`` would rebuild and validate for every run)."""
    job = dg.define_asset_job(
        name, selection=dg.AssetSelection.assets(*LAKE_ASSETS), executor_def=executor_def, description=description
    )
    defs = dg.Definitions(
        assets=LAKE_ASSETS,
        asset_checks=LAKE_CHECKS,
        jobs=[job],
        resources={
            "landing": LandingResource(path=landing, models_dir=models_dir),
            "lake": LakeResource(warehouse=warehouse),
        },
    )
    return defs.resolve_job_def(name)
