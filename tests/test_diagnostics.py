"""McNemar's test and notebook 07's analyses against brute force and known answers."""

import os
import sys

import numpy as np
import pytest
from conftest import REPO_ROOT

from capsules_keras.diagnostics import (
    bonferroni_bound,
    compare,
    mcnemar,
    paired_difference,
    seed_verdict,
)
from capsules_keras.metrics import binomial_interval

# The analyses that notebook 07 alone uses live beside the notebooks.
sys.path.insert(0, os.path.join(REPO_ROOT, "notebooks"))

from analysis import (  # noqa: E402
    auroc,
    bootstrap_interval,
    linear_probe,
    pixel_correlation,
    r_squared,
    roc_curve,
)

RNG = np.random.default_rng(0)


def brute_force_auroc(positive, negative):
    """Every (positive, negative) pair: 1 if the positive is higher, 1/2 if tied."""
    p, n = np.asarray(positive)[:, None], np.asarray(negative)[None, :]
    return float(np.mean((p > n) + 0.5 * (p == n)))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_auroc_counts_pairs_and_ties(seed):
    rng = np.random.default_rng(seed)
    positive = rng.integers(0, 6, 37).astype(float)  # many ties
    negative = rng.integers(0, 4, 23).astype(float)
    assert auroc(positive, negative) == pytest.approx(
        brute_force_auroc(positive, negative), abs=1e-12
    )


def test_auroc_extremes_and_roc_area():
    assert auroc([2.0, 3.0], [0.0, 1.0]) == 1.0
    assert auroc([0.0, 1.0], [2.0, 3.0]) == 0.0
    positive, negative = RNG.normal(1, 1, 200), RNG.normal(0, 1, 300)
    fpr, tpr = roc_curve(positive, negative)
    assert (fpr[0], tpr[0], fpr[-1], tpr[-1]) == (0.0, 0.0, 1.0, 1.0)
    assert np.all(np.diff(fpr) >= 0) and np.all(np.diff(tpr) >= 0)
    assert np.trapezoid(tpr, fpr) == pytest.approx(auroc(positive, negative))


@pytest.mark.parametrize("bad", [[], [1.0, np.nan], [[1.0, 2.0]]])
def test_auroc_refuses_bad_scores(bad):
    with pytest.raises(ValueError, match="Received"):
        auroc(bad, [0.0, 1.0])


def test_linear_probe_reads_out_a_linear_quantity_on_held_out_rows():
    features = RNG.normal(size=(400, 12))
    targets = features @ RNG.normal(size=(12, 2)) + 3.0
    predictions = linear_probe(features[:200], targets[:200], features[200:], ridge=0)
    np.testing.assert_allclose(predictions, targets[200:], atol=1e-8)
    assert np.allclose(r_squared(targets[200:], predictions), 1.0)


def test_linear_probe_chooses_a_ridge_that_keeps_noise_features_harmless():
    # 300 features of pure noise, 120 rows: without a penalty the fit is
    # exact on the training rows and wild on the others.
    features, targets = RNG.normal(size=(240, 300)), RNG.normal(size=240)
    unpenalised = linear_probe(
        features[:120], targets[:120], features[120:], ridge=1e-6
    )
    chosen = linear_probe(features[:120], targets[:120], features[120:])
    assert r_squared(targets[120:], unpenalised)[0] < -0.2
    assert r_squared(targets[120:], chosen)[0] > -0.1


def test_linear_probe_and_r_squared_name_bad_inputs():
    x = RNG.normal(size=(10, 3))
    with pytest.raises(ValueError, match="10 and 9 rows"):
        linear_probe(x, np.zeros(9), x)
    with pytest.raises(ValueError, match="Received: 2 and 3"):
        linear_probe(x, np.arange(10.0), x[:, :2])
    with pytest.raises(ValueError, match="ridge"):
        linear_probe(x, np.arange(10.0), x, ridge=-1)
    with pytest.raises(ValueError, match="constant"):
        r_squared(np.ones(4), np.arange(4.0))
    with pytest.raises(ValueError, match=r"\(4, 1\) and \(3, 1\)"):
        r_squared(np.arange(4.0), np.arange(3.0))


