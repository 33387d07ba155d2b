"""Online primal-dual scheduling pieces (papers/hadar.md §3): prices, options, the dual subroutine.

A GPU's price rises exponentially with how full its node is in a time slot
(``price = L * (U/L) ** (load / capacity)``). A job is admitted when the
best plan's utility exceeds the priced resources it uses; its resources
then become dearer for the jobs that follow. Everything here is pure and
independent of the view, so the worked cases of the digest test it directly.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from mypy_extensions import mypyc_attr

from rackwise.frozen import pickled_by_constructor
from rackwise.sorted_ints import index_of, insert

_EXPONENTS: dict[int, np.ndarray] = {}  # k / capacity, k = 0..capacity-1, by capacity (read-only arrays)


def position_prices(lower: float, upper: float, capacity: int) -> np.ndarray:
    """Price of the k-th GPU taken on a node of ``capacity`` GPUs, k = 0..capacity-1.

    Taking k GPUs at load g costs ``sum(position_prices[g:g+k])``: the exact
    marginal sum of the price curve.
    """
    ratio = upper / lower if lower > 0 else 1.0
    exponents = _EXPONENTS.get(capacity)
    if exponents is None:  # a book is built every round, on nodes of a few sizes
        exponents = _EXPONENTS[capacity] = np.arange(capacity) / capacity
        exponents.flags.writeable = False
    return lower * ratio ** exponents


def sigmoid_utility(slots: float, gamma1: float, gamma2: float, gamma3: float,
                    floor: float = 1e-9) -> float:
    """OASiS-style utility of finishing after ``slots`` slots: high until about gamma3, then falling.

    Floored at ``floor * gamma1`` so a job that has waited long keeps a tiny
    positive utility (and prices stay finite).
    """
    z = gamma2 * (slots - gamma3)
    value = gamma1 / (1.0 + math.exp(z)) if z < 700 else 0.0
    return max(value, floor * gamma1)


# Past |z| = 40 the sigmoid is flat in doubles: exp(-40) < 2**-54, so 1 + exp(z) rounds to 1
# and the value is gamma1; gamma1 / (1 + exp(40)) < 1e-17 * gamma1, so the floor wins.
_FLAT_Z = 41.0


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class UtilityCurve:
    """`sigmoid_utility` of one knee as a function of whole slots, each value worked out once.

    Outside a window of about ``2 * 41 / gamma2`` slots around the knee the
    curve is flat in doubles (``gamma1`` before, the floor after), so only
    the window's values are kept, in a list grown as far as asked.
    ``gamma1`` and ``gamma2`` must be positive (`HadarParameters` checks).
    """

    def __init__(self, gamma1: float, gamma2: float, gamma3: float) -> None:
        self.gamma1, self.gamma2, self.gamma3 = gamma1, gamma2, gamma3
        reach = _FLAT_Z / gamma2
        self.first = math.floor(gamma3 - reach)  # slots below it: the curve's top, exactly
        self.last = math.ceil(gamma3 + reach)  # slots above it: its floor, exactly
        self.top = sigmoid_utility(self.first - 1, gamma1, gamma2, gamma3)
        self.bottom = sigmoid_utility(self.last + 1, gamma1, gamma2, gamma3)
        self.values: list[float] = []  # slots first, first + 1, ...; -1.0 until asked (values are > 0)
        self.users = 0  # jobs planning with it: the planner forgets it when none is left

    def at(self, slots: int) -> float:
        """The utility of finishing ``slots`` slots after arrival: ``sigmoid_utility``'s value."""
        i = slots - self.first
        if i < 0:
            return self.top
        if slots > self.last:
            return self.bottom
        values = self.values
        if i >= len(values):
            values.extend([-1.0] * (i + 1 - len(values)))
        value = values[i]
        if value < 0.0:
            value = values[i] = sigmoid_utility(slots, self.gamma1, self.gamma2, self.gamma3)
        return value


