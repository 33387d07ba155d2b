"""How much co-location interference costs in the regimes of ``experiments/marl.yaml``.

    .venv/bin/python experiments/marl_interference.py [--scales 0.25,0,1] [--seed 0]

For each workload and load of the experiment, runs ``marl`` with fixed
placement rules (same agents, FIFO order) under `NetworkPerf` at several
``interference_scale`` values (0.25 is the default; 0 turns interference
off) and prints average JCT in hours. The gap between a scale and 0 bounds
what any placement can win from avoiding neighbours; the gap between rules
at one scale is what placement does win.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

EXPERIMENT = Path(__file__).with_name("marl.yaml")
RULES = ("first-fit", "consolidated", "spread")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", default="0.25,0,1")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    from rackwise.experiments.config import load_experiment
    from rackwise.run import RunConfig, execute

    experiment = load_experiment(EXPERIMENT)
    scales = [float(s) for s in args.scales.split(",")]
    cluster = experiment.clusters[0].run_config()
    print("| workload | load | placement | " + " | ".join(f"scale {s:g}" for s in scales) + " |")
    print("|---|---:|---|" + "---:|" * len(scales))
    for workload in experiment.workloads:
        for load in experiment.loads:
            for rule in RULES:
                jct = []
                for scale in scales:
                    config = RunConfig(workload=workload.run_config().model_copy(update={"load": load}),
                                       cluster=cluster, policy="marl", policy_params={"placement": rule},
                                       perf="network", perf_params={"config": {"interference_scale": scale}},
                                       seed=args.seed)
                    result, _ = execute(config)
                    jct.append(float(np.mean([r.jct_s for r in result.records])) / 3600)
                print(f"| {workload.label} | {load:g} | {rule} | "
                      + " | ".join(f"{j:.3f}" for j in jct) + " |", flush=True)


if __name__ == "__main__":
    main()
