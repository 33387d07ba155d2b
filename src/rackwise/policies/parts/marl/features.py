"""Observations: the cluster as a three-level graph, the queue head, and per-server candidates.

Everything here is numpy, shared by the environments (training) and the
`marl` policy (inference), so both see exactly the same numbers. Features
are normalised to about [0, 1]:

* GPU (`N_GPU_FEATURES`): busy; family one-hot of the job holding it; that
  job's width (log2) and whether it spans several servers.
* server (`N_SERVER_FEATURES`): free fraction; jobs resident / 8; jobs using
  its NIC (spanning servers) / 8; share of its GPUs held per family.
* rack (`N_RACK_FEATURES`): free fraction; jobs crossing its uplink / 8;
  uplink share of one more crossing job.
* job (`job_features`): family one-hot, width, the agent's queue summary,
  the head's age, the agent's one-hot.
* candidate, one row per server (`N_CANDIDATE_FEATURES`): may it anchor the
  head; free fraction left; servers and racks the placement would span; the
  interference model's predicted log-slowdown of the head there and the
  summed increase it would cause its neighbours.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from rackwise.cluster.allocation import FreeGpus
from rackwise.cluster.topology import Topology
from rackwise.perf.catalogue import CATALOGUE
from rackwise.policies.parts.marl.placement import anchored_gpus, feasible_mask
from rackwise.workload.job import Job

FAMILIES: tuple[str, ...] = tuple(dict.fromkeys(spec.family for spec in CATALOGUE.values()))
MODELS: tuple[str, ...] = tuple(CATALOGUE)
N_FAMILIES = len(FAMILIES) + 1  # the last one: no or unknown model
N_MODELS = len(MODELS) + 1
_FAMILY_INDEX = {name: FAMILIES.index(spec.family) for name, spec in CATALOGUE.items()}
_MODEL_INDEX = {name: i for i, name in enumerate(MODELS)}

N_GPU_FEATURES = 1 + N_FAMILIES + 2
N_SERVER_FEATURES = 3 + N_FAMILIES
N_RACK_FEATURES = 3
N_CANDIDATE_FEATURES = 6
N_QUEUE_FEATURES = 4


def family_index(model: str | None) -> int:
    """Index of a catalogue model's family in `FAMILIES` (the last index if unknown)."""
    return _FAMILY_INDEX.get(model or "", N_FAMILIES - 1)


def model_index(model: str | None) -> int:
    """Index of a catalogue model in `MODELS` (the last index if unknown)."""
    return _MODEL_INDEX.get(model or "", N_MODELS - 1)


def agent_of(job: Job, n_agents: int) -> int:
    """The agent a job belongs to: a stable hash of its group (else its id) mod ``n_agents``."""
    key = job.group if job.group is not None else job.job_id
    # blake2b, not crc32: crc32 is linear, so keys that differ in one character share parity
    digest = hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little") % n_agents


@dataclass(frozen=True)
class GraphIndex:
    """Static structure of a topology: which server holds each GPU, which rack each server."""

    gpu_server: np.ndarray
    server_rack: np.ndarray
    server_size: np.ndarray
    rack_size: np.ndarray

    @classmethod
    def of(cls, topology: Topology) -> GraphIndex:
        return cls(np.asarray(topology.gpu_node, dtype=np.int64),
                   np.asarray([n.rack_id for n in topology.nodes], dtype=np.int64),
                   np.asarray([n.n_gpus for n in topology.nodes], dtype=np.float64),
                   np.asarray(topology.rack_capacity, dtype=np.float64))


@dataclass
class Placed:
    """A job holding GPUs (running, or tentatively started in this decision)."""

    job: Job
    gpu_ids: tuple[int, ...]
    remaining_s: float = 0.0  # ideal seconds of work left (training reward only)
    model_id: int = field(init=False, repr=False)  # `model_index` of the job's model, asked often

    def __post_init__(self) -> None:
        self.model_id = model_index(self.job.model)


@functools.cache
def _width_feature(width: int) -> np.float64:
    """A GPU's width feature: log2 of its job's GPU count / 7 (numpy's log2, as `_count` uses)."""
    value: np.float64 = np.log2(np.int64(width)) / 7.0
    return value


def graph_features(free: FreeGpus, placed: Sequence[Placed], index: GraphIndex
                   ) -> dict[str, np.ndarray]:
    """GPU, server and rack feature matrices of the cluster now."""
    return GraphFeatures(free, placed, index).arrays()


