"""The one check of a policy's decisions, run whole before anything is carried out.

The simulator and the live driver both call `check_decisions`; a decision
either passes as a whole or raises `InvalidDecisionError` with nothing
applied. The check replays the decision in order on a light overlay of the
view (preemptions first, then starts, as engines apply them), so a migration
may reuse the GPUs it frees and a job may start beside one started just
before it in the same decision.
"""

from __future__ import annotations

from collections.abc import Callable, Container
from dataclasses import dataclass
from typing import Any, NoReturn

from mypy_extensions import mypyc_attr

from rackwise.cluster.allocation import SLICED, SLICES_PER_GPU, slices_of
from rackwise.engine.contract import Decisions, Start
from rackwise.engine.view import ClusterView
from rackwise.errors import InvalidDecisionError
from rackwise.frozen import pickled_by_constructor
from rackwise.workload.state import state_of

ONLY_IN_SIMULATION = "runs only in the simulator (a real cluster gives a GPU to one job at a time)"


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True, slots=True)
class EngineSupport:
    """What an engine can carry out beyond plain starts and preemptions.

    Each field is None where the engine supports it, or the reason it does not.
    """

    forking_refused: str | None = f"a forked job (copies > 1) {ONLY_IN_SIMULATION}"
    sharing_refused: str | None = f"space sharing {ONLY_IN_SIMULATION}"
    fractions_refused: str | None = f"a fractional job {ONLY_IN_SIMULATION}"

    def __reduce__(self) -> tuple[type, tuple[Any, ...]]:
        return pickled_by_constructor(self)


LIVE_CLUSTER = EngineSupport()

_Reject = Callable[[str], NoReturn]


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(slots=True)
class _Placed:
    gpu_ids: tuple[int, ...]
    n_gpus: int
    copies: int
    slices: int = 0  # of its one GPU, for a fractional job


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class _Replay:
    """The view as it would be after each decision so far (nothing in the view changes)."""

    def __init__(self, view: ClusterView) -> None:
        self.view = view
        self.owner: dict[int, str | None] = {}
        self.partner: dict[str, str | None] = {}
        self.started: dict[str, _Placed] = {}
        self.stopped: set[str] = set()
        self.room: dict[int, int] = {}  # split GPUs whose free slices changed

    def is_running(self, job_id: str) -> bool:
        return job_id in self.started or (job_id in self.view.running and job_id not in self.stopped)

    def is_pending(self, job_id: str) -> bool:
        return job_id not in self.started and (job_id in self.view.pending or job_id in self.stopped)

    def owner_of(self, gpu: int) -> str | None:
        return self.owner[gpu] if gpu in self.owner else self.view.owner_of(gpu)

    def partner_of(self, job_id: str) -> str | None:
        if job_id in self.partner:
            return self.partner[job_id]
        state = state_of(self.view.running, job_id)
        return state.partner if state is not None else None

    def room_on(self, gpu: int) -> int | None:
        return self.room[gpu] if gpu in self.room else self.view.room_on(gpu)

    def placed(self, job_id: str) -> _Placed:
        if job_id in self.started:
            return self.started[job_id]
        state = self.view.running[job_id]
        job = state.job
        return _Placed(state.gpu_ids, state.n_gpus, state.copies,
                       slices_of(job.gpu_share) if job.is_fractional else 0)

    def preempt(self, job_id: str) -> None:
        placed = self.placed(job_id)
        if placed.slices:
            gpu = placed.gpu_ids[0]
            room = self.room[gpu] = self.room_on(gpu) + placed.slices  # type: ignore[operator]
            if room == SLICES_PER_GPU:
                self.owner[gpu] = None
            self.started.pop(job_id, None)
            self.stopped.add(job_id)
            return
        partner = self.partner_of(job_id)
        for gpu in self.placed(job_id).gpu_ids:
            self.owner[gpu] = partner  # a partner runs on alone on the GPUs; else they are free
        if partner is not None:
            self.partner[partner] = None
        self.partner[job_id] = None
        self.started.pop(job_id, None)
        self.stopped.add(job_id)

    def start_slices(self, start: Start, slices: int) -> None:
        gpu = start.gpu_ids[0]
        room = self.room_on(gpu)
        self.owner[gpu] = SLICED
        self.room[gpu] = (SLICES_PER_GPU if room is None else room) - slices
        self.started[start.job_id] = _Placed(start.gpu_ids, 1, 1, slices)

    def start(self, start: Start, n_gpus: int) -> None:
        self.started[start.job_id] = _Placed(start.gpu_ids, n_gpus, start.copies)
        self.partner[start.job_id] = start.beside
        if start.beside is None:
            for gpu in start.gpu_ids:
                self.owner[gpu] = start.job_id
        else:
            self.partner[start.beside] = start.job_id


