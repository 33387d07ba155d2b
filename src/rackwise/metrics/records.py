"""Plain result records: one per finished job, and samples of the cluster over time."""

from __future__ import annotations

from dataclasses import dataclass, fields

from rackwise.frozen import unfrozen_builder


@dataclass(frozen=True, slots=True)
class JobRecord:
    """What happened to one job. Times are seconds from the start of the workload."""

    job_id: str
    group: str | None
    model: str | None
    n_gpus: int
    submit_time: float
    first_start: float
    finish_time: float
    jct_s: float
    queueing_delay_s: float  # all time spent pending, before and between runs
    run_time_s: float  # wall time holding GPUs, restores included
    overhead_s: float  # of which restoring checkpoints after preemptions
    gpu_s: float  # GPU-seconds held
    n_preemptions: int
    n_nodes: int  # spread of the placement it finished on
    n_racks: int
    duration_s: float  # as the trace recorded it
    total_iters: float
    comm_s: float = 0.0  # seconds communicating (0 unless the performance model tracks it)
    comm_extra_s: float = 0.0  # of which beyond a fully consolidated placement
    lost_s: float = 0.0  # run time whose progress a failure threw away (in run_time_s)

    @classmethod
    def columns(cls) -> list[str]:
        return [f.name for f in fields(cls)]


# `JobRecord(...)`, for the simulator's one record per finished job.
build_record = unfrozen_builder(JobRecord)


@dataclass(frozen=True, slots=True)
class Timeline:
    """Cluster samples after every scheduling step (parallel lists)."""

    time: list[float]
    busy_gpus: list[int]
    n_pending: list[int]
    n_running: list[int]