# Options and plans are made by the million and read-only by convention, not frozen: the
# __init__ a dataclass generates stays Python in the compiled build, and a frozen one sets
# every field through object.__setattr__. Their own __init__ compiles.
@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(init=False, slots=True)
class Option:
    """One way to hold GPUs in one slot: its priced cost, its progress, and GPUs per node."""

    cost: float
    progress: float
    take: tuple[tuple[int, int], ...]  # (node id, GPUs)

    def __init__(self, cost: float, progress: float, take: tuple[tuple[int, int], ...]) -> None:
        self.cost = cost
        self.progress = progress
        self.take = take


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(init=False, slots=True)
class Plan:
    """The dual subroutine's answer: slot -> option (slots >= horizon-1 share the last row)."""

    payoff: float
    finish_slot: int
    slots: tuple[tuple[int, Option], ...]
    tail_slots: int  # how many slots past the explicit horizon it uses

    def __init__(self, payoff: float, finish_slot: int, slots: tuple[tuple[int, Option], ...],
                 tail_slots: int) -> None:
        self.payoff = payoff
        self.finish_slot = finish_slot
        self.slots = slots
        self.tail_slots = tail_slots


Entry = tuple[float, float, int]  # (cost per progress, -progress, slot): the greedy's order


def _entries(rows: Sequence[Option | None]) -> list[Entry]:
    """The rows' options in the order the greedy takes them: cheapest per progress first."""
    entries = [(o.cost / o.progress, -o.progress, t) for t, o in enumerate(rows) if o is not None]
    entries.sort()
    return entries


def _greedy(rows: Sequence[Option | None], entries: list[Entry], tail: Option | None,
            n_tail: int, work: float) -> tuple[float, list[int], int] | None:
    """Cheapest slots (<= one option each) by cost per progress until ``work`` is covered.

    ``entries``: the explicit slots the greedy may use, as `_entries` orders
    them (their options are in ``rows``); ``n_tail`` more slots each offer ``tail``.
    """
    done = cost = 0.0
    used: list[int] = []
    n_used_tail = 0
    tail_ratio = tail.cost / tail.progress if tail is not None and n_tail > 0 else math.inf
    index = 0
    while done < work - 1e-9:
        explicit = entries[index][0] if index < len(entries) else math.inf
        if explicit == math.inf and tail_ratio == math.inf:
            return None
        if explicit <= tail_ratio:
            t = entries[index][2]
            index += 1
            option = rows[t]
            assert option is not None
            used.append(t)
            done += option.progress
            cost += option.cost
        else:
            assert tail is not None
            k = min(n_tail - n_used_tail, math.ceil((work - done) / tail.progress - 1e-9))
            if k == 0:
                # What is left is below the slot tolerance (rounding, on large work): covered,
                # as `best_plan`'s earliest finish counts it. Looping on would never end.
                break
            n_used_tail += k
            done += k * tail.progress
            cost += k * tail.cost
            if n_used_tail >= n_tail:
                tail_ratio = math.inf
    return cost, used, n_used_tail


def _cost_floor(by_ratio: Sequence[Option | None], by_speed: Sequence[Option | None],
                work: float) -> float:
    """A lower bound on what any plan covering ``work`` costs (-inf when none is known).

    Every unit of progress costs at least the lowest cost per progress on
    offer (``by_ratio`` holds each slot's lowest), and a plan covers the work
    up to the fills' tolerance (1e-9, or 1e-9 of a tail slot's progress; the
    fastest option bounds that). The relative margin of 1e-9 is far above the
    rounding of the fills' few sums, so the bound holds for the computed costs.
    """
    ratio = math.inf
    for o in by_ratio:
        if o is not None:
            per_progress = o.cost / o.progress
            if per_progress < ratio:
                ratio = per_progress
    fastest = -math.inf
    for o in by_speed:
        if o is not None and o.progress > fastest:
            fastest = o.progress
    covered = work - 1e-9 * (1.0 + fastest)
    if ratio <= 0 or covered <= 0:
        return -math.inf
    return ratio * covered * (1.0 - 1e-9)


def _largest(values: list[float]) -> float:
    """``max(values)`` of a non-empty list, the same float: compiled, a loop stays native where
    ``max`` is a generic call on the builtins module (made for every job a round plans)."""
    largest = values[0]
    for value in values:
        if value > largest:
            largest = value
    return largest


