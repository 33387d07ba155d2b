"""The ``marl`` actor and interference model on the observations of a real run (needs the rl extra).

Runs ``marl`` on the first ``--first-n`` jobs of a trace (the cluster of
``bench_policies.py speed``), keeping every observation the actor is asked
about and every batch of interference pairs, then:

* replays the observations in order on a fresh `CachedActor`, ``--passes``
  times: CPU microseconds per call, and how many times a set of groups to
  recompute was looked up;
* with ``--ops N``, profiles one more replay with cProfile: the N
  functions with the most time of their own, each with its calls per
  observation and microseconds per call;
* with ``--network``, asks the torch network (`ActorCritic.logits`, a full
  pass) about every observation too: the largest difference from the
  actor's finite logits, and the observations where ``marl``'s choice (the
  argmax on its 1/256 grid) differs;
* asks the torch interference model for each captured batch as one tensor
  pass and compares the run's answer (`PairTerms.pair_terms`, numpy tables
  from the same weights): the terms that differ, and the largest relative
  difference (float32 rounding: numpy and torch sum in other orders).

Prints one JSON line. Run with an older checkout first on ``PYTHONPATH``
to compare:

    cd benchmarks && python bench_marl_replay.py --trace itp_2021 --first-n 4000 [--ops 6] [--network]
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np
from bench_policies import SPEED_CLUSTERS, simulator_for
from provenance import provenance


def capture(trace: str, first_n: int) -> tuple[Any, list[dict[str, np.ndarray]], list[tuple[Any, ...]]]:
    """Run marl on the trace's first jobs; the topology, the actor's observations and the pair batches."""
    from rackwise.policies.parts.marl.inference import CachedActor
    from rackwise.policies.parts.marl.pair_terms import PairTerms

    observations: list[dict[str, np.ndarray]] = []
    batches: list[tuple[Any, ...]] = []
    logits, pair_terms = CachedActor.logits, PairTerms.pair_terms

    def kept_logits(self: Any, obs: dict[str, np.ndarray]) -> Any:
        observations.append({key: value.copy() for key, value in obs.items()})
        return logits(self, obs)

    def kept_pairs(self: Any, a: Any, b: Any, share: Any) -> Any:
        batches.append((np.array(a), np.array(b), np.array(share)))
        return pair_terms(self, a, b, share)

    simulator = simulator_for("marl", trace, first_n)()
    CachedActor.logits, PairTerms.pair_terms = kept_logits, kept_pairs  # type: ignore[method-assign]
    try:
        simulator.run()
    finally:
        CachedActor.logits, PairTerms.pair_terms = logits, pair_terms  # type: ignore[method-assign]
    return simulator.topology, observations, batches


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default="itp_2021", choices=sorted(SPEED_CLUSTERS))
    parser.add_argument("--first-n", type=int, default=4000)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--ops", type=int, default=0, help="profile one more replay: the top N functions")
    parser.add_argument("--network", action="store_true", help="compare with the torch network's logits")
    parser.add_argument("--blas-threads", type=int, default=1, help="numpy's BLAS threads (marl runs with 1)")
    args = parser.parse_args()

    import torch
    from threadpoolctl import threadpool_limits

    from rackwise.policies.marl import _cached
    from rackwise.policies.parts.marl import inference
    from rackwise.policies.parts.marl.checkpoint import load

    torch.set_num_threads(1)
    topology, observations, batches = capture(args.trace, args.first_n)
    threadpool_limits(args.blas_threads, user_api="blas")  # marl's run set 1
    checkpoint = _cached(None)  # the numpy weights a run reads
    networks = load(None)  # the torch networks they were exported from
    per_call_us = []
    lookup = "of_members" if hasattr(inference._Groups, "of_members") else "rows"  # older checkouts: rows
    lookup_of, calls = getattr(inference._Groups, lookup), [0]

    def counted_lookup(self: Any, changed: Any) -> Any:
        calls[0] += 1
        return lookup_of(self, changed)

    setattr(inference._Groups, lookup, counted_lookup)
    for _ in range(args.passes):
        calls[0] = 0
        actor = inference.CachedActor(checkpoint.actor, topology)
        start = time.process_time()
        for obs in observations:
            actor.logits(obs)
        per_call_us.append(round((time.process_time() - start) / len(observations) * 1e6, 1))
    setattr(inference._Groups, lookup, lookup_of)

    top_ops = []
    if args.ops:
        import cProfile
        import pstats

        actor = inference.CachedActor(checkpoint.actor, topology)
        with cProfile.Profile() as profile:
            for obs in observations:
                actor.logits(obs)
        stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
        top = sorted(stats.items(), key=lambda item: -item[1][2])[:args.ops]  # by time of its own
        top_ops = [{"function": f"{name} ({file.rsplit('/', 1)[-1]}:{line})",
                    "calls_per_observation": round(calls_made / len(observations), 2),
                    "self_us_per_call": round(own_s / calls_made * 1e6, 1)}
                   for (file, line, name), (_, calls_made, own_s, _, _) in top]

    network = {}
    if args.network:
        from rackwise.policies.parts.marl.encoder import stack_obs, topology_index

        actor, index = inference.CachedActor(checkpoint.actor, topology), topology_index(topology)
        largest, choices_differ = 0.0, 0
        for obs in observations:
            ours = np.asarray(actor.logits(obs)).reshape(-1)
            with torch.inference_mode():
                theirs = networks.actor_critic.logits(stack_obs([obs]), *index)[0][0].numpy()
            finite = np.isfinite(theirs)
            largest = max(largest, float(np.abs(ours[finite] - theirs[finite]).max()))
            choices_differ += int(np.round(ours * 256.0).argmax() != np.round(theirs * 256.0).argmax())
        network = {"largest_logit_difference": largest, "choices_unlike_the_network": choices_differ}

    differ = total = 0
    largest_relative = 0.0
    for a, b, share in batches:
        with torch.no_grad():
            model = networks.predictor.model.pair_term(
                torch.as_tensor(a, dtype=torch.int64), torch.as_tensor(b, dtype=torch.int64),
                torch.as_tensor(share, dtype=torch.float32)).numpy().astype(np.float64)
        ours = checkpoint.pair_terms.pair_terms(a, b, share)
        differ += int((ours != model).sum())
        largest_relative = max(largest_relative, float((np.abs(ours - model) / np.abs(model).clip(1e-30)).max()))
        total += len(a)
    print(json.dumps({"figure": "marl_replay", "trace": args.trace, "first_n": args.first_n,
                      "blas_threads": args.blas_threads,
                      "observations": len(observations), "actor_us_per_call": per_call_us,
                      "group_set_lookups": calls[0], "top_ops": top_ops, **network,
                      "pair_batches": len(batches), "pair_terms": total,
                      "pair_terms_unlike_the_model": differ,
                      "pair_terms_largest_relative_difference": largest_relative, **provenance()}))


if __name__ == "__main__":
    main()
