"""rackwise: schedule deep-learning training jobs on GPU clusters, and simulate it first.

The names below are the public API (docs/api.md); each is imported on first
use, so ``import rackwise`` stays light::

    from rackwise import load_trace, make_policy, simulate, uniform_cluster

    jobs = load_trace("philly_2017", first_n=5_000)
    result = simulate(uniform_cluster(16, 8, 4), jobs, make_policy("tiresias"), seed=0)
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

# Public name -> (module, attribute).
_EXPORTS = {
    "simulate": ("rackwise.sim.engine", "simulate"),
    "Simulator": ("rackwise.sim.engine", "Simulator"),
    "SimResult": ("rackwise.sim.engine", "SimResult"),
    "load_trace": ("rackwise.traces.catalog", "load"),
    "trace_names": ("rackwise.traces.catalog", "names"),
    "read_trace": ("rackwise.workload.readers", "read"),
    "Job": ("rackwise.workload.job", "Job"),
    "Workload": ("rackwise.workload.workload", "Workload"),
    "uniform_cluster": ("rackwise.cluster.topology", "uniform_cluster"),
    "load_cluster": ("rackwise.cluster.topology", "load_cluster"),
    "Topology": ("rackwise.cluster.topology", "Topology"),
    "make_policy": ("rackwise.policies.registry", "make_policy"),
    "all_policies": ("rackwise.policies.registry", "all_policies"),
    "BasePolicy": ("rackwise.policies.base", "BasePolicy"),
    "Decisions": ("rackwise.engine.contract", "Decisions"),
    "Start": ("rackwise.engine.contract", "Start"),
    "ClusterView": ("rackwise.engine.view", "ClusterView"),
    "check_policy": ("rackwise.testing", "check_policy"),
    "summarize": ("rackwise.metrics.summary", "summarize"),
}

__all__ = ["__version__", "is_compiled", *_EXPORTS]


def is_compiled() -> bool:
    """Whether this install runs the compiled build of the simulator's hot modules (``setup.py``)."""
    from importlib.util import find_spec

    spec = find_spec("rackwise.sim.engine")
    return spec is not None and spec.origin is not None and not spec.origin.endswith(".py")


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'rackwise' has no attribute '{name}'")
    module, attribute = _EXPORTS[name]
    value = getattr(import_module(module), attribute)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