def _earliest_finish(by_speed: Sequence[Option | None], work: float) -> int | None:
    """The first slot by whose end ``work`` can be done, taking the most progress in every slot."""
    last = len(by_speed) - 1
    done = 0.0
    for t in range(last):
        option = by_speed[t]
        if option is not None:
            done += option.progress
        if done >= work - 1e-9:
            return t
    tail = by_speed[last]
    if tail is None:
        return None
    return last + max(0, math.ceil((work - done) / tail.progress - 1e-9) - 1)


def _all_alike(slots: Sequence[Option | None], option: Option) -> bool:
    """Whether every slot offers ``option`` (an equal one: same cost, progress and take)."""
    for other in slots:
        if other is None:
            return False
        if other is not option and not (other.cost == option.cost and other.progress == option.progress
                                        and other.take == option.take):
            return False
    return True


def best_plan(options: Sequence[Sequence[Option]], work: float, utility: Callable[[int], float],
              max_wait_slots: int) -> Plan | None:
    """The dual subroutine: the plan maximising utility minus cost, or None if none pays.

    ``options[t]`` lists what the job could hold in slot t (t = 0 is now);
    the last row stands for every later slot too. ``utility(t_hat)`` is the
    utility of finishing in slot t_hat. Candidate finish slots run from the
    earliest feasible one to ``max_wait_slots`` later; for each, slots are
    picked greedily by cost per unit of progress, at most one option per
    slot (the fastest options are tried if the cheapest cannot finish).
    """
    if not options:
        return None
    if all(len(row) <= 1 for row in options):
        return best_single_plan([row[0] if row else None for row in options], work, utility, max_wait_slots)
    by_ratio = [min(row, key=lambda o: (o.cost / o.progress, -o.progress)) if row else None
                for row in options]
    by_speed = [max(row, key=lambda o: (o.progress, -o.cost)) if row else None for row in options]
    # When both pick the same everywhere, so would both fills.
    same = all(a is b for a, b in zip(by_ratio, by_speed))
    return _best_of_fills((by_ratio,) if same else (by_ratio, by_speed), by_ratio, by_speed,
                          work, utility, max_wait_slots)


def best_single_plan(slots: Sequence[Option | None], work: float, utility: Callable[[int], float],
                     max_wait_slots: int) -> Plan | None:
    """`best_plan` of a job offered one option a slot at most: ``slots[t]``, or None for none.

    The common case (a job of one GPU type): the cheapest option of a slot is its fastest.
    """
    if not slots:
        return None
    first = slots[0]
    if first is not None and _all_alike(slots, first):
        # The same option in every slot (a book whose slots hold equal loads, as they
        # mostly do): the floor and the greedy's order need no search.
        return _uniform_plan(first, len(slots), work, utility, max_wait_slots)
    return _best_of_fills((slots,), slots, slots, work, utility, max_wait_slots)


def _best_of_fills(fills: tuple[Sequence[Option | None], ...], by_ratio: Sequence[Option | None],
                   by_speed: Sequence[Option | None], work: float, utility: Callable[[int], float],
                   max_wait_slots: int) -> Plan | None:
    """`best_plan` once each slot's cheapest (``by_ratio``) and fastest (``by_speed``) options are
    known: the candidate finish slots, each filled by the first of ``fills`` that covers the work."""
    t_min = _earliest_finish(by_speed, work)
    if t_min is None:
        return None
    # Candidate finish slots: t_min + i, i = 0..max_wait_slots.
    utilities = [utility(t_min + i) for i in range(max_wait_slots + 1)]
    # A job priced out (half to five in six of those planned in a busy round) is told so
    # here, without the fills: no plan can cost less than this floor.
    if _largest(utilities) <= _cost_floor(by_ratio, by_speed, work):
        return None
    last = len(by_speed) - 1
    # Every candidate finish slot orders the explicit slots alike: sort them once per fill.
    ordered = [_entries(rows[:last]) for rows in fills]
    best: Plan | None = None
    repeat: tuple[int, Picked] | None = None  # (n_rows, fill) that later candidates repeat
    for i, finish_utility in enumerate(utilities):
        t_hat = t_min + i
        n_rows = min(t_hat + 1, last)  # explicit slots 0..n_rows-1
        n_tail = t_hat + 1 - n_rows  # copies of the last row
        if repeat is not None and repeat[0] == n_rows:
            rows, picked = repeat[1]
        else:
            rows, picked = _fill(fills, ordered, n_rows, n_tail, work)
            # A first-kind fill that left tail slots unused took every step as it
            # would with more of them: later candidates (one more tail slot each) repeat it.
            repeat = ((n_rows, (rows, picked)) if picked is not None and rows is fills[0]
                      and picked[2] < n_tail else None)
        if picked is None:
            continue
        cost, used, n_used_tail = picked
        payoff = finish_utility - cost
        if payoff > 0 and (best is None or payoff > best.payoff):
            slots = [(t, rows[t]) for t in sorted(used)]
            if n_used_tail:
                slots.append((last, rows[last]))
            best = Plan(payoff, t_hat, tuple((t, o) for t, o in slots if o is not None),
                        n_used_tail)
    return best


