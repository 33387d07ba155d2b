"""One simulation run described as data: which jobs, which cluster, which policy.

`RunConfig` is what the CLI flags, an experiment file or a sweep cell turn
into; `execute` builds everything from it and runs the simulator, and
`save` writes the results folder. Every failure of the input is an
`InputError` or `UnknownNameError` raised before anything is written.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rackwise import __version__
from rackwise.cluster.topology import Topology, load_cluster, uniform_cluster
from rackwise.errors import InputError, UnknownNameError, suggest
from rackwise.metrics.output import TableFormat, write_results
from rackwise.metrics.summary import records_frame, summarize, timeline_frame
from rackwise.metrics.tables import records_table, timeline_table
from rackwise.perf.base import PerfModel
from rackwise.policies.registry import make_policy
from rackwise.sim.engine import SimResult, Simulator
from rackwise.workload.job import Job
from rackwise.workload.workload import Workload

PERF_MODELS: dict[str, str] = {
    "ideal": "rackwise.perf.base:IdealPerf",
    "network": "rackwise.perf.model:NetworkPerf",
}

TraceFormat = Literal["csv", "gavel", "philly-json", "philly", "pai", "helios", "sacct", "k8s-pods"]


class WorkloadConfig(BaseModel):
    """Where the jobs come from, and which of them to keep."""

    model_config = ConfigDict(extra="forbid")
    trace: str | None = None  # a shipped trace name
    file: Path | None = None  # or a trace file
    format: TraceFormat = "csv"
    mapping: Path | None = None  # column mapping (YAML) for csv files
    groups: list[str] | None = None
    start_s: float | None = None
    end_s: float | None = None
    first_n: int | None = Field(default=None, gt=0)
    skip_oversized: bool = False
    strict: bool = False  # refuse a trace file at the first row its mapping would skip
    gpu_shares: bool = False  # read requests for part of one GPU as fractional jobs
    # Arrival-rate factor: gaps between submissions are divided by it (1 = as recorded).
    load: float = Field(default=1.0, gt=0)
    # The cluster's log: this many jobs that finished before start_s (see `load_history`).
    history_jobs: int = Field(default=0, ge=0)


class ClusterConfig(BaseModel):
    """A cluster spec file, or a homogeneous cluster from flags."""

    model_config = ConfigDict(extra="forbid")
    spec: Path | None = None
    nodes: int = 64
    gpus_per_node: int = 8
    nodes_per_rack: int = 8
    gpu_type: str = "v100"


class RunConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    workload: WorkloadConfig
    cluster: ClusterConfig = Field(default_factory=ClusterConfig)
    policy: str = "fifo"
    policy_params: dict[str, Any] = Field(default_factory=dict)
    perf: str = "ideal"
    perf_params: dict[str, Any] = Field(default_factory=dict)
    seed: int = 0
    # Seconds a cluster manager takes to launch a started job (`Simulator`'s start_latency_s).
    start_latency_s: float = Field(default=0.0, ge=0.0, allow_inf_nan=False)


def known_gpu_types() -> tuple[str, ...]:
    """GPU types the performance catalogue can price: measured ones and those with a speed-up over V100."""
    from rackwise.perf.config import PerfConfig
    from rackwise.perf.throughput import default_table

    return tuple(sorted({*default_table().gpu_types, *PerfConfig().gpu_speedup_vs_v100}))


def build_cluster(config: ClusterConfig) -> Topology:
    """The cluster of a run; a GPU type the performance catalogue does not know is refused.

    Raises:
        InputError: an unknown GPU type, naming the flag or file and the known types.
    """
    if config.spec is not None:
        topology = load_cluster(config.spec)
        source, where = str(config.spec), "node_groups.gpu_type"
    else:
        topology = uniform_cluster(config.nodes, config.gpus_per_node, config.nodes_per_rack,
                                   config.gpu_type.lower())
        source, where = None, "--gpu-type"
    known = known_gpu_types()
    declared = dict(topology.gpu_speedups)
    unknown = [gpu_type for gpu_type in topology.gpu_types
               if gpu_type not in known and gpu_type not in declared]
    if unknown:
        raise InputError(f"unknown GPU type '{unknown[0]}'; known types: {', '.join(known)}; "
                         f"a cluster file may declare one (gpu_speedup_vs_v100: "
                         f"{{{unknown[0]}: SPEED-UP}})", source=source, field=where)
    return topology


def load_workload(config: WorkloadConfig) -> Workload:
    """Read and filter the jobs a run will use."""
    if (config.trace is None) == (config.file is None):
        raise InputError("give either a shipped trace name or a trace file", field="trace")
    if config.trace is not None:
        from rackwise import traces

        workload = traces.load(config.trace, groups=config.groups, start_s=config.start_s,
                               end_s=config.end_s, first_n=config.first_n)
    else:
        from rackwise.workload import readers

        assert config.file is not None
        workload = readers.read(config.file, config.format, mapping=config.mapping,
                                strict=config.strict, gpu_shares=config.gpu_shares)
        workload = workload.select(groups=config.groups, start_s=config.start_s,
                                   end_s=config.end_s, first_n=config.first_n)
    return scale_arrivals(workload, config.load) if config.load != 1.0 else workload


def load_history(config: WorkloadConfig) -> list[Job]:
    """The log a live cluster would hold when the window opens: the last ``history_jobs``
    jobs of the same trace (and groups) to finish before ``start_s``, in finishing order."""
    if not config.history_jobs:
        return []
    if config.start_s is None:
        raise InputError("a job log is what finished before the window opens: set start_s",
                         field="history_jobs")
    if config.trace is not None:
        from rackwise import traces

        earlier = traces.load(config.trace, groups=config.groups, end_s=config.start_s, rebase=False)
    else:
        from rackwise.workload import readers

        assert config.file is not None
        earlier = readers.read(config.file, config.format, mapping=config.mapping,
                               strict=config.strict, gpu_shares=config.gpu_shares
                               ).select(groups=config.groups, end_s=config.start_s)
    finished = [job for job in earlier if job.submit_time + job.duration_s <= config.start_s]
    finished.sort(key=lambda job: job.submit_time + job.duration_s)
    return finished[-config.history_jobs:]


def scale_arrivals(workload: Workload, load: float) -> Workload:
    """The same jobs arriving ``load`` times as fast: every gap between submissions is divided by it."""
    if not workload.jobs:
        return workload
    first_s = min(job.submit_time for job in workload)
    jobs = tuple(job.with_changes(submit_time=first_s + (job.submit_time - first_s) / load)
                 for job in workload)
    return dataclasses.replace(workload, jobs=jobs)


def make_perf(name: str, params: dict[str, Any]) -> PerfModel:
    if name not in PERF_MODELS:
        raise UnknownNameError(
            f"unknown performance model '{name}'.{suggest(name, list(PERF_MODELS))} "
            f"Known: {', '.join(PERF_MODELS)}")
    module_name, _, attr = PERF_MODELS[name].partition(":")
    cls = getattr(importlib.import_module(module_name), attr)
    try:
        model: PerfModel = cls(**params)
    except TypeError as exc:
        raise InputError(f"performance model '{name}': {exc}", field="perf_params") from None
    return model


def execute(config: RunConfig,
            on_progress: Callable[[int, int], None] | None = None) -> tuple[SimResult, Workload]:
    """Build the run described by ``config`` and simulate it to the end."""
    simulator, workload = build_simulator(config, on_progress=on_progress)
    return simulator.run(), workload


def build_simulator(config: RunConfig, **options: Any) -> tuple[Simulator, Workload]:
    """The simulator of the run ``config`` describes, not yet started, and its workload.

    ``options`` go to `Simulator` (``observers``, ``on_progress``).
    """
    topology = build_cluster(config.cluster)
    workload = load_workload(config.workload)
    if config.workload.skip_oversized:
        workload = workload.drop_oversized(topology.n_gpus)
    workload.check_fits(topology)
    if not len(workload):
        raise InputError("no jobs left after filtering", source=workload.source)
    policy = make_policy(config.policy, **config.policy_params)
    perf = make_perf(config.perf, config.perf_params)
    history = [job for job in load_history(config.workload) if job.n_gpus <= topology.n_gpus]
    simulator = Simulator(topology, workload, policy, perf=perf, seed=config.seed,
                          history=history, start_latency_s=config.start_latency_s, **options)
    return simulator, workload


def summary_of(result: SimResult, config: RunConfig,
               workload: Workload | None = None) -> dict[str, Any]:
    """Figures, plus what produced them (and the trace rows left out), for ``summary.json``."""
    skipped = dict(workload.skipped_by_reason) if workload is not None else {}
    return {
        "skipped_rows": skipped,
        "rounded_up_rows": workload.n_rounded_up if workload is not None else 0,
        "figures": summarize(result.records, result.timeline, result.topology.n_gpus),
        "config": config.model_dump(mode="json"),
        "policy": repr(result.policy),
        "cluster": result.topology.describe(),
        "n_steps": result.n_steps,
        "wall_time_s": round(result.wall_time_s, 3),
        "rackwise_version": __version__,
    }


def save(result: SimResult, config: RunConfig, out_dir: str | Path,
         fmt: TableFormat = "parquet", workload: Workload | None = None,
         summary: dict[str, Any] | None = None) -> Path:
    """Write ``jobs``, ``timeline`` and ``summary.json`` into ``out_dir``.

    ``summary``: what `summary_of` gave for this run, if the caller has it already.
    Parquet tables are built by pyarrow alone (pandas reads them back as the frames
    `records_frame` and `timeline_frame` make); CSV goes through pandas.
    """
    tables: dict[str, Any]
    if fmt == "parquet":
        tables = {"jobs": records_table(result.records), "timeline": timeline_table(result.timeline)}
    else:
        tables = {"jobs": records_frame(result.records), "timeline": timeline_frame(result.timeline)}
    if summary is None:
        summary = summary_of(result, config, workload)
    return write_results(out_dir, tables, summary, fmt=fmt)
