"""The hierarchical GNN: GPU -> server -> rack -> datacenter, and the actor and critic heads.

Each level passes messages among siblings (mean over the parent's children,
then a residual update with LayerNorm), then pools bottom-up with mean and
max into the parent, concatenated with the parent's own features. No node
index enters anywhere, so permuting servers within a rack permutes the
per-server embeddings and leaves every pooled embedding unchanged, and the
same weights run on any cluster size.

Tensors carry a batch dimension first; one topology's index vectors
(`gpu_server`, `server_rack`) are shared by the whole batch. Plain torch
(``index_add_``/``scatter_reduce``) does the scatter work: no compiled
extension is needed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from rackwise.policies.parts.marl import require
from rackwise.policies.parts.marl.features import (
    N_CANDIDATE_FEATURES,
    N_GPU_FEATURES,
    N_QUEUE_FEATURES,
    N_RACK_FEATURES,
    N_SERVER_FEATURES,
    job_feature_size,
)
from rackwise.policies.parts.marl.inference import LAYER_NORM_EPS

if TYPE_CHECKING:
    import torch

torch = require("torch")
nn = torch.nn


def scatter_mean(x: torch.Tensor, index: torch.Tensor, n_out: int) -> torch.Tensor:
    """Mean of rows of ``x`` (B, N, F) grouped by ``index`` (N,) into (B, n_out, F)."""
    out = x.new_zeros(x.shape[0], n_out, x.shape[2]).index_add_(1, index, x)
    counts = torch.bincount(index, minlength=n_out).clamp(min=1).to(x.dtype)
    return out / counts.view(1, -1, 1)


def scatter_max(x: torch.Tensor, index: torch.Tensor, n_out: int) -> torch.Tensor:
    """Max of rows of ``x`` (B, N, F) grouped by ``index`` (N,) into (B, n_out, F)."""
    out = x.new_full((x.shape[0], n_out, x.shape[2]), -1e9)
    return out.scatter_reduce(1, index.view(1, -1, 1).expand_as(x), x, reduce="amax", include_self=True)


def mlp(n_in: int, hidden: int, n_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(n_in, hidden), nn.ReLU(), nn.Linear(hidden, n_out))


class _Siblings(nn.Module):
    """One round of sibling message passing: h <- LN(h + ReLU(W [h, mean of siblings]))."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.update = nn.Linear(2 * hidden, hidden)
        self.norm = nn.LayerNorm(hidden, eps=LAYER_NORM_EPS)

    def forward(self, h: torch.Tensor, index: torch.Tensor | None, n_groups: int) -> torch.Tensor:
        if index is None:  # one group: the datacenter
            message = h.mean(dim=1, keepdim=True).expand_as(h)
        else:
            message = scatter_mean(h, index, n_groups)[:, index]
        out: torch.Tensor = self.norm(h + torch.relu(self.update(torch.cat([h, message], dim=-1))))
        return out


class HierarchicalEncoder(nn.Module):
    """Embeddings of every GPU, server and rack, and of the whole datacenter.

    Args:
        hidden: Width of every embedding.
        rounds: Sibling message-passing rounds at the GPU, server and rack levels.
    """

    def __init__(self, hidden: int = 32, rounds: tuple[int, int, int] = (1, 2, 1)) -> None:
        super().__init__()
        self.hidden = hidden
        self.gpu_in = nn.Linear(N_GPU_FEATURES, hidden)
        self.server_in = nn.Linear(N_SERVER_FEATURES, hidden)
        self.rack_in = nn.Linear(N_RACK_FEATURES, hidden)
        self.levels = nn.ModuleList(
            nn.ModuleList(_Siblings(hidden) for _ in range(n)) for n in rounds)
        self.server_pool = nn.Linear(3 * hidden, hidden)
        self.rack_pool = nn.Linear(3 * hidden, hidden)
        self.dc_pool = nn.Linear(2 * hidden, hidden)

    def forward(self, obs: dict[str, torch.Tensor], gpu_server: torch.Tensor,
                server_rack: torch.Tensor) -> dict[str, torch.Tensor]:
        n_servers, n_racks = obs["server"].shape[1], obs["rack"].shape[1]
        h = self.gpu_level(obs["gpu"], gpu_server, n_servers)
        z_s = self.server_level(scatter_mean(h, gpu_server, n_servers), scatter_max(h, gpu_server, n_servers),
                                obs["server"], server_rack, n_racks)
        z = self.rack_levels(scatter_mean(z_s, server_rack, n_racks), scatter_max(z_s, server_rack, n_racks),
                             obs["rack"])
        return {"gpu": h, "server": z_s, **z}

    def gpu_level(self, gpu: torch.Tensor, gpu_server: torch.Tensor, n_servers: int) -> torch.Tensor:
        """GPU embeddings after the sibling rounds within each server (a server's GPUs see no other)."""
        h = torch.relu(self.gpu_in(gpu))
        for layer in cast(nn.ModuleList, self.levels[0]):
            h = layer(h, gpu_server, n_servers)
        return h

    def server_level(self, gpu_mean: torch.Tensor, gpu_max: torch.Tensor, server: torch.Tensor,
                     server_rack: torch.Tensor, n_racks: int) -> torch.Tensor:
        """Server embeddings after the sibling rounds within each rack (a rack's servers see no other)."""
        z_s = torch.relu(self.server_pool(torch.cat([
            gpu_mean, gpu_max, torch.relu(self.server_in(server))], dim=-1)))
        for layer in cast(nn.ModuleList, self.levels[1]):
            z_s = layer(z_s, server_rack, n_racks)
        return z_s

    def rack_levels(self, server_mean: torch.Tensor, server_max: torch.Tensor,
                    rack: torch.Tensor) -> dict[str, torch.Tensor]:
        """Rack and datacenter embeddings from the per-rack mean and max of the server level."""
        z_r = torch.relu(self.rack_pool(torch.cat([
            server_mean, server_max, torch.relu(self.rack_in(rack))], dim=-1)))
        for layer in cast(nn.ModuleList, self.levels[2]):
            z_r = layer(z_r, None, 1)
        z_dc = torch.relu(self.dc_pool(torch.cat([z_r.mean(dim=1), z_r.max(dim=1).values], dim=-1)))
        return {"rack": z_r, "dc": z_dc}


