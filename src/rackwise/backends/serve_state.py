"""What `serve` remembers across its own restarts, kept in a state file.

A live scheduler that crashes must come back as it was: the policy's own
state (Tiresias' queues, delay timers, A-SRPT's forest and predictions,
its random generator) and the loop's bookkeeping (which jobs it has told
the policy about, the timers the policy asked for, the next round). `serve`
writes them after every round; the file is replaced whole (written beside
it, flushed to disk, then renamed over it), so a crash mid-write leaves the
previous round's state, never half of one.

On start, `load` gives the saved state back only if it belongs to the
same policy with the same parameters; otherwise (no file, an unreadable
one, another policy) serve warns and starts fresh from the cluster's view.
"""

from __future__ import annotations

import logging
import os
import pickle
from dataclasses import dataclass, field
from pathlib import Path

from rackwise.engine.contract import Policy

log = logging.getLogger("rackwise.serve")


@dataclass
class ServeState:
    """The policy, with its run state, and the loop's bookkeeping after one round."""

    policy: Policy
    known_active: set[str]  # jobs the policy has been told arrived and not yet finished
    known_done: set[str]  # jobs seen finished or failed
    timers: set[float]  # wake_at times the policy asked for, still ahead
    next_round: float  # the next round boundary (round-based policies), or inf
    # Per active job, whether the policy takes it to be running (its last decisions applied).
    believed: dict[str, bool] = field(default_factory=dict)


def save(path: Path, state: ServeState) -> None:
    """Replace ``path`` with ``state`` in one step."""
    partial = path.with_name(path.name + ".partial")
    with partial.open("wb") as file:
        pickle.dump(state, file, protocol=pickle.HIGHEST_PROTOCOL)
        file.flush()
        os.fsync(file.fileno())
    os.replace(partial, path)


def load(path: Path, policy: Policy) -> ServeState | None:
    """The state saved in ``path`` for ``policy`` (same class and parameters), else None with a warning."""
    if not path.exists():
        return None
    try:
        with path.open("rb") as file:
            state = pickle.load(file)
    except Exception as exc:  # any unpickling failure means the same: nothing to restore
        log.warning("%s: cannot read the saved state (%s: %s); starting fresh from the cluster's view",
                    path, type(exc).__name__, exc)
        return None
    if not isinstance(state, ServeState):
        log.warning("%s: not a serve state file; starting fresh from the cluster's view", path)
        return None
    if type(state.policy) is not type(policy) or state.policy != policy:
        log.warning("%s: saved for %r, not %r; starting fresh from the cluster's view",
                    path, state.policy, policy)
        return None
    return state
