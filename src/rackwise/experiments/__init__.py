"""Experiments: grids of simulation runs described in YAML, run locally or on Ray.

``load_experiment`` reads a file, ``plan`` checks and expands it into cells,
``run_cells`` runs what has not finished yet and gathers one table; see
``docs/experiments.md``.
"""

from __future__ import annotations

from rackwise.experiments.config import Experiment, load_experiment
from rackwise.experiments.grid import Cell, expand, plan
from rackwise.experiments.runner import SweepOutcome, run_cells

__all__ = ["Cell", "Experiment", "SweepOutcome", "expand", "load_experiment", "plan", "run_cells"]
