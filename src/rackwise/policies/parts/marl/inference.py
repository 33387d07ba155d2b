"""The actor at run time, in numpy: one observation after another of one cluster, unchanged parts kept.

A decision asks the actor about one observation. torch spends most of such
a call dispatching about a hundred small operators (docs/benchmarks.md,
thirty-third run), so `CachedActor` runs the same layers, with the trained
float32 weights of `ActorCritic` (its state dict, from the checkpoint's
``.npz`` file: no torch needed), as numpy array operations.
Its logits agree with `ActorCritic.logits` to about 1e-6 (the kernels sum
in other orders); ``marl`` compares logits on a 1/256 grid for that reason.

The encoder passes messages among the GPUs of one server, then among the
servers of one rack (`HierarchicalEncoder.gpu_level`, `.server_level`), so a
server's pooled GPU embeddings depend on its own GPUs alone, and a rack's
server embeddings on its own servers alone. `CachedActor` keeps both and
works them out again only for the servers and racks whose features changed
since the last call: a start touches a server or a few, where the full pass
runs over every GPU and server of the cluster. The rack and datacenter
levels and the heads run in full. A recomputed row goes through the same
operations on the same inputs as in a pass over every row, but BLAS may
sum a product of fewer rows in another order, so the logits match those of
a pass from scratch to float32 rounding (`tests/rl/test_incremental.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

LAYER_NORM_EPS = 1e-5  # the encoder's LayerNorm (`encoder._Siblings`); torch's default
_ROWS_KEPT = 1024  # sets of groups whose rows are kept (then forgotten all at once)


def _relu(x: np.ndarray) -> np.ndarray:
    """ReLU in place."""
    np.maximum(x, 0.0, out=x)
    return x


@dataclass(frozen=True)
class _Linear:
    """``x @ weight + bias``: a torch ``Linear``'s weights, transposed once."""

    weight: np.ndarray
    bias: np.ndarray

    @classmethod
    def of(cls, weights: Mapping[str, Any], name: str) -> _Linear:
        """The layer ``name`` of a state dict of numpy arrays."""
        return cls(np.ascontiguousarray(np.asarray(weights[f"{name}.weight"], dtype=np.float32).T),
                   np.array(weights[f"{name}.bias"], dtype=np.float32))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        out: np.ndarray = x @ self.weight
        out += self.bias
        return out


@dataclass(frozen=True)
class _Mlp:
    """A torch ``mlp``: linear, ReLU, linear."""

    first: _Linear
    second: _Linear

    @classmethod
    def of(cls, weights: Mapping[str, Any], name: str) -> _Mlp:
        return cls(_Linear.of(weights, f"{name}.0"), _Linear.of(weights, f"{name}.2"))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return self.second(_relu(self.first(x)))


@dataclass(frozen=True)
class _Siblings:
    """One round of sibling message passing (`encoder._Siblings`): h <- LN(h + ReLU(W [h, mean of siblings]))."""

    update: _Linear
    scale: np.ndarray
    shift: np.ndarray
    eps: float

    @classmethod
    def of(cls, weights: Mapping[str, Any], name: str) -> _Siblings:
        return cls(_Linear.of(weights, f"{name}.update"),
                   np.array(weights[f"{name}.norm.weight"], dtype=np.float32),
                   np.array(weights[f"{name}.norm.bias"], dtype=np.float32), LAYER_NORM_EPS)

    def __call__(self, h: np.ndarray, message: np.ndarray) -> np.ndarray:
        x: np.ndarray = h + _relu(self.update(np.concatenate([h, message], axis=1)))
        # LayerNorm with the biased variance, as torch's; ``x.mean`` is this sum and division,
        # with Python around it
        width = x.shape[1]
        x -= np.add.reduce(x, axis=1, keepdims=True) / width
        x /= np.sqrt(np.add.reduce(x * x, axis=1, keepdims=True) / width + self.eps)
        x *= self.scale
        x += self.shift
        return x


