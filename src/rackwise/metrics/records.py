"""Plain result records: one per finished job, and samples of the cluster over time."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields
from typing import Any, TypeVar, cast

_T = TypeVar("_T")


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


def unfrozen_builder(cls: type[_T]) -> type[_T]:
    """A class whose calls take ``cls``'s arguments and return ``cls`` instances, built faster.

    ``cls`` is a frozen dataclass with slots. Its own ``__init__`` sets each
    field through ``object.__setattr__`` (the frozen class refuses plain
    stores); the builder has the same slots and fields, unfrozen, so its
    ``__init__`` stores them directly, and then gives the instance ``cls``'s
    class (the layouts are the same, so Python allows it). Three to four
    times faster for a record of twenty fields, made once per job.
    """
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or not hasattr(cls, "__slots__"):
        raise TypeError(f"{cls.__name__} is not a frozen dataclass with slots")
    specs: list[tuple[str, Any, Any]] = []
    for spec in fields(cast(Any, cls)):
        if not spec.init or spec.kw_only:
            raise TypeError(f"{cls.__name__}.{spec.name}: only positional init fields are supported")
        specs.append((spec.name, spec.type, dataclasses.field(
            default=spec.default, default_factory=spec.default_factory)))
    post_init = getattr(cls, "__post_init__", None)

    def __post_init__(self: Any) -> None:
        if post_init is not None:
            post_init(self)
        self.__class__ = cls

    builder: type[_T] = dataclasses.make_dataclass(
        f"_Unfrozen{cls.__name__}", specs, slots=True, eq=False, repr=False, match_args=False,
        namespace={"__post_init__": __post_init__, "__module__": cls.__module__})
    if builder.__slots__ != cls.__slots__:  # type: ignore[attr-defined]
        raise TypeError(f"{cls.__name__} has slots beyond its fields")
    return builder


# `JobRecord(...)`, for the simulator's one record per finished job.
build_record = unfrozen_builder(JobRecord)


@dataclass(frozen=True, slots=True)
class Timeline:
    """Cluster samples after every scheduling step (parallel lists)."""

    time: list[float]
    busy_gpus: list[int]
    n_pending: list[int]
    n_running: list[int]
