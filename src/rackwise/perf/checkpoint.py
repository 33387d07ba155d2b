"""What a preemption costs: saving and restoring a checkpoint, and restarting.

The engine charges the whole cost when a preempted job restarts (it holds its
new GPUs while it restores), so the write at preemption is counted there too:

    overhead_s = fixed + checkpoint_bytes / write_bandwidth + checkpoint_bytes / read_bandwidth
"""

from __future__ import annotations


def restart_overhead_s(checkpoint_bytes: float, *, write_gbytes_per_s: float,
                       read_gbytes_per_s: float, fixed_s: float) -> float:
    """Seconds a restarted job makes no progress (bandwidths in GB/s, 1e9 bytes)."""
    nbytes = max(0.0, checkpoint_bytes)
    return fixed_s + nbytes / (write_gbytes_per_s * 1e9) + nbytes / (read_gbytes_per_s * 1e9)