Picked = tuple[Sequence[Option | None], tuple[float, list[int], int] | None]  # (fill's rows, greedy)


def _uniform_plan(option: Option, n_slots: int, work: float, utility: Callable[[int], float],
                  max_wait_slots: int) -> Plan | None:
    """`best_plan` when every one of the ``n_slots`` slots offers just ``option``: the same steps, less search.

    Every slot has the same cost per progress, so the greedy takes the
    explicit slots in order, then the tail: the fill is `_greedy`'s own, on
    entries already in its order.
    """
    row: list[Option | None] = [option] * n_slots
    t_min = _earliest_finish(row, work)
    if t_min is None:
        return None
    # Candidate finish slots: t_min + i, i = 0..max_wait_slots.
    utilities = [utility(t_min + i) for i in range(max_wait_slots + 1)]
    ratio = option.cost / option.progress
    covered = work - 1e-9 * (1.0 + option.progress)
    if ratio > 0 and covered > 0 and _largest(utilities) <= ratio * covered * (1.0 - 1e-9):
        return None  # `_cost_floor`'s test, its minimum and maximum over equal options
    last = n_slots - 1
    entries = [(ratio, -option.progress, t) for t in range(last)]  # sorted: equal but for t
    best: Plan | None = None
    repeat: tuple[int, tuple[float, list[int], int] | None] | None = None  # as in `best_plan`
    for i, finish_utility in enumerate(utilities):
        t_hat = t_min + i
        n_rows = min(t_hat + 1, last)
        n_tail = t_hat + 1 - n_rows
        if repeat is not None and repeat[0] == n_rows:
            picked = repeat[1]
        else:
            picked = _greedy(row, entries[:n_rows], option, n_tail, work)
            repeat = (n_rows, picked) if picked is not None and picked[2] < n_tail else None
        if picked is None:
            continue
        cost, used, n_used_tail = picked
        payoff = finish_utility - cost
        if payoff > 0 and (best is None or payoff > best.payoff):
            slots = [(t, option) for t in sorted(used)]
            if n_used_tail:
                slots.append((last, option))
            best = Plan(payoff, t_hat, tuple(slots), n_used_tail)
    return best


def _fill(fills: Sequence[Sequence[Option | None]], ordered: Sequence[list[Entry]], n_rows: int,
          n_tail: int, work: float) -> Picked:
    """The first fill whose greedy covers the work with the first ``n_rows`` slots and ``n_tail`` more."""
    last = len(fills[0]) - 1
    picked = None
    for rows, entries in zip(fills, ordered):
        if n_rows < last:
            entries = [e for e in entries if e[2] < n_rows]
        picked = _greedy(rows, entries, rows[last], n_tail, work)
        if picked is not None:
            break
    return rows, picked


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True, slots=True)
class _NodeClasses:
    """A book's nodes in classes of one group, capacity and price curve (ids ascending in each).

    Shared by books on the same cluster: read it, never change it.
    """

    class_of: list[int]  # per node
    group: list[int]  # per class
    capacity: list[int]  # per class
    upper: list[float]  # per class: the top of its price curve
    members: list[list[int]]  # per class
    group_classes: dict[int, list[int]]  # group -> its classes, ascending
    free: dict[int, int]  # group -> GPUs

    def __reduce__(self) -> tuple[type, tuple[Any, ...]]:
        return pickled_by_constructor(self)