def test_bootstrap_interval_covers_a_mean_about_as_often_as_it_says():
    covered = [
        low <= 0.0 <= high
        for low, high in (
            bootstrap_interval(np.mean, RNG.normal(size=60), resamples=400, seed=k)
            for k in range(100)
        )
    ]
    assert 0.85 <= np.mean(covered) <= 1.0


def test_bootstrap_interval_is_seeded_and_pairs_columns():
    sample = RNG.normal(size=(50, 2))
    first = bootstrap_interval(lambda s: s[:, 0].mean(), sample, seed=3)
    assert first == bootstrap_interval(lambda s: s[:, 0].mean(), sample, seed=3)
    assert first[0] < sample[:, 0].mean() < first[1]
    # Two identical columns resampled together: their difference never moves.
    same = np.repeat(sample[:, :1], 2, axis=1)
    assert bootstrap_interval(lambda s: s[:, 0].mean() - s[:, 1].mean(), same) == (
        0.0,
        0.0,
    )


@pytest.mark.parametrize(
    "kwargs, match",
    [({"resamples": 0}, "resamples"), ({"confidence": 1.0}, "confidence")],
)
def test_bootstrap_interval_names_bad_settings(kwargs, match):
    with pytest.raises(ValueError, match=match):
        bootstrap_interval(np.mean, np.arange(5.0), **kwargs)
    with pytest.raises(ValueError, match="at least one sample"):
        bootstrap_interval(np.mean)


def test_mcnemar_counts_the_images_one_model_alone_gets_right():
    a = np.array([True, True, True, False, False, True])
    b = np.array([True, False, False, True, False, True])
    assert mcnemar(a, b) == (2, 1, 1.0)  # 2 * P(X <= 1), X ~ Bin(3, 1/2) = 1
    assert mcnemar(a, a) == (0, 0, 1.0)
    # 30 against 0 over 10,000 images: p = 2 / 2^30.
    many = np.ones(10_000, bool)
    fewer = many.copy()
    fewer[:30] = False
    assert mcnemar(many, fewer) == (30, 0, 2.0**-29)
    with pytest.raises(ValueError, match="int64"):
        mcnemar(np.ones(3, int), np.ones(3, bool))


def test_paired_difference_is_the_mean_per_image_difference_with_its_interval():
    a, b = RNG.random(500) < 0.9, RNG.random(500) < 0.8
    per_image = a.astype(float) - b  # -1, 0 or +1 for each image
    difference, low, high = paired_difference(a, b)
    assert difference == pytest.approx(per_image.mean())
    # The normal interval of a mean, from the per-image differences' spread.
    spread = 1.959964 * per_image.std() / np.sqrt(len(per_image))
    assert (low, high) == pytest.approx((difference - spread, difference + spread))
    assert paired_difference(a, a) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="0 images"):
        paired_difference(np.ones(0, bool), np.ones(0, bool))
    with pytest.raises(ValueError, match="float64"):
        paired_difference(np.ones(3), np.ones(3, bool))


def test_paired_difference_covers_the_true_difference_95_times_in_100():
    # Two correlated models (A right wherever B is, and on 3% more of the
    # images), 2,000 test sets of 1,000 images: the true difference is 0.03.
    rng = np.random.default_rng(1)
    draws = rng.random((2_000, 1_000))
    covered = [
        low <= 0.03 <= high
        for low, high in (
            paired_difference(row < 0.93, row < 0.90)[1:] for row in draws
        )
    ]
    assert 0.93 <= np.mean(covered) <= 0.97