class GraphFeatures:
    """`graph_features` kept up to date as jobs start.

    A start rewrites only the rows of its GPUs, servers and racks, with the
    arithmetic a rebuild would do, so `arrays` equals `graph_features` of the
    new state bit for bit.
    """

    def __init__(self, free: FreeGpus, placed: Sequence[Placed], index: GraphIndex) -> None:
        topology = free.topology
        n_gpus, n_servers, n_racks = topology.n_gpus, topology.n_nodes, topology.n_racks
        self.index = index
        self.gpu = np.zeros((n_gpus, N_GPU_FEATURES), dtype=np.float32)
        self.server = np.zeros((n_servers, N_SERVER_FEATURES), dtype=np.float32)
        self.rack = np.zeros((n_racks, N_RACK_FEATURES), dtype=np.float32)
        self.family_gpus = np.zeros((n_servers, N_FAMILIES))  # GPUs held per family
        self.n_jobs = np.zeros(n_servers)
        self.nic = np.zeros(n_servers)  # jobs on the server that span several servers
        self.crossing = np.zeros(n_racks)  # jobs on the rack that span several racks
        self.holders: list[int] = [0] * n_gpus  # jobs holding each GPU (a list: read a few at a time)
        self.server_free = np.zeros(n_servers)  # free GPUs the rows were written with
        self.rack_free = np.zeros(n_racks)
        # Plain lists for the per-job updates, which touch a server or two: numpy's
        # per-call cost would outweigh the work.
        self._gpu_server: list[int] = index.gpu_server.tolist()
        self._server_rack: list[int] = index.server_rack.tolist()
        self._server_size: list[float] = index.server_size.tolist()
        self._rack_size: list[float] = index.rack_size.tolist()
        if placed:
            self._count(placed)
        self._set_rows(free, range(n_servers), range(n_racks))

    def _count(self, placed: Sequence[Placed]) -> None:
        # vectorised over every held GPU: one row per (GPU, job), then (server, job) pairs
        index, gpu = self.index, self.gpu
        n_servers, n_racks = len(self.n_jobs), len(self.crossing)
        widths = np.fromiter((len(p.gpu_ids) for p in placed), np.int64, len(placed))
        fams = np.fromiter((family_index(p.job.model) for p in placed), np.int64, len(placed))
        ids = np.fromiter((g for p in placed for g in p.gpu_ids), np.int64, int(widths.sum()))
        owner = np.repeat(np.arange(len(placed)), widths)
        gpu[ids, 0] = 1.0
        gpu[ids, 1 + fams[owner]] = 1.0
        gpu[ids, 1 + N_FAMILIES] = np.log2(widths[owner]) / 7.0
        self.holders = np.bincount(ids, minlength=len(self.holders)).tolist()
        servers_of = index.gpu_server[ids]
        np.add.at(self.family_gpus, (servers_of, fams[owner]), 1.0)
        pairs = np.unique(servers_of * len(placed) + owner)
        pair_server, pair_job = pairs // len(placed), pairs % len(placed)
        self.n_jobs = np.bincount(pair_server, minlength=n_servers).astype(np.float64)
        spans = np.bincount(pair_job, minlength=len(placed))
        multi = spans[pair_job] > 1
        self.nic = np.bincount(pair_server[multi], minlength=n_servers).astype(np.float64)
        gpu[ids, 2 + N_FAMILIES] = (spans[owner] > 1).astype(np.float32)
        rack_pairs = np.unique(index.server_rack[pair_server] * len(placed) + pair_job)
        rack_of, rack_job = rack_pairs // len(placed), rack_pairs % len(placed)
        n_racks_of = np.bincount(rack_job, minlength=len(placed))
        self.crossing = np.bincount(rack_of[n_racks_of[rack_job] > 1], minlength=n_racks).astype(np.float64)

    def add(self, item: Placed, free: FreeGpus) -> None:
        """Count a job that has just taken its GPUs (``free`` no longer has them)."""
        ids, servers, racks = self._update(item, 1.0)
        gpu = self.gpu
        gpu[ids, 0] = 1.0
        gpu[ids, 1 + family_index(item.job.model)] = 1.0
        gpu[ids, 1 + N_FAMILIES] = _width_feature(len(ids))
        gpu[ids, 2 + N_FAMILIES] = 1.0 if len(servers) > 1 else 0.0
        self._set_rows(free, servers, racks)

    def remove(self, item: Placed, free: FreeGpus) -> bool:
        """Uncount a job that has given its GPUs back (``free`` has them again).

        False if another counted job holds one of its GPUs too: that GPU's row
        cannot be told from the counts, so the caller must rebuild.
        """
        ids, servers, racks = self._update(item, -1.0)
        holders = self.holders
        if any(holders[g] for g in ids):
            return False
        self.gpu[ids] = 0.0
        self._set_rows(free, servers, racks)
        return True

    def refresh_free(self, free: FreeGpus) -> None:
        """Read every server's and rack's free GPUs again (rewriting the rows where they changed)."""
        server_free = np.asarray(free.free_counts(), dtype=np.float64)
        rack_free = np.fromiter((free.free_in_rack(r) for r in range(len(self.crossing))), np.float64,
                                len(self.crossing))
        servers = np.flatnonzero(server_free != self.server_free).tolist()
        racks = np.flatnonzero(rack_free != self.rack_free).tolist()
        if servers or racks:
            self._set_rows(free, servers, racks)

    def _update(self, item: Placed, sign: float) -> tuple[list[int], list[int], list[int]]:
        """Add ``sign`` x the job to the counts; its GPU ids, servers and racks (ascending)."""
        ids = list(item.gpu_ids)
        gpu_server = self._gpu_server
        per_server: dict[int, int] = {}
        for g in ids:
            s = gpu_server[g]
            per_server[s] = per_server.get(s, 0) + 1
        servers = sorted(per_server)
        racks = sorted({self._server_rack[s] for s in servers})
        holders, step = self.holders, int(sign)
        for g in ids:
            holders[g] += step
        family = family_index(item.job.model)
        family_gpus, n_jobs, nic = self.family_gpus, self.n_jobs, self.nic
        spread = len(servers) > 1
        for s in servers:
            family_gpus[s, family] += sign * per_server[s]
            n_jobs[s] += sign
            if spread:
                nic[s] += sign
        if len(racks) > 1:
            for r in racks:
                self.crossing[r] += sign
        return ids, servers, racks

    def _set_rows(self, free: FreeGpus, servers: Iterable[int], racks: Iterable[int]) -> None:
        """Write the rows of the given servers and racks from the counts and ``free``."""
        server, sizes = self.server, self._server_size
        n_jobs, nic, family_gpus = self.n_jobs, self.nic, self.family_gpus
        for s in servers:
            count, size = float(free.free_in_node(s)), sizes[s]
            self.server_free[s] = count
            row = server[s]
            row[0] = count / size
            row[1] = n_jobs[s] / 8.0
            row[2] = nic[s] / 8.0
            row[3:] = family_gpus[s] / size
        rack, crossing = self.rack, self.crossing
        for r in racks:
            count, n_crossing = float(free.free_in_rack(r)), crossing[r]
            self.rack_free[r] = count
            row = rack[r]
            row[0] = count / self._rack_size[r]
            row[1] = n_crossing / 8.0
            row[2] = 1.0 / (1.0 + n_crossing)

    def arrays(self) -> dict[str, np.ndarray]:
        """The ``gpu``, ``server`` and ``rack`` matrices (fresh arrays, clipped to 4)."""
        return {"gpu": np.minimum(self.gpu, 4.0), "server": np.minimum(self.server, 4.0),
                "rack": np.minimum(self.rack, 4.0)}


