"""`IterationBreakdown`: where one step of a job goes on one placement."""

from __future__ import annotations

from dataclasses import dataclass

INF = float("inf")


@dataclass(frozen=True, slots=True)
class IterationBreakdown:
    """Where one step of a job goes on one placement.

    Attributes:
        compute_s: Compute per step, alone on the GPUs (pipeline bubble included).
        comm_s: Communication stall per step (after overlap).
        interference_factor: Speed factor from jobs sharing its nodes (1 = none).
        level: 0 one node, 1 one rack, 2 several racks.
        bottleneck: Slowest link: none, intra-node, intra-rack, cross-rack or rack-uplink.
            For a mixed-parallel job, the slowest its GPUs span (or its uplink share),
            not necessarily the link that carries most of its traffic.
        bandwidth_gbps: Bandwidth of that link for this job (inf without communication).
        iteration_s: Seconds per step.
        consolidated_iteration_s: Seconds per step on the tightest placement this
            cluster allows, alone.
        consolidated_comm_s: Communication stall per step there.
    """

    compute_s: float
    comm_s: float
    interference_factor: float
    level: int
    bottleneck: str
    bandwidth_gbps: float
    iteration_s: float
    consolidated_iteration_s: float
    consolidated_comm_s: float

    @property
    def throughput_iters_per_s(self) -> float:
        return 1.0 / self.iteration_s if self.iteration_s > 0 else INF

    @property
    def slowdown(self) -> float:
        """Step time relative to the consolidated placement (1 = as fast)."""
        return self.iteration_s / self.consolidated_iteration_s

    @property
    def comm_extra_s(self) -> float:
        """Communication per step beyond what the consolidated placement needs."""
        return max(0.0, self.comm_s - self.consolidated_comm_s)
