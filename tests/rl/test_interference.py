"""The learned interference model against a constant predictor, on held-out co-locations."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="needs the rl extra: pip install 'rackwise[rl]'")

from rackwise.policies.parts.marl.interference import (  # noqa: E402
    Predictor,
    Samples,
    fit_interference,
    mae,
    sample_colocations,
)


@pytest.fixture(scope="module")
def fitted() -> tuple[Predictor, Samples, Samples]:
    torch.set_num_threads(1)
    train = sample_colocations(4000, np.random.default_rng(0))
    held_out = sample_colocations(1000, np.random.default_rng(1))
    return Predictor(fit_interference(train, epochs=15, batch_size=128, seed=0)), train, held_out


def test_beats_the_constant_predictor_on_held_out_samples(fitted) -> None:  # type: ignore[no-untyped-def]
    predictor, train, held_out = fitted
    constant = np.full(len(held_out), train.log_sigma.mean())
    model_mae = mae(predictor.predict(held_out), held_out.log_sigma)
    assert model_mae <= 0.75 * mae(constant, held_out.log_sigma)
    # and against the noise-free slowdowns too
    assert mae(predictor.predict(held_out), held_out.log_sigma_true) <= 0.6 * mae(
        constant, held_out.log_sigma_true)


def test_no_neighbour_no_slowdown_and_more_neighbours_never_less(fitted) -> None:  # type: ignore[no-untyped-def]
    predictor, _, held_out = fitted
    alone = Samples(held_out.target, np.full_like(held_out.neighbour, -1),
                    np.zeros_like(held_out.share), held_out.log_sigma, held_out.log_sigma_true)
    assert np.all(predictor.predict(alone) == 0.0)
    fewer = Samples(held_out.target, held_out.neighbour.copy(), held_out.share.copy(),
                    held_out.log_sigma, held_out.log_sigma_true)
    fewer.neighbour[:, -1] = -1
    assert np.all(predictor.predict(held_out) >= predictor.predict(fewer) - 1e-9)


def test_samples_follow_the_performance_model() -> None:
    samples = sample_colocations(500, np.random.default_rng(2), noise_sigma=0.0)
    lonely = (samples.neighbour < 0).all(axis=1)
    assert lonely.any() and np.all(samples.log_sigma_true[lonely] == 0.0)
    # a few measured pairs do not slow each other at all; most do
    assert np.all(samples.log_sigma_true[~lonely] >= 0.0)
    assert np.mean(samples.log_sigma_true[~lonely] > 0.0) > 0.8
    assert np.array_equal(samples.log_sigma, samples.log_sigma_true)
