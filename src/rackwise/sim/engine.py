"""The discrete-event simulator: a heap loop that applies a policy's decisions.

Time moves only in `Simulator.step`, from one event instant to the next;
nothing happens between events, so the cost grows with the number of
events, not with simulated time. Running jobs' progress is advanced lazily
(see `JobState`). Each running job keeps one live completion event, at or
before its finish. A rate change that brings the finish forward queues a new
one; one that puts it off leaves the event where it is (most re-ratings slow
a job down, so most queue nothing), and the event, when it comes up, is
queued again at the finish it then finds. Either way the finish carries the
tie-breaking number of the job's last re-rating, so same-instant events go
in the order they would if every re-rating queued its own. Events a job left
behind are stale.
"""

from __future__ import annotations

import heapq
import time as wallclock
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Final, cast

import numpy as np
from mypy_extensions import mypyc_attr

from rackwise.cluster.allocation import Allocation, slices_of
from rackwise.cluster.topology import Topology
from rackwise.engine.checks import EngineSupport, check_decisions
from rackwise.engine.contract import Decisions, Policy
from rackwise.engine.hooks import notify
from rackwise.engine.queue_order import QueueOrder
from rackwise.engine.seeding import history_rng, run_generators
from rackwise.engine.view import ClusterView
from rackwise.errors import InputError, RackwiseError
from rackwise.metrics.records import JobRecord, Timeline, build_record
from rackwise.perf.base import NO_COMM, CommAccounting, IdealPerf, PerfModel, forked_rate
from rackwise.sim.collector import long_lived_objects
from rackwise.sim.events import NO_PAYLOAD, Event, EventKind
from rackwise.workload.job import Job
from rackwise.workload.state import FINISHED, PENDING, RUNNING, JobState

INF: Final = float("inf")  # Final: compiled, a plain module name is looked up at each use
NO_FINISH: Final = -1  # `Due.finish_seq` of a job whose last re-rating gave it no finish
# Steps a policy may take on an idle cluster, with jobs queued and none to come, before
# the run is declared stuck (a round-based policy would otherwise loop for ever).
MAX_IDLE_STEPS = 10_000
# Floor of a job's speed beside a partner on its GPUs, so that a pair always finishes.
MIN_PAIR_FACTOR = 0.01
# Event kinds read once (as `workload.state.RUNNING` and its kin): each `EventKind.X` written
# in a function looks the member up on its class (some 70 ns), and a step reads several.
_COMPLETION: Final = EventKind.COMPLETION
_COMPLETION_RANK: Final = int(EventKind.COMPLETION)
_TIMER: Final = EventKind.TIMER
_ROUND: Final = EventKind.ROUND
# Bound once: compiled, `heapq.heappush` looks the function up on its module at each call.
_heappush: Final = heapq.heappush
_heappop: Final = heapq.heappop


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Due:
    """A running job's live completion event (time and tie-breaking number), and the number
    its finish carries: that of its last re-rating, which may have put the finish off
    (`NO_FINISH`: the job makes no progress).

    Compiled, an event read back from the heap is a new tuple, so events are told by number.
    """

    __slots__ = ("at", "finish_seq", "seq")

    def __init__(self, at: float, seq: int) -> None:
        self.at = at
        self.seq = seq
        self.finish_seq = seq


