"""Where Hadar's rounds go, counted: how many jobs a round plans, and how many find nothing.

Runs ``hadar`` (or ``--policy hadare``, its defaults) on the first N jobs of a trace (0: all of
them; the cluster of ``bench_policies.py speed``), under the ideal performance model (or
``--perf network``), seed 0, with counters wrapped around its planner, and prints one JSON line:

* ``rounds``: rounds planned, and ``jobs_planned``: jobs planned over all of
  them (every active job is planned again each round);
* ``jobs_offered_nothing``: planned jobs that found no free GPU of their
  types in any slot of the price book, and ``offered_nothing_last``: those
  that came after the round's last job offered something (all that an
  early stop on a full book could skip);
* ``planned_after_slot0_full``: planned jobs that came after the point from
  which no job left in the round found room in slot 0 (now) for its GPUs
  among its types: they cannot run this round, and all that an early stop
  when slot 0 is full could skip;
* ``cpu_us_per_job_planned``: the run's CPU time over ``jobs_planned``;
* ``rounds_moved_as_planned``: rounds whose decision could not keep the
  running jobs planned in their shape where they run, and moved every
  job whose layout changed to its planned nodes;
* ``preemptions``: over all jobs (a job moved to other GPUs counts one),
  and ``avg_jct_s``, the mean job completion time.

``records_sha256`` is the same hash as ``bench_policies.py speed``'s: the
counters change no decision. CPU seconds include the counters' own cost.

    cd benchmarks && python bench_hadar_rounds.py --trace philly_2017 --first-n 10000
    cd benchmarks && python bench_hadar_rounds.py --trace itp_2021 --first-n 0 --perf network
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from bench_policies import SPEED_CLUSTERS, records_sha256, simulator_for
from provenance import provenance

import rackwise


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default="philly_2017", choices=sorted(SPEED_CLUSTERS))
    parser.add_argument("--first-n", type=int, default=10000, help="0: the whole trace")
    parser.add_argument("--perf", default="ideal", choices=["ideal", "network"])
    parser.add_argument("--policy", default="hadar", choices=["hadar", "hadare"])
    args = parser.parse_args()
    if rackwise.is_compiled():
        parser.error("its counters replace the planner' methods, which the compiled build "
                     "calls directly: run it on the plain-Python build")

    from rackwise.policies.parts.hadar_planning import HadarPlanner

    counts = {"rounds": 0, "jobs_planned": 0, "jobs_offered_nothing": 0, "offered_nothing_last": 0,
              "planned_after_slot0_full": 0, "rounds_moved_as_planned": 0}
    offered: list[bool] = []  # per job planned this round: whether any slot offered it GPUs
    room_now: list[bool] = []  # per job planned this round: whether slot 0 had its GPUs free
    rows_of, slots_of = HadarPlanner._rows, HadarPlanner._single_type_slots
    plan_of, decide_of = HadarPlanner._plan, HadarPlanner._decide_keeping

    def note(book: Any, types: Any, n_gpus: int, offers: bool) -> None:
        room_now.append(book.free_in(0, types.usable) >= n_gpus)  # asking for options leaves the loads
        offered.append(offers)

    # A job's options come from `_single_type_slots` if it can use one GPU type, else from `_rows`.
    def counted_rows(self: HadarPlanner, *args: Any) -> Any:
        book, _, n_gpus, types = args
        rows = rows_of(self, *args)
        note(book, types, n_gpus, any(rows))
        return rows

    def counted_slots(self: HadarPlanner, *args: Any) -> Any:
        book, types, n_gpus = args
        slots = slots_of(self, *args)
        note(book, types, n_gpus, slots is not None)
        return slots

    def counted_plan(self: HadarPlanner, *args: Any) -> Any:
        offered.clear()
        room_now.clear()
        layouts = plan_of(self, *args)
        counts["rounds"] += 1
        counts["jobs_planned"] += len(offered)
        counts["jobs_offered_nothing"] += offered.count(False)
        last = max((i for i, was in enumerate(offered) if was), default=-1)
        counts["offered_nothing_last"] += len(offered) - 1 - last
        counts["planned_after_slot0_full"] += len(room_now) - 1 - max(
            (i for i, room in enumerate(room_now) if room), default=-1)
        return layouts

    def counted_decide(self: HadarPlanner, *args: Any, in_shape: bool) -> Any:
        counts["rounds_moved_as_planned"] += not in_shape
        return decide_of(self, *args, in_shape=in_shape)

    build = simulator_for(args.policy, args.trace, args.first_n or None, perf=args.perf)
    HadarPlanner._rows, HadarPlanner._plan = counted_rows, counted_plan  # type: ignore[method-assign]
    HadarPlanner._single_type_slots = counted_slots  # type: ignore[method-assign]
    HadarPlanner._decide_keeping = counted_decide  # type: ignore[method-assign]
    try:
        start = time.process_time()
        result = build().run()
        cpu_s = time.process_time() - start
    finally:
        HadarPlanner._rows, HadarPlanner._plan = rows_of, plan_of  # type: ignore[method-assign]
        HadarPlanner._single_type_slots = slots_of  # type: ignore[method-assign]
        HadarPlanner._decide_keeping = decide_of  # type: ignore[method-assign]
    digest = records_sha256(result)
    records = result.records
    print(json.dumps({"figure": "hadar_rounds", "policy": args.policy, "trace": args.trace,
                      "first_n": args.first_n, "perf": args.perf, **counts,
                      "preemptions": sum(r.n_preemptions for r in records),
                      "avg_jct_s": round(sum(r.jct_s for r in records) / len(records), 1),
                      "cpu_s": round(cpu_s, 2),
                      "cpu_us_per_job_planned": round(cpu_s / max(1, counts["jobs_planned"]) * 1e6, 1),
                      "records_sha256": digest, **provenance()}))


if __name__ == "__main__":
    main()
