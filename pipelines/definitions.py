"""The Dagster code location: everything is loaded from this package's own ``defs/``
(``pipelines.defs`` under dg, ``faultline.defs`` installed), from any working directory."""

import importlib
from pathlib import Path

import dagster as dg


@dg.definitions
def defs() -> dg.Definitions:
    here = Path(__file__).parent
    return dg.ComponentTree.from_module(
        defs_module=importlib.import_module(f"{__package__}.defs"), project_root=here
    ).build_defs()
