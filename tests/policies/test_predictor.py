"""The iteration predictor: cold-start rules, the forest, accuracy figures (a_srpt.md §3.2, TC6)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rackwise.policies.parts.predictor import (
    FlatForest,
    IterationPredictor,
    PredictionRecord,
    name_template,
    prediction_accuracy,
    recurrence_key,
)
from rackwise.workload.job import Job

pytest.importorskip("sklearn")


def _job(job_id: str, *, model: str | None = "bert-large", group: str | None = "vc1",
         user: str | None = "alice", name: str = "exp", n_gpus: int = 4,
         tags: tuple[tuple[str, str], ...] = ()) -> Job:
    return Job(job_id, 0.0, n_gpus, 1.0, group=group, user=user, model=model,
               tags=(("name", name), *tags))


def test_tc6_three_identical_rows() -> None:
    jobs = [_job(f"j{i}") for i in range(4)]
    cold = IterationPredictor(min_train_rows=20)
    forest = IterationPredictor(min_train_rows=3,
                                forest_params={"bootstrap": False, "n_estimators": 5})
    for predictor in (cold, forest):
        rows = [predictor.features(job) for job in jobs[:3]]
        assert len({f.row for f in rows}) == 1  # nothing had finished yet
        for features, actual in zip(rows, (1000.0, 1100.0, 1200.0)):
            predictor.observe(features, actual)
    # Fewer than 20 rows: the same-model median.
    value, source = cold.predict([cold.features(jobs[3])])[0]
    assert source == "model-median" and value == pytest.approx(1100.0)
    # One leaf per tree on a log1p target: expm1 of the mean log.
    value, source = forest.predict([forest.features(jobs[3])])[0]
    expected = math.expm1((math.log1p(1000) + math.log1p(1100) + math.log1p(1200)) / 3)
    assert source == "forest" and value == pytest.approx(expected) == pytest.approx(1096.96, abs=0.01)
    assert forest.n_fits == 1 and not cold.fitted


def test_cold_start_order_declared_model_group_global_default() -> None:
    predictor = IterationPredictor()
    assert predictor.cold_start(predictor.features(_job("a"))) == (1000.0, "default")
    predictor.observe(predictor.features(_job("b", model="resnet50", group="vc9")), 400.0)
    # no same-model or same-group history: the global median
    value, source = predictor.cold_start(predictor.features(_job("c", model=None, group=None)))
    assert source == "global-median" and value == pytest.approx(400.0)
    predictor.observe(predictor.features(_job("d", model=None, group="vc1")), 90.0)
    value, source = predictor.cold_start(predictor.features(_job("e", model=None)))
    assert source == "group-median" and value == pytest.approx(90.0)
    declared = _job("f", tags=(("max_iters", "777"),))
    assert predictor.cold_start(predictor.features(declared)) == (777.0, "declared")


def test_unseen_recurrence_keys_use_the_cold_start_rules_even_with_a_forest() -> None:
    predictor = IterationPredictor(min_train_rows=2, forest_params={"n_estimators": 3})
    for i in range(2):
        predictor.observe(predictor.features(_job(f"j{i}")), 500.0)
    assert predictor.fitted
    _, source = predictor.predict([predictor.features(_job("new", name="other"))])[0]
    assert source == "model-median"


def test_refits_happen_every_n_completions_after_the_first() -> None:
    predictor = IterationPredictor(min_train_rows=3, refit_every=4,
                                   forest_params={"n_estimators": 2})
    fits = [predictor.observe(predictor.features(_job(f"j{i}")), 100.0 + i) for i in range(11)]
    assert [i for i, fitted in enumerate(fits) if fitted] == [2, 6, 10]


def test_name_templates_and_keys_ignore_run_numbers() -> None:
    assert name_template(_job("a", name="exp-12-run3")) == "exp-#-run#"
    assert recurrence_key(_job("a", name="exp-1")) == recurrence_key(_job("b", name="exp-2"))
    assert recurrence_key(_job("a")) != recurrence_key(_job("b", n_gpus=8))


def test_prediction_accuracy_by_hand() -> None:
    log = [PredictionRecord("a", 100.0, 80.0, "forest"), PredictionRecord("b", 50.0, 100.0, "x"),
           PredictionRecord("c", 110.0, 100.0, "x")]
    figures = prediction_accuracy(log)
    assert figures["n_jobs"] == 3
    assert figures["mae_iters"] == pytest.approx((20 + 50 + 10) / 3)
    assert figures["mape_pct"] == pytest.approx(100 * (0.25 + 0.5 + 0.1) / 3)
    assert figures["within_20pct_frac"] == pytest.approx(1 / 3)
    assert figures["median_ratio"] == pytest.approx(1.1)  # of 1.25, 0.5, 1.1
    assert figures["under_frac"] == pytest.approx(1 / 3)
    assert math.isnan(prediction_accuracy([])["mae_iters"])


def recurring_jobs(n_jobs: int, seed: int) -> tuple[list[Job], list[float]]:
    """Jobs from 16 recurring templates; each template reruns with ~10% noise in its iterations.

    Templates share models and groups, so those medians alone cannot tell them apart.
    """
    rng = np.random.default_rng(seed)
    templates = [
        {"name": f"t{k}-run", "user": f"u{k % 5}", "group": f"vc{k % 3}",
         "model": ("resnet50", "bert-large")[k % 2], "n_gpus": int(2 ** (k % 4)),
         "base": float(np.exp(rng.uniform(np.log(100), np.log(100_000))))}
        for k in range(16)
    ]
    jobs, actual = [], []
    for i in range(n_jobs):
        t = templates[int(rng.integers(len(templates)))]
        jobs.append(Job(f"j{i}", float(i), t["n_gpus"], 1.0, group=t["group"], user=t["user"],
                        model=t["model"], tags=(("name", t["name"] + str(i)),)))
        actual.append(t["base"] * float(np.exp(rng.normal(0.0, 0.1))))
    return jobs, actual


def test_the_forest_beats_the_cold_start_rules_on_held_out_recurring_jobs() -> None:
    jobs, actual = recurring_jobs(500, seed=7)
    forest = IterationPredictor(forest_params={"n_estimators": 30}, random_state=3)
    rules = IterationPredictor(use_forest=False)
    errors: dict[str, list[float]] = {"forest": [], "rules": []}
    for i, (job, iters) in enumerate(zip(jobs, actual)):
        for label, predictor in (("forest", forest), ("rules", rules)):
            features = predictor.features(job)
            if i >= 300:  # held out: predicted before the job's own outcome is seen
                errors[label].append(abs(predictor.predict([features])[0][0] - iters))
            predictor.observe(features, iters)
    mae = {label: sum(e) / len(e) for label, e in errors.items()}
    assert mae["forest"] < 0.5 * mae["rules"]


def test_same_seed_same_forest_predictions() -> None:
    jobs, actual = recurring_jobs(120, seed=1)
    outputs = []
    for _ in range(2):
        predictor = IterationPredictor(forest_params={"n_estimators": 10}, random_state=5)
        for job, iters in zip(jobs[:100], actual[:100]):
            predictor.observe(predictor.features(job), iters)
        outputs.append(predictor.predict([predictor.features(job) for job in jobs[100:]]))
    assert outputs[0] == outputs[1]


@settings(max_examples=20)
@given(seed=st.integers(0, 2**31 - 1), n_rows=st.integers(1, 40), max_depth=st.sampled_from([None, 1, 4]))
def test_the_flat_forest_answers_exactly_what_the_fitted_forest_does(seed: int, n_rows: int,
                                                                     max_depth: int | None) -> None:
    from sklearn.ensemble import RandomForestRegressor

    rng = np.random.default_rng(seed)
    x = rng.random((300, 6)) * 100.0
    x[:, 2] = rng.integers(-1, 4, 300)  # coded columns, with ties at the thresholds
    y = np.log1p(np.exp(x[:, 0] / 20.0) * rng.random(300))
    forest = RandomForestRegressor(n_estimators=15, max_depth=max_depth, random_state=seed).fit(x, y)
    rows = [tuple(row) for row in np.vstack([x[:n_rows], rng.random((n_rows, 6)) * 100.0])]
    expected = forest.predict(np.asarray(rows, dtype=np.float32))
    assert FlatForest(forest).predict(rows) == expected.tolist()


def test_distributions_are_the_samples_each_rule_learnt_from() -> None:
    jobs = [_job(f"j{i}") for i in range(4)]
    cold = IterationPredictor(min_train_rows=20)
    forest = IterationPredictor(min_train_rows=3,
                                forest_params={"bootstrap": False, "n_estimators": 5})
    for predictor in (cold, forest):
        rows = [predictor.features(job) for job in jobs[:3]]  # before any finished: one row
        for features, actual in zip(rows, (1000.0, 1100.0, 1200.0)):
            predictor.observe(features, actual)
    # Identical rows share one leaf in every tree: all three samples, equally weighted.
    for predictor in (cold, forest):
        sizes = predictor.distributions([predictor.features(jobs[3])])[0]
        assert sizes.values == pytest.approx([1000.0, 1100.0, 1200.0])
        assert sizes.expected_remaining(1050.0) == pytest.approx(100.0)


def test_forest_distribution_weights_each_tree_leaf() -> None:
    predictor = IterationPredictor(min_train_rows=4, forest_params={"bootstrap": False, "n_estimators": 3})
    small, large = predictor.features(_job("s", n_gpus=1)), predictor.features(_job("l", n_gpus=8))
    for features, actual in ((small, 10.0), (small, 30.0), (large, 1000.0), (large, 3000.0)):
        predictor.observe(features, actual)
    # Every tree splits the GPU counts apart, so only the same-size jobs count.
    sizes = predictor.distributions([large])[0]
    assert sizes.values == pytest.approx([1000.0, 3000.0])
    assert sizes.expected_remaining(0.0) == pytest.approx(2000.0)


def test_a_refit_forgets_the_answers_the_last_forest_gave() -> None:
    jobs, actual = recurring_jobs(160, seed=2)
    predictor = IterationPredictor(forest_params={"n_estimators": 10}, refit_every=20, refit_growth=0.0,
                                   random_state=3)
    asked = [predictor.features(job) for job in jobs[100:]]
    refits = from_forest = 0
    for job, iters in zip(jobs[:100], actual[:100]):
        refits += predictor.observe(predictor.features(job), iters)
        if predictor.fitted:
            answers = predictor.predict(asked + asked[:5])  # some rows twice, some asked before
            flat = FlatForest(predictor._forest)
            for (value, source), features in zip(answers, asked + asked[:5]):
                if source == "forest":
                    from_forest += 1
                    assert value == max(1.0, math.expm1(flat.predict([features.row])[0]))
    assert refits >= 3 and from_forest > 0


def test_a_cold_start_distribution_is_shared_until_a_job_finishes() -> None:
    predictor = IterationPredictor(min_train_rows=20)
    predictor.observe(predictor.features(_job("a", model=None)), 100.0)
    one, two = (predictor.features(_job(job_id, model=None)) for job_id in ("b", "c"))
    first, second = predictor.distributions([one, two])
    assert first is second and list(first.values) == pytest.approx([100.0])
    predictor.observe(predictor.features(_job("d", model=None)), 300.0)
    (after,) = predictor.distributions([one])
    assert after is not first and list(after.values) == pytest.approx([100.0, 300.0])
    declared = predictor.features(_job("e", tags=(("max_iters", "50"),)))
    assert list(predictor.distributions([declared])[0].values) == [50.0]


def test_without_its_row_a_job_gets_the_same_cold_start_answers() -> None:
    full, bare = IterationPredictor(use_forest=False), IterationPredictor(use_forest=False)
    for i, size in enumerate((900.0, 1_500.0, 1_200.0)):
        job = _job(f"j{i}", user=f"u{i % 2}", tags=(("max_iters", "2000"),) if i == 2 else ())
        with_row, without = full.features(job), bare.features(job, with_row=False)
        assert without.row == () and len(with_row.row) == 16
        assert (without.key, without.model, without.group, without.user, without.declared_iters) == (
            with_row.key, with_row.model, with_row.group, with_row.user, with_row.declared_iters)
        assert bare.predict([without]) == full.predict([with_row])
        assert [d.values.tolist() for d in bare.distributions([without])] == [
            d.values.tolist() for d in full.distributions([with_row])]
        full.observe(with_row, size)
        bare.observe(without, size)