def test_pixel_correlation_matches_numpy_image_by_image():
    images = RNG.uniform(0, 1, (6, 8, 8, 1))
    references = 0.5 * images + RNG.uniform(0, 1, images.shape)
    expected = [
        np.corrcoef(a.ravel(), b.ravel())[0, 1]
        for a, b in zip(images, references, strict=True)
    ]
    np.testing.assert_allclose(pixel_correlation(images, references), expected)
    # Brightness and contrast do not count; the sign of the relation does.
    np.testing.assert_allclose(pixel_correlation(images, 3 * images + 1), 1.0)
    np.testing.assert_allclose(pixel_correlation(images, 1 - images), -1.0)


@pytest.mark.parametrize(
    ("images", "references", "match"),
    [
        (np.ones((2, 4)), np.ones((2, 5)), "same shape"),
        (np.ones(4), np.ones(4), "same shape"),
        (RNG.uniform(size=(2, 4)), np.stack([np.arange(4.0), np.ones(4)]), "row 1"),
    ],
)
def test_pixel_correlation_names_bad_inputs(images, references, match):
    with pytest.raises(ValueError, match=match):
        pixel_correlation(images, references)


def test_compare_gathers_both_intervals_and_the_paired_test():
    rng = np.random.default_rng(3)
    right_a, right_b = rng.random(200) < 0.8, rng.random(200) < 0.7
    result = compare(right_a, right_b)
    assert result.accuracy_a == right_a.mean() and result.accuracy_b == right_b.mean()
    assert result.interval_a == pytest.approx(binomial_interval(right_a.mean(), 200))
    assert result.interval_b == pytest.approx(binomial_interval(right_b.mean(), 200))
    assert (result.a_only, result.b_only, result.p_value) == mcnemar(right_a, right_b)
    difference = (result.difference, *result.difference_interval)
    assert difference == paired_difference(right_a, right_b)
    row = result.row(bound=result.p_value * 2)
    assert row.startswith(f"{right_a.mean():6.1%} [") and row.endswith("*")
    assert f"+{result.a_only}/-{result.b_only} p=" in row
    assert not result.row(bound=result.p_value / 2).endswith("*")
    assert not result.passes(result.p_value)  # strictly below the bound


@pytest.mark.parametrize(
    "tests, alpha, bound",
    [(1, 0.05, 0.05), (16, 0.05, 0.003125), (12, 0.01, 0.01 / 12)],
)
def test_bonferroni_bound_shares_alpha_among_the_tests(tests, alpha, bound):
    assert bonferroni_bound(tests, alpha) == pytest.approx(bound, rel=1e-15)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"tests": 0}, "tests=0"),
        ({"tests": True}, "tests=True"),
        ({"tests": 2.0}, "tests=2.0"),
        ({"tests": 2, "alpha": 1.0}, "alpha=1.0"),
    ],
)
def test_bonferroni_bound_names_bad_settings(kwargs, match):
    with pytest.raises(ValueError, match=match):
        bonferroni_bound(**kwargs)


def test_seed_verdict_reads_every_seed_against_the_bound():
    # Ten images only A reads right: p = 0.002; two: p = 0.5.
    strong = compare([True] * 30, [False] * 10 + [True] * 20)
    weak = compare([True] * 30, [False] * 2 + [True] * 28)
    behind_strong = compare([False] * 10 + [True] * 20, [True] * 30)
    behind_weak = compare([False] * 2 + [True] * 28, [True] * 30)
    assert strong.p_value < 0.01 < weak.p_value
    cases = {
        (strong, strong, strong): "supported",
        (strong,): "supported",
        (strong, weak, weak): "suggestive",
        (weak, weak): "suggestive",
        (weak,): "not seen",
        (strong, behind_weak): "not seen",
        (strong, strong, behind_strong): "contradicted",
    }
    for comparisons, verdict in cases.items():
        assert seed_verdict(comparisons, bound=0.01) == verdict, comparisons
    assert seed_verdict((strong, weak), bound=0.001) == "suggestive"  # none passes


@pytest.mark.parametrize("comparisons", [[], [(0.9, 0.8)]])
def test_seed_verdict_names_what_it_received(comparisons):
    with pytest.raises(ValueError, match="Received"):
        seed_verdict(comparisons, bound=0.05)
