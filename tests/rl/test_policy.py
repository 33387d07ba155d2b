"""The ``marl`` policy: runs without torch, in the simulator, CLI commands."""

from __future__ import annotations

import pytest

from rackwise.policies.registry import make_policy, policy_class

_WITHOUT_TORCH = """
import sys

class NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("torch is blocked")

sys.meta_path.insert(0, NoTorch())
from rackwise.cluster.topology import uniform_cluster
from rackwise.policies.registry import make_policy
from rackwise.sim.engine import simulate
from rackwise.workload.job import Job

jobs = [Job(f"j{i}", 20.0 * i, w, 300.0 + 50 * i, model="resnet50") for i, w in enumerate([1, 2, 8, 1, 4, 2] * 4)]
result = simulate(uniform_cluster(4, 4, 4), jobs, make_policy("marl"), seed=0)
assert len(result.records) == len(jobs)
assert not any(name == "torch" or name.startswith("torch.") for name in sys.modules)
print(repr(result.records))
"""


def test_runs_without_torch() -> None:
    """The shipped weights are read from numpy arrays: a run imports no torch, and decides as one with it."""
    import subprocess
    import sys

    from rackwise.cluster.topology import uniform_cluster
    from rackwise.sim.engine import simulate
    from rackwise.workload.job import Job

    assert policy_class("marl").needs_extra is None
    done = subprocess.run([sys.executable, "-c", _WITHOUT_TORCH], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr
    jobs = [Job(f"j{i}", 20.0 * i, w, 300.0 + 50 * i, model="resnet50")
            for i, w in enumerate([1, 2, 8, 1, 4, 2] * 4)]
    here = simulate(uniform_cluster(4, 4, 4), jobs, make_policy("marl"), seed=0)
    assert done.stdout.strip() == repr(here.records)


def test_weights_that_miss_a_layer_are_named_before_the_run(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import shutil

    import numpy as np

    from rackwise.cluster.topology import uniform_cluster
    from rackwise.errors import InputError
    from rackwise.policies.parts.marl.checkpoint import SHIPPED
    from rackwise.sim.engine import simulate
    from rackwise.workload.job import Job

    shutil.copy(SHIPPED.with_suffix(".json"), tmp_path / "ck.json")
    with pytest.raises(InputError, match=r"ck\.npz.*no such checkpoint file"):
        simulate(uniform_cluster(2, 4, 4), [Job("j", 0.0, 1, 60.0)],
                 make_policy("marl", checkpoint=str(tmp_path / "ck")), seed=0)
    np.save(tmp_path / "one.npy", np.zeros(3))
    for broken in (b"", b"not weights", SHIPPED.with_suffix(".npz").read_bytes()[:1000],
                   (tmp_path / "one.npy").read_bytes()):
        (tmp_path / "ck.npz").write_bytes(broken)
        with pytest.raises(InputError, match=r"ck\.npz: not a readable \.npz file of weights"):
            simulate(uniform_cluster(2, 4, 4), [Job("j", 0.0, 1, 60.0)],
                     make_policy("marl", checkpoint=str(tmp_path / "ck")), seed=0)
    with np.load(SHIPPED.with_suffix(".npz")) as stored:
        arrays = {key: stored[key] for key in stored.files if "job_in.2" not in key}
    np.savez(tmp_path / "ck.npz", **arrays)
    with pytest.raises(InputError, match=r"ck\.npz.*weights do not match the actor: no 'job_in\.2\.weight'"):
        simulate(uniform_cluster(2, 4, 4), [Job("j", 0.0, 1, 60.0)],
                 make_policy("marl", checkpoint=str(tmp_path / "ck")), seed=0)


torch = pytest.importorskip("torch", reason="needs the rl extra: pip install 'rackwise[rl]'")

import numpy as np  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from rackwise.cluster.topology import uniform_cluster  # noqa: E402
from rackwise.perf.model import NetworkPerf  # noqa: E402
from rackwise.sim.engine import simulate  # noqa: E402
from rackwise.workload.job import Job  # noqa: E402


def _jobs() -> list[Job]:
    widths = [1, 1, 2, 1, 8, 1, 4, 1, 16, 1, 1, 2]
    return [Job(f"j{i}", 20.0 * i, w, 300.0 + 50 * i, group=f"vc{i % 3}")
            for i, w in enumerate(widths)]


def test_shipped_checkpoint_runs_and_repeats() -> None:
    cluster = uniform_cluster(8, 4, 4)
    first = simulate(cluster, _jobs(), make_policy("marl"), perf=NetworkPerf(), seed=1)
    again = simulate(cluster, _jobs(), make_policy("marl"), perf=NetworkPerf(), seed=1)
    assert sorted(r.job_id for r in first.records) == sorted(j.job_id for j in _jobs())
    assert first.records == again.records


def test_simulate_cli_with_marl(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from rackwise.cli import app

    result = CliRunner().invoke(app, [
        "simulate", "--trace", "philly_2017", "--first-n", "40", "--policy", "marl",
        "--nodes", "8", "--nodes-per-rack", "4", "--perf", "network", "--out", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "r" / "summary.json").is_file()


def test_train_marl_cli_writes_a_loadable_checkpoint(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import typer

    from rackwise.cli.train import train_marl

    app = typer.Typer()
    app.command("train-marl")(train_marl)
    app.command("noop")(lambda: None)  # two commands keep typer from flattening the app
    out = tmp_path / "ck"
    result = CliRunner().invoke(app, [
        "train-marl", "--out", str(out), "--updates", "1", "--episodes-per-update", "1",
        "--n-jobs", "20", "--nodes", "4", "--gpus-per-node", "4", "--nodes-per-rack", "2",
        "--agents", "2", "--bc-episodes", "1", "--interference-samples", "200",
        "--sources", "synthetic:philly_2017"])
    assert result.exit_code == 0, result.output
    assert (out / "training_curve.csv").is_file() and (out / "training_curve.png").is_file()
    policy = make_policy("marl", checkpoint=str(out / "marl"))
    done = simulate(uniform_cluster(4, 4, 2), _jobs()[:8], policy, seed=0)
    assert len(done.records) == 8


def test_the_shipped_checkpoint_beats_its_untrained_self_on_a_held_out_window(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """On the second itp_2021 evaluation window of experiments/marl_eval.py, where placement
    matters (the spread rule is about twice as slow there), the trained agents' average JCT
    is well below that of the same network freshly initialised."""
    from rackwise.policies.parts.marl.checkpoint import load, save
    from rackwise.rl.episodes import trace_window
    from rackwise.rl.mappo import untrained

    save(tmp_path / "marl", untrained(load()))
    cluster = uniform_cluster(16, 8, 4)
    jobs = trace_window("itp_2021", np.random.default_rng(0), n_jobs=300, load=0.9,
                        cluster_gpus=cluster.n_gpus, split="eval", start=10252)

    def avg_jct_h(**params: object) -> float:
        result = simulate(cluster, jobs, make_policy("marl", **params), perf=NetworkPerf(), seed=1)
        return sum(r.jct_s for r in result.records) / len(result.records) / 3600

    trained, fresh = avg_jct_h(), avg_jct_h(checkpoint=str(tmp_path / "marl"))
    assert trained < 0.95 * fresh, (trained, fresh)


def test_a_forced_action_is_the_actors_own_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    """Skipping the observation and the actor where one anchor or none is feasible changes no decision."""
    from rackwise.policies.marl import Marl

    jobs = [Job(f"j{i}", 10.0 * i, w, 600.0 + 37 * (i % 7)) for i, w in enumerate([1, 2, 4, 1, 8, 2, 1, 4] * 5)]
    cluster = uniform_cluster(8, 4, 4)
    sizes = []
    real = Marl._feasible_anchors
    monkeypatch.setattr(Marl, "_feasible_anchors", lambda self, free, agent: sizes.append(
        len(anchors := real(self, free, agent))) or anchors)
    shortcut = simulate(cluster, jobs, make_policy("marl"), perf=NetworkPerf(), seed=2).records
    assert sum(size <= 1 for size in sizes) >= 10 and sum(size > 1 for size in sizes) >= 10
    # Two anchors offered every time: the actor decides every time, on the full observation.
    monkeypatch.setattr(Marl, "_feasible_anchors", lambda self, free, agent: np.arange(2))
    assert simulate(cluster, jobs, make_policy("marl"), perf=NetworkPerf(), seed=2).records == shortcut


def test_las_order_keeps_the_policy_contract() -> None:
    from rackwise.testing import check_policy

    policy = make_policy("marl", order="las")
    assert policy.capabilities.preempts and not make_policy("marl").capabilities.preempts
    check_policy(policy)


def test_las_order_runs_tiresias_decisions_with_the_agents_placement() -> None:
    """Tiresias' own decisions where the agents' placement is Tiresias' own: for one-GPU
    jobs, the first-fit anchor and first-fit placement both take the lowest free GPU, so
    only Tiresias' order and preemptions decide."""
    from policy_spy import Spy
    from rackwise.policies.tiresias import Tiresias

    rng = np.random.default_rng(5)
    jobs = [Job(f"j{i:02d}", float(t), 1, float(d), group=f"vc{i % 3}")
            for i, (t, d) in enumerate(zip(np.cumsum(rng.exponential(60.0, 40)),
                                           rng.lognormal(np.log(4800.0), 1.2, 40)))]
    cluster = uniform_cluster(2, 4, 2)
    las, tiresias = Spy(make_policy("marl", order="las", placement="first-fit")), Spy(
        Tiresias(placement="first-fit"))
    simulate(cluster, jobs, las, seed=3)
    simulate(cluster, jobs, tiresias, seed=3)
    assert sum(len(decisions.preempt) for _, decisions in las.decisions) >= 5
    assert las.decisions == tiresias.decisions  # the same starts on the same GPUs, the same preemptions


def test_the_shipped_arrays_are_the_shipped_weights() -> None:
    """``marl.npz`` is ``export()`` of ``marl.pt``: every tensor, bit for bit, and nothing else."""
    from rackwise.policies.parts.marl.checkpoint import SHIPPED

    state = torch.load(SHIPPED.with_suffix(".pt"), weights_only=True)
    with np.load(SHIPPED.with_suffix(".npz")) as stored:
        assert sorted(stored.files) == sorted(f"{part}/{name}" for part, tensors in state.items()
                                              for name in tensors)
        for part, tensors in state.items():
            for name, tensor in tensors.items():
                np.testing.assert_array_equal(stored[f"{part}/{name}"], tensor.numpy())