@dataclass(frozen=True)
class _Segments:
    """Some groups' members, listed group after group (every group has a member: a server has
    GPUs, a rack servers).

    Attributes:
        groups: The groups' ids, ascending.
        rows: Their members' rows, group after group, each group's ascending.
        local: Each row's group, as a position in ``groups``.
        starts: Where each group's rows start in ``rows``.
        counts: The groups' sizes, as a float32 column: the mean's divisor.
    """

    groups: np.ndarray
    rows: np.ndarray
    local: np.ndarray
    starts: np.ndarray
    counts: np.ndarray

    @classmethod
    def of(cls, groups: np.ndarray, members: list[np.ndarray]) -> _Segments:
        sizes = np.array([len(members[g]) for g in groups], dtype=np.int64)
        return cls(groups, np.concatenate([members[g] for g in groups]), np.repeat(np.arange(len(groups)), sizes),
                   np.cumsum(sizes) - sizes, sizes.astype(np.float32)[:, None])

    def mean(self, x: np.ndarray) -> np.ndarray:
        """Mean of each group's rows of ``x`` (rows in ``rows``' order)."""
        out: np.ndarray = np.add.reduceat(x, self.starts, axis=0) / self.counts
        return out

    def max(self, x: np.ndarray) -> np.ndarray:
        """Max of each group's rows of ``x``."""
        out: np.ndarray = np.maximum.reduceat(x, self.starts, axis=0)
        return out


class _Groups:
    """Members of each group (GPUs of a server, servers of a rack), and segments of some groups."""

    def __init__(self, group_of: np.ndarray, n_groups: int) -> None:
        self.group_of = group_of
        self.n_groups = n_groups
        order = np.argsort(group_of, kind="stable")
        sizes = np.bincount(group_of, minlength=n_groups)
        self.members = np.split(order, np.cumsum(sizes)[:-1])
        self.all = _Segments.of(np.arange(n_groups), self.members)
        self._kept: dict[tuple[int, ...], _Segments] = {}  # by chosen groups: few sets recur

    def of_members(self, changed: np.ndarray) -> _Segments:
        """The groups of the ``changed`` members."""
        key = _distinct_ids(self.group_of[changed])
        if len(key) == self.n_groups:
            return self.all
        segments = self._kept.get(key)
        if segments is None:
            if len(self._kept) >= _ROWS_KEPT:
                self._kept.clear()
            segments = self._kept[key] = _Segments.of(np.array(key, dtype=np.int64), self.members)
        return segments


def _distinct_ids(values: np.ndarray) -> tuple[int, ...]:
    """``np.unique`` of a few values, as a tuple, without its sort's cost per call."""
    return tuple(sorted(set(values.tolist())))


def _distinct(values: np.ndarray) -> np.ndarray:
    """`_distinct_ids` as an array."""
    return np.array(_distinct_ids(values), dtype=np.int64)


def _changed_rows(new: np.ndarray, old: np.ndarray) -> np.ndarray:
    # few rows change: finding the changed cells first is cheaper than a reduction per row
    rows: np.ndarray = np.flatnonzero(new.ravel() != old.ravel()) // new.shape[1]
    if len(rows) > 1:  # ascending: keep the first of each run
        rows = rows[np.concatenate(([True], rows[1:] != rows[:-1]))]
    return rows


class ActorLayers(NamedTuple):
    """The actor's layers, read once from a trained `ActorCritic`'s state dict."""

    gpu_in: _Linear
    server_in: _Linear
    rack_in: _Linear
    gpu_rounds: list[_Siblings]
    server_rounds: list[_Siblings]
    rack_rounds: list[_Siblings]
    server_pool: _Linear
    rack_pool: _Linear
    dc_pool: _Linear
    job_in: _Mlp
    candidate_in: _Linear
    server_head: _Mlp
    wait_head: _Mlp

    @classmethod
    def of(cls, weights: Mapping[str, Any]) -> ActorLayers:
        """The layers of a state dict of numpy arrays, copied (later training does not reach them).

        Raises:
            KeyError: a layer of the actor is missing from ``weights``.
        """
        def encoder(name: str) -> _Linear:
            return _Linear.of(weights, f"actor_encoder.{name}")

        def rounds(level: int) -> list[_Siblings]:
            prefix = f"actor_encoder.levels.{level}."
            return [_Siblings.of(weights, f"{prefix}{i}") for i in range(_count(weights, prefix))]

        return cls(encoder("gpu_in"), encoder("server_in"), encoder("rack_in"), rounds(0), rounds(1), rounds(2),
                   encoder("server_pool"), encoder("rack_pool"), encoder("dc_pool"),
                   _Mlp.of(weights, "job_in"), _Linear.of(weights, "candidate_in"),
                   _Mlp.of(weights, "server_head"), _Mlp.of(weights, "wait_head"))


