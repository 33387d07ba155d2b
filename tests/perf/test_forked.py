"""NetworkPerf and jobs forked into copies (HadarE): each copy trains as its own ring."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from model_helpers import placed

from rackwise import traces
from rackwise.cluster.topology import Links, uniform_cluster
from rackwise.perf.base import forked_rate
from rackwise.perf.config import PerfConfig
from rackwise.perf.model import NetworkPerf
from rackwise.policies.registry import make_policy
from rackwise.sim.engine import Simulator
from rackwise.workload.job import Job
from rackwise.workload.state import JobState

# 2 racks x 2 nodes x 4 GPUs: GPUs 0-3 node 0 and 4-7 node 1 (rack 0), 8-11 node 2 and 12-15 node 3 (rack 1)
TOPOLOGY = uniform_cluster(4, 4, 2, links=Links(rack_uplink_gbps=60.0))
MODELS = ["ResNet-18 (batch size 16)", "LM (batch size 5)", "BERT-Large", "A3C", "CycleGAN"]


def forked(job: Job, gpu_ids: tuple[int, ...], copies: int) -> JobState:
    state = placed(job, gpu_ids)
    state.copies = copies
    return state


def bound(interference_scale: float) -> NetworkPerf:
    perf = NetworkPerf(PerfConfig(interference_scale=interference_scale), assign_models=False)
    perf.bind(TOPOLOGY)
    return perf


def copy_rates(perf: NetworkPerf, state: JobState, running: dict[str, JobState]) -> list[float]:
    n = state.job.n_gpus
    return [perf.rate(state.job, state.gpu_ids[c * n:(c + 1) * n], running) for c in range(state.copies)]


def test_one_gpu_copies_communicate_nothing_and_load_no_uplink() -> None:
    perf = bound(0.0)  # no interference: only the uplinks link the two jobs
    x = Job("x", 0, 2, 1.0, model="LM (batch size 5)")
    running = {"x": placed(x, (1, 9))}  # one ring through both racks' uplinks
    alone = perf.rates(running, ["x"])["x"]
    running["f"] = forked(Job("f", 0, 1, 1.0, model="ResNet-18 (batch size 16)"), (0, 8), 2)
    new = perf.rates(running, ["f"])
    # The copies sit on nodes of both racks, but neither sends anything across.
    assert new.get("x", alone) == alone
    assert perf.comm_per_iter_s("f") == (0.0, 0.0)
    assert new["f"] == pytest.approx(2 * perf.rate(running["f"].job, (0,), running))


def test_a_copy_spanning_racks_shares_the_uplinks() -> None:
    perf = bound(0.0)
    x = Job("x", 0, 2, 1.0, model="LM (batch size 5)")
    f = Job("f", 0, 2, 1.0, model="LM (batch size 5)")
    running = {"x": placed(x, (1, 9))}
    alone = perf.rates(running, ["x"])["x"]
    running["f"] = forked(f, (0, 8, 4, 5), 2)  # copy 0 across the racks, copy 1 on node 1
    new = perf.rates(running, ["f"])
    assert new["x"] < alone  # two rings now share each uplink
    assert new["x"] == pytest.approx(bound(0.0).rate(x, (1, 9), running))
    crossing, inside = copy_rates(perf, running["f"], running)
    assert crossing < inside
    assert new["f"] == pytest.approx(crossing + inside)
    comm, extra = perf.comm_per_iter_s("f")
    comm_crossing = perf.iteration_breakdown(f, (0, 8), running).comm_s
    comm_inside = perf.iteration_breakdown(f, (4, 5), running).comm_s
    assert comm == pytest.approx((crossing * comm_crossing + inside * comm_inside) / (crossing + inside))
    assert 0.0 < extra < comm


def test_a_change_on_any_node_of_a_forked_job_re_rates_it() -> None:
    # Its copies run at their own paces: a neighbour on the copy that is not the
    # slowest still moves the job's rate (a one-ring job would keep its pace).
    perf = bound(1.0)
    f = Job("f", 0, 1, 1.0, model="ResNet-18 (batch size 16)")
    running = {"f": forked(f, (0, 4), 2),
               "heavy": placed(Job("heavy", 0, 2, 1.0, model="CycleGAN"), (1, 2))}
    perf.rates(running, ["f"])
    perf.rates(running, ["heavy"])
    running["light"] = placed(Job("light", 0, 1, 1.0, model="A3C"), (5,))
    new = perf.rates(running, ["light"])
    assert new["f"] == pytest.approx(sum(copy_rates(bound(1.0), running["f"], running)))


@st.composite
def forking_sequences(draw: st.DrawFn) -> list[tuple[str, int, int, tuple[int, ...]]]:
    """Starts and stops of small jobs, some forked into 2 or 3 copies, on `TOPOLOGY`."""
    free = list(range(16))
    running: dict[str, tuple[int, ...]] = {}
    steps: list[tuple[str, int, int, tuple[int, ...]]] = []
    for index in range(draw(st.integers(1, 20))):
        if running and (not free or draw(st.booleans())):
            job_id = draw(st.sampled_from(sorted(running)))
            free.extend(running.pop(job_id))
            steps.append((job_id, 0, 0, ()))
            continue
        n = draw(st.integers(1, min(2, len(free))))
        copies = draw(st.integers(1, min(3, len(free) // n)))
        gpus = tuple(draw(st.permutations(sorted(free)))[:n * copies])
        for gpu in gpus:
            free.remove(gpu)
        job_id = f"j{index}"
        running[job_id] = gpus
        steps.append((job_id, draw(st.integers(0, len(MODELS) - 1)), copies, gpus))
    return steps


@settings(max_examples=60)
@given(forking_sequences())
def test_incremental_rates_of_forked_jobs_match_a_fresh_model(
        steps: list[tuple[str, int, int, tuple[int, ...]]]) -> None:
    perf = bound(1.0)
    running: dict[str, JobState] = {}
    known: dict[str, float] = {}
    for job_id, model, copies, gpus in steps:
        if gpus:
            job = Job(job_id, 0.0, len(gpus) // copies, 1.0, model=MODELS[model])
            running[job_id] = forked(job, gpus, copies)
        else:
            del running[job_id]
            known.pop(job_id)
        known.update(perf.rates(running, [job_id]))
        fresh = bound(1.0)
        for other_id, state in running.items():
            assert known[other_id] == pytest.approx(sum(copy_rates(fresh, state, running)), rel=1e-9)


def test_forked_jobs_in_a_simulation_run_at_their_copies_rates() -> None:
    """HadarE on a busy ITP window: after every step, each forked job's rate is
    what a fresh model gives its copies, and jobs whose copies are one GPU
    each are charged no communication."""
    topology = uniform_cluster(8, 8, 4)
    jobs = list(traces.load("itp_2021", first_n=150).drop_oversized(topology.n_gpus))
    policy = make_policy("hadare")
    most_copies: dict[str, int] = {}

    def check(sim: Simulator) -> None:
        fresh = NetworkPerf(assign_models=False)
        fresh.bind(topology)
        for job_id, state in sim.running.items():
            if state.copies > 1:
                frac = policy.fork_overhead_frac(state.job)  # type: ignore[attr-defined]
                assert state.rate_iters_per_s == pytest.approx(
                    forked_rate(fresh, state, sim.running, frac, policy.copy_efficiency),  # type: ignore[attr-defined]
                    rel=1e-9)
                most_copies[job_id] = max(most_copies.get(job_id, 1), state.copies)

    result = Simulator(topology, jobs, policy, perf=NetworkPerf(), seed=1, observers=(check,)).run()
    assert max(most_copies.values()) > 2
    one_gpu_forked = [r for r in result.records if r.job_id in most_copies and r.n_gpus == 1]
    assert one_gpu_forked and all(r.comm_s == 0.0 for r in one_gpu_forked)
