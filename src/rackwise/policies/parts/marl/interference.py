"""A learned job-interference model: predicted log-slowdown of a job beside its neighbours.

Samples come from the performance model's co-location interference
(`rackwise.perf.interference`, as `NetworkPerf` uses it) plus measurement
noise: a job on one server beside 0-4 neighbours holding random shares of
the server; the target is ``log sigma``, sigma being the job's slowdown.

The regressor is a DeepSets sum over neighbours:
``log sigma(a | N) = sum_{b in N} share_b * softplus(phi([e_a, e_b, share_b]))``
with ``e`` a learned embedding of the catalogue model and ``phi`` a small MLP.
The form makes the prediction 0 with no neighbour and never lower when one
is added, and it mirrors the multiplicative neighbour factors of the
performance model. It feeds the candidate features and the reward shaping.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from rackwise.perf.config import PerfConfig
from rackwise.perf.interference import Interference
from rackwise.perf.throughput import default_table
from rackwise.policies.parts.marl import require
from rackwise.policies.parts.marl.features import MODELS, N_MODELS, GraphIndex, Placed, model_index
from rackwise.workload.job import Job

if TYPE_CHECKING:
    import torch

torch = require("torch")
nn = torch.nn

MAX_NEIGHBOURS = 4


@dataclass
class Samples:
    """Co-location samples: target model, padded neighbours (-1 = none), their shares, targets."""

    target: np.ndarray  # (n,) model index
    neighbour: np.ndarray  # (n, MAX_NEIGHBOURS) model index or -1
    share: np.ndarray  # (n, MAX_NEIGHBOURS) share of the server's GPUs
    log_sigma: np.ndarray  # (n,) measured (with noise)
    log_sigma_true: np.ndarray  # (n,) noise-free

    def __len__(self) -> int:
        return len(self.target)


def sample_colocations(n: int, rng: np.random.Generator, *, server_gpus: int = 8,
                       gpu_type: str = "v100", noise_sigma: float = 0.02,
                       config: PerfConfig | None = None) -> Samples:
    """Draw ``n`` co-locations and their slowdowns under the performance model, plus lognormal noise."""
    config = config if config is not None else PerfConfig()
    truth = Interference(default_table(), config.interference_scale)
    target = rng.integers(0, len(MODELS), size=n)
    neighbour = np.full((n, MAX_NEIGHBOURS), -1, dtype=np.int64)
    share = np.zeros((n, MAX_NEIGHBOURS))
    log_true = np.zeros(n)
    for i in range(n):
        free = server_gpus - 1  # the target holds at least one GPU
        for k in range(int(rng.integers(0, MAX_NEIGHBOURS + 1))):
            if free <= 0:
                break
            gpus = int(rng.integers(1, free + 1))
            free -= gpus
            b = int(rng.integers(0, len(MODELS)))
            neighbour[i, k], share[i, k] = b, gpus / server_gpus
            factor = truth.neighbour_factor(MODELS[target[i]], MODELS[b], gpu_type, gpus, server_gpus)
            log_true[i] -= np.log(max(factor, 1e-6))
    noisy = np.maximum(log_true + rng.normal(0.0, noise_sigma, size=n), 0.0)
    return Samples(target, neighbour, share, noisy, log_true)


class InterferenceModel(nn.Module):
    """DeepSets regressor of log-slowdown (see the module docstring)."""

    def __init__(self, embed_dim: int = 8, hidden: int = 32) -> None:
        super().__init__()
        self.embed = nn.Embedding(N_MODELS, embed_dim)
        self.phi = nn.Sequential(nn.Linear(2 * embed_dim + 1, hidden), nn.ReLU(),
                                 nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def pair_term(self, a: torch.Tensor, b: torch.Tensor, share: torch.Tensor) -> torch.Tensor:
        """Contribution of neighbour ``b`` (holding ``share``) to the log-slowdown of ``a``."""
        x = torch.cat([self.embed(a), self.embed(b), share.unsqueeze(-1)], dim=-1)
        return share * nn.functional.softplus(self.phi(x).squeeze(-1))

    def forward(self, target: torch.Tensor, neighbour: torch.Tensor, share: torch.Tensor) -> torch.Tensor:
        present = neighbour >= 0
        a = target.unsqueeze(-1).expand_as(neighbour)
        terms = self.pair_term(a, neighbour.clamp(min=0), share) * present
        return terms.sum(dim=-1)


def _tensors(samples: Samples) -> tuple[Any, Any, Any, Any]:
    return (torch.as_tensor(samples.target), torch.as_tensor(samples.neighbour),
            torch.as_tensor(samples.share, dtype=torch.float32),
            torch.as_tensor(samples.log_sigma, dtype=torch.float32))


def fit_interference(samples: Samples, *, epochs: int = 30, batch_size: int = 256,
                     lr: float = 3e-3, seed: int = 0) -> InterferenceModel:
    """Train the regressor (Adam, Huber loss on log-slowdown); deterministic for a seed."""
    torch.manual_seed(seed)
    model = InterferenceModel()
    optimiser = torch.optim.Adam(model.parameters(), lr=lr)
    target, neighbour, share, y = _tensors(samples)
    generator = torch.Generator().manual_seed(seed)
    loss_fn = nn.HuberLoss(delta=0.1)
    for _ in range(epochs):
        order = torch.randperm(len(samples), generator=generator)
        for start in range(0, len(samples), batch_size):
            rows = order[start:start + batch_size]
            loss = loss_fn(model(target[rows], neighbour[rows], share[rows]), y[rows])
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
    model.eval()
    return model


class Predictor:
    """Numpy-facing wrapper of a trained `InterferenceModel` (not trained further: its pair
    terms are kept)."""

    def __init__(self, model: InterferenceModel) -> None:
        self.model = model
        # Every (a, b) pair's term at each share seen, worked out in one pass per share: shares
        # are GPUs over a server's size, so few; a table answers each pair alike in any batch.
        self._shares = np.zeros(0, dtype=np.float32)  # ascending
        self._tables = np.zeros((0, N_MODELS, N_MODELS))  # one per share, in that order

    def predict(self, samples: Samples) -> np.ndarray:
        """Predicted log-slowdown of each sample."""
        target, neighbour, share, _ = _tensors(samples)
        with torch.no_grad():
            predicted: np.ndarray = self.model(target, neighbour, share).numpy().astype(np.float64)
        return predicted

    def pair_terms(self, a: Sequence[int] | np.ndarray, b: Sequence[int] | np.ndarray,
                   share: Sequence[float] | np.ndarray) -> np.ndarray:
        """Each neighbour's contribution (`InterferenceModel.pair_term`), looked up per share."""
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
        a, b = np.divmod(np.arange(N_MODELS * N_MODELS), N_MODELS)
        tables = []
        for share in new.tolist():
            with torch.no_grad():
                terms = self.model.pair_term(torch.as_tensor(a), torch.as_tensor(b),
                                             torch.full((len(a),), share, dtype=torch.float32))
            tables.append(terms.numpy().astype(np.float64).reshape(N_MODELS, N_MODELS))
        all_shares = np.concatenate([self._shares, new])
        order = np.argsort(all_shares)
        self._shares = all_shares[order]
        self._tables = np.concatenate([self._tables, np.stack(tables)])[order]

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


def mae(prediction: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean(np.abs(prediction - truth)))