def check_decisions(view: ClusterView, decisions: Decisions, policy_name: str, now: float, *,
                    finished: Container[str] = (), support: EngineSupport = LIVE_CLUSTER) -> None:
    """Raise `InvalidDecisionError` unless the engine can carry out ``decisions`` whole.

    Args:
        view: The cluster as the policy saw it (left unchanged).
        decisions: What the policy answered.
        policy_name: Named in the error.
        now: The engine's clock, named in the error.
        finished: Jobs that have finished (so the error can say so).
        support: What the engine can do beyond plain starts (default: a real cluster's).
    """

    def reject(reason: str) -> NoReturn:
        raise InvalidDecisionError(f"policy '{policy_name}' at t={now:.3f} s: {reason}")

    if (decisions.preempt or decisions.start) and not _plain_decision_fits(view, decisions, support):
        _check_by_replay(view, decisions, finished, support, reject)
    if decisions.wake_at is not None and not decisions.wake_at > now:
        reject(f"wake_at={decisions.wake_at} is not after now")


def _check_by_replay(view: ClusterView, decisions: Decisions, finished: Container[str],
                     support: EngineSupport, reject: _Reject) -> None:
    """Preemptions, then starts, in order, on an overlay of the view; the first wrong one is rejected."""
    replay = _Replay(view)
    for job_id in decisions.preempt:
        if not replay.is_running(job_id):
            reject(f"cannot preempt job {job_id}: it is not running")
        replay.preempt(job_id)
    n_gpus_total = view.topology.n_gpus
    for start in decisions.start:
        job_id = start.job_id
        if not replay.is_pending(job_id):
            if job_id in replay.started:
                reject(f"cannot start job {job_id} twice in one decision")
            where = ("running" if replay.is_running(job_id) else
                     "finished" if job_id in finished else "not in the queue")
            reject(f"cannot start job {job_id}: it is {where}")
        state = view.pending[job_id] if job_id in view.pending else view.running[job_id]
        n_gpus = state.job.n_gpus
        if state.job.is_fractional:
            _check_fractional(replay, start, state.job.gpu_share, support, reject)
            continue
        if start.beside is None:
            copies = start.copies
            if copies < 1:
                reject(f"job {job_id}: copies must be >= 1, got {copies}")
            if copies > 1 and support.forking_refused is not None:
                reject(f"job {job_id}: {support.forking_refused}")
            gpus = start.gpu_ids
            if len(gpus) != n_gpus * copies or len(set(gpus)) != len(gpus):
                reject(f"job {job_id} needs {n_gpus * copies} distinct GPUs "
                       f"({copies} cop{'y' if copies == 1 else 'ies'}), got {list(gpus)}")
            for gpu in gpus:
                if not 0 <= gpu < n_gpus_total:
                    reject(f"job {job_id}: GPU {gpu} does not exist")
                holder = replay.owner_of(gpu)
                if holder is not None:
                    reject(f"job {job_id}: GPU {gpu} is held by job {holder}")
        else:
            _check_pair(replay, start, n_gpus, support, reject)
        replay.start(start, n_gpus)


