"""Fixed anchor rules: the placement heuristics the learned agents are measured against.

Each rule picks an anchor server from one agent's observation
(`rackwise.policies.parts.marl.features.observation`), over the same mask
and the same GPU-picking rule (`rackwise.policies.parts.marl.placement`) as
the learned actor, so a rule and the actor differ only in the anchor they
choose. Candidate columns: 0 may anchor, 1 free fraction left at the anchor,
2 servers spanned (scaled), 3 spans racks, 4 and 5 the interference model's
predicted log-slowdown of the job and of its neighbours.

* ``first-fit``: the lowest-numbered allowed server (pack, fewest servers);
* ``spread``: the allowed server with the most free GPUs left (load balance);
* ``consolidated``: fewest racks, then fewest servers, then the tightest fit;
* ``greedy``: least predicted interference plus a span and fit penalty (the
  interference-aware rule that also warm-starts training);
* ``random``: uniform over the allowed servers (the run's generator).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from rackwise.errors import UnknownNameError, suggest

ANCHOR_RULES: tuple[str, ...] = ("first-fit", "spread", "consolidated", "greedy", "random")
NEEDS_PREDICTOR: frozenset[str] = frozenset({"greedy"})


def greedy_action(obs: Mapping[str, np.ndarray]) -> int:
    """Interference-aware greedy: least predicted interference, then fewest servers and racks,
    then the tightest fit (the warm-start teacher)."""
    cand = obs["candidate"]
    return _argmin(obs, cand[:, 4] + cand[:, 5] + 2.0 * cand[:, 2] + 4.0 * cand[:, 3] + 0.5 * cand[:, 1])


def anchor_action(rule: str, obs: Mapping[str, np.ndarray], rng: np.random.Generator) -> int:
    """The action ``rule`` takes on ``obs``: an allowed server, or the last action (wait) if none."""
    cand = obs["candidate"]
    if rule == "greedy":
        return greedy_action(obs)
    if rule == "first-fit":
        return _argmin(obs, np.zeros(len(cand)))
    if rule == "spread":
        return _argmin(obs, -cand[:, 1])
    if rule == "consolidated":
        # racks dominate servers, which dominate fit: each term stays below the next one's step
        return _argmin(obs, 100.0 * cand[:, 3] + 10.0 * cand[:, 2] + cand[:, 1])
    if rule == "random":
        allowed = np.flatnonzero(obs["mask"][:-1])
        return int(allowed[rng.integers(len(allowed))]) if len(allowed) else len(obs["mask"]) - 1
    raise UnknownNameError(f"unknown anchor rule '{rule}'; known: {', '.join(ANCHOR_RULES)}."
                           f"{suggest(rule, list(ANCHOR_RULES))}")


def _argmin(obs: Mapping[str, np.ndarray], score: np.ndarray) -> int:
    """The allowed server of least score (lowest index on a tie), or wait if none is allowed."""
    mask = obs["mask"].astype(bool)
    n_servers = len(mask) - 1
    if not mask[:n_servers].any():
        return n_servers
    return int(np.argmin(np.where(mask[:n_servers], score, np.inf)))
