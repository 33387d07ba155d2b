"""`Placed`: what stays fixed while a job runs on one placement, and its comm helpers."""

from __future__ import annotations

from typing import TypeGuard

from mypy_extensions import mypyc_attr

from rackwise.perf.comm import Level
from rackwise.workload.job import Parallelism


def is_mixed(par: Parallelism | None, n_gpus: int) -> TypeGuard[Parallelism]:
    """A job priced on its worker mapping: tensor or pipeline parallel over all its GPUs."""
    return par is not None and par.n_gpus == n_gpus and (par.tensor > 1 or par.pipeline > 1)


def comm_pair(comm_s: float, ref_comm_s: float) -> tuple[float, float]:
    """(communication, of which beyond the consolidated placement) per step."""
    extra = comm_s - ref_comm_s
    return comm_s, extra if extra > 0.0 else 0.0


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Placed:
    """A job on a placement: what stays fixed while it runs there."""

    __slots__ = (
        "bandwidth",
        "base_gbps",
        "coeff",
        "comm_pair",
        "compute_s",
        "copies",
        "cross_terms",
        "crosses",
        "dyn_bits",
        "factor",
        "gpu_ids",
        "gpu_type",
        "ideal_rate",
        "job_id",
        "level",
        "listed",
        "model",
        "model_id",
        "node_factors",
        "node_gpus",
        "nodes",
        "partner",
        "racks",
        "rate",
        "ref_comm_s",
        "static_comm_s",
    )

    job_id: str
    model: str
    gpu_ids: tuple[int, ...]
    nodes: tuple[int, ...]
    node_gpus: tuple[int, ...]
    racks: tuple[int, ...]
    level: Level
    gpu_type: str
    compute_s: float
    dyn_bits: float  # bits through the bottleneck per step, after overlap
    base_gbps: float
    ref_comm_s: float
    # Communication per step that no uplink share changes: all of it unless `crosses`,
    # else the fixed and latency parts (the shared uplink's part is added per rating).
    static_comm_s: float
    comm_pair: tuple[float, float]  # (comm, beyond consolidated) per step, unless `crosses`
    ideal_rate: float  # > 0 only for jobs without a catalogue model
    node_factors: list[float]  # interference factor per node while indexed, if on several nodes
    factor: float  # interference factor of its slowest node, which sets the pace
    coeff: list[float]  # interference weight of each neighbour, by its model's id (`Weights`)
    model_id: int  # its model's id in `Weights`
    rate: float  # last rate reported to the engine
    listed: int  # the last re-rating that listed it to re-rate (`running_index.Affected`), 0: none
    crosses: bool  # its ring goes through rack uplinks
    bandwidth: float  # least bandwidth of its links now, Gb/s (kept by `RunningIndex` while it crosses racks)
    # Mixed-parallel jobs that cross racks: (link seconds, cross-rack bits) per kind of
    # traffic, each priced as the slower of the two; None for data-parallel jobs (set
    # only where `crosses` is read).
    cross_terms: tuple[tuple[float, float], ...] | None
    # The job sharing its GPUs (space sharing), whose slowdown the engine's pair
    # factor prices: left out of the node's neighbours, or it would count twice.
    partner: str | None
    # A forked job's copies, each on its n GPUs (None: not forked). The job's own
    # `crosses` and `racks` then cover only the copies that span racks.
    copies: tuple[Placed, ...] | None