def _plain_decision_fits(view: ClusterView, decisions: Decisions, support: EngineSupport = LIVE_CLUSTER) -> bool:
    """True when every preemption stops a distinct running job that holds its GPUs alone, and
    every start is a plain one of a distinct waiting (or just stopped) job on GPUs free or freed
    (forked into copies, one block of its GPU count each, where ``support`` takes forks).

    The common decision, checked in one pass; anything else goes through the
    replay, which also words the error.
    """
    forks = support.forking_refused is None
    owners, pending, running = view.owners, view.pending, view.running
    freed: set[int] = set()
    stopped: set[str] = set()
    for job_id in decisions.preempt:
        state = state_of(running, job_id)
        if state is None or job_id in stopped or state.partner is not None or state.job.gpu_share < 1.0:
            return False
        stopped.add(job_id)
        freed.update(state.gpu_ids)
    n_gpus = len(owners)
    taken: set[int] = set()
    started: set[str] = set()
    for start in decisions.start:
        job_id, gpu_ids = start.job_id, start.gpu_ids
        state = state_of(pending, job_id)
        if state is None and job_id in stopped:
            state = running[job_id]
        copies = start.copies
        if state is None or start.beside is not None or copies < 1 or (copies > 1 and not forks):
            return False
        job = state.job
        if len(gpu_ids) != job.n_gpus * copies or job.gpu_share < 1.0:  # a fractional job: the replay
            return False
        for gpu in gpu_ids:
            if not 0 <= gpu < n_gpus or (owners[gpu] is not None and gpu not in freed):
                return False
        # a GPU twice (in one start or two), or a job started twice, does not add to the sets
        n_taken, n_started = len(taken), len(started)
        taken.update(gpu_ids)
        started.add(job_id)
        if len(taken) != n_taken + len(gpu_ids) or len(started) == n_started:
            return False
    return True


def _check_fractional(replay: _Replay, start: Start, share: float, support: EngineSupport,
                      reject: _Reject) -> None:
    job_id = start.job_id
    if support.fractions_refused is not None:
        reject(f"job {job_id} asks for {share:g} of a GPU: {support.fractions_refused}")
    if start.beside is not None or start.copies != 1 or len(start.gpu_ids) != 1:
        reject(f"job {job_id} asks for {share:g} of a GPU, so it starts on exactly one GPU, "
               f"unforked and beside no partner; got {list(start.gpu_ids)}")
    gpu = start.gpu_ids[0]
    if not 0 <= gpu < replay.view.topology.n_gpus:
        reject(f"job {job_id}: GPU {gpu} does not exist")
    holder, room, slices = replay.owner_of(gpu), replay.room_on(gpu), slices_of(share)
    if holder is not None and (holder != SLICED or room is None or room < slices):
        reject(f"job {job_id}: GPU {gpu} has no room for {share:g} of a GPU "
               f"(held by {holder}, {room or 0} of {SLICES_PER_GPU} slices free)")
    replay.start_slices(start, slices)


def _check_pair(replay: _Replay, start: Start, n_gpus: int, support: EngineSupport,
                reject: _Reject) -> None:
    job_id, host = start.job_id, start.beside
    assert host is not None
    if support.sharing_refused is not None:
        reject(f"job {job_id} cannot share GPUs: {support.sharing_refused}")
    if not replay.is_running(host):
        reject(f"job {job_id} cannot share the GPUs of job {host}: it is not running")
    placed = replay.placed(host)
    if replay.partner_of(host) is not None or start.copies != 1 or placed.copies != 1:
        reject(f"job {job_id} cannot share the GPUs of job {host}: only two unforked jobs may share a GPU")
    if sorted(start.gpu_ids) != sorted(placed.gpu_ids) or n_gpus != placed.n_gpus:
        reject(f"job {job_id} shares the GPUs of job {host}, so it must ask for the same count and "
               f"be given exactly {list(placed.gpu_ids)}")
