"""`ForkParameters`: how ``hadare`` and ``combined`` fork jobs (papers/hadar.md §3.7).

A module of its own, as `parts.hadar_parameters` is: policy classes inherit
these fields, and the forking itself (`parts.forking`) is compiled in the
optional compiled build.
"""

from __future__ import annotations

from dataclasses import dataclass

from rackwise.errors import InputError


@dataclass(kw_only=True)
class ForkParameters:
    """How jobs fork (HadarE's parameters; the digest's values by default).

    Args:
        max_copies: Most copies of one job (None: the number of nodes).
        sync_bandwidth_gbps: Bandwidth for averaging copies (digest: 10).
        restart_s: Seconds each sync costs beyond the transfer (digest: 10).
        default_model_bytes: Model size when neither job nor table knows it.
        copy_efficiency: Progress an extra copy adds, as a share of its own
            rate. Averaging the models of copies that each saw part of the
            samples is worth less than one model that saw them all, and how
            much less is not public for HadarE (its abstract reports no loss
            of model quality); 0.8 is the sensitivity value of
            shared/papers/hadar.md §3.7, and 1 is the abstract's reading.
        wide_copies: Let a job wider than any node of its types fork too: its
            copy takes the fewest nodes of one type that no other copy of it
            uses ([R]; the digest confines a copy to one node, which such a
            job never fits, so it would never fork).
    """

    max_copies: int | None = None
    sync_bandwidth_gbps: float = 10.0
    restart_s: float = 10.0
    default_model_bytes: float = 100e6
    copy_efficiency: float = 0.8
    wide_copies: bool = True


def check_fork_parameters(params: ForkParameters) -> None:
    """Refuse parameters outside their range, naming the field."""
    if not 0.0 <= params.copy_efficiency <= 1.0:
        raise InputError(f"must be in [0, 1], got {params.copy_efficiency}", field="copy_efficiency")
