"""Communication formulas against hand-computed cases (network_sensitive_delay.md §7)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rackwise.cluster.topology import Links, uniform_cluster
from rackwise.perf.comm import (
    Level,
    congested_gbps,
    consolidated_level,
    level_bandwidth_gbps,
    level_of,
    pipeline_bubble_frac,
    ring_allreduce_s,
    uplink_capacity_gbps,
)

MB = 1e6


@pytest.mark.parametrize(("gbytes_per_s", "expected_s"), [
    (300.0, 0.5e-3), (25.0, 6e-3), (12.5, 12e-3), (3.125, 48e-3)])
def test_ring_allreduce_matches_the_digest_cases(gbytes_per_s: float, expected_s: float) -> None:
    # S = 100 MB over 4 workers: 2*3/4 * 100 MB = 150 MB on the slowest link.
    assert ring_allreduce_s(4, 100 * MB, gbytes_per_s * 8) == pytest.approx(expected_s)


def test_latency_adds_two_hops_per_worker_less_one() -> None:
    plain = ring_allreduce_s(4, 100 * MB, 100.0)
    assert ring_allreduce_s(4, 100 * MB, 100.0, latency_s=1e-5) == pytest.approx(plain + 60e-6)


def test_one_worker_or_no_bytes_costs_nothing() -> None:
    assert ring_allreduce_s(1, 100 * MB, 10.0, 1e-3) == 0.0
    assert ring_allreduce_s(8, 0.0, 10.0, 1e-3) == 0.0


def test_levels() -> None:
    assert level_of(1, 1) is Level.NODE
    assert level_of(2, 1) is Level.RACK
    assert level_of(2, 2) is Level.CLUSTER


def test_bottleneck_is_the_slowest_link_spanned() -> None:
    links = Links(intra_node_gbps=1200.0, intra_rack_gbps=200.0, cross_rack_gbps=50.0)
    assert level_bandwidth_gbps(links, Level.NODE) == 1200.0
    assert level_bandwidth_gbps(links, Level.RACK) == 200.0
    assert level_bandwidth_gbps(links, Level.CLUSTER) == 50.0
    # a faster spine never beats the node's NIC
    fast_spine = Links(intra_node_gbps=1200.0, intra_rack_gbps=100.0, cross_rack_gbps=400.0)
    assert level_bandwidth_gbps(fast_spine, Level.CLUSTER) == 100.0


def test_uplink_defaults_to_the_nics_of_the_rack() -> None:
    topology = uniform_cluster(6, 8, 4)  # racks of 4 and 2 nodes
    assert uplink_capacity_gbps(topology, 0) == 400.0
    assert uplink_capacity_gbps(topology, 1) == 200.0
    capped = uniform_cluster(6, 8, 4, links=Links(rack_uplink_gbps=150.0))
    assert uplink_capacity_gbps(capped, 0) == 150.0


def test_consolidated_level_by_size() -> None:
    topology = uniform_cluster(4, 8, 2)  # 8 GPUs a node, 16 a rack
    assert consolidated_level(topology, 8) is Level.NODE
    assert consolidated_level(topology, 9) is Level.RACK
    assert consolidated_level(topology, 17) is Level.CLUSTER


def test_pipeline_bubble() -> None:
    assert pipeline_bubble_frac(1, 8) == 0.0
    assert pipeline_bubble_frac(4, 8) == pytest.approx(3 / 8)


@given(base=st.floats(1.0, 1e4), uplink=st.floats(1.0, 1e4), k=st.integers(0, 200))
def test_congestion_never_increases_bandwidth(base: float, uplink: float, k: int) -> None:
    share = congested_gbps(base, uplink, k)
    assert share <= base
    assert share <= congested_gbps(base, uplink, max(k - 1, 0))
