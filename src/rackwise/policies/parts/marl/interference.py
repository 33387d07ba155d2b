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

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from rackwise.perf.config import PerfConfig
from rackwise.perf.interference import Interference
from rackwise.perf.throughput import default_table
from rackwise.policies.parts.marl import require
from rackwise.policies.parts.marl.features import MODELS, N_MODELS
from rackwise.policies.parts.marl.pair_terms import PairTerms

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


class Predictor(PairTerms):
    """A trained `InterferenceModel` and its pair terms (not trained further: the terms are kept)."""

    def __init__(self, model: InterferenceModel) -> None:
        super().__init__({name: value.numpy() for name, value in model.state_dict().items()})
        self.model = model

    def predict(self, samples: Samples) -> np.ndarray:
        """Predicted log-slowdown of each sample."""
        target, neighbour, share, _ = _tensors(samples)
        with torch.no_grad():
            predicted: np.ndarray = self.model(target, neighbour, share).numpy().astype(np.float64)
        return predicted


def mae(prediction: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean(np.abs(prediction - truth)))