# Classes by (capacities, groups), for curves that are the same across each group:
# a planner builds its books on the same cluster every round.
_GROUPED: dict[tuple[tuple[int, ...], tuple[int, ...]], _NodeClasses] = {}


def _node_classes(caps: list[int], labels: list[int], uppers: list[float]) -> _NodeClasses:
    """Nodes of the same group, capacity and price-curve top form a class, in order of their first node."""
    group_upper = dict(zip(labels, uppers))
    if list(map(group_upper.__getitem__, labels)) != uppers:  # a group with several tops
        return _classes_by_key(list(zip(labels, caps, uppers)))
    key = (tuple(caps), tuple(labels))
    grouped = _GROUPED.get(key)
    if grouped is None:
        if len(_GROUPED) >= 64:
            _GROUPED.clear()
        grouped = _GROUPED[key] = _classes_by_key([(g, c, 0.0) for g, c in zip(labels, caps)])
    return _NodeClasses(grouped.class_of, grouped.group, grouped.capacity,
                        list(map(group_upper.__getitem__, grouped.group)), grouped.members,
                        grouped.group_classes, grouped.free)


def _classes_by_key(node_keys: list[tuple[int, int, float]]) -> _NodeClasses:
    """Classes of nodes with equal (group, capacity, top price), in order of their first node."""
    keys = {key: k for k, key in enumerate(dict.fromkeys(node_keys))}
    class_of = list(map(keys.__getitem__, node_keys))
    members: list[list[int]] = [[] for _ in keys]
    for node, k in enumerate(class_of):
        members[k].append(node)
    group_classes: dict[int, list[int]] = {}
    free: dict[int, int] = {}
    for k, (g, c, _) in enumerate(keys):
        group_classes.setdefault(g, []).append(k)
        free[g] = free.get(g, 0) + c * len(members[k])
    return _NodeClasses(class_of, [g for g, _, _ in keys], [c for _, c, _ in keys], [u for _, _, u in keys],
                        members, group_classes, free)


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class PriceBook:
    """Committed GPUs per node and slot over a short horizon, and their prices.

    Row ``horizon-1`` stands for every later slot. ``groups`` labels the nodes
    (Hadar: by GPU type; default: all in one group) so that questions can be
    asked of some groups only. Nodes of one group with the same capacity and
    price curve form a class, and each class keeps its nodes sorted by load:
    the questions a planner asks for every job (free GPUs, the cheapest node
    with room, nodes by free GPUs) then cost in classes x loads, not in nodes.
    ``load`` is a read-only copy: change the book with `take` or `commit`.
    ``memo`` holds what callers work out from the book; every change empties it.
    """

    def __init__(self, capacity: Sequence[int], lower: float, upper: Sequence[float],
                 horizon: int, groups: Sequence[int] | None = None) -> None:
        # Plain ints and lists on the hot paths: a book is built every round and
        # asked about, and changed, for every job; numpy scalars would cost more there.
        caps: list[int] = np.asarray(capacity, dtype=int).tolist()
        n_nodes = len(caps)
        labels = [0] * n_nodes if groups is None else list(map(int, groups))
        uppers: list[float] = np.asarray(upper, dtype=float).tolist()
        self._caps = caps
        self._group_of = labels
        self._loads = [[0] * n_nodes for _ in range(horizon)]  # [slot][node]: committed GPUs
        classes = _node_classes(caps, labels, uppers)
        self._class_of = classes.class_of
        self._cap = classes.capacity
        self._group_classes = classes.group_classes
        self._classes_of: dict[tuple[int, ...], list[int]] = {}
        # Plain floats: the same values, faster.
        self._cum_values: list[list[float]] = [[0.0, *np.cumsum(position_prices(lower, u, c)).tolist()]
                                               for c, u in zip(classes.capacity, classes.upper)]
        self._cum = list(map(self._cum_values.__getitem__, self._class_of))  # a class's nodes share one
        # _by_load[slot][class][g]: the class's nodes holding g committed GPUs, ascending.
        self._by_load = [[[list(nodes) if g == 0 else [] for g in range(cap + 1)]
                          for nodes, cap in zip(classes.members, classes.capacity)] for _ in range(horizon)]
        self._free = [dict(classes.free) for _ in range(horizon)]
        self.memo: dict[object, Any] = {}  # answers worked out from the book, until it changes

    @classmethod
    def flat(cls, capacity: Sequence[int], groups: Sequence[int] | None = None) -> PriceBook:
        """A one-slot book with one price everywhere: a record of the GPUs taken.

        Building a book costs far more than loading one, so a caller that
        asks often keeps one and reloads it with `set_loads`, which replaces
        all the slot held.
        """
        return cls(capacity, 1.0, [1.0] * len(capacity), 1, groups=groups)

    @property
    def horizon(self) -> int:
        return len(self._loads)

    @property
    def capacity(self) -> np.ndarray:
        """GPUs of each node."""
        return np.asarray(self._caps, dtype=int)

    @property
    def load(self) -> np.ndarray:
        """Committed GPUs per slot and node (a read-only copy): change them with `take` or `commit`."""
        load = np.array(self._loads, dtype=int).reshape(self.horizon, len(self._caps))
        load.flags.writeable = False
        return load

    def first_alike(self) -> list[int]:
        """For each slot, the first slot holding the same loads on every node (so the same prices).

        Kept until the book changes: the jobs a planner turns away in between ask again.
        """
        alike: list[int] | None = self.memo.get("first_alike")
        if alike is None:
            loads = self._loads
            alike = self.memo["first_alike"] = [loads.index(row) for row in loads]  # first equal row
        return alike

    def cost(self, slot: int, node: int, n_gpus: int) -> float:
        """Marginal price of taking ``n_gpus`` more GPUs on ``node`` in ``slot``."""
        g = self._loads[slot][node]
        cum = self._cum[node]
        return cum[g + n_gpus] - cum[g]

    def next_price(self, slot: int, node: int) -> float:
        g = self._loads[slot][node]
        return self._cum[node][g + 1] - self._cum[node][g] if g < self._caps[node] else math.inf

    def free(self, slot: int, node: int) -> int:
        return self._caps[node] - self._loads[slot][node]

    def take(self, slot: int, node: int, n_gpus: int) -> None:
        """Commit ``n_gpus`` more GPUs of ``node`` in ``slot``."""
        loads = self._loads[slot]
        g = loads[node]
        if not 0 <= g + n_gpus <= self._caps[node]:
            raise ValueError(f"node {node} has {self.free(slot, node)} free GPUs in slot {slot}, "
                             f"not {n_gpus}")
        by_load = self._by_load[slot][self._class_of[node]]
        del by_load[g][index_of(by_load[g], node)]
        insert(by_load[g + n_gpus], node)
        loads[node] = g + n_gpus
        self._free[slot][self._group_of[node]] -= n_gpus
        if self.memo:
            self.memo.clear()

    def set_loads(self, slot: int, loads: Sequence[int]) -> None:
        """Make ``loads`` (GPUs per node) the committed GPUs of ``slot``, all at once."""
        caps = self._caps
        if len(loads) != len(caps):
            raise ValueError(f"{len(loads)} loads for {len(caps)} nodes")
        by_load: list[list[list[int]]] = [[[] for _ in range(cap + 1)] for cap in self._cap]
        free = dict.fromkeys(self._free[slot], 0)
        for node, (k, g, cap) in enumerate(zip(self._class_of, loads, caps)):
            if not 0 <= g <= cap:
                raise ValueError(f"node {node} has {cap} GPUs, not {g}")
            by_load[k][g].append(node)  # ascending, as `take` keeps them
            free[self._group_of[node]] += cap - g
        self._loads[slot] = list(loads)
        self._by_load[slot] = by_load
        self._free[slot] = free
        if self.memo:
            self.memo.clear()

    def commit(self, plan: Plan) -> None:
        for slot, option in plan.slots:
            for node, n in option.take:
                self.take(slot, node, n)

    def _classes(self, groups: Iterable[int]) -> list[int]:
        key = tuple(groups)
        if key not in self._classes_of:  # few distinct group sets are ever asked for
            self._classes_of[key] = [k for g in key for k in self._group_classes.get(g, ())]
        return self._classes_of[key]

    def free_in(self, slot: int, groups: Sequence[int]) -> int:
        """Free GPUs of the given groups' nodes in ``slot``."""
        free = self._free[slot]
        if len(groups) == 1:  # most jobs can use one type only
            return free.get(groups[0], 0)
        return sum([free.get(g, 0) for g in groups])

    def cheapest_node(self, slot: int, groups: Iterable[int], n_gpus: int) -> tuple[float, int] | None:
        """The cheapest node of the groups with ``n_gpus`` free in ``slot`` (lowest id on ties): (cost, node).

        Nodes of a class at the same load cost the same, so only the first
        node of each (class, load) is a candidate.
        """
        best_cost, best_node = math.inf, -1
        for k in self._classes(groups):
            cum, by_load = self._cum_values[k], self._by_load[slot][k]
            for g in range(self._cap[k] - n_gpus + 1):
                nodes = by_load[g]
                if nodes:
                    # (cost, node) compared as a pair would be, without building the pair
                    cost, node = cum[g + n_gpus] - cum[g], nodes[0]
                    if best_node < 0 or cost < best_cost or (cost == best_cost and node < best_node):
                        best_cost, best_node = cost, node
        return None if best_node < 0 else (best_cost, best_node)

    def most_free_first(self, slot: int, groups: Iterable[int]) -> Iterator[tuple[int, int]]:
        """(node, free GPUs) of the groups' nodes with any free in ``slot``: most free first, then by id.

        Lazy; do not change the book while iterating.
        """
        classes = self._classes(groups)
        by_load = self._by_load[slot]
        for free in range(max((self._cap[k] for k in classes), default=0), 0, -1):
            lists = [by_load[k][self._cap[k] - free] for k in classes if self._cap[k] >= free]
            for node in lists[0] if len(lists) == 1 else heapq.merge(*lists):
                yield node, free

    def emptiest_node(self, slot: int, groups: Iterable[int], n_gpus: int,
                      excluded: set[int] | frozenset[int] = frozenset()) -> int | None:
        """The first node `most_free_first` yields with ``n_gpus`` free and not in ``excluded``, or None."""
        classes = self._classes(groups)
        by_load = self._by_load[slot]
        caps = self._cap
        if len(classes) == 1:  # one class: its load lists, least loaded first
            k = classes[0]
            for nodes in by_load[k][:max(caps[k] - max(n_gpus, 1) + 1, 0)]:
                for node in nodes:
                    if node not in excluded:
                        return node
            return None
        for free in range(max((caps[k] for k in classes), default=0), max(n_gpus, 1) - 1, -1):
            best: int | None = None
            for k in classes:
                if caps[k] >= free:
                    for node in by_load[k][caps[k] - free]:  # ascending: the first not excluded is the lowest
                        if node not in excluded:
                            if best is None or node < best:
                                best = node
                            break
            if best is not None:
                return best
        return None

    def with_free(self, slot: int, groups: Iterable[int]) -> list[int]:
        """The groups' nodes with any free GPU in ``slot``, ascending."""
        by_load = self._by_load[slot]
        return sorted(n for k in self._classes(groups) for nodes in by_load[k][:self._cap[k]]
                      for n in nodes)


def cheapest_gpus(book: PriceBook, slot: int, nodes: Sequence[int],
                  n_gpus: int) -> tuple[float, tuple[tuple[int, int], ...]] | None:
    """The ``n_gpus`` cheapest free GPUs among ``nodes`` in ``slot``: (cost, per-node counts)."""
    heap = [(book.next_price(slot, n), n) for n in nodes if book.free(slot, n) > 0]
    if sum(book.free(slot, n) for _, n in heap) < n_gpus:
        return None
    taken: dict[int, int] = {}
    heapq.heapify(heap)
    cost = 0.0
    for _ in range(n_gpus):
        price, node = heapq.heappop(heap)
        cost += price
        taken[node] = taken.get(node, 0) + 1
        g = book._loads[slot][node] + taken[node]
        if g < book._caps[node]:
            heapq.heappush(heap, (book._cum[node][g + 1] - book._cum[node][g], node))
    return cost, tuple(sorted(taken.items()))