class CachedActor:
    """The actor's masked logits (as `ActorCritic.logits`, batch of one) for observations of one topology.

    Args:
        layers: The trained actor's layers.
        topology: The cluster every observation describes.
    """

    def __init__(self, layers: ActorLayers, topology: Any) -> None:
        (self.gpu_in, self.server_in, self.rack_in, self.gpu_rounds, self.server_rounds, self.rack_rounds,
         self.server_pool, self.rack_pool, self.dc_pool, self.job_in, self.candidate_in,
         self.server_head, self.wait_head) = layers
        self.server_rack = np.asarray(topology.node_rack, dtype=np.int64)
        self.servers = _Groups(np.asarray(topology.gpu_node, dtype=np.int64), topology.n_nodes)
        self.racks = _Groups(self.server_rack, topology.n_racks)
        self.last: dict[str, np.ndarray] = {}  # the GPU and server features seen last
        self.kept: dict[str, np.ndarray] = {}  # per server: gpu_mean, gpu_max, z_s; per rack: mean, max

    def logits(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        """Masked logits over the servers plus "wait" (last): -inf where the mask forbids."""
        if not self.last:
            self._gpu_level(self.servers.all, obs["gpu"])
            self._server_level(self.racks.all, obs["server"])
        else:
            gpus = _changed_rows(obs["gpu"], self.last["gpu"])
            servers = _changed_rows(obs["server"], self.last["server"])
            if gpus.size:
                some = self.servers.of_members(gpus)
                self._gpu_level(some, obs["gpu"])
                servers = _distinct(np.concatenate([some.groups, servers]))
            if servers.size:
                self._server_level(self.racks.of_members(servers), obs["server"])
        self.last = {"gpu": obs["gpu"], "server": obs["server"]}
        z_r, z_dc = self._rack_levels(obs["rack"])
        return self._scores(z_r, z_dc, obs)

    def _gpu_level(self, some: _Segments, gpu: np.ndarray) -> None:
        """Pooled GPU embeddings again, of ``some`` servers."""
        h = _relu(self.gpu_in(gpu[some.rows]))
        for layer in self.gpu_rounds:
            h = layer(h, some.mean(h)[some.local])
        self._put("gpu_mean", some.groups, some.mean(h))
        self._put("gpu_max", some.groups, some.max(h))

    def _server_level(self, some: _Segments, server: np.ndarray) -> None:
        """Server embeddings and their per-rack pools again, of the servers of ``some`` racks."""
        rows, kept = some.rows, self.kept
        z_s = _relu(self.server_pool(np.concatenate([
            kept["gpu_mean"][rows], kept["gpu_max"][rows], _relu(self.server_in(server[rows]))], axis=1)))
        for layer in self.server_rounds:
            z_s = layer(z_s, some.mean(z_s)[some.local])
        self._put("z_s", rows, z_s)
        self._put("rack_mean", some.groups, some.mean(z_s))
        self._put("rack_max", some.groups, some.max(z_s))

    def _put(self, name: str, rows: np.ndarray, values: np.ndarray) -> None:
        kept = self.kept.get(name)
        if kept is None:  # the first pass covers every row
            kept = self.kept[name] = np.empty_like(values)
        kept[rows] = values

    def _rack_levels(self, rack: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rack embeddings (one group: every rack sees every other) and the datacenter's."""
        z_r = _relu(self.rack_pool(np.concatenate(
            [self.kept["rack_mean"], self.kept["rack_max"], _relu(self.rack_in(rack))], axis=1)))
        n_racks = len(z_r)
        for layer in self.rack_rounds:
            z_r = layer(z_r, (np.add.reduce(z_r, axis=0, keepdims=True) / n_racks).repeat(n_racks, axis=0))
        z_dc = _relu(self.dc_pool(np.concatenate([np.add.reduce(z_r, axis=0) / n_racks,
                                                  np.maximum.reduce(z_r, axis=0)])))
        return z_r, z_dc

    def _scores(self, z_r: np.ndarray, z_dc: np.ndarray, obs: dict[str, np.ndarray]) -> np.ndarray:
        mask = obs["mask"]
        context = np.concatenate([z_dc, self.job_in(obs["job"])])  # the datacenter and the queue head
        scores = np.full(len(mask), -np.inf, dtype=np.float32)
        # Only the servers the mask allows are scored: the rest are -inf whatever the head says.
        rows = mask[:-1].nonzero()[0]
        if len(rows):
            n_rows = len(rows)
            per_server = np.concatenate([
                self.kept["z_s"][rows], z_r[self.server_rack[rows]],
                context[None, :].repeat(n_rows, axis=0),
                _relu(self.candidate_in(obs["candidate"][rows]))], axis=1)
            scores[rows] = self.server_head(per_server)[:, 0]
        if mask[-1]:
            scores[-1] = self.wait_head(context)[0]
        return scores


def _count(weights: Mapping[str, Any], prefix: str) -> int:
    """How many numbered layers ``prefix0.``, ``prefix1.``, ... the state dict holds."""
    return len({key[len(prefix):].split(".", 1)[0] for key in weights if key.startswith(prefix)})
