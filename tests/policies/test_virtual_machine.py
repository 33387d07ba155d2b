"""The virtual single machine: SRPT order, keys, overdue jobs, growth (a_srpt.md §3.3, §6)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rackwise.policies.parts.virtual_machine import VirtualMachine, srpt_finish_times


def test_tc1_srpt_finish_times_match_the_hand_computed_timeline() -> None:
    # G = 8; sizes g * N * tau / G: J1 4*100*1/8 = 50, J2 2*40*1/8 = 10, J3 8*100*0.5/8 = 50.
    finish = srpt_finish_times([("J1", 0.0, 50.0), ("J2", 10.0, 10.0), ("J3", 20.0, 50.0)])
    assert finish == {"J1": 60.0, "J2": 20.0, "J3": 110.0}
    flow = finish["J1"] - 0 + finish["J2"] - 10 + finish["J3"] - 20
    assert flow == 160.0


def test_tc1_keys_order_the_real_cluster_at_t20() -> None:
    vm = VirtualMachine()
    vm.add("J1", 50.0, 0.0)
    vm.advance(10.0)
    assert vm.remaining_s("J1") == 40.0
    vm.add("J2", 10.0, 10.0)
    vm.advance(20.0)
    vm.add("J3", 50.0, 20.0)
    # J2 is done on the machine (overdue), J1 has 40 left, J3 50.
    assert vm.is_overdue("J2") and vm.finish_times["J2"] == 20.0
    order = sorted(["J3", "J1", "J2"], key=vm.key)
    assert order == ["J2", "J1", "J3"]
    assert vm.key("J1") == (40.0, 0.0, 0)
    assert vm.next_finish_time() == 60.0


def test_ties_go_to_the_earlier_release_then_insertion_order() -> None:
    vm = VirtualMachine(5.0)
    vm.add("late", 10.0, 5.0)
    vm.add("early", 10.0, 1.0)
    vm.add("same", 10.0, 1.0)
    assert sorted(["late", "same", "early"], key=vm.key) == ["early", "same", "late"]


def test_overdue_jobs_come_first_in_the_order_the_machine_finished_them() -> None:
    vm = VirtualMachine()
    vm.add("a", 5.0)
    vm.add("b", 3.0)
    vm.add("c", 100.0)
    vm.advance(10.0)  # b done at 3, a at 8, c has 98 left
    assert vm.finish_times == {"b": 3.0, "a": 8.0}
    assert sorted(["c", "a", "b"], key=vm.key) == ["b", "a", "c"]
    assert vm.remaining_s("c") == 98.0


def test_tc7_growth_puts_an_overdue_job_back_in_service() -> None:
    vm = VirtualMachine()
    vm.add("j", 50.0)  # g=4, tau*=1, G=8, N=100
    vm.advance(100.0)
    assert vm.is_overdue("j")
    vm.grow("j", 4 * 50 * 1.0 / 8)  # N: 100 -> 150 adds 25 s
    assert not vm.is_overdue("j") and vm.remaining_s("j") == 25.0
    vm.advance(110.0)
    assert vm.remaining_s("j") == 15.0


def test_shrinking_below_zero_finishes_now_and_remove_forgets() -> None:
    vm = VirtualMachine()
    vm.add("j", 10.0)
    vm.add("k", 20.0)
    vm.advance(4.0)
    vm.grow("j", -7.0)
    assert vm.is_overdue("j") and vm.finish_times["j"] == 4.0
    vm.remove("j")
    assert "j" not in vm and len(vm) == 1
    vm.remove("k")  # a real completion before the machine's
    assert vm.next_finish_time() == math.inf


def test_adding_a_job_twice_is_refused() -> None:
    vm = VirtualMachine()
    vm.add("j", 1.0)
    with pytest.raises(ValueError, match="already"):
        vm.add("j", 2.0)


@given(st.lists(st.tuples(st.integers(0, 50), st.integers(1, 40)), min_size=1, max_size=8))
def test_srpt_is_work_conserving_and_never_worse_than_fifo(jobs: list[tuple[int, int]]) -> None:
    named = [(f"j{i}", float(r), float(p)) for i, (r, p) in enumerate(jobs)]
    finish = srpt_finish_times(named)
    # Work conservation: the last finish equals the FIFO makespan on one machine.
    clock = 0.0
    fifo_flow = 0.0
    for _, release, size in sorted(named, key=lambda j: j[1]):
        clock = max(clock, release) + size
        fifo_flow += clock - release
    assert max(finish.values()) == pytest.approx(clock)
    srpt_flow = sum(finish[j] - r for j, r, _ in named)
    assert srpt_flow <= fifo_flow + 1e-9


def change(vm: VirtualMachine, op: str, j: int, amount: int) -> None:
    """One change of a random sequence: add, serve, re-size or remove job ``J{j}``."""
    job_id = f"J{j}"
    if op == "add" and job_id not in vm:
        vm.add(job_id, float(abs(amount)))
    elif op == "advance":
        vm.advance(vm.now + abs(amount) / 4)
    elif op == "grow" and job_id in vm:
        vm.grow(job_id, float(amount))
    elif op == "remove":
        vm.remove(job_id)


@given(st.lists(st.tuples(st.sampled_from(["add", "advance", "grow", "remove"]),
                          st.integers(0, 9), st.integers(-30, 60)), max_size=40))
def test_ranked_is_every_job_sorted_by_key(ops: list[tuple[str, int, int]]) -> None:
    vm = VirtualMachine()
    for op, j, amount in ops:
        change(vm, op, j, amount)
    ids = [f"J{j}" for j in range(10) if f"J{j}" in vm]
    assert vm.ranked((job_id, job_id) for job_id in ids) == sorted(
        ((vm.key(job_id), job_id) for job_id in ids), key=lambda pair: pair[0])


@given(st.lists(st.tuples(st.sampled_from(["add", "advance", "grow", "remove"]),
                          st.integers(0, 9), st.integers(-30, 60),
                          st.floats(0.0, 100.0, allow_nan=False)), max_size=60))
def test_order_is_kept_equal_to_every_key_sorted(ops: list[tuple[str, int, int, float]]) -> None:
    # Checked after every change, with fractional sizes and release times (ties and partial service).
    vm = VirtualMachine()
    for op, j, amount, fraction in ops:
        job_id = f"J{j}"
        if op == "add" and job_id not in vm:
            vm.add(job_id, abs(amount) * fraction / 7, vm.now - fraction // 10)
        elif op == "advance":
            vm.advance(vm.now + fraction / 3)
        elif op == "grow" and job_id in vm:
            vm.grow(job_id, amount * fraction / 11)
        elif op == "remove":
            vm.remove(job_id)
        ids = [f"J{i}" for i in range(10) if f"J{i}" in vm]
        assert vm.order() == sorted(vm.order_key(job_id) for job_id in ids)


@given(st.lists(st.floats(0.0, 100.0, allow_nan=False), min_size=1, max_size=60),
       st.floats(0.0, 30.0))
def test_order_after_many_changes_at_once_is_every_key_sorted(sizes: list[float], served: float) -> None:
    vm = VirtualMachine()
    for i, size in enumerate(sizes):  # a batch of arrivals between two reads of the order
        vm.add(f"J{i}", size, float(i % 3))
    vm.advance(served)
    for i in range(0, len(sizes), 4):
        vm.grow(f"J{i}", sizes[i] / 2 - 10.0)
    ids = [f"J{i}" for i in range(len(sizes))]
    assert vm.order() == sorted(vm.order_key(job_id) for job_id in ids)


@given(st.lists(st.lists(st.tuples(st.sampled_from(["add", "advance", "grow", "remove"]),
                                   st.integers(0, 9), st.integers(-30, 60)), max_size=8), max_size=8))
def test_keys_changed_names_every_job_whose_key_changed_since_the_last_call(
        batches: list[list[tuple[str, int, int]]]) -> None:
    vm = VirtualMachine()
    assert vm.keys_changed() == []  # the log starts here

    def keys() -> dict[str, tuple[float, float, int, str]]:
        return {f"J{j}": vm.order_key(f"J{j}") for j in range(10) if f"J{j}" in vm}

    for batch in batches:
        before = keys()
        for op, j, amount in batch:
            change(vm, op, j, amount)
        after = keys()
        changed = set(vm.keys_changed())
        assert {job_id for job_id, key in after.items() if before.get(job_id) != key} <= changed
