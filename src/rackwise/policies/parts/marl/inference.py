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

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from rackwise.policies.parts.marl import require
from rackwise.policies.parts.marl.encoder import (
    group_counts,
    scatter_max,
    scatter_mean,
    topology_index,
)

if TYPE_CHECKING:
    import torch

torch = require("torch")

# Matrix products of a handful of rows take another kernel, which rounds differently from
# the one a full pass uses; recomputing at least this many rows keeps to the latter.
MIN_ROWS = 64
_ROWS_KEPT = 1024  # sets of groups whose rows are kept (then forgotten all at once)


class _Groups:
    """Members of each group (GPUs of a server, servers of a rack), each in ascending order."""

    def __init__(self, group_of: torch.Tensor, n_groups: int) -> None:
        self.index = group_of
        self.group_of = group_of.numpy()
        self.n_groups = n_groups
        self.counts = group_counts(group_of, n_groups)  # `scatter_mean`'s divisor over all groups
        order = np.argsort(self.group_of, kind="stable")
        self.sizes = np.bincount(self.group_of, minlength=n_groups)
        self.members = np.split(order, np.cumsum(self.sizes)[:-1])
        self._rows: dict[tuple[int, ...], _Rows] = {}  # by chosen groups: few sets recur

    def rows(self, changed: np.ndarray) -> _Rows | None:
        """The groups of the ``changed`` members (with more, up to `MIN_ROWS` rows); None if that
        is every group."""
        chosen = sorted(set(self.group_of[changed].tolist()))
        n_rows = int(self.sizes[chosen].sum())
        if n_rows < MIN_ROWS:  # an unchanged group comes out the same: add some
            taken = set(chosen)
            for group in range(self.n_groups):
                if n_rows >= MIN_ROWS:
                    break
                if group not in taken:
                    chosen.append(group)
                    n_rows += int(self.sizes[group])
            chosen.sort()
        if len(chosen) == self.n_groups:
            return None
        key = tuple(chosen)
        rows = self._rows.get(key)
        if rows is None:
            if len(self._rows) >= _ROWS_KEPT:
                self._rows.clear()
            sizes = self.sizes[chosen]
            rows = self._rows[key] = _Rows(
                torch.as_tensor(chosen), torch.from_numpy(np.concatenate([self.members[g] for g in chosen])),
                torch.from_numpy(np.repeat(np.arange(len(chosen)), sizes)),
                torch.from_numpy(sizes).clamp(min=1).to(torch.float32))
        return rows


@dataclass(frozen=True)
class _Rows:
    """Some groups: their ids, their members' rows in the full pass's order, each row's group
    among them, and the groups' `group_counts`."""

    groups: torch.Tensor
    rows: torch.Tensor
    local: torch.Tensor
    counts: torch.Tensor

    @property
    def n_groups(self) -> int:
        return len(self.groups)


def _changed_rows(new: np.ndarray, old: np.ndarray) -> np.ndarray:
    # few rows change: finding the changed cells first is cheaper than a reduction per row
    return np.unique(np.flatnonzero(new.ravel() != old.ravel()) // new.shape[1])


class CachedActor:
    """The actor's masked logits (as `ActorCritic.logits`) for observations of one topology."""

    def __init__(self, model: Any, topology: Any) -> None:
        self.model = model
        gpu_server, self.server_rack = topology_index(topology)
        self.servers = _Groups(gpu_server, topology.n_nodes)
        self.racks = _Groups(self.server_rack, topology.n_racks)
        self.last: dict[str, np.ndarray] = {}  # the GPU and server features seen last
        self.kept: dict[str, torch.Tensor] = {}  # per server: gpu_mean, gpu_max, z_s; per rack: mean, max

    def logits(self, obs: dict[str, np.ndarray]) -> torch.Tensor:
        """Masked logits over the servers plus "wait" (last), batch of one."""
        # a batch of one, as `stack_obs` gives it, without copying: the same numbers in the same layout
        batch = {key: torch.from_numpy(value[None]) for key, value in obs.items()}
        batch["mask"] = batch["mask"].bool()
        encoder = self.model.actor_encoder
        with torch.inference_mode():
            if not self.last:
                self._gpu_level(None, batch)
                self._server_level(None, batch)
            else:
                gpus = _changed_rows(obs["gpu"], self.last["gpu"])
                if gpus.size:
                    self._gpu_level(self.servers.rows(gpus), batch)
                servers = np.union1d(np.unique(self.servers.group_of[gpus]),
                                     _changed_rows(obs["server"], self.last["server"]))
                if servers.size:
                    self._server_level(self.racks.rows(servers), batch)
            self.last = {"gpu": obs["gpu"], "server": obs["server"]}
            kept = self.kept
            z = {"server": kept["z_s"],
                 **encoder.rack_levels(kept["rack_mean"], kept["rack_max"], batch["rack"])}
            scores: torch.Tensor = self.model.actor_scores(z, batch, self.server_rack)
        return scores

    def _gpu_level(self, some: _Rows | None, batch: dict[str, torch.Tensor]) -> None:
        """Pooled GPU embeddings again, of ``some`` servers or (None) of all."""
        encoder, kept, servers = self.model.actor_encoder, self.kept, self.servers
        if some is None:
            h = encoder.gpu_level(batch["gpu"], servers.index, servers.n_groups, servers.counts)
            kept["gpu_mean"] = scatter_mean(h, servers.index, servers.n_groups, servers.counts)
            kept["gpu_max"] = scatter_max(h, servers.index, servers.n_groups)
            return
        h = encoder.gpu_level(batch["gpu"][:, some.rows], some.local, some.n_groups, some.counts)
        kept["gpu_mean"][:, some.groups] = scatter_mean(h, some.local, some.n_groups, some.counts)
        kept["gpu_max"][:, some.groups] = scatter_max(h, some.local, some.n_groups)

    def _server_level(self, some: _Rows | None, batch: dict[str, torch.Tensor]) -> None:
        """Server embeddings and their per-rack pools again, of the servers of ``some`` racks or
        (None) of all."""
        encoder, kept, racks = self.model.actor_encoder, self.kept, self.racks
        if some is None:
            z_s = encoder.server_level(kept["gpu_mean"], kept["gpu_max"], batch["server"], racks.index,
                                       racks.n_groups, racks.counts)
            kept["z_s"] = z_s
            kept["rack_mean"] = scatter_mean(z_s, racks.index, racks.n_groups, racks.counts)
            kept["rack_max"] = scatter_max(z_s, racks.index, racks.n_groups)
            return
        rows = some.rows
        z_s = encoder.server_level(kept["gpu_mean"][:, rows], kept["gpu_max"][:, rows], batch["server"][:, rows],
                                   some.local, some.n_groups, some.counts)
        kept["z_s"][:, rows] = z_s
        kept["rack_mean"][:, some.groups] = scatter_mean(z_s, some.local, some.n_groups, some.counts)
        kept["rack_max"][:, some.groups] = scatter_max(z_s, some.local, some.n_groups)
