"""rackwise: schedule deep-learning training jobs on GPU clusters, and simulate it first."""

from __future__ import annotations

__version__ = "0.1.0"
