"""`InvariantChecker`: the simulator's invariants, checked after every step (an observer)."""

from __future__ import annotations

import math

from rackwise.cluster.allocation import SLICED, SLICES_PER_GPU, slices_of
from rackwise.sim.engine import Simulator
from rackwise.workload.state import Status

REL = 1e-9


class InvariantChecker:
    """Checks the simulator's state after every step (pass as an observer)."""

    def __init__(self) -> None:
        self.last_now = -math.inf
        self.n_checks = 0
        self.forked: set[str] = set()  # jobs seen running as several copies at once
        self.shared: set[str] = set()  # jobs seen sharing their GPUs with another

    def __call__(self, sim: Simulator) -> None:
        self.n_checks += 1
        now = sim.now
        assert now >= self.last_now, f"time went back from {self.last_now} to {now}"
        self.last_now = now
        topology = sim.topology
        owner = sim.allocation.owner

        # every running job holds exactly its GPUs, and nobody else holds any; a GPU
        # holds two jobs only if they share it as each other's partners (space sharing)
        expected: list[str | None] = [None] * topology.n_gpus
        split: dict[int, dict[str, int]] = {}  # GPU -> slices of each fractional job on it
        for job_id in sorted(sim.running):
            state = sim.running[job_id]
            assert state.status is Status.RUNNING
            if state.job.is_fractional:
                (gpu,) = state.gpu_ids
                split.setdefault(gpu, {})[job_id] = slices_of(state.job.gpu_share)
                continue
            copies = getattr(state, "copies", 1)
            if copies > 1:
                self.forked.add(job_id)
            assert len(state.gpu_ids) == state.n_gpus * copies == len(set(state.gpu_ids))
            if state.partner is not None:
                partner = sim.running[state.partner]
                assert partner.partner == job_id and copies == 1
                assert sorted(partner.gpu_ids) == sorted(state.gpu_ids)
                self.shared.add(job_id)
                if state.partner < job_id:
                    continue  # the pair's GPUs are checked once, below under either name
            for gpu in state.gpu_ids:
                assert expected[gpu] is None, f"GPU {gpu} held by {expected[gpu]} and {job_id}"
                expected[gpu] = job_id
        for gpu, job_id in enumerate(expected):
            if job_id is not None and sim.running[job_id].partner is not None:
                expected[gpu] = owner[gpu] if owner[gpu] in (job_id, sim.running[job_id].partner) \
                    else job_id
        # a split GPU holds fractional jobs only, their slices add up to at most a whole GPU
        for gpu, tenants in split.items():
            assert expected[gpu] is None, f"GPU {gpu} held by {expected[gpu]} and split"
            assert sum(tenants.values()) <= SLICES_PER_GPU
            assert sim.allocation.room[gpu] == SLICES_PER_GPU - sum(tenants.values())
            expected[gpu] = SLICED
        assert sim.allocation.tenants == split
        assert owner == expected

        # free + allocated = capacity, per node, per rack and in total
        node_held = [0] * topology.n_nodes
        for gpu, job_id in enumerate(owner):
            if job_id is not None:
                node_held[topology.gpu_node[gpu]] += 1
        for node in topology.nodes:
            assert sim.allocation.free_in_node(node.node_id) + node_held[node.node_id] == node.n_gpus
        for rack, nodes in enumerate(topology.rack_nodes):
            held = sum(node_held[n] for n in nodes)
            assert sim.allocation.free_in_rack(rack) + held == topology.rack_capacity[rack]
        assert sim.allocation.n_free + sum(node_held) == topology.n_gpus

        # each arrived job is in exactly one of pending, running, finished
        assert not set(sim.pending) & set(sim.running)
        assert not (set(sim.pending) | set(sim.running)) & set(sim.finished)
        arrived = sum(job.submit_time <= now for job in sim.jobs)
        assert len(sim.pending) + len(sim.running) + len(sim.finished) == arrived
        assert all(s.status is Status.PENDING for s in sim.pending.values())
        assert all(s.status is Status.FINISHED for s in sim.finished.values())

        # no job has run past its iterations (progress is not clamped here)
        for state in sim.pending.values():
            assert state.iters_done <= state.job.total_iters * (1 + REL)
        for state in sim.running.values():
            productive = max(0.0, now - max(state.last_update, state.busy_until))
            raw = state.iters_done + productive * state.rate_iters_per_s
            assert raw <= state.job.total_iters * (1 + REL) + 1e-9, (
                f"job {state.job_id} at {raw} of {state.job.total_iters} iterations at t={now}")
