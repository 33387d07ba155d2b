"""`Workload`: an ordered, immutable list of jobs that remembers where it came from.

Readers return one, so that a later check (a job larger than the cluster)
can point at the file, line and column the job was read from.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Protocol, overload

from rackwise.errors import InputError, UnknownNameError, suggest
from rackwise.workload.job import Job


class Cluster(Protocol):
    """What `Workload.check_fits` needs of a cluster (a `rackwise.cluster.topology.Topology` is one)."""

    @property
    def name(self) -> str: ...

    @property
    def n_gpus(self) -> int: ...


@dataclass(frozen=True, slots=True, repr=False)
class Workload(Sequence[Job]):
    """Jobs in submission order, with their provenance.

    Attributes:
        jobs: The jobs.
        name: Short label (a trace name, a file stem, ``"synthetic"``).
        source: The file path or trace name the jobs were read from.
        lines: Source line of each job (1-based, a header counts as line 1;
            0 when unknown). Empty means unknown for every job.
        n_gpus_field: Name of the source column or key that gave ``n_gpus``,
            so errors about a job's size point at it.
        n_skipped: Records the reader left out (incomplete or unusable).
        skipped_by_reason: ``(reason, count)`` pairs of the records left out
            by declared filters, in the order the filters run.
        n_rounded_up: Records whose fractional GPU count was rounded up to
            whole GPUs (kept, but asking for more than the trace says).
    """

    jobs: tuple[Job, ...]
    name: str = "workload"
    source: str = ""
    lines: tuple[int, ...] = ()
    n_gpus_field: str = "n_gpus"
    n_skipped: int = 0
    skipped_by_reason: tuple[tuple[str, int], ...] = ()
    n_rounded_up: int = 0

    def __post_init__(self) -> None:
        if not self.lines:
            object.__setattr__(self, "lines", (0,) * len(self.jobs))
        elif len(self.lines) != len(self.jobs):
            raise ValueError(f"{len(self.lines)} line numbers for {len(self.jobs)} jobs")

    def __repr__(self) -> str:
        return (f"Workload(name={self.name!r}, source={self.source!r}, "
                f"{len(self.jobs)} jobs, n_skipped={self.n_skipped})")

    def __len__(self) -> int:
        return len(self.jobs)

    @overload
    def __getitem__(self, index: int) -> Job: ...

    @overload
    def __getitem__(self, index: slice) -> Workload: ...

    def __getitem__(self, index: int | slice) -> Job | Workload:
        if isinstance(index, slice):
            return self._keep(range(len(self.jobs))[index])
        return self.jobs[index]

    def __iter__(self) -> Iterator[Job]:
        return iter(self.jobs)

    def check_fits(self, topology: Cluster) -> None:
        """Raise `InputError` for the first job asking more GPUs than ``topology`` has."""
        capacity = topology.n_gpus
        for job, line in zip(self.jobs, self.lines):
            if job.n_gpus > capacity:
                raise InputError(
                    f"job {job.job_id!r} asks for {job.n_gpus} GPUs but cluster "
                    f"{topology.name!r} has {capacity}; use a larger cluster, or drop such jobs "
                    f"(--skip-oversized)",
                    source=self.source or self.name, line=line or None, field=self.n_gpus_field)

    def drop_oversized(self, n_gpus: int) -> Workload:
        """A copy without the jobs that ask for more than ``n_gpus`` GPUs, counted as ``oversized``."""
        kept = self._keep([i for i, job in enumerate(self.jobs) if job.n_gpus <= n_gpus])
        dropped = len(self.jobs) - len(kept.jobs)
        return replace(kept, n_skipped=kept.n_skipped + dropped,
                       skipped_by_reason=(*kept.skipped_by_reason, ("oversized", dropped)))

    def select(self, *, groups: str | Iterable[str] | None = None, start_s: float | None = None,
               end_s: float | None = None, first_n: int | None = None) -> Workload:
        """The jobs that pass every given filter, in this workload's order.

        Args:
            groups: Keep jobs whose ``group`` is one of these.
            start_s: Keep jobs submitted at or after this time.
            end_s: Keep jobs submitted before this time.
            first_n: Of those, keep the ``first_n`` earliest submissions.

        Raises:
            UnknownNameError: a group no job belongs to.
            InputError: ``first_n`` below 1 or ``end_s`` not after ``start_s``.
        """
        keep = list(range(len(self.jobs)))
        if groups is not None:
            wanted = {groups} if isinstance(groups, str) else set(groups)
            known = sorted({job.group for job in self.jobs if job.group is not None})
            for group in sorted(wanted):
                if group not in known:
                    raise UnknownNameError(
                        f"{self.source or self.name} has no group {group!r}."
                        f"{suggest(group, known)} Groups: {', '.join(known)}")
            keep = [i for i in keep if self.jobs[i].group in wanted]
        if start_s is not None and end_s is not None and end_s <= start_s:
            raise InputError(f"end_s ({end_s}) must be after start_s ({start_s})", field="end_s")
        if start_s is not None:
            keep = [i for i in keep if self.jobs[i].submit_time >= start_s]
        if end_s is not None:
            keep = [i for i in keep if self.jobs[i].submit_time < end_s]
        if first_n is not None:
            if first_n < 1:
                raise InputError(f"must be at least 1, got {first_n}", field="first_n")
            earliest = sorted(keep, key=lambda i: self.jobs[i].submit_time)[:first_n]
            keep = sorted(earliest)
        return self if len(keep) == len(self.jobs) else self._keep(keep)

    def _keep(self, indices: Sequence[int]) -> Workload:
        return replace(self, jobs=tuple(self.jobs[i] for i in indices),
                       lines=tuple(self.lines[i] for i in indices))
