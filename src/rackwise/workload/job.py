"""The `Job` record: what a user submitted, never what happened to it.

A job's work is measured in iterations. When a trace gives only a duration
and no model, a job's iterations equal its duration in seconds and it runs
at one iteration per second on any placement (`iters_per_s_reference`), so
a simulation without a performance model reproduces the trace's durations.
A performance model may assign a model and recompute `total_iters` from the
throughput the job had where it originally ran.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from operator import attrgetter

from rackwise.frozen import unfrozen_builder


@dataclass(frozen=True, slots=True)
class Parallelism:
    """Degrees of data, tensor and pipeline parallelism; their product is the GPU count."""

    data: int = 1
    tensor: int = 1
    pipeline: int = 1

    @property
    def n_gpus(self) -> int:
        return self.data * self.tensor * self.pipeline


@dataclass(frozen=True, slots=True)
class Job:
    """One training job as submitted.

    Attributes:
        job_id: Unique id within a workload.
        submit_time: Seconds from the start of the workload.
        n_gpus: GPUs the job asks for (gang-scheduled: all or none).
        gpu_share: Share of one GPU the job asks for; below 1 (a fractional
            job) only with ``n_gpus == 1``, and the job then shares a GPU
            with other fractional jobs (`rackwise.cluster.allocation`).
        duration_s: Run time the trace recorded (on its original placement).
        total_iters: Work to do, in iterations; defaults to ``duration_s``.
        group: Virtual cluster, cluster or tenant the job was submitted to.
        user: Submitting user, when the trace knows it.
        model: Model name from the performance catalogue, or ``None``.
        batch_size: Global batch size, when known.
        parallelism: Data/tensor/pipeline degrees.
        comm_sensitivity: 0 (insensitive) .. 1 (communication-bound).
        gradient_bytes: Bytes all-reduced per iteration.
        model_bytes: Checkpoint size, bytes.
        tags: Free-form extra fields a reader kept (string values).
    """

    job_id: str
    submit_time: float
    n_gpus: int
    duration_s: float
    total_iters: float = -1.0
    group: str | None = None
    user: str | None = None
    model: str | None = None
    batch_size: int | None = None
    parallelism: Parallelism | None = None
    comm_sensitivity: float = 0.0
    gradient_bytes: float = 0.0
    model_bytes: float = 0.0
    tags: tuple[tuple[str, str], ...] = field(default=())
    gpu_share: float = 1.0

    def __post_init__(self) -> None:
        if self.total_iters < 0:
            object.__setattr__(self, "total_iters", float(self.duration_s))

    @property
    def gpu_seconds(self) -> float:
        """GPU-seconds the trace recorded for this job (a fractional job counts its share)."""
        return self.n_gpus * self.gpu_share * self.duration_s

    @property
    def is_fractional(self) -> bool:
        """The job asks for a share of one GPU, not for whole GPUs."""
        return self.gpu_share < 1.0

    def with_changes(self, **changes: object) -> Job:
        """A copy with some fields replaced (a `Job` is immutable)."""
        # NOTE: positional, not dataclasses.replace, whose field introspection per
        # call dominated forecasts that rescale thousands of jobs per sample.
        values = list(field_values(self))
        for name, value in changes.items():
            index = FIELD_INDEX.get(name)
            if index is None:
                raise TypeError(f"Job has no field '{name}'")
            values[index] = value
        return build_job(*values)


FIELD_INDEX = {item.name: index for index, item in enumerate(fields(Job))}  # a field's position
field_values = attrgetter(*FIELD_INDEX)  # a job's field values, in their order
# `Job(*values)`, without the frozen class's slow `__init__`: readers and models make one per job.
build_job = unfrozen_builder(Job)
