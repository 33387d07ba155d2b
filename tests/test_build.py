"""The build this test run imports: plain Python, or the compiled build of ``setup.py``'s list.

``RACKWISE_EXPECT_COMPILED=1`` (set by `.ci/run` for its compiled stage) says
the install was built with ``RACKWISE_COMPILE=1``: then every module listed
in ``setup.py`` must be an extension module. Without it, none may be.
"""

from __future__ import annotations

import ast
import os
import pickle
from collections.abc import Iterator
from importlib.util import find_spec
from pathlib import Path

import rackwise

SETUP = Path(__file__).resolve().parents[1] / "setup.py"


def compiled_modules() -> list[str]:
    """The module names ``setup.py`` compiles, read from its ``COMPILED`` list."""
    for node in ast.parse(SETUP.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "COMPILED" for t in node.targets):
            paths = ast.literal_eval(node.value)
            return [p.removeprefix("src/").removesuffix(".py").replace("/", ".") for p in paths]
    raise AssertionError("setup.py has no COMPILED list")


def compiled_sources() -> Iterator[tuple[str, ast.Module]]:
    """Each module ``setup.py`` compiles, by name, with its parsed source."""
    for name in compiled_modules():
        path = SETUP.parent / "src" / (name.replace(".", "/") + ".py")
        yield name, ast.parse(path.read_text())


def test_the_listed_modules_are_compiled_exactly_when_the_build_says_so() -> None:
    expected = os.environ.get("RACKWISE_EXPECT_COMPILED") == "1"
    modules = compiled_modules()
    assert "rackwise.sim.engine" in modules  # `is_compiled` reads this one
    for name in modules:
        spec = find_spec(name)
        assert spec is not None and spec.origin is not None, name
        assert (not spec.origin.endswith(".py")) == expected, f"{name}: {spec.origin}"
    assert rackwise.is_compiled() == expected


def test_a_search_that_reads_the_head_of_its_victims_reads_no_further_in_either_build() -> None:
    # The compiled build would make a generator expression a whole list: A-SRPT's preemption
    # pass reads its victims through a generator function, which both builds run lazily.
    from rackwise.policies.parts.predicted_srpt import _remaining_outside
    from rackwise.workload.job import Job
    from rackwise.workload.state import JobState

    kept, victim = JobState(Job("kept", 0.0, 1, 1.0)), JobState(Job("a", 0.0, 1, 1.0))

    def entries() -> Iterator[tuple[tuple[float, float, int, str], JobState]]:
        yield (5.0, 0.0, 0, "kept"), kept
        yield (4.0, 0.0, 1, "a"), victim
        raise AssertionError("read past the first victim")

    victims = _remaining_outside(entries(), {"kept"})
    assert next(victims) == (4.0, victim)


def test_no_listed_module_nests_a_generator_in_a_function() -> None:
    # Compiled, a generator defined inside a function (a closure) raises AttributeError
    # ("'__mypyc_env__' ... undefined") when asked for a next item once spent, where Python ends it.
    nested = []
    for name, tree in compiled_sources():
        for outer in ast.walk(tree):
            if isinstance(outer, ast.FunctionDef):
                nested += [f"{name}.{outer.name}.{inner.name}" for inner in ast.walk(outer)
                           if inner is not outer and isinstance(inner, ast.FunctionDef)
                           and any(isinstance(n, ast.Yield | ast.YieldFrom) for n in ast.walk(inner))]
    assert not nested, f"generators nested in functions: {nested}"


def test_a_preemption_pass_that_runs_out_of_victims_goes_on_in_either_build() -> None:
    # T1 fits nowhere even once R, the only victim, is gone; T2 then finds no victim left.
    from rackwise.cluster.topology import uniform_cluster
    from rackwise.perf.base import IdealPerf
    from rackwise.policies.fifo import Fifo
    from rackwise.policies.parts.ordering import RankedQueue, preempt_ranked
    from rackwise.sim.engine import Simulator
    from rackwise.workload.job import Job
    from rackwise.workload.state import RUNNING, JobState

    sim = Simulator(uniform_cluster(1, 4, 1), [], Fifo(), perf=IdealPerf())
    sim.start()
    running = sim.running["R"] = JobState(Job("R", 0.0, 2, 100.0))
    running.status, running.gpu_ids = RUNNING, (0, 1)
    sim.allocation.allocate("R", (0, 1))
    queue = RankedQueue()
    for rank, job_id, n_gpus in ((0, "T1", 2), (1, "T2", 1)):
        sim.pending[job_id] = JobState(Job(job_id, 0.0, n_gpus, 10.0))
        queue.add(job_id, n_gpus, (rank, job_id))
    decided = preempt_ranked(sim.view, [(5, "R")], [2], queue, lambda free, state: None)
    assert (decided.start, decided.preempt) == ((), ("R",))


def _is_native(node: ast.ClassDef) -> bool:
    """Whether mypyc compiles the class as a native class (not a protocol, tuple, enum or error)."""
    bases = {ast.unparse(base) for base in node.bases}
    return not bases & {"Protocol", "NamedTuple", "Enum"} and not any(
        base.endswith("Error") for base in bases)


def test_every_native_class_of_a_listed_module_can_be_pickled_once_compiled() -> None:
    # Policies are pickled mid-run (forecasts, snapshots). Compiled, a class pickles only with
    # `serializable=True`, which works only beside `allow_interpreted_subclasses`, and a frozen
    # dataclass unpickles only through its constructor (`rackwise.frozen.pickled_by_constructor`).
    marked = "mypyc_attr(serializable=True, allow_interpreted_subclasses=True)"
    unmarked, frozen_without_reduce = [], []
    for name, tree in compiled_sources():
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef) or not _is_native(node):
                continue
            decorators = {ast.unparse(decorator) for decorator in node.decorator_list}
            if marked not in decorators:
                unmarked.append(f"{name}.{node.name}")
            methods = {item.name for item in node.body if isinstance(item, ast.FunctionDef)}
            if any("frozen=True" in d for d in decorators) and "__reduce__" not in methods:
                frozen_without_reduce.append(f"{name}.{node.name}")
    assert not unmarked, f"classes without @{marked}: {unmarked}"
    assert not frozen_without_reduce, f"frozen dataclasses without __reduce__: {frozen_without_reduce}"


def test_a_live_policy_with_tuned_timers_survives_pickling_in_either_build() -> None:
    # The compiled stage of CI runs this file: a compiled class of a live policy's state that
    # cannot be unpickled (the tuner's log rows, frozen dataclasses) fails here.
    from rackwise import traces
    from rackwise.cluster.topology import uniform_cluster
    from rackwise.engine.snapshot import pickle_policy
    from rackwise.perf.model import NetworkPerf
    from rackwise.policies.delay import Dally
    from rackwise.sim.engine import Simulator

    topology = uniform_cluster(8, 8, 4)
    jobs = traces.load("philly_2017", first_n=400).drop_oversized(topology.n_gpus)
    policy = Dally(timer_med_s=(30.0, 300.0), timer_high_s=(10.0, 400.0), tune_every_s=60.0, tune_every_starts=3)
    simulator = Simulator(topology, jobs, policy, perf=NetworkPerf(), seed=0)
    simulator.start()
    while not policy.timer_log and simulator.step():
        pass
    assert policy.timer_log, "the tuner moved no timer: the test no longer covers its log"
    twin = pickle.loads(pickle_policy(policy))
    assert twin.timer_log == policy.timer_log
    assert twin.schedule(simulator.view, simulator.now) == policy.schedule(simulator.view, simulator.now)