class SimulationStuckError(RackwiseError):
    """Jobs are left waiting but nothing will ever happen again."""


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass
class SimResult:
    """Everything a run produced: per-job records, the timeline, and what was run."""

    records: list[JobRecord]
    timeline: Timeline
    topology: Topology
    policy: Policy
    seed: int
    jobs: list[Job]
    n_steps: int
    wall_time_s: float

    def summary(self) -> dict[str, Any]:
        """The headline figures: JCT and queueing percentiles, makespan, utilisation (`summarize`)."""
        from rackwise.metrics.summary import summarize  # pandas, only when asked

        return summarize(self.records, self.timeline, self.topology.n_gpus)

    def __repr__(self) -> str:
        # The default would print every record.
        return (f"SimResult({self.policy.name} on {len(self.jobs):,} jobs, {self.topology.n_gpus:,} "
                f"GPUs, seed {self.seed}, {self.n_steps:,} steps)")


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Simulator:
    """Runs one policy over one workload on one cluster.

    Args:
        topology: The cluster.
        jobs: The workload (any order; sorted by submit time, stably).
        policy: Any `Policy`; it is reset by `start` (which `run` calls).
        perf: Performance model (default: `IdealPerf`, trace speeds).
        seed: Seeds every random choice of the run (policy and model).
        observers: Called as ``observer(simulator)`` after every step (tests
            use this to check invariants).
        on_progress: Called as ``on_progress(n_finished, n_jobs)`` now and then, and at the end.
        history: Jobs that finished before the run (the cluster's log); the
            performance model prepares them from a stream of their own, and
            the policy gets them through ``on_history`` when the run starts.
        start_latency_s: Seconds a cluster manager takes to launch a started
            job. Every run (a restart after a preemption too) holds its GPUs
            from the decision on, but runs only from this long after it: its
            ``run_start``, progress, run time and attained service begin
            then, as a driver sees a job it released on a real cluster, and
            the record counts the wait as queueing. 0 (the default): jobs run
            the instant they are started.
    """

    def __init__(self, topology: Topology, jobs: Iterable[Job], policy: Policy, *,
                 perf: PerfModel | None = None, seed: int = 0,
                 observers: Sequence[Callable[[Simulator], None]] = (),
                 on_progress: Callable[[int, int], None] | None = None,
                 history: Iterable[Job] = (), start_latency_s: float = 0.0) -> None:
        if not start_latency_s >= 0.0 or start_latency_s == INF:
            raise InputError(f"start latency must be a finite number of seconds >= 0, got "
                             f"{start_latency_s}", field="start_latency_s")
        self.topology = topology
        # The topology's tables read at every step or start (its properties are Python calls).
        self._n_gpus = topology.n_gpus
        self._gpu_node, self._gpu_rack = topology.gpu_node, topology.gpu_rack
        self.start_latency_s = float(start_latency_s)
        self.policy = policy
        self.perf: PerfModel = perf if perf is not None else IdealPerf()
        self.seed = seed
        self.observers = tuple(observers)
        self.on_progress = on_progress
        perf_rng, self._policy_rng = run_generators(seed)
        # A model may make a new record per job here (`NetworkPerf.prepare`), all of them kept.
        with long_lived_objects():
            prepared = self.perf.prepare(list(jobs), topology, perf_rng)
            self.jobs = sorted(prepared, key=attrgetter("submit_time"))
            _check_jobs(self.jobs, topology)
            history = list(history)
            self.history = tuple(self.perf.prepare(history, topology, history_rng(seed))) if history else ()

        self.now = 0.0
        self.allocation = Allocation(topology)
        self.pending: dict[str, JobState] = {}
        self.running: dict[str, JobState] = {}
        self.finished: dict[str, JobState] = {}
        self._queue_order = QueueOrder()  # `pending` in order, for reads from its front (`ClusterView.queued`)
        self.view = ClusterView(topology, self.allocation, self.pending, self.running, self.perf,
                                self._queue_order)
        self.view.keeps_changes = True
        self._running_log = self.view.running_changed  # every new running state's job, for the view
        self.records: list[JobRecord] = []
        self.timeline = Timeline([], [], [], [])
        self._heap: list[Event] = []
        self._n_pushed = 0  # events pushed so far: the next one's tie-breaking number
        self._due: dict[str, Due] = {}  # per running job with a queued completion
        self._next_arrival = 0
        self._timers: set[float] = set()
        capabilities = policy.capabilities
        self._round_s = capabilities.round_s
        self._fork_overhead = capabilities.fork_overhead
        self._copy_efficiency = capabilities.copy_efficiency
        # Optional: models that track communication say how much of each step it takes.
        self._tracks_comm = hasattr(self.perf, "comm_per_iter")
        # Optional: models that price two jobs on the same GPUs (space sharing).
        self._sharing_factor = getattr(self.perf, "sharing_factor", None)
        _check_policy_runs_fractions(self.jobs, policy)
        self._support = EngineSupport(
            forking_refused=None, fractions_refused=None,
            sharing_refused=None if self._sharing_factor is not None else (
                f"performance model {type(self.perf).__name__} has no paired throughputs "
                f"(use the network model)"))
        self.n_steps = 0
        self.started = False

    @classmethod
    def resume(cls, topology: Topology, *, now: float, running: Sequence[JobState],
               pending: Sequence[JobState], policy: Policy, perf: PerfModel | None = None,
               seed: int = 0, arrivals: Iterable[Job] = (),
               held_gpus: dict[str, tuple[int, ...]] | None = None, timers: Iterable[float] = (),
               next_round_s: float | None = None, decide_now: bool = False,
               node_order: Sequence[int] = (), completion_order: Sequence[str] = ()
               ) -> Simulator:
        """A simulator that goes on from ``now`` instead of starting empty (forecasts).

        The states become the simulator's own (hand over copies); running
        ones keep their GPUs, progress and rates. ``policy`` is live: already
        reset and told of every job, so drive the result with `step`, never
        `run` (which would reset it). ``held_gpus`` stay taken throughout;
        ``decide_now`` asks the policy for a decision at ``now`` first.
        ``node_order`` lists nodes as the live allocation's free-count buckets
        held them (placements break ties by it), so a copy places as the original;
        ``completion_order`` likewise orders running jobs' completion events
        (same-instant completions are handled in the order they were pushed).
        """
        sim = cls(topology, arrivals, policy, perf=perf, seed=seed)
        sim.started = True
        sim.now = sim.view.now = now
        for owner, gpu_ids in (held_gpus or {}).items():
            sim.allocation.allocate(owner, gpu_ids)
        for state in running:
            if state.job.is_fractional:
                sim.allocation.allocate_slices(state.job_id, state.gpu_ids[0],
                                               slices_of(state.gpu_share))
            elif state.partner is None or state.partner not in sim.running:  # a pair holds its GPUs once
                sim.allocation.allocate(state.job_id, state.gpu_ids)
            sim.running[state.job_id] = state
        rank = {job_id: index for index, job_id in enumerate(completion_order)}
        for state in sorted(running, key=lambda s: rank.get(s.job_id, len(rank))):
            eta = state.finish_eta()
            if eta < INF:
                sim._queue_completion(state.job_id, max(eta, now))
        for state in pending:
            sim.pending[state.job_id] = state
            sim._queue_order.enter(state)
        if node_order:
            sim.allocation.set_node_order(node_order)
        wakes = sorted({t for t in timers if t > now} | ({now} if decide_now else set()))
        for wake_at in wakes:
            sim._timers.add(wake_at)
            sim._push(wake_at, _TIMER)
        if sim._round_s is not None:
            sim._push(next_round_s if next_round_s is not None else now + sim._round_s,
                      _ROUND)
        return sim

    # ------------------------------------------------------------------ run
    def start(self) -> None:
        """Begin the run: reset the policy with the run's generator; then `step` it.

        `run` calls this; call it yourself to drive a run step by step.
        """
        if self.started:
            raise RackwiseError("this simulator's run has already started")
        self.started = True
        self.policy.reset(self.view, self._policy_rng)
        if self.history:
            self.policy.on_history(self.history)
        if self._round_s is not None and self.jobs:
            self._push(self.jobs[0].submit_time + self._round_s, _ROUND)

    def hand_over(self, policy: Policy, rng: np.random.Generator) -> None:
        """Let a fresh ``policy`` go on with this run from now, as after a driver's restart.

        It is reset on the current view with ``rng`` and told of every running
        and pending job as an arrival, as `rackwise.backends.base.serve` does
        when it finds them. Its rounds, if any, must match the old policy's.
        """
        if policy.capabilities.round_s != self._round_s:
            raise RackwiseError(f"policy '{policy.name}' has rounds of {policy.capabilities.round_s} s, "
                                f"this run {self._round_s} s")
        self.started = True
        policy.reset(self.view, rng)
        notify(policy, (), [s.job for s in (*self.running.values(), *self.pending.values())], self.now)
        self.policy = policy

    def run(self) -> SimResult:
        """Run until every job has finished (`long_lived_objects` while it runs)."""
        started = wallclock.perf_counter()
        self.start()
        idle_steps = 0  # steps in a row with jobs queued on an idle cluster and no arrivals left
        with long_lived_objects():
            while self.step():
                if self.running or not self.pending or self._next_arrival < len(self.jobs):
                    idle_steps = 0
                else:
                    idle_steps += 1
                    if idle_steps >= MAX_IDLE_STEPS:  # rounds or timers would go on for ever
                        break
        n_left = len(self.pending) + len(self.running)
        if n_left:
            example = next(iter(self.pending or self.running))
            why = (f"after {MAX_IDLE_STEPS} steps on an idle cluster with no arrivals left"
                   if idle_steps >= MAX_IDLE_STEPS else "with nothing left to happen")
            raise SimulationStuckError(
                f"policy '{self.policy.name}' left {n_left} job(s) unfinished at t={self.now:.0f} s "
                f"{why} (e.g. job {example}); it must start jobs that fit "
                f"or ask for a timer (wake_at)"
            )
        if self.on_progress is not None:
            self.on_progress(len(self.records), len(self.jobs))
        return SimResult(self.records, self.timeline, self.topology, self.policy, self.seed,
                         self.jobs, self.n_steps, wallclock.perf_counter() - started)

    def peek(self) -> float:
        """Time of the next event (inf if none)."""
        self._drop_stale()
        arrival = self.jobs[self._next_arrival].submit_time if self._next_arrival < len(self.jobs) else INF
        return min(arrival, self._heap[0][0] if self._heap else INF)

    def step(self) -> bool:
        """Process every event at the next instant, then ask the policy once.

        Returns False when there is nothing left to process.
        """
        if not self.started:
            raise RackwiseError("call start() before step(): the policy has not been reset")
        now = self.peek()
        if now == INF:
            return False
        self.now = now
        self.view.now = now
        changed: set[str] = set()
        heap = self._heap
        policy = self.policy
        # Completions first: they free GPUs for everything else at this instant. `peek` left
        # a live and due one on top, if any is due; each finish leaves the next one so.
        completed: list[Job] = []
        while heap and heap[0][0] <= now and heap[0][3] is _COMPLETION:
            state = self.running[_heappop(heap)[4]]
            self._finish(state, now, changed)
            completed.append(state.job)
            self._drop_stale()
        jobs = self.jobs
        first = self._next_arrival
        while self._next_arrival < len(jobs) and jobs[self._next_arrival].submit_time <= now:
            job = jobs[self._next_arrival]
            self._next_arrival += 1
            state = self.pending[job.job_id] = JobState(job)
            self._queue_order.enter(state)
        notify(policy, completed, jobs[first:self._next_arrival], now)
        while heap and heap[0][0] <= now:
            _, _, _, kind, _ = _heappop(heap)
            if kind is _TIMER:
                self._timers.discard(now)
            elif kind is _ROUND and self._round_s is not None and self._has_work():
                self._push(now + self._round_s, _ROUND)

        decisions = policy.schedule(self.view, now)
        self.view.decided()
        self._apply(decisions, now, changed)
        self.n_steps += 1
        timeline = self.timeline
        timeline.time.append(now)
        timeline.busy_gpus.append(self._n_gpus - self.allocation.n_free)
        timeline.n_pending.append(len(self.pending))
        timeline.n_running.append(len(self.running))
        for observer in self.observers:
            observer(self)
        if self.on_progress is not None and self.n_steps % 2048 == 0:
            self.on_progress(len(self.records), len(self.jobs))
        return True

    def advance_to(self, time: float) -> None:
        """Move the clock to ``time``, before the next event (a driver loop that polls between events)."""
        if not self.now <= time < self.peek():
            raise RackwiseError(f"cannot move the clock from {self.now} to {time}: the next event "
                                f"is at {self.peek()}")
        self.now = self.view.now = time

    @property
    def n_waiting(self) -> int:
        """Jobs not yet submitted (their arrival lies in the future)."""
        return len(self.jobs) - self._next_arrival

    @property
    def next_arrival_time(self) -> float:
        """Submit time of the next job to arrive (inf if none)."""
        return self.jobs[self._next_arrival].submit_time if self.n_waiting else INF

    @property
    def submitted(self) -> Sequence[Job]:
        """Jobs submitted so far, in submit order."""
        return self.jobs[:self._next_arrival]

    def timers(self) -> tuple[float, ...]:
        """Instants the policy asked to be woken at that are still to come, ascending."""
        return tuple(sorted(t for t in self._timers if t > self.now))

    def next_round_at(self) -> float | None:
        """When the next policy round is due (None without rounds)."""
        rounds = [event[0] for event in self._heap if event[3] is _ROUND]
        return min(rounds) if rounds else None

    def completion_order(self) -> tuple[str, ...]:
        """Running jobs in the order of their finishes' tie-breaking numbers.

        Same-instant completions are handled in this order, so a copy of the
        simulator (`resume`) needs it to go on exactly as this one does.
        """
        return tuple(sorted(self._due, key=lambda job_id: self._due[job_id].finish_seq))

    def apply(self, decisions: Decisions) -> None:
        """Apply decisions made outside `step` at the current instant (a driver loop's hook)."""
        self._apply(decisions, self.now, set())

    # -------------------------------------------------------------- decisions
    def _apply(self, decisions: Decisions, now: float, changed: set[str]) -> None:
        if decisions.start or decisions.preempt or decisions.wake_at is not None:
            check_decisions(self.view, decisions, self.policy.name, now, finished=self.finished,
                            support=self._support)
        for job_id in decisions.preempt:
            self._preempt(self.running[job_id], now, changed)
        for start in decisions.start:
            state = self.pending[start.job_id]
            self._start(state, start.gpu_ids, now, start.copies, start.beside)
            changed.add(start.job_id)
            if start.beside is not None:
                changed.add(start.beside)
            if state.gpu_share < 1.0:  # `is_fractional`, inlined here and below: once per start
                changed.update(self.allocation.tenants[start.gpu_ids[0]])
        if changed:
            self._update_rates(changed, now)
        wake_at = decisions.wake_at
        if wake_at is not None and wake_at not in self._timers:
            self._timers.add(wake_at)
            self._push(wake_at, _TIMER)

    # ------------------------------------------------------------ transitions
    def _start(self, state: JobState, gpu_ids: tuple[int, ...], now: float,
               copies: int = 1, beside: str | None = None) -> None:
        del self.pending[state.job_id]
        self._queue_order.leave(state.job_id)
        state.copies = copies
        if state.gpu_share < 1.0:
            self.allocation.allocate_slices(state.job_id, gpu_ids[0], slices_of(state.gpu_share))
        elif beside is None:
            self.allocation.allocate(state.job_id, gpu_ids)
        else:  # the GPUs stay its partner's in the table; both jobs hold them
            state.partner = beside
            self.running[beside].partner = state.job_id
        state.status = RUNNING
        state.gpu_ids = tuple(gpu_ids)
        runs_at = now + self.start_latency_s  # its clock starts once launched
        state.run_start = runs_at
        state.last_update = runs_at
        restore = self.perf.restart_overhead_s(state.job) if state.n_preemptions else 0.0
        state.busy_until = runs_at + restore
        if state.first_start is None:
            state.first_start = runs_at
        state.n_nodes, state.n_racks = _spread(self._gpu_node, self._gpu_rack, gpu_ids)
        self.running[state.job_id] = state
        self._running_log.append(state.job_id)
        self.view.n_starts += 1

    def _stop(self, state: JobState, now: float, changed: set[str]) -> None:
        state.advance(now)
        state.overhead_s += max(0.0, min(now, state.busy_until) - state.run_start)
        if state.last_update > now:  # stopped before its launch: this run never ran
            state.last_update = now
            if state.first_start is not None and state.first_start > now:
                state.first_start = None
        partner = state.partner
        if state.gpu_share < 1.0:  # its GPU's other tenants now run at a new pace
            gpu = state.gpu_ids[0]
            self.allocation.release_slices(state.job_id, gpu)
            changed.update(self.allocation.tenants.get(gpu, ()))
        elif partner is None:
            self.allocation.release(state.gpu_ids)
        else:  # the partner runs on alone, now at its own pace
            self.allocation.hand_over(state.gpu_ids, partner)
            self.running[partner].partner = None
            state.partner = None
            changed.add(partner)
        del self.running[state.job_id]
        if state.job_id in self._due:  # its queued completion is stale now
            del self._due[state.job_id]
        changed.add(state.job_id)
        state.version += 1
        self._running_log.append(state.job_id)
        state.rate_iters_per_s = 0.0

    def _preempt(self, state: JobState, now: float, changed: set[str]) -> None:
        self._stop(state, now, changed)
        state.status = PENDING
        state.n_preemptions += 1
        state.queued_since = now
        self.pending[state.job_id] = state
        self._queue_order.enter(state)

    def _finish(self, state: JobState, now: float, changed: set[str]) -> None:
        self._stop(state, now, changed)
        state.iters_done = state.total_iters
        state.status = FINISHED
        state.finish_time = now
        self.finished[state.job_id] = state
        self.records.append(_record(state))

    def _update_rates(self, changed: set[str], now: float) -> None:
        running, heap, seq, running_log, dues = self.running, self._heap, self._n_pushed, self._running_log, self._due
        # Sorted: the order of a set of strings changes between processes. The model's answer
        # comes in an order fixed by its inputs (`PerfModel.rates`), and is taken as it comes.
        new_rates = self.perf.rates(running, sorted(changed))
        # A dict, so that the compiled build reads it natively.
        comm = cast(CommAccounting, self.perf).comm_per_iter if self._tracks_comm else None
        for job_id, rate in new_rates.items():
            state = running[job_id]
            if state.copies > 1:
                frac = self._fork_overhead(state.job) if self._fork_overhead is not None else 0.0
                rate = forked_rate(self.perf, state, running, frac, self._copy_efficiency)
            elif state.partner is not None:
                rate *= self._pair_factor(state)
            elif state.gpu_share < 1.0:  # `is_fractional`, inlined: this runs per re-rated job
                rate *= self._tenancy_factor(state)
            if rate == state.rate_iters_per_s and job_id not in changed:
                continue
            state.advance(now)
            state.rate_iters_per_s = rate
            if comm is not None:
                # Not `get(job_id, NO_COMM)`: compiled, the default is boxed anew at every call.
                pair = comm.get(job_id)
                state.comm_s_per_iter, state.comm_extra_s_per_iter = NO_COMM if pair is None else pair
            state.version += 1
            running_log.append(job_id)
            # `finish_eta` and `_queue_completion` inlined: this runs for every re-rated job.
            eta = INF
            if rate > 0.0:
                start, busy = state.last_update, state.busy_until
                eta = (start if start >= busy else busy) + (
                    state.total_iters - state.iters_done) / rate
            live = dues.get(job_id)
            if eta < INF:
                due = eta if eta > now else now
                if live is None:
                    _heappush(heap, (due, _COMPLETION_RANK, seq, _COMPLETION, job_id))
                    dues[job_id] = Due(due, seq)
                else:
                    if due < live.at:
                        _heappush(heap, (due, _COMPLETION_RANK, seq, _COMPLETION, job_id))
                        live.at = due
                        live.seq = seq
                    # else the live event, when it comes up, queues the finish with this number
                    live.finish_seq = seq
                seq += 1
            elif live is not None:
                live.finish_seq = NO_FINISH  # the live event, when it comes up, is dropped
        self._n_pushed = seq
        self._compact_heap()

    def _pair_factor(self, state: JobState) -> float:
        assert self._sharing_factor is not None and state.partner is not None
        gpu_type = self.topology.gpu_type_of(state.gpu_ids[0])
        factor = self._sharing_factor(state.job, self.running[state.partner].job, gpu_type)
        return min(max(float(factor), MIN_PAIR_FACTOR), 1.0)

    def _tenancy_factor(self, state: JobState) -> float:
        """Speed a fractional job keeps beside the other jobs splitting its GPU.

        Each tenant takes the measured pair slowdown weighted by its share
        (`PerfModel.sharing_factor`); a model without pair figures charges nothing.
        """
        if self._sharing_factor is None:
            return 1.0
        gpu = state.gpu_ids[0]
        gpu_type = self.topology.gpu_type_of(gpu)
        factor = 1.0
        for other_id in sorted(self.allocation.tenants[gpu]):
            if other_id != state.job_id:
                other = self.running[other_id].job
                loss = 1.0 - float(self._sharing_factor(state.job, other, gpu_type))
                factor *= 1.0 - loss * other.gpu_share
        return max(factor, MIN_PAIR_FACTOR)

    # ---------------------------------------------------------------- helpers
    def _queue_completion(self, job_id: str, due: float) -> None:
        seq = self._n_pushed
        self._n_pushed += 1
        _heappush(self._heap, (due, _COMPLETION_RANK, seq, _COMPLETION, job_id))
        self._due[job_id] = Due(due, seq)

    def _requeue(self, job_id: str, live: Due, at: float) -> None:
        """Replace a running job's early completion event, come up at ``at``, by its finish (if any)."""
        if live.finish_seq == NO_FINISH:
            del self._due[job_id]
            return
        # The arithmetic of the job's last re-rating on the same state, so the same finish. At
        # ``at`` itself where that re-rating, at this instant, put it here: the event goes back
        # among this instant's events, in its finish's place.
        eta = self.running[job_id].finish_eta()
        live.at, live.seq = (eta if eta > at else at), live.finish_seq
        _heappush(self._heap, (live.at, _COMPLETION_RANK, live.seq, _COMPLETION, job_id))

    def _push(self, time: float, kind: EventKind, payload: str = NO_PAYLOAD) -> None:
        _heappush(self._heap, (time, int(kind), self._n_pushed, kind, payload))
        self._n_pushed += 1
        self._compact_heap()

    def _compact_heap(self) -> None:
        # A preempted job's completion stays in the heap until its (far) time comes;
        # dropping such stale events once they outnumber the rest keeps pushes and pops cheap.
        heap = self._heap
        if len(heap) > 2 * (len(self.running) + len(self._timers)) + 1024:
            heap[:] = [event for event in heap if self._is_live(event)]
            heapq.heapify(heap)

    def _is_live(self, event: Event) -> bool:
        """Not a completion its job left behind (by stopping, or by an earlier one queued since)."""
        if event[3] is not _COMPLETION:
            return True
        due = self._due.get(event[4])
        return due is not None and due.seq == event[2]

    def _drop_stale(self) -> None:
        """Pop stale completions off the heap's top and queue early ones again at their finish,
        so that its first event is due."""
        heap, dues = self._heap, self._due
        while heap and heap[0][3] is _COMPLETION:
            event = heap[0]
            job_id, seq = event[4], event[2]
            live = dues.get(job_id)  # `_is_live`, inlined: this runs at every step
            if live is not None and live.seq == seq:
                if seq == live.finish_seq:  # queued by the job's last re-rating: its finish
                    return
                _heappop(heap)
                self._requeue(job_id, live, event[0])
            else:
                _heappop(heap)

    def _has_work(self) -> bool:
        return bool(self.pending or self.running or self._next_arrival < len(self.jobs))


