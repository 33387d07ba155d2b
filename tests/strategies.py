"""Every hypothesis strategy the tests use.

Clusters are small (1-3 racks of 1-4 nodes of 1-8 GPUs, mixed GPU types)
and workloads short (1-30 jobs), so a shrunk failure stays readable.
"""

from __future__ import annotations

from hypothesis import strategies as st

from rackwise.cluster.topology import ClusterSpec, Node, Topology
from rackwise.workload.job import Job

GPU_TYPES = ("v100", "p100", "k80")


@st.composite
def topologies(draw: st.DrawFn, max_racks: int = 3, max_nodes_per_rack: int = 4,
               max_gpus_per_node: int = 8) -> Topology:
    """A cluster of 1-3 racks, each of 1-4 nodes of 1-8 GPUs; each node has its own GPU type."""
    n_racks = draw(st.integers(1, max_racks))
    nodes: list[Node] = []
    first_gpu = 0
    for rack_id in range(n_racks):
        for _ in range(draw(st.integers(1, max_nodes_per_rack))):
            n_gpus = draw(st.integers(1, max_gpus_per_node))
            gpu_type = draw(st.sampled_from(GPU_TYPES))
            nodes.append(Node(len(nodes), rack_id, gpu_type, n_gpus, first_gpu))
            first_gpu += n_gpus
    return Topology(tuple(nodes), name="drawn")


@st.composite
def cluster_specs(draw: st.DrawFn) -> ClusterSpec:
    """A cluster spec as a user would write it: 1-3 node groups, each racked on its own."""
    groups = draw(st.lists(
        st.fixed_dictionaries(
            {"count": st.integers(1, 6), "gpus_per_node": st.integers(1, 8),
             "gpu_type": st.sampled_from(GPU_TYPES)},
            optional={"nodes_per_rack": st.integers(1, 4)},
        ),
        min_size=1, max_size=3,
    ))
    return ClusterSpec(nodes_per_rack=draw(st.integers(1, 4)), node_groups=groups)


def _job_sizes(capacity: int) -> st.SearchStrategy[int]:
    """Mostly small gangs, sometimes anything up to the whole cluster."""
    return st.one_of(st.integers(1, min(capacity, 4)), st.integers(1, capacity))


@st.composite
def workloads(draw: st.DrawFn, capacity: int, max_jobs: int = 30) -> list[Job]:
    """1-30 jobs that each fit a cluster of ``capacity`` GPUs; submit times often tie."""
    n_jobs = draw(st.integers(1, max_jobs))
    gaps = st.one_of(st.just(0.0), st.integers(1, 3_000).map(float),
                     st.floats(0.5, 5_000.0, allow_nan=False))
    durations = st.one_of(st.integers(1, 10_000).map(float),
                          st.floats(1.0, 10_000.0, allow_nan=False))
    jobs: list[Job] = []
    submit = 0.0
    for index in range(n_jobs):
        submit += draw(gaps)
        jobs.append(Job(f"j{index:02d}", submit, draw(_job_sizes(capacity)), draw(durations)))
    # the engine must not rely on the input order
    return draw(st.permutations(jobs))


@st.composite
def clusters_and_workloads(draw: st.DrawFn, max_jobs: int = 30) -> tuple[Topology, list[Job]]:
    """A drawn cluster and a workload whose every job fits it."""
    topology = draw(topologies())
    return topology, draw(workloads(topology.n_gpus, max_jobs=max_jobs))
