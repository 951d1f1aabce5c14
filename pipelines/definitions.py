"""The Dagster code location: everything is loaded from ``defs/``.

The defs module is this package's own (``pipelines.defs`` under dg, ``faultline.defs`` when
installed), so the location loads from any working directory, a checkout or not.
"""

import importlib
from pathlib import Path

import dagster as dg


@dg.definitions
def defs() -> dg.Definitions:
    here = Path(__file__).parent
    return dg.ComponentTree.from_module(
        defs_module=importlib.import_module(f"{__package__}.defs"), project_root=here
    ).build_defs()
