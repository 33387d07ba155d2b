"""The interference model's pair terms at run time, in numpy, from its trained weights.

`interference.InterferenceModel` predicts a job's log-slowdown as a sum of
one term per neighbour, ``share_b * softplus(phi([e_a, e_b, share_b]))``.
Shares are GPUs over a server's size, so few: `PairTerms` works out every
(a, b) pair's term once per share, with the model's float32 weights and
operations, and answers from that table. torch is not needed: a run of
``marl`` reads the weights from the checkpoint's ``.npz`` file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rackwise.policies.parts.marl.features import N_MODELS, GraphIndex, Placed, model_index
from rackwise.workload.job import Job

# torch's softplus returns its input above this (its default threshold, at beta 1).
_SOFTPLUS_THRESHOLD = 20.0


class PairTerms:
    """Each neighbour's contribution to a job's predicted log-slowdown, by table.

    Args:
        weights: The model's state dict (``embed.weight``, ``phi.{0,2,4}.weight``
            and ``.bias``), as numpy arrays.
    """

    def __init__(self, weights: Mapping[str, Any]) -> None:
        self._embed = np.asarray(weights["embed.weight"], dtype=np.float32)
        self._layers = [(np.ascontiguousarray(np.asarray(weights[f"phi.{i}.weight"], dtype=np.float32).T),
                         np.asarray(weights[f"phi.{i}.bias"], dtype=np.float32)) for i in (0, 2, 4)]
        self._shares = np.zeros(0, dtype=np.float32)  # ascending
        self._tables = np.zeros((0, N_MODELS, N_MODELS))  # one per share, in that order

    def pair_terms(self, a: Sequence[int] | np.ndarray, b: Sequence[int] | np.ndarray,
                   share: Sequence[float] | np.ndarray) -> np.ndarray:
        """Each neighbour ``b``'s term in the log-slowdown of ``a``, holding ``share`` of the server."""
        if not len(a):
            return np.zeros(0)
        shares = np.asarray(share, dtype=np.float32)
        which = self._share_rows(shares)
        if which is None:
            self._add_tables(shares)
            which = self._share_rows(shares)
            assert which is not None
        out: np.ndarray = self._tables[which, a, b]
        return out

    def _share_rows(self, shares: np.ndarray) -> np.ndarray | None:
        """Each share's table, or None if one has none yet."""
        if not len(self._shares):
            return None
        which = np.minimum(np.searchsorted(self._shares, shares), len(self._shares) - 1)
        return which if (self._shares[which] == shares).all() else None

    def _add_tables(self, shares: np.ndarray) -> None:
        new = np.setdiff1d(shares, self._shares)
        tables = [self._table(share) for share in new]
        all_shares = np.concatenate([self._shares, new])
        order = np.argsort(all_shares)
        self._shares = all_shares[order]
        self._tables = np.concatenate([self._tables, np.stack(tables)])[order]

    def _table(self, share: np.float32) -> np.ndarray:
        """Every (a, b) pair's term at one share, in float32 as the model computes it."""
        a, b = np.divmod(np.arange(N_MODELS * N_MODELS), N_MODELS)
        x = np.concatenate([self._embed[a], self._embed[b], np.full((len(a), 1), share, np.float32)], axis=1)
        (w0, b0), (w1, b1), (w2, b2) = self._layers
        h = np.maximum(x @ w0 + b0, np.float32(0))
        h = np.maximum(h @ w1 + b1, np.float32(0))
        y = (h @ w2 + b2)[:, 0]
        soft = np.where(y > _SOFTPLUS_THRESHOLD, y, np.log1p(np.exp(np.minimum(y, _SOFTPLUS_THRESHOLD))))
        terms: np.ndarray = (share * soft).astype(np.float64)
        return terms.reshape(N_MODELS, N_MODELS)

    def candidate_effects(self, job: Job, on_server: list[list[tuple[Placed, float]]],
                          servers: np.ndarray, index: GraphIndex) -> tuple[np.ndarray, np.ndarray]:
        """For each anchor server: the head's predicted log-slowdown there, and the summed
        increase of its neighbours' (the anchor server stands for the whole placement)."""
        head = model_index(job.model)
        slots = servers.tolist()
        resident_lists = [on_server[s] for s in slots]
        n_each = np.fromiter((len(items) for items in resident_lists), np.int64, len(slots))
        n_pairs = int(n_each.sum())
        if not n_pairs:
            return np.zeros(len(servers)), np.zeros(len(servers))
        # two terms per resident, in resident order: the head beside it (kind 0), it beside the head (1)
        other = np.fromiter((item.model_id for items in resident_lists for item, _ in items),
                            np.int64, n_pairs)
        other_share = np.fromiter((share for items in resident_lists for _, share in items),
                                  np.float64, n_pairs)
        size = index.server_size[servers]
        head_share = np.minimum(job.n_gpus, size) / size
        owner = np.repeat(np.arange(len(slots)), n_each)
        a = np.empty(2 * n_pairs, dtype=np.int64)
        b = np.empty(2 * n_pairs, dtype=np.int64)
        share = np.empty(2 * n_pairs)
        a[0::2], a[1::2] = head, other
        b[0::2], b[1::2] = other, head
        share[0::2], share[1::2] = other_share, head_share[owner]
        terms = self.pair_terms(a, b, share)
        # each server's terms added one after another from 0, in resident order, as a loop would
        return (np.bincount(owner, weights=terms[0::2], minlength=len(slots)),
                np.bincount(owner, weights=terms[1::2], minlength=len(slots)))
