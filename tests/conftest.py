"""Shared test configuration: hypothesis profiles.

Pick one with ``--hypothesis-profile``: ``dev`` (a handful of examples, for
editing), ``ci`` (the default) or ``soak`` (100,000 examples, for a long run).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings

_COMMON = {
    "deadline": None,  # wall time on a shared 2-core machine says nothing
    "suppress_health_check": [HealthCheck.too_slow],
    "print_blob": True,
}

settings.register_profile("dev", max_examples=10, **_COMMON)
# Derandomized: CI runs the same examples every time, so a run is reproducible;
# `soak` explores new ones.
settings.register_profile("ci", max_examples=60, derandomize=True, **_COMMON)
settings.register_profile("soak", max_examples=100_000, **_COMMON)
settings.load_profile("ci")


def pytest_configure(config: pytest.Config) -> None:
    """Load the profile named on the command line, else ``ci``."""
    try:
        name = config.getoption("--hypothesis-profile")
    except ValueError:  # hypothesis' plugin not loaded
        name = None
    settings.load_profile(name or "ci")
