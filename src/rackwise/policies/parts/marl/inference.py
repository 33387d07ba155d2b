"""The actor at run time: one observation after another of one cluster, the GPU level kept.

The GPU level of the encoder (`HierarchicalEncoder.gpu_level`) passes
messages only among the GPUs of one server, so a server's pooled GPU
embeddings depend on its own GPUs' features alone. `CachedActor` keeps them
and works them out again only for the servers whose GPU features changed
since the last call: a start touches one server or a few, where the full
pass would run over every GPU of the cluster. The rest of the network runs
in full. Each recomputed row goes through the same operations on the same
inputs as in the full pass, so the logits are the same bit for bit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from rackwise.policies.parts.marl import require
from rackwise.policies.parts.marl.encoder import scatter_max, scatter_mean, stack_obs, topology_index

if TYPE_CHECKING:
    import torch

torch = require("torch")

# Matrix products of a handful of rows take another kernel, which rounds differently from
# the one a full pass uses; recomputing at least this many GPU rows keeps to the latter.
MIN_ROWS = 64


class CachedActor:
    """The actor's masked logits (as `ActorCritic.logits`) for observations of one topology."""

    def __init__(self, model: Any, topology: Any) -> None:
        self.model = model
        self.gpu_server, self.server_rack = topology_index(topology)
        self.n_servers = topology.n_nodes
        gpu_server = self.gpu_server.numpy()
        self.gpu_server_np = gpu_server
        order = np.argsort(gpu_server, kind="stable")  # each server's GPUs in ascending id order
        sizes = np.bincount(gpu_server, minlength=self.n_servers)
        self.server_gpus = np.split(order, np.cumsum(sizes)[:-1])
        self.last_gpu: np.ndarray | None = None
        self.gpu_mean: torch.Tensor | None = None
        self.gpu_max: torch.Tensor | None = None

    def logits(self, obs: dict[str, np.ndarray]) -> torch.Tensor:
        """Masked logits over the servers plus "wait" (last), batch of one."""
        batch = stack_obs([obs])
        encoder = self.model.actor_encoder
        with torch.inference_mode():
            if self.last_gpu is None or self.gpu_mean is None or self.gpu_max is None:
                h = encoder.gpu_level(batch["gpu"], self.gpu_server, self.n_servers)
                self.gpu_mean = scatter_mean(h, self.gpu_server, self.n_servers)
                self.gpu_max = scatter_max(h, self.gpu_server, self.n_servers)
            else:
                changed = np.flatnonzero((obs["gpu"] != self.last_gpu).any(axis=1))
                if changed.size:
                    self._refresh(np.unique(self.gpu_server_np[changed]), batch["gpu"])
            self.last_gpu = obs["gpu"]
            z = encoder.upper_levels(self.gpu_mean, self.gpu_max, batch["server"], batch["rack"],
                                     self.server_rack)
            scores: torch.Tensor = self.model.actor_scores(z, batch, self.server_rack)
        return scores

    def _refresh(self, servers: np.ndarray, gpu: torch.Tensor) -> None:
        """Pooled GPU embeddings of ``servers`` (ascending) again, from the GPU features ``gpu``."""
        assert self.gpu_mean is not None and self.gpu_max is not None
        chosen = servers.tolist()
        n_rows = sum(len(self.server_gpus[s]) for s in chosen)
        if n_rows < MIN_ROWS:  # unchanged servers come out the same: add some to reach MIN_ROWS
            taken = set(chosen)
            for s in range(self.n_servers):
                if n_rows >= MIN_ROWS:
                    break
                if s not in taken:
                    chosen.append(s)
                    n_rows += len(self.server_gpus[s])
            chosen.sort()
        parts = [self.server_gpus[s] for s in chosen]
        rows = torch.from_numpy(np.concatenate(parts))
        local = torch.repeat_interleave(torch.arange(len(chosen)),
                                        torch.as_tensor([len(p) for p in parts]))
        h = self.model.actor_encoder.gpu_level(gpu[:, rows], local, len(chosen))
        at = torch.as_tensor(chosen)
        self.gpu_mean[:, at] = scatter_mean(h, local, len(chosen))
        self.gpu_max[:, at] = scatter_max(h, local, len(chosen))