def _spread(gpu_node: tuple[int, ...], gpu_rack: tuple[int, ...], gpu_ids: tuple[int, ...]) -> tuple[int, int]:
    """`Topology.spread` on its tables: (nodes, racks) the GPUs span, natively in the compiled build."""
    if len(gpu_ids) == 1:
        return 1, 1
    return len({gpu_node[g] for g in gpu_ids}), len({gpu_rack[g] for g in gpu_ids})


def _record(state: JobState) -> JobRecord:
    job = state.job
    assert state.first_start is not None and state.finish_time is not None
    jct = state.finish_time - job.submit_time
    run_time_s = state.run_time_s
    # Positional, in `JobRecord`'s field order: a class called with keywords parses
    # them from a dict, and this runs once per job.
    return build_record(
        state.job_id, job.group, job.model, state.n_gpus,  # job_id, group, model, n_gpus
        job.submit_time, state.first_start, state.finish_time,  # submit_time, first_start, finish_time
        jct, jct - run_time_s, run_time_s,  # jct_s, queueing_delay_s, run_time_s
        state.overhead_s, state.attained_gpu_s, state.n_preemptions,  # overhead_s, gpu_s, n_preemptions
        state.n_nodes, state.n_racks, job.duration_s,  # n_nodes, n_racks, duration_s
        state.total_iters, state.comm_s, state.comm_extra_s,  # total_iters, comm_s, comm_extra_s
    )


