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
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np


def position_prices(lower: float, upper: float, capacity: int) -> np.ndarray:
    """Price of the k-th GPU taken on a node of ``capacity`` GPUs, k = 0..capacity-1.

    Taking k GPUs at load g costs ``sum(position_prices[g:g+k])``: the exact
    marginal sum of the price curve.
    """
    ratio = upper / lower if lower > 0 else 1.0
    return lower * ratio ** (np.arange(capacity) / capacity)


def sigmoid_utility(slots: float, gamma1: float, gamma2: float, gamma3: float,
                    floor: float = 1e-9) -> float:
    """OASiS-style utility of finishing after ``slots`` slots: high until about gamma3, then falling.

    Floored at ``floor * gamma1`` so a job that has waited long keeps a tiny
    positive utility (and prices stay finite).
    """
    z = gamma2 * (slots - gamma3)
    value = gamma1 / (1.0 + math.exp(z)) if z < 700 else 0.0
    return max(value, floor * gamma1)


@dataclass(frozen=True, slots=True)
class Option:
    """One way to hold GPUs in one slot: its priced cost, its progress, and GPUs per node."""

    cost: float
    progress: float
    take: tuple[tuple[int, int], ...]  # (node id, GPUs)


@dataclass(frozen=True, slots=True)
class Plan:
    """The dual subroutine's answer: slot -> option (slots >= horizon-1 share the last row)."""

    payoff: float
    finish_slot: int
    slots: tuple[tuple[int, Option], ...]
    tail_slots: int  # how many slots past the explicit horizon it uses


def _greedy(rows: list[Option | None], tail: Option | None, n_tail: int,
            work: float) -> tuple[float, list[int], int] | None:
    """Cheapest slots (<= one option each) by cost per progress until ``work`` is covered."""
    entries = [(o.cost / o.progress, -o.progress, t) for t, o in enumerate(rows) if o is not None]
    entries.sort()
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
            n_used_tail += k
            done += k * tail.progress
            cost += k * tail.cost
            if n_used_tail >= n_tail:
                tail_ratio = math.inf
    return cost, used, n_used_tail


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
    by_ratio = [min(row, key=lambda o: (o.cost / o.progress, -o.progress)) if row else None
                for row in options]
    by_speed = [max(row, key=lambda o: (o.progress, -o.cost)) if row else None for row in options]
    last = len(options) - 1
    # Earliest feasible finish: the most progress in every slot.
    done, t_min = 0.0, None
    for t in range(last):
        option = by_speed[t]
        done += option.progress if option is not None else 0.0
        if done >= work - 1e-9:
            t_min = t
            break
    if t_min is None:
        tail = by_speed[last]
        if tail is None:
            return None
        t_min = last + max(0, math.ceil((work - done) / tail.progress - 1e-9) - 1)
    best: Plan | None = None
    for t_hat in range(t_min, t_min + max_wait_slots + 1):
        n_rows = min(t_hat + 1, last)  # explicit slots 0..n_rows-1
        n_tail = t_hat + 1 - n_rows  # copies of the last row
        for rows in (by_ratio, by_speed):
            picked = _greedy(list(rows[:n_rows]), rows[last], n_tail, work)
            if picked is not None:
                break
        if picked is None:
            continue
        cost, used, n_used_tail = picked
        payoff = utility(t_hat) - cost
        if payoff > 0 and (best is None or payoff > best.payoff):
            slots = [(t, rows[t]) for t in sorted(used)]
            if n_used_tail:
                slots.append((last, rows[last]))
            best = Plan(payoff, t_hat, tuple((t, o) for t, o in slots if o is not None),
                        n_used_tail)
    return best


class PriceBook:
    """Committed GPUs per node and slot over a short horizon, and their prices.

    Row ``horizon-1`` stands for every later slot.
    """

    def __init__(self, capacity: Sequence[int], lower: float, upper: Sequence[float],
                 horizon: int) -> None:
        self.capacity = np.asarray(capacity, dtype=int)
        self.load = np.zeros((horizon, len(capacity)), dtype=int)
        self._cum = [np.concatenate([[0.0], np.cumsum(position_prices(lower, u, c))])
                     for u, c in zip(upper, self.capacity)]

    @property
    def horizon(self) -> int:
        return self.load.shape[0]

    def cost(self, slot: int, node: int, n_gpus: int) -> float:
        """Marginal price of taking ``n_gpus`` more GPUs on ``node`` in ``slot``."""
        g = self.load[slot, node]
        return float(self._cum[node][g + n_gpus] - self._cum[node][g])

    def next_price(self, slot: int, node: int) -> float:
        g = self.load[slot, node]
        return float(self._cum[node][g + 1] - self._cum[node][g]) if g < self.capacity[node] else math.inf

    def free(self, slot: int, node: int) -> int:
        return int(self.capacity[node] - self.load[slot, node])

    def commit(self, plan: Plan) -> None:
        for slot, option in plan.slots:
            for node, n in option.take:
                self.load[slot, node] += n


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
        g = book.load[slot, node] + taken[node]
        if g < book.capacity[node]:
            heapq.heappush(heap, (float(book._cum[node][g + 1] - book._cum[node][g]), node))
    return cost, tuple(sorted(taken.items()))
