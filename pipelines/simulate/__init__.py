"""Fleet simulator: writes a landing folder (kernel, Slurm and job logs in real formats) plus ``_truth/``:
``simulate("out/landing", scenario="demo", seed=0)``; scenarios in ``SCENARIOS`` (TRUTH.md)."""

from .run import simulate
from .scenarios import SCENARIOS, Scenario

__all__ = ["simulate", "SCENARIOS", "Scenario"]
