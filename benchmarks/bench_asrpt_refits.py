"""What thinning the A-SRPT forest's refits buys: CPU time, number of fits, average JCT.

Runs ``asrpt`` on the first N jobs of philly_2017 on 512 GPUs (64 nodes x 8,
8 per rack), ideal performance model, seed 0, once refitting every 50
finished jobs (``refit_growth=0``) and once with the default growth (a refit
after 50 jobs or 10% of all finished, whichever is more).

    python benchmarks/bench_asrpt_refits.py [--first-n 5000]
"""

from __future__ import annotations

import argparse
import time

from provenance import provenance

from rackwise import traces
from rackwise.cluster.topology import uniform_cluster
from rackwise.policies.asrpt import Asrpt
from rackwise.sim.engine import simulate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--first-n", type=int, default=5000)
    args = parser.parse_args()
    jobs = traces.load("philly_2017", first_n=args.first_n)
    print(provenance())
    print("| refit_growth | forest fits | CPU (s) | avg JCT (h) |")
    print("|---:|---:|---:|---:|")
    for growth in (0.0, 0.1):
        policy = Asrpt(refit_growth=growth)
        started = time.process_time()
        result = simulate(uniform_cluster(64, 8, 8), jobs, policy, seed=0)
        cpu_s = time.process_time() - started
        avg_jct_h = sum(r.jct_s for r in result.records) / len(result.records) / 3600
        print(f"| {growth:g} | {policy.srpt.n_fits} | {cpu_s:.1f} | {avg_jct_h:.3f} |")


if __name__ == "__main__":
    main()
