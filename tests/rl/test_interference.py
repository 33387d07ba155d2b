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


def test_a_pairs_term_is_the_models_and_the_same_in_any_batch(fitted) -> None:  # type: ignore[no-untyped-def]
    predictor, _, held_out = fitted
    present = held_out.neighbour >= 0
    a = np.repeat(held_out.target, present.sum(axis=1))
    b, share = held_out.neighbour[present], held_out.share[present]
    batch = predictor.pair_terms(a, b, share)
    with torch.no_grad():
        model = predictor.model.pair_term(torch.as_tensor(a), torch.as_tensor(b),
                                          torch.as_tensor(share, dtype=torch.float32)).numpy()
    np.testing.assert_allclose(batch, model, rtol=1e-5, atol=1e-7)
    # each pair alone gets the very value it got in the batch
    alone = [predictor.pair_terms(a[i:i + 1], b[i:i + 1], share[i:i + 1])[0] for i in range(0, len(a), 37)]
    assert alone == batch[::37].tolist()