def queue_summary(queue: Sequence[Job], now: float, cluster_gpus: int, asked: int | None = None
                  ) -> np.ndarray:
    """(jobs queued / 20, GPUs asked / cluster, head age in hours / 10, any queued), clipped to 1.

    ``asked``: the GPUs the queue's jobs ask for in all, if the caller keeps count.
    """
    if not queue:
        return np.zeros(N_QUEUE_FEATURES, dtype=np.float32)
    if asked is None:
        asked = sum(job.n_gpus for job in queue)
    age_h = max(0.0, now - queue[0].submit_time) / 3600.0
    return np.minimum(np.asarray([len(queue) / 20.0, asked / cluster_gpus, age_h / 10.0, 1.0],
                                 dtype=np.float32), 1.0)


def job_features(job: Job | None, summary: np.ndarray, agent: int, n_agents: int,
                 gpus_per_server: int) -> np.ndarray:
    """Features of an agent's queue head (zeros but the queue and agent parts if none)."""
    out = np.zeros(N_FAMILIES + 2 + N_QUEUE_FEATURES + n_agents, dtype=np.float32)
    if job is not None:
        out[family_index(job.model)] = 1.0
        out[N_FAMILIES] = math.log2(job.n_gpus) / 7.0
        out[N_FAMILIES + 1] = min(job.n_gpus / gpus_per_server, 4.0) / 4.0
    out[N_FAMILIES + 2:N_FAMILIES + 2 + N_QUEUE_FEATURES] = summary
    out[N_FAMILIES + 2 + N_QUEUE_FEATURES + agent] = 1.0
    return out


def job_feature_size(n_agents: int) -> int:
    return N_FAMILIES + 2 + N_QUEUE_FEATURES + n_agents


def residents(placed: Sequence[Placed], index: GraphIndex) -> list[list[tuple[Placed, float]]]:
    """Per server, the jobs on it and the share of its GPUs each holds."""
    out: list[list[tuple[Placed, float]]] = [[] for _ in range(len(index.server_rack))]
    for item in placed:
        add_resident(out, item, index)
    return out