def _check_jobs(jobs: list[Job], topology: Topology) -> None:
    seen: set[str] = set()
    capacity = topology.n_gpus
    for job in jobs:
        if job.job_id in seen:
            raise InputError(f"job id '{job.job_id}' appears twice", field="job_id")
        seen.add(job.job_id)
        if job.n_gpus > capacity:
            raise InputError(
                f"job {job.job_id} asks for {job.n_gpus} GPUs but cluster '{topology.name}' has "
                f"{topology.n_gpus}; use a larger cluster or drop such jobs", field="n_gpus")
        if not job.duration_s > 0:
            raise InputError(f"job {job.job_id} has duration {job.duration_s} s; it must be positive",
                             field="duration_s")
        if job.n_gpus <= 0:
            raise InputError(f"job {job.job_id} asks for {job.n_gpus} GPUs", field="n_gpus")
        share = job.gpu_share
        if not 0.0 < share <= 1.0 or (share < 1.0 and job.n_gpus != 1):  # below 1: fractional
            raise InputError(f"job {job.job_id} asks for {job.gpu_share:g} of a GPU on "
                             f"{job.n_gpus} GPUs; a share must be in (0, 1], and below 1 "
                             f"only for a one-GPU job", field="gpu_share")


def _check_policy_runs_fractions(jobs: list[Job], policy: Policy) -> None:
    fractional = next((job for job in jobs if job.gpu_share < 1.0), None)  # `is_fractional`
    if fractional is not None and not policy.capabilities.fractional_gpus:
        raise InputError(
            f"policy '{policy.name}' cannot run fractional jobs (job {fractional.job_id} asks for "
            f"{fractional.gpu_share:g} of a GPU); use fifo or fifo-backfill, or read the trace "
            f"with fractional_gpus: round_up", field="gpu_share")


def simulate(topology: Topology, jobs: Iterable[Job], policy: Policy, **kwargs: object) -> SimResult:
    """Shorthand for ``Simulator(topology, jobs, policy, **kwargs).run()``."""
    return Simulator(topology, jobs, policy, **kwargs).run()  # type: ignore[arg-type]
