"""Check the communication model against the measured table's own unconsolidated runs.

For every multi-GPU job type the table measured both consolidated (one
server) and unconsolidated (one GPU per server), compare the slowdown of
spreading, ``consolidated / unconsolidated`` throughput, with the model's
slowdown of the same job on s nodes of one rack, one GPU each. Run:

    python -m rackwise.perf.validate                 # markdown tables on stdout
    python -m rackwise.perf.validate --nic-gbps 10,25,100
"""

from __future__ import annotations

import argparse
import math
import statistics
from dataclasses import dataclass

import numpy as np

from rackwise.cluster.topology import Links, uniform_cluster
from rackwise.perf.catalogue import CATALOGUE
from rackwise.perf.model import NetworkPerf
from rackwise.perf.throughput import ThroughputTable, default_table
from rackwise.workload.job import Job

# Intra-node links of the servers the table was measured on: V100 with NVLink 2.0
# (about 150 GB/s per GPU per direction), P100 and K80 on PCIe 3.0 x16 (15.75 GB/s).
INTRA_NODE_GBPS = {"v100": 1200.0, "p100": 126.0, "k80": 126.0}


@dataclass(frozen=True, slots=True)
class Comparison:
    gpu_type: str
    job_type: str
    scale: int
    table_slowdown: float
    model_slowdown: float

    @property
    def log_error(self) -> float:
        """log(model / table): 0 is a perfect match, +0.69 twice the table's slowdown."""
        return math.log(self.model_slowdown / self.table_slowdown)


def compare(nic_gbps: float, table: ThroughputTable | None = None) -> list[Comparison]:
    """Model vs table slowdown for every job type measured both ways, at one NIC speed."""
    table = table or default_table()
    rows: list[Comparison] = []
    for gpu_type in ("v100", "p100", "k80"):
        links = Links(intra_node_gbps=INTRA_NODE_GBPS[gpu_type], intra_rack_gbps=nic_gbps,
                      cross_rack_gbps=nic_gbps)
        topology = uniform_cluster(8, 8, 8, gpu_type, links)
        perf = NetworkPerf(table=table, assign_models=False)
        perf.bind(topology)
        for (job_type, scale), together in sorted(table.isolated[gpu_type].items()):
            spread = table.unconsolidated.get(gpu_type, {}).get((job_type, scale))
            if scale < 2 or job_type not in CATALOGUE or not together or not spread:
                continue
            job = Job("v", 0.0, scale, 1.0, model=job_type)
            (job,) = perf.prepare([job], topology, np.random.default_rng(0))
            packed = perf.rate(job, tuple(range(scale)), {})
            apart = perf.rate(job, tuple(node * 8 for node in range(scale)), {})
            rows.append(Comparison(gpu_type, job_type, scale, together / spread, packed / apart))
    return rows


def summary_lines(nic_list: list[float]) -> list[str]:
    lines = ["| NIC Gb/s | GPU | entries | median table slowdown | median model slowdown "
             "| median abs error (x) | within 2x |", "|---|---|---|---|---|---|---|"]
    for nic in nic_list:
        rows = compare(nic)
        for gpu_type in ("v100", "p100", "k80", "all"):
            chosen = [r for r in rows if gpu_type in ("all", r.gpu_type)]
            errors = [abs(r.log_error) for r in chosen]
            lines.append(
                f"| {nic:g} | {gpu_type} | {len(chosen)} "
                f"| {statistics.median(r.table_slowdown for r in chosen):.2f} "
                f"| {statistics.median(r.model_slowdown for r in chosen):.2f} "
                f"| {math.exp(statistics.median(errors)):.2f} "
                f"| {sum(e <= math.log(2) for e in errors) / len(errors):.0%} |")
    return lines


def detail_lines(nic: float, gpu_type: str) -> list[str]:
    lines = [f"| job type ({gpu_type}, {nic:g} Gb/s) | GPUs | table slowdown | model slowdown "
             "| model / table |", "|---|---|---|---|---|"]
    for row in compare(nic):
        if row.gpu_type == gpu_type:
            lines.append(f"| {row.job_type} | {row.scale} | {row.table_slowdown:.2f} "
                         f"| {row.model_slowdown:.2f} | {math.exp(row.log_error):.2f} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nic-gbps", default="10,25,100",
                        help="node-to-switch bandwidths to try, comma-separated")
    parser.add_argument("--detail", default="v100", help="GPU type to list entry by entry")
    parser.add_argument("--detail-nic-gbps", type=float, default=100.0)
    args = parser.parse_args()
    nic_list = [float(x) for x in args.nic_gbps.split(",")]
    print("\n".join(summary_lines(nic_list)))
    print()
    print("\n".join(detail_lines(args.detail_nic_gbps, args.detail)))


if __name__ == "__main__":
    main()