class ActorCritic(nn.Module):
    """Shared actor (server scores + wait) and a centralised critic, each with its own encoder.

    The actor sees the graph, its own queue head and per-server candidate
    features; the critic sees the graph, every agent's queue summary and the
    episode clock, which the actor never needs at run time.
    """

    def __init__(self, n_agents: int, hidden: int = 32, head_hidden: int = 64) -> None:
        super().__init__()
        self.n_agents = n_agents
        self.actor_encoder = HierarchicalEncoder(hidden)
        self.critic_encoder = HierarchicalEncoder(hidden)
        self.job_in = mlp(job_feature_size(n_agents), head_hidden, hidden)
        self.candidate_in = nn.Linear(N_CANDIDATE_FEATURES, hidden)
        self.server_head = mlp(5 * hidden, head_hidden, 1)
        self.wait_head = mlp(2 * hidden, head_hidden, 1)
        self.value_head = mlp(hidden + n_agents * N_QUEUE_FEATURES + 1, head_hidden, 1)

    def logits(self, obs: dict[str, torch.Tensor], gpu_server: torch.Tensor,
               server_rack: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Masked logits over servers plus "wait" (last), and the actor's embeddings."""
        z = self.actor_encoder(obs, gpu_server, server_rack)
        return self.actor_scores(z, obs, server_rack), z

    def actor_scores(self, z: dict[str, torch.Tensor], obs: dict[str, torch.Tensor],
                     server_rack: torch.Tensor) -> torch.Tensor:
        """`logits` from the actor's embeddings ``z`` (server, rack and datacenter)."""
        job = self.job_in(obs["job"])
        n_servers = z["server"].shape[1]
        per_server = torch.cat([
            z["server"], z["rack"][:, server_rack],
            z["dc"].unsqueeze(1).expand(-1, n_servers, -1), job.unsqueeze(1).expand(-1, n_servers, -1),
            torch.relu(self.candidate_in(obs["candidate"]))], dim=-1)
        scores = torch.cat([self.server_head(per_server).squeeze(-1),
                            self.wait_head(torch.cat([z["dc"], job], dim=-1))], dim=-1)
        masked: torch.Tensor = scores.masked_fill(~obs["mask"], float("-inf"))
        return masked

    def value(self, obs: dict[str, torch.Tensor], gpu_server: torch.Tensor,
              server_rack: torch.Tensor) -> torch.Tensor:
        """Centralised state value, one per batch row."""
        z = self.critic_encoder(obs, gpu_server, server_rack)
        x = torch.cat([z["dc"], obs["queues"].flatten(1), obs["clock"]], dim=-1)
        value: torch.Tensor = self.value_head(x).squeeze(-1)
        return value


def n_parameters(module: Any) -> int:
    return sum(p.numel() for p in module.parameters())


def stack_obs(observations: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    """Batch observations of one topology into tensors (``mask`` becomes bool)."""
    import numpy as np

    out = {key: torch.from_numpy(np.stack([o[key] for o in observations]))
           for key in observations[0]}
    out["mask"] = out["mask"].bool()
    return out


def topology_index(topology: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """(gpu -> server, server -> rack) index tensors of a topology."""
    return (torch.as_tensor(topology.gpu_node, dtype=torch.long),
            torch.as_tensor([n.rack_id for n in topology.nodes], dtype=torch.long))
