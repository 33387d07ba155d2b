"""The actor at run time: one observation after another of one cluster, unchanged parts kept.

The encoder passes messages among the GPUs of one server, then among the
servers of one rack (`HierarchicalEncoder.gpu_level`, `.server_level`), so a
server's pooled GPU embeddings depend on its own GPUs alone, and a rack's
server embeddings on its own servers alone. `CachedActor` keeps both and
works them out again only for the servers and racks whose features changed
since the last call: a start touches a server or a few, where the full pass
runs over every GPU and server of the cluster. The rack and datacenter
levels and the heads run in full. Each recomputed row goes through the same
operations on the same inputs as in the full pass, so the logits are the
same bit for bit.
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
# the one a full pass uses; recomputing at least this many rows keeps to the latter.
MIN_ROWS = 64


class _Groups:
    """Members of each group (GPUs of a server, servers of a rack), each in ascending order."""

    def __init__(self, group_of: np.ndarray, n_groups: int) -> None:
        self.group_of = group_of
        order = np.argsort(group_of, kind="stable")
        self.sizes = np.bincount(group_of, minlength=n_groups)
        self.members = np.split(order, np.cumsum(self.sizes)[:-1])

    def rows(self, changed: np.ndarray) -> tuple[list[int], torch.Tensor, torch.Tensor]:
        """The groups of the ``changed`` members (with more, up to `MIN_ROWS` rows), their
        members' rows in the full pass's order, and each row's group among them."""
        chosen = np.unique(self.group_of[changed]).tolist()
        n_rows = int(self.sizes[chosen].sum())
        if n_rows < MIN_ROWS:  # an unchanged group comes out the same: add some
            taken = set(chosen)
            for group in range(len(self.sizes)):
                if n_rows >= MIN_ROWS:
                    break
                if group not in taken:
                    chosen.append(group)
                    n_rows += int(self.sizes[group])
            chosen.sort()
        rows = torch.from_numpy(np.concatenate([self.members[g] for g in chosen]))
        local = torch.repeat_interleave(torch.arange(len(chosen)), torch.from_numpy(self.sizes[chosen]))
        return chosen, rows, local


def _changed_rows(new: np.ndarray, old: np.ndarray) -> np.ndarray:
    # few rows change: finding the changed cells first is cheaper than a reduction per row
    return np.unique(np.flatnonzero(new.ravel() != old.ravel()) // new.shape[1])


class CachedActor:
    """The actor's masked logits (as `ActorCritic.logits`) for observations of one topology."""

    def __init__(self, model: Any, topology: Any) -> None:
        self.model = model
        self.gpu_server, self.server_rack = topology_index(topology)
        self.n_servers, self.n_racks = topology.n_nodes, topology.n_racks
        self.servers = _Groups(self.gpu_server.numpy(), self.n_servers)
        self.racks = _Groups(self.server_rack.numpy(), self.n_racks)
        self.last: dict[str, np.ndarray] = {}  # the GPU and server features seen last
        self.kept: dict[str, torch.Tensor] = {}  # per server: gpu_mean, gpu_max, z_s; per rack: mean, max

    def logits(self, obs: dict[str, np.ndarray]) -> torch.Tensor:
        """Masked logits over the servers plus "wait" (last), batch of one."""
        batch = stack_obs([obs])
        encoder = self.model.actor_encoder
        with torch.inference_mode():
            if not self.last:
                self._full(batch)
            else:
                gpus = _changed_rows(obs["gpu"], self.last["gpu"])
                if gpus.size:
                    self._gpu_level(gpus, batch)
                servers = np.union1d(np.unique(self.servers.group_of[gpus]),
                                     _changed_rows(obs["server"], self.last["server"]))
                if servers.size:
                    self._server_level(servers, batch)
            self.last = {"gpu": obs["gpu"], "server": obs["server"]}
            kept = self.kept
            z = {"server": kept["z_s"],
                 **encoder.rack_levels(kept["rack_mean"], kept["rack_max"], batch["rack"])}
            scores: torch.Tensor = self.model.actor_scores(z, batch, self.server_rack)
        return scores

    def _full(self, batch: dict[str, torch.Tensor]) -> None:
        encoder, kept = self.model.actor_encoder, self.kept
        h = encoder.gpu_level(batch["gpu"], self.gpu_server, self.n_servers)
        kept["gpu_mean"] = scatter_mean(h, self.gpu_server, self.n_servers)
        kept["gpu_max"] = scatter_max(h, self.gpu_server, self.n_servers)
        z_s = encoder.server_level(kept["gpu_mean"], kept["gpu_max"], batch["server"], self.server_rack,
                                   self.n_racks)
        kept["z_s"] = z_s
        kept["rack_mean"] = scatter_mean(z_s, self.server_rack, self.n_racks)
        kept["rack_max"] = scatter_max(z_s, self.server_rack, self.n_racks)

    def _gpu_level(self, gpus: np.ndarray, batch: dict[str, torch.Tensor]) -> None:
        """Pooled GPU embeddings again for the servers of the changed ``gpus``."""
        servers, rows, local = self.servers.rows(gpus)
        h = self.model.actor_encoder.gpu_level(batch["gpu"][:, rows], local, len(servers))
        at = torch.as_tensor(servers)
        self.kept["gpu_mean"][:, at] = scatter_mean(h, local, len(servers))
        self.kept["gpu_max"][:, at] = scatter_max(h, local, len(servers))

    def _server_level(self, servers: np.ndarray, batch: dict[str, torch.Tensor]) -> None:
        """Server embeddings and their per-rack pools again for the racks of ``servers``."""
        kept = self.kept
        racks, rows, local = self.racks.rows(servers)
        z_s = self.model.actor_encoder.server_level(kept["gpu_mean"][:, rows], kept["gpu_max"][:, rows],
                                                    batch["server"][:, rows], local, len(racks))
        kept["z_s"][:, rows] = z_s
        at = torch.as_tensor(racks)
        kept["rack_mean"][:, at] = scatter_mean(z_s, local, len(racks))
        kept["rack_max"][:, at] = scatter_max(z_s, local, len(racks))
