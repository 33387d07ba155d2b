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
* ``greedy``: ``consolidated``, its ties broken by the least predicted
  interference (the interference-aware rule that also warm-starts training);
* ``random``: uniform over the allowed servers (the run's generator).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from rackwise.errors import UnknownNameError, suggest

ANCHOR_RULES: tuple[str, ...] = ("first-fit", "spread", "consolidated", "greedy", "random")
NEEDS_PREDICTOR: frozenset[str] = frozenset({"greedy"})


def greedy_action(obs: Mapping[str, np.ndarray]) -> int:
    """Interference-aware greedy (the warm-start teacher): fewest racks, then fewest servers,
    then the tightest fit, then the least predicted interference (the job's own and its
    neighbours').

    Interference only breaks ties: on the shipped traces, keeping whole servers
    free for wide jobs (tightest fit) and keeping jobs in few servers and racks
    are worth more than avoiding a neighbour (preferring the least interference
    over the tightest fit made the average JCT on ITP 3% worse than
    ``consolidated``).
    """
    cand = obs["candidate"]
    return _first(obs, cand[:, 3], cand[:, 2], cand[:, 1], cand[:, 4] + cand[:, 5])


def anchor_action(rule: str, obs: Mapping[str, np.ndarray], rng: np.random.Generator) -> int:
    """The action ``rule`` takes on ``obs``: an allowed server, or the last action (wait) if none."""
    cand = obs["candidate"]
    if rule == "greedy":
        return greedy_action(obs)
    if rule == "first-fit":
        return _first(obs)
    if rule == "spread":
        return _first(obs, -cand[:, 1])
    if rule == "consolidated":
        return _first(obs, cand[:, 3], cand[:, 2], cand[:, 1])
    if rule == "random":
        allowed = np.flatnonzero(obs["mask"][:-1])
        return int(allowed[rng.integers(len(allowed))]) if len(allowed) else len(obs["mask"]) - 1
    raise UnknownNameError(f"unknown anchor rule '{rule}'; known: {', '.join(ANCHOR_RULES)}."
                           f"{suggest(rule, list(ANCHOR_RULES))}")


def _first(obs: Mapping[str, np.ndarray], *keys: np.ndarray) -> int:
    """The allowed server that sorts first by ``keys`` (the first key matters most; the lowest
    index on a full tie), or wait (the last action) if none is allowed."""
    mask = obs["mask"].astype(bool)
    n_servers = len(mask) - 1
    allowed = np.flatnonzero(mask[:n_servers])
    if len(allowed) == 0:
        return n_servers
    # np.lexsort sorts by its last key first; the index breaks the remaining ties
    order = np.lexsort((allowed, *(np.asarray(k)[allowed] for k in reversed(keys))))
    return int(allowed[order[0]])
