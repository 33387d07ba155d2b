"""One seed, independent generators: the performance model's and the policy's (and the log's).

The simulator and every live driver draw them here, so a policy given the
same seed makes the same random choices wherever it runs.
"""

from __future__ import annotations

import numpy as np


def run_generators(seed: int) -> tuple[np.random.Generator, np.random.Generator]:
    """``(perf_rng, policy_rng)`` for a run seeded with ``seed``."""
    perf_seed, policy_seed = np.random.SeedSequence(seed).spawn(2)
    return np.random.default_rng(perf_seed), np.random.default_rng(policy_seed)


def history_rng(seed: int) -> np.random.Generator:
    """A third stream, for the performance model to prepare a run's job log (`Simulator` history).

    Separate, so a run given a log draws the same for its own jobs as one without.
    """
    return np.random.default_rng(np.random.SeedSequence(seed).spawn(3)[2])


def policy_rng(seed: int) -> np.random.Generator:
    """The policy's generator for ``seed`` (the second of `run_generators`)."""
    return run_generators(seed)[1]
