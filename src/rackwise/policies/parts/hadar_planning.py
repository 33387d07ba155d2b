"""Hadar's planning: per-round primal-dual plans over GPU types (papers/hadar.md).

Every ``round_s`` seconds all active jobs are re-planned, one after the
other (``order``: by default the jobs that bound the total time first, then
the rest shortest first): GPU prices start at their floor, each job takes the plan (which GPUs now,
possibly of several types, and in which future slots) that maximises its
utility minus the priced GPUs, and is run now only if that payoff is
positive and the plan uses the current slot. Prices, options and the dual
subroutine are `parts.primal_dual`'s.

``hadar`` holds one `HadarPlanner`; ``hadare`` holds one too and gives it
``add_copies``, which forks running jobs onto the nodes the plan left idle.
Both take `HadarParameters` (`parts.hadar_parameters`), a dataclass of
fields only listed among each policy's bases, so the parameters are
declared once and set flat (``-p round_s=600``) with no behaviour passing
between policy modules.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
from mypy_extensions import mypyc_attr

from rackwise.cluster.allocation import TentativeAllocation
from rackwise.engine.contract import Decisions, Start
from rackwise.engine.view import ClusterView
from rackwise.frozen import pickled_by_constructor
from rackwise.policies.parts.hadar_parameters import HadarParameters
from rackwise.policies.parts.heterogeneity import (
    RoundClock,
    TypeThroughputs,
    representative_gpus,
)
from rackwise.policies.parts.primal_dual import (
    Option,
    Plan,
    PriceBook,
    UtilityCurve,
    best_plan,
    best_single_plan,
    cheapest_gpus,
)
from rackwise.workload.state import RUNNING, JobState

Take = tuple[tuple[int, int], ...]  # (node id, GPUs) of one copy
Layout = tuple[Take, ...]  # one take per copy
Shape = tuple[tuple[tuple[int, int], ...], ...]  # per copy its nodes' (GPU type, GPUs); all sorted


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True, slots=True)
class JobTypes:
    """Which GPU types a job can use, worked out once from its rates on each type.

    Attributes:
        rates: The job's rate on each type, as plain floats (the same values).
        usable: Types with a positive rate, ascending.
        at_least: For each usable type, the types at least as fast, ascending.
        fastest: Usable types, fastest first (ties to the lower index).
        tiers: Usable types grouped by equal rate, fastest group first.
    """

    rates: tuple[float, ...]
    usable: tuple[int, ...]
    at_least: tuple[tuple[int, ...], ...]
    fastest: tuple[int, ...]
    tiers: tuple[tuple[int, ...], ...]

    def __reduce__(self) -> tuple[type, tuple[Any, ...]]:
        return pickled_by_constructor(self)

    @classmethod
    def of(cls, rates: np.ndarray) -> JobTypes:
        # Plain floats and lists: a handful of types, asked once for every job.
        values: list[float] = np.asarray(rates, dtype=float).tolist()
        if len(values) == 1:  # one GPU type: usable or not
            if values[0] > 0:
                return cls((values[0],), (0,), ((0,),), (0,), ((0,),))
            return cls((values[0],), (), (), (), ())
        usable = tuple(t for t, rate in enumerate(values) if rate > 0)
        at_least = tuple(tuple(t for t, rate in enumerate(values) if rate >= values[r]) for r in usable)
        fastest = tuple(sorted(usable, key=lambda t: -values[t]))  # stable: ties to the lower index
        tiers = tuple(tuple(t for t in usable if values[t] == rate)
                      for rate in sorted({values[t] for t in usable}, reverse=True))
        return cls(tuple(values), usable, at_least, fastest, tiers)


_UNKNOWN: Any = object()  # not in a memo yet (None is an answer)
_SHAPES_KEPT = 1 << 16  # layout shapes remembered at most, then forgotten at once

# A job to plan this round: (state, remaining iterations, slots since arrival, its utility, its types).
_Planned = tuple[JobState, float, int, UtilityCurve, JobTypes]

# Adds copies of running jobs to this round's layouts (``hadare``): (view, active jobs, layouts).
AddCopies = Callable[[ClusterView, list[JobState], dict[str, Layout]], None]


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class HadarPlanner:
    """One run of Hadar's rounds: per-type rates, the round clock and what follows from them.

    Args:
        params: The policy's `HadarParameters`.
        view: The run's view, for its topology.
        add_copies: Called after each round's plan; None runs one copy per job.
    """

    def __init__(self, params: HadarParameters, view: ClusterView,
                 add_copies: AddCopies | None = None) -> None:
        self._params = params
        self._add_copies = add_copies
        self._rates = TypeThroughputs(view.topology, extrapolate=True)
        self._clock = RoundClock(params.round_s)
        types = self._rates.types
        self._node_type = [types.index(n.gpu_type) for n in view.topology.nodes]
        self._capacities = [n.n_gpus for n in view.topology.nodes]
        self._type_nodes = [self._rates.nodes[t] for t in types]
        self._min_nodes_of: list[dict[int, int]] = [{} for _ in types]  # [type][GPUs]: see `_min_nodes`
        self._d_min: dict[str, int] = {}
        self._types: dict[str, JobTypes] = {}
        # A running job's layout and its shape, with the GPUs and copies they were read from:
        # kept while those stay.
        self._current: dict[str, tuple[tuple[tuple[int, ...], int], Layout, Shape]] = {}
        self._curves: dict[float, UtilityCurve] = {}  # by knee, while some job's utility has it
        self._shapes: dict[Layout, Shape] = {}  # see `_shape`
        self._constants: dict[str, tuple[JobTypes, UtilityCurve]] = {}  # see `_job_constants`
        self._used = PriceBook.flat(self._capacities, groups=self._node_type)  # see `used_book`

    @property
    def node_type(self) -> Sequence[int]:
        """Each node's GPU type, as an index into the topology's types."""
        return self._node_type

    def job_types(self, job_id: str) -> JobTypes:
        """The GPU types a job planned this round can use."""
        return self._types[job_id]

    def forget(self, job_id: str) -> None:
        """Drop what was worked out for a completed job."""
        self._rates.forget(job_id)
        self._d_min.pop(job_id, None)
        self._types.pop(job_id, None)
        self._current.pop(job_id, None)
        known = self._constants.pop(job_id, None)
        if known is not None:
            curve = known[1]
            curve.users -= 1
            if curve.users == 0:
                del self._curves[curve.gamma3]

    def _job_types(self, job_id: str, rates: np.ndarray) -> JobTypes:
        # A job's rates are cached until it completes, so what follows from them is too.
        types = self._types.get(job_id)
        if types is None:
            types = self._types[job_id] = JobTypes.of(rates)
        return types

    # ---------------------------------------------------------------- rounds
    def schedule(self, view: ClusterView, now: float) -> Decisions:
        """At a round boundary, plan every active job again; between rounds, wait."""
        active = self._clock.begin(view, now)
        if active is None:
            return Decisions(wake_at=self._clock.wake_at(view, now))
        layouts = self._plan(view, active, now)
        if self._add_copies is not None:
            self._add_copies(view, active, layouts)
        decisions = self._decide(view, active, layouts)
        return Decisions(start=decisions.start, preempt=decisions.preempt,
                         wake_at=self._clock.wake_at(view, now))

    def used_book(self, layouts: dict[str, Layout]) -> PriceBook:
        """A one-slot book with flat prices, nodes grouped by GPU type, loaded with what ``layouts`` take.

        The same book each call, reloaded: what a caller took from it before is gone.
        """
        loads = [0] * len(self._capacities)
        for layout in layouts.values():
            for take in layout:
                for node, n in take:
                    loads[node] += n
        self._used.set_loads(0, loads)
        return self._used

    def _job_constants(self, view: ClusterView, state: JobState) -> tuple[JobTypes, UtilityCurve]:
        """A job's usable types and utility curve (knee 0 if it can use no type), kept until it completes.

        Jobs with the same knee share one curve.
        """
        rates = self._rates.of(view, state)
        types = self._job_types(state.job_id, rates)
        gamma3 = self._gamma3(state, rates) if types.usable else 0.0
        curve = self._curves.get(gamma3)
        if curve is None:
            curve = self._curves[gamma3] = UtilityCurve(
                self._params.utility_gamma1, self._params.utility_gamma2, gamma3)
        curve.users += 1
        known = self._constants[state.job_id] = (types, curve)
        return known

    def _gamma3(self, state: JobState, rates: np.ndarray) -> float:
        """The utility's knee: a multiple of the fewest slots the whole job could take."""
        if state.job_id not in self._d_min:
            top = float(rates.max())
            slots = state.job.total_iters / (self._params.round_s * top)
            self._d_min[state.job_id] = max(1, math.ceil(slots))
        return self._params.utility_gamma3_factor * self._d_min[state.job_id]

    def _plan(self, view: ClusterView, active: list[JobState], now: float) -> dict[str, Layout]:
        delta = self._params.round_s
        spread = self._params.spread_factor
        jobs: list[_Planned] = []
        # The price curve's ends: half the lowest spread density, and each type's highest density.
        lowest = math.inf
        upper: list[float | None] = [None] * len(self._rates.types)
        constants = self._constants
        for state in active:
            known = constants.get(state.job_id)
            if known is None:
                known = self._job_constants(view, state)
            types, curve = known
            if not types.usable:
                continue
            remaining = state.remaining_iters(now)
            elapsed = int((now - state.job.submit_time) // delta)
            jobs.append((state, remaining, elapsed, curve, types))
            n_gpus = state.job.n_gpus
            for r in types.usable:
                rate = types.rates[r]
                d = max(1, math.ceil(remaining / (delta * rate)))
                density = curve.at(elapsed + d) / (n_gpus * d)
                highest = upper[r]
                if highest is None or density > highest:
                    upper[r] = density
                # The floor assumes the spread penalty too, so a job that must span
                # nodes (or types) is still admitted into an empty cluster.
                d_spread = max(1, math.ceil(remaining / (delta * rate * spread)))
                f_spread = curve.at(elapsed + d_spread) / (n_gpus * d_spread)
                if f_spread < lowest:
                    lowest = f_spread
        if not jobs:
            return {}
        lower = 0.5 * lowest
        type_upper = [lower if u is None else max(u, lower) for u in upper]
        book = PriceBook(self._capacities, lower, list(map(type_upper.__getitem__, self._node_type)),
                         self._params.horizon_slots, groups=self._node_type)
        jobs = self._in_planning_order(jobs)
        layouts: dict[str, Layout] = {}
        max_wait = self._params.max_wait_slots
        for state, remaining, elapsed, curve, types in jobs:
            plan: Plan | None
            if len(types.usable) == 1:  # most jobs: one option a slot at most
                slots = self._single_type_slots(book, types, state.job.n_gpus)
                if slots is None:
                    continue
                plan = best_single_plan(slots, remaining, _FinishUtility(curve, elapsed).at, max_wait)
            else:
                rows = self._rows(book, types.rates, state.job.n_gpus, types)
                if not any(rows):
                    continue
                plan = best_plan(rows, remaining, _FinishUtility(curve, elapsed).at, max_wait)
            if plan is None:
                continue
            book.commit(plan)
            if plan.slots and plan.slots[0][0] == 0:  # it runs now
                layouts[state.job_id] = (plan.slots[0][1].take,)
        if self._params.backfill:
            self._backfill([j[0] for j in jobs], layouts)
        return layouts

    def _in_planning_order(self, jobs: list[_Planned]) -> list[_Planned]:
        """The jobs in the order ``order`` names (stable: ties keep arrival order)."""
        order = self._params.order
        if order == "arrival":
            return jobs

        # Highest utility density first; sorting indices by a list's items calls no Python key.
        d_min = self._d_min
        by_density = [-(curve.at(elapsed + 1) / (state.job.n_gpus * d_min[state.job_id]))
                      for state, _, elapsed, curve, _ in jobs]
        if order == "utility_density":
            return [jobs[i] for i in sorted(range(len(jobs)), key=by_density.__getitem__)]
        # Remaining time on the fastest usable type, in seconds (a lower bound on the finish);
        # its rate read by index, as `max` is a generic call on the builtins module, compiled.
        left = [remaining / types.rates[types.fastest[0]] for _, remaining, _, _, types in jobs]
        cut = self._params.longest_share * max(left)
        by_left = [-t for t in left]
        first = sorted((i for i, t in enumerate(left) if t >= cut), key=by_left.__getitem__)
        rest = sorted((i for i, t in enumerate(left) if t < cut), key=by_density.__getitem__)
        return [jobs[i] for i in first] + [jobs[i] for i in rest]

    def _rows(self, book: PriceBook, rates: Sequence[float], n_gpus: int,
              types: JobTypes) -> list[list[Option]]:
        """The job's options in each slot of the book (``slot_options`` per slot).

        A slot's options depend only on its loads, and slots often hold equal
        loads (a plan that runs in every slot takes the same GPUs in each), so
        each distinct load is searched once and its row shared.
        """
        rows: list[list[Option]] = []
        for t, first in enumerate(book.first_alike()):
            if first < t:
                rows.append(rows[first])
            elif book.free_in(t, types.usable) >= n_gpus:
                rows.append(self.slot_options(book, t, rates, n_gpus, types))
            else:
                # A slot without n_gpus free GPUs of the usable types offers nothing (the
                # search would find no option), and a job offered nothing gets no plan.
                rows.append([])
        return rows

    def _single_type_slots(self, book: PriceBook, types: JobTypes, n_gpus: int) -> list[Option | None] | None:
        """`_rows` of a job that can use one GPU type: its option in each slot (None: no room), or
        None when no slot has room. The options are `slot_options`' own."""
        usable = types.usable
        r = usable[0]
        progress = self._params.round_s * types.rates[r]
        spread_factor = self._params.spread_factor
        min_nodes = self._min_nodes(r, n_gpus)
        slots: list[Option | None] = []
        any_room = False
        for t, first in enumerate(book.first_alike()):
            if first < t:
                slots.append(slots[first])
            elif book.free_in(t, usable) >= n_gpus:
                picked = self._local(book, t, usable, n_gpus)
                assert picked is not None  # the type has room
                cost, take = picked
                factor = spread_factor if len(take) > min_nodes else 1.0
                slots.append(Option(cost, progress * factor, take))
                any_room = True
            else:
                slots.append(None)
        return slots if any_room else None

    def slot_options(self, book: PriceBook, slot: int, rates: Sequence[float] | np.ndarray, n_gpus: int,
                     types: JobTypes | None = None) -> list[Option]:
        """Non-dominated ways to hold the job's GPUs in one slot (§3.3, rules of §3.5).

        ``types`` is ``JobTypes.of(rates)``, passed when already known.
        """
        delta = self._params.round_s
        options: list[Option] = []
        if types is None:
            types = JobTypes.of(np.asarray(rates, dtype=float))
        for r in types.usable:
            picked = self._local(book, slot, (r,), n_gpus)
            if picked is None:
                continue
            cost, take = picked
            spread = len(take) > self._min_nodes(r, n_gpus)
            factor = self._params.spread_factor if spread else 1.0
            options.append(Option(cost, delta * rates[r] * factor, take))
        if options:
            return _non_dominated(options)
        # No single type has room: mix types (the task-level freedom).
        for _, allowed in zip(types.usable, types.at_least):
            if book.free_in(slot, allowed) < n_gpus:
                continue
            picked = cheapest_gpus(book, slot, book.with_free(slot, allowed), n_gpus)
            if picked is None:
                continue
            cost, take = picked
            used = [(int(self._node_type[node]), n) for node, n in take]
            if self._params.progress_model == "bottleneck":
                rate = min(rates[t] for t, _ in used) * (self._params.spread_factor if len(take) > 1 else 1.0)
            else:
                rate = sum(rates[t] * n for t, n in used) / n_gpus
            options.append(Option(cost, delta * rate, take))
        return _non_dominated(options)

    def _local(self, book: PriceBook, slot: int, types: Sequence[int],
               n_gpus: int) -> tuple[float, tuple[tuple[int, int], ...]] | None:
        """GPUs of the given types: the cheapest single node that fits, else the fewest nodes.

        Remembered in the book until it changes: the next job of the same size
        and types after one that took nothing asks the same question.
        """
        key = (slot, tuple(types), n_gpus)  # the only tuple keys in the book's memo
        found = book.memo.get(key, _UNKNOWN)
        if found is _UNKNOWN:
            found = book.memo[key] = self._search_local(book, slot, types, n_gpus)
        return cast("tuple[float, Take] | None", found)

    def _search_local(self, book: PriceBook, slot: int, types: Sequence[int],
                      n_gpus: int) -> tuple[float, Take] | None:
        if book.free_in(slot, types) < n_gpus:
            return None
        fitting = book.cheapest_node(slot, types, n_gpus)
        if fitting is not None:
            cost, node = fitting
            return cost, ((node, n_gpus),)
        take: list[tuple[int, int]] = []
        need = n_gpus
        for node, free in book.most_free_first(slot, types):
            k = min(free, need)
            take.append((node, k))
            need -= k
            if need == 0:
                break
        return sum(book.cost(slot, n, k) for n, k in take), tuple(sorted(take))

    def _min_nodes(self, r: int, n_gpus: int) -> int:
        known = self._min_nodes_of[r]
        fewest = known.get(n_gpus)
        if fewest is None:
            topology = self._rates.topology
            gpus = representative_gpus(topology, self._type_nodes[r], n_gpus)
            fewest = known[n_gpus] = topology.spread(gpus)[0] if gpus else 1 << 30
        return fewest

    def _backfill(self, jobs: list[JobState], layouts: dict[str, Layout]) -> None:
        """Give GPUs no plan uses to waiting jobs that can use them, in ``jobs``' order."""
        waiting = [s for s in jobs if s.job_id not in layouts]
        if not waiting:
            return
        book = self.used_book(layouts)
        for state in waiting:
            usable = self._types[state.job_id].fastest
            if book.free_in(0, usable) < state.job.n_gpus:
                continue  # no room in all its types together, so none in any of them
            # One type if any has room (fastest first), else any usable GPUs.
            for types in [*((r,) for r in usable), usable]:
                picked = self._local(book, 0, types, state.job.n_gpus)
                if picked is not None:
                    for node, n in picked[1]:
                        book.take(0, node, n)
                    layouts[state.job_id] = (picked[1],)
                    break

    def _decide(self, view: ClusterView, active: list[JobState],
                layouts: dict[str, Layout]) -> Decisions:
        """Keep running jobs planned in the shape they run in; preempt the rest; start the new layouts.

        A plan fixes a job's GPU types, GPUs per node and nodes per copy (its
        progress); which nodes of a type it names follows from the order jobs
        were planned in, which changes from round to round. So a running job
        planned in its current shape stays on its GPUs (rule (iv) of
        papers/hadar.md §3.5: no restart for the same progress), and a job to
        start takes its planned nodes where they have room, else other nodes
        of the same type (`_InShape`). Should that fail, every running job
        whose layout changed moves to its planned nodes, where all fits.
        """
        decisions = self._decide_keeping(view, active, layouts, in_shape=True)
        if decisions is None:
            decisions = self._decide_keeping(view, active, layouts, in_shape=False)
        assert decisions is not None, "a plan asks some node for more GPUs than it has"
        return decisions

    def _decide_keeping(self, view: ClusterView, active: list[JobState], layouts: dict[str, Layout],
                        in_shape: bool) -> Decisions | None:
        """One decision. With ``in_shape``, running jobs planned in their shape stay where they
        run; else only those planned on their own nodes do. None when a take finds no node."""
        gpu_node = view.topology.gpu_node
        free = view.tentative()
        moving: list[JobState] = []
        kept: dict[str, JobState] = {}  # running jobs planned in another layout of their shape
        to_start: list[tuple[JobState, Layout]] = []
        for state in active:
            layout = layouts.get(state.job_id)
            if state.status is RUNNING:
                current, current_shape = self._current_layout(gpu_node, state)
                if layout == current:
                    continue
                if in_shape and layout is not None and self._has_shape(layout, current_shape):
                    kept[state.job_id] = state
                    continue
                moving.append(state)
                free.give(state.gpu_ids)
            if layout is not None:
                to_start.append((state, layout))
        if not to_start:  # most rounds: nothing to place, so nothing to move out of the way either
            return Decisions(preempt=tuple(state.job_id for state in moving))
        placing = _InShape(free, gpu_node, self._node_type, kept)
        placed = placing.place(to_start, layouts)
        if placed is None:
            return None
        for state in placing.evicted:
            free.give(state.gpu_ids)
        starts = [_start_on(free, state, layout) for state, layout in placed]
        preempt = [state.job_id for state in moving + placing.evicted]
        return Decisions(start=tuple(starts), preempt=tuple(preempt))

    def _has_shape(self, layout: Layout, shape: Shape) -> bool:
        """Whether ``layout``'s `_shape` is ``shape``; one copy on one node is compared in place."""
        if len(layout) != len(shape):
            return False
        if len(layout) == 1 and len(layout[0]) == 1:
            node, n = layout[0][0]
            only = shape[0]
            return len(only) == 1 and only[0][0] == self._node_type[node] and only[0][1] == n
        return self._shape(layout) == shape

    def _shape(self, layout: Layout) -> Shape:
        """Per copy, its nodes' (GPU type, GPUs): what a layout's progress depends on.

        Remembered: a kept job's plan is often asked again every round. One
        copy on one node, the most common layout, is cheaper to build than to look up.
        """
        if len(layout) == 1 and len(layout[0]) == 1:
            node, n = layout[0][0]
            return (((self._node_type[node], n),),)
        shape = self._shapes.get(layout)
        if shape is None:
            if len(self._shapes) >= _SHAPES_KEPT:
                self._shapes.clear()
            node_type = self._node_type
            shape = self._shapes[layout] = tuple(sorted(tuple(sorted((node_type[node], n) for node, n in take))
                                                        for take in layout))
        return shape

    def _current_layout(self, gpu_node: tuple[int, ...], state: JobState) -> tuple[Layout, Shape]:
        """`current_layout` and its `_shape`, worked out again only when the job's GPUs changed."""
        key = (state.gpu_ids, state.copies)
        cached = self._current.get(state.job_id)
        if cached is not None and cached[0] == key:
            return cached[1], cached[2]
        layout = current_layout(gpu_node, state)
        shape = self._shape(layout)
        self._current[state.job_id] = (key, layout, shape)
        return layout, shape


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class _InShape:
    """Places layouts on free GPUs in their shape: planned nodes with room, else others of their types.

    ``kept``: running jobs that stay where they run though planned elsewhere.
    When no node of a type has room for a take, the kept jobs on the node of
    that type with the most room move to their own planned layouts
    (`evicted`), and the take goes there. Each type's nodes are kept in
    buckets by free GPUs left, so a take finds its node without a scan.
    """

    def __init__(self, free: TentativeAllocation, gpu_node: Sequence[int], node_type: Sequence[int],
                 kept: dict[str, JobState]) -> None:
        self._gpu_node, self._node_type = gpu_node, node_type
        self._room = free.free_counts()  # free GPUs left per node
        # _by_room[type][g]: the type's nodes with g free GPUs left, ascending
        self._by_room: list[dict[int, list[int]]] = [{} for _ in range(max(node_type, default=-1) + 1)]
        for node, room in enumerate(self._room):
            self._by_room[node_type[node]].setdefault(room, []).append(node)
        self._kept = kept
        # Per node, the kept jobs on it and the GPUs they hold there: made when first asked
        # (`_make_room`), as most placements find room without them.
        self._kept_on: dict[int, list[JobState]] | None = None
        self._kept_gpus: dict[int, int] = {}
        self.evicted: list[JobState] = []

    def _kept_tables(self) -> dict[int, list[JobState]]:
        """``_kept_on``, made on the first call (and ``_kept_gpus`` with it)."""
        if self._kept_on is None:
            kept_on: dict[int, list[JobState]] = {}
            for state in self._kept.values():
                counts: dict[int, int] = {}
                for gpu in state.gpu_ids:
                    node = self._gpu_node[gpu]
                    counts[node] = counts.get(node, 0) + 1
                for node, k in counts.items():
                    kept_on.setdefault(node, []).append(state)
                    self._kept_gpus[node] = self._kept_gpus.get(node, 0) + k
            self._kept_on = kept_on
        return self._kept_on

    def _change(self, node: int, by: int) -> None:
        """``by`` more free GPUs left on ``node`` (fewer when negative)."""
        buckets = self._by_room[self._node_type[node]]
        old = self._room[node]
        bucket = buckets[old]
        del bucket[bisect.bisect_left(bucket, node)]
        self._room[node] = old + by
        bisect.insort(buckets.setdefault(old + by, []), node)

    def _fitting(self, node_type: int, n: int, used: set[int], own: Sequence[int]) -> int | None:
        """The job's own node of the type with ``n`` free, else the one with the fewest free (lowest id first)."""
        room = self._room
        mine = [m for m in own if self._node_type[m] == node_type and m not in used and room[m] >= n]
        if mine:
            return min(mine, key=lambda m: (room[m], m))
        buckets = self._by_room[node_type]
        for left in sorted(g for g in buckets if g >= n):
            for node in buckets[left]:
                if node not in used:
                    return node
        return None

    def place(self, to_start: list[tuple[JobState, Layout]],
              layouts: dict[str, Layout]) -> list[tuple[JobState, Layout]] | None:
        """``to_start`` and any evicted jobs, each with the nodes it gets; None if some take fits nowhere."""
        jobs: list[tuple[JobState, Layout]] = []
        takes: list[list[list[tuple[int, int] | None]]] = []  # per job, per copy: (node, GPUs) or None
        # (-GPUs, job, copy, entry) of the takes still without a node: the widest go first,
        # before narrower ones crowd the nodes with room for them.
        left: list[tuple[int, int, int, int]] = []
        owns: dict[int, list[int]] = {}  # per job, the nodes it runs on

        def claim_planned(state: JobState, layout: Layout) -> None:
            j = len(jobs)
            jobs.append((state, layout))
            job_takes = []
            for c, take in enumerate(layout):
                entries: list[tuple[int, int] | None] = []
                for e, (node, n) in enumerate(take):
                    if self._room[node] >= n:
                        self._change(node, -n)
                        entries.append((node, n))
                    else:
                        entries.append(None)
                        heapq.heappush(left, (-n, j, c, e))
                job_takes.append(entries)
            takes.append(job_takes)

        for state, layout in to_start:
            claim_planned(state, layout)
        while left:
            _, j, c, e = heapq.heappop(left)
            state, layout = jobs[j]
            planned, n = layout[c][e]
            used = {node for node, _ in layout[c]} | {entry[0] for entry in takes[j][c] if entry is not None}
            own = owns.get(j)
            if own is None:  # the nodes it runs on: asked again for each of its takes
                own = owns[j] = list(dict.fromkeys(map(self._gpu_node.__getitem__, state.gpu_ids)))
            node = self._fitting(self._node_type[planned], n, used, own)
            evicted: list[JobState] = []
            if node is None:
                made = self._make_room(self._node_type[planned], n, used)
                if made is None:
                    return None
                node, evicted = made
            self._change(node, -n)
            takes[j][c][e] = (node, n)
            for moved in evicted:  # after the take: their own layouts look for room anew
                claim_planned(moved, layouts[moved.job_id])
        return [(state, tuple(tuple(entry for entry in copy if entry is not None) for copy in job_takes))
                for (state, _), job_takes in zip(jobs, takes)]

    def _make_room(self, node_type: int, n: int, used: set[int]) -> tuple[int, list[JobState]] | None:
        """Move kept jobs off the node of the type with the most room until it has ``n`` free.

        (that node, the jobs moved), or None if no node can have ``n`` free so.
        Only nodes holding kept jobs can gain room, so only those are looked at.
        """
        kept_on = self._kept_tables()
        room, kept_gpus = self._room, self._kept_gpus
        candidates = [node for node in kept_on
                      if self._node_type[node] == node_type and node not in used
                      and room[node] + kept_gpus[node] >= n]
        if not candidates:
            return None
        node = min(candidates, key=lambda m: (-room[m], m))
        moved: list[JobState] = []
        for state in sorted(kept_on[node], key=lambda s: -self._gpus_on(s, node)):
            if room[node] >= n:
                break
            for gpu in state.gpu_ids:
                other = self._gpu_node[gpu]
                self._change(other, 1)
                kept_gpus[other] -= 1
                if state in kept_on.get(other, ()):
                    kept_on[other].remove(state)
            moved.append(state)
        self.evicted.extend(moved)
        return node, moved

    def _gpus_on(self, state: JobState, node: int) -> int:
        return sum(1 for g in state.gpu_ids if self._gpu_node[g] == node)


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class _FinishUtility:
    """A job's utility of finishing in slot t of this round's plan (slot 0 is now): `at`.

    A class, not a closure: compiled, its bound method is called the fast way, a closure the generic way.
    """

    __slots__ = ("curve", "first")

    def __init__(self, curve: UtilityCurve, elapsed: int) -> None:
        self.curve = curve
        self.first = elapsed + 1  # slots since arrival at the end of slot 0

    def at(self, t: int) -> float:
        return self.curve.at(self.first + t)


def _start_on(free: TentativeAllocation, state: JobState, layout: Layout) -> Start:
    """Start ``state`` on ``layout``'s nodes, preferring its previous GPUs on each; take them from ``free``."""
    gpus: list[int] = []
    held = set(state.gpu_ids)  # a forked job holds many: look them up, not along
    for take in layout:
        for node, n in take:
            ids = free.free_gpu_ids(node)  # ascending: its previous GPUs first, each part in order
            if held:
                ids = [g for g in ids if g in held] + [g for g in ids if g not in held]
            gpus.extend(ids[:n])
            free.take(ids[:n])
    return Start(state.job_id, tuple(gpus), copies=len(layout))


def current_layout(gpu_node: tuple[int, ...], state: JobState) -> Layout:
    """A running job's placement as per-copy node counts."""
    n = state.job.n_gpus
    layout = []
    for c in range(state.copies):
        counts: dict[int, int] = {}
        for g in state.gpu_ids[c * n:(c + 1) * n]:
            counts[gpu_node[g]] = counts.get(gpu_node[g], 0) + 1
        layout.append(tuple(sorted(counts.items())))
    return tuple(layout)


def _non_dominated(options: list[Option]) -> list[Option]:
    """Drop options that cost more and progress no further than another."""
    if len(options) <= 1:
        return options
    keep: list[Option] = []
    for o in sorted(options, key=lambda o: (o.cost, -o.progress)):
        if not keep or o.progress > keep[-1].progress:
            keep.append(o)
    return keep