def add_resident(on_server: list[list[tuple[Placed, float]]], item: Placed, index: GraphIndex) -> None:
    """Add one more placed job to what `residents` gave (as if it came last in ``placed``)."""
    counts: dict[int, int] = {}
    for g in item.gpu_ids:
        s = int(index.gpu_server[g])
        counts[s] = counts.get(s, 0) + 1
    for s, c in counts.items():
        on_server[s].append((item, c / float(index.server_size[s])))


def candidates(free: FreeGpus, job: Job, on_server: list[list[tuple[Placed, float]]],
               index: GraphIndex, predictor: object | None) -> tuple[np.ndarray, np.ndarray]:
    """Per-server candidate features and the feasibility mask."""
    topology = free.topology
    n_servers = topology.n_nodes
    feats = np.zeros((n_servers, N_CANDIDATE_FEATURES), dtype=np.float32)
    room = np.asarray(free.free_counts())
    mask = feasible_mask(free, job.n_gpus, index.server_size, room)
    min_servers = max(1, math.ceil(job.n_gpus / topology.max_gpus_per_node))
    # An anchor with room for the whole job places it there alone: one server, one rack.
    whole = mask & (room >= job.n_gpus)
    feats[whole, 0] = 1.0
    feats[whole, 1] = (room[whole] - job.n_gpus) / index.server_size[whole]
    feats[whole, 2] = min(1 / min_servers, 4.0) / 4.0
    gpu_server, node_rack = topology.gpu_node, topology.node_rack
    for s in (mask & ~whole).nonzero()[0].tolist():  # 1-d: `nonzero` without flatnonzero's wrappers
        ids = anchored_gpus(free, job.n_gpus, s)
        if ids is None:  # cannot happen for a feasible anchor; stay safe
            mask[s] = False
            continue
        used = {gpu_server[g] for g in ids}
        feats[s, 0] = 1.0
        feats[s, 1] = (free.free_in_node(s) - sum(1 for g in ids if gpu_server[g] == s)) \
            / index.server_size[s]
        feats[s, 2] = min(len(used) / min_servers, 4.0) / 4.0
        feats[s, 3] = float(len({node_rack[n] for n in used}) > 1)
    if predictor is not None and mask.any():
        self_log, others = predictor.candidate_effects(job, on_server, mask.nonzero()[0], index)  # type: ignore[attr-defined]
        # clipped to [0, 4] by the ufuncs themselves (np.clip's wrappers cost more than the work)
        feats[mask, 4] = np.minimum(np.maximum(self_log * 10.0, 0.0), 4.0)
        feats[mask, 5] = np.minimum(np.maximum(others * 10.0, 0.0), 4.0)
    return feats, mask


def observation(free: FreeGpus, placed: Sequence[Placed], queues: Sequence[Sequence[Job]],
                agent: int, *, now: float, clock: float, index: GraphIndex,
                predictor: object | None, wait_allowed: bool,
                deciding: bool = True,
                on_server: list[list[tuple[Placed, float]]] | None = None,
                graph: GraphFeatures | None = None,
                asked: Sequence[int] | None = None) -> dict[str, np.ndarray]:
    """One agent's observation (see the module docstring and `rackwise.rl.envs`).

    ``deciding`` False (or an empty queue, or a head that does not fit) leaves
    only the no-op (the last action) allowed. ``on_server``: `residents` of
    ``placed``, ``graph``: its `GraphFeatures`, and ``asked``: the GPUs each
    queue asks for, if the caller keeps them up to date (else they are worked
    out here).
    """
    topology = free.topology
    obs = graph.arrays() if graph is not None else graph_features(free, placed, index)
    totals = asked if asked is not None else [None] * len(queues)
    obs["queues"] = np.stack([queue_summary(q, now, topology.n_gpus, total) for q, total in zip(queues, totals)])
    obs["clock"] = np.asarray([min(clock, 4.0) / 4.0], dtype=np.float32)
    queue = queues[agent]
    head = queue[0] if deciding and queue and queue[0].n_gpus <= free.n_free else None
    n_servers = topology.n_nodes
    mask = np.zeros(n_servers + 1, dtype=np.int8)
    cand = np.zeros((n_servers, N_CANDIDATE_FEATURES), dtype=np.float32)
    if head is not None:
        if on_server is None:
            on_server = residents(placed, index)
        cand, server_mask = candidates(free, head, on_server, index, predictor)
        mask[:n_servers] = server_mask
        mask[n_servers] = 1 if wait_allowed or not server_mask.any() else 0
    else:
        mask[n_servers] = 1
    obs["job"] = job_features(head, obs["queues"][agent], agent, len(queues),
                              topology.max_gpus_per_node)
    obs["candidate"] = cand
    obs["mask"] = mask
    return obs
