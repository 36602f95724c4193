"""Representation drift: the CKA/HSIC, split-half floor, cosine and participation-ratio
statistics (reobench_mm.evaluation.functional.representation), the layer selection and the
end-to-end analysis on the demo UperNet (reobench_mm.robustness.drift,
tools/analysis_tools/representation_drift.py), per sample (the default) and per token."""
import itertools
import json
import os
import os.path as osp
import subprocess
import sys

import numpy as np
import pytest
import torch
from torch import nn

import reobench_mm  # noqa: F401  (registration)
from helpers import PROJECT_ROOT, SEG_DEMO_CONFIG
from reobench_mm.datasets.synthetic import write_potsdam
from reobench_mm.evaluation.functional.drift_accumulators import (DriftAccumulator,
                                                                  SampleDriftAccumulator)
from reobench_mm.evaluation.functional.representation import (
    StreamingCKA, StreamingCosine,
    StreamingParticipationRatio, hsic_unbiased, linear_cka, participation_ratio,
    row_cosine_similarity, split_half_cka, split_half_indices, token_cosine_similarity)
from reobench_mm.robustness.drift import (layer_tokens, pool_tokens, representation_drift,
                                          sample_token_positions, select_drift_layers)
from reobench_mm.fileio import file_sha256
from reobench_mm.models.backbones.convert import dense_backbone_types

TOOL = osp.join(PROJECT_ROOT, 'tools', 'analysis_tools', 'representation_drift.py')


# ----------------------------------------------------------------------------- references
def reference_hsic(K, L):
    """Song et al. (2012), Eq. 5, written with explicit ones vectors."""
    n = K.shape[0]
    k, l = K.copy(), L.copy()  # noqa: E741
    np.fill_diagonal(k, 0)
    np.fill_diagonal(l, 0)
    one = np.ones(n)
    return (np.trace(k @ l) + (one @ k @ one) * (one @ l @ one) / ((n - 1) * (n - 2))
            - 2 / (n - 2) * one @ k @ l @ one) / (n * (n - 3))


def u_statistic_hsic(K, L):
    """The same estimator as the U-statistic it is (Song et al., Theorem 2): the mean
    over ordered distinct quadruples of k_ij l_ij + k_ij l_qr - 2 k_ij l_iq."""
    n = K.shape[0]
    terms = [K[i, j] * L[i, j] + K[i, j] * L[q, r] - 2 * K[i, j] * L[i, q]
             for i, j, q, r in itertools.permutations(range(n), 4)]
    return float(np.mean(terms))


def reference_cka(X, Y):
    K, L = X @ X.T, Y @ Y.T
    return reference_hsic(K, L) / np.sqrt(reference_hsic(K, K) * reference_hsic(L, L))


def random_orthogonal(dim, rng):
    q, r = np.linalg.qr(rng.normal(size=(dim, dim)))
    return q * np.sign(np.diag(r))


def reference_cosines(X, Y):
    """Per-row cosine, written out."""
    return np.array([x @ y / (np.linalg.norm(x) * np.linalg.norm(y)) for x, y in zip(X, Y)])


def reference_pr(X, convention):
    """(Σλ)² / Σλ²: raw from the singular values of X itself, centred from the
    eigenvalues of np.cov."""
    if convention == 'raw':
        eigenvalues = np.linalg.svd(X, compute_uv=False) ** 2
    else:
        eigenvalues = np.linalg.eigvalsh(np.cov(X, rowvar=False))
    return eigenvalues.sum() ** 2 / (eigenvalues ** 2).sum()


def reference_split_half(X, seed):
    """The documented split: a seeded permutation, first half against second half."""
    permutation = np.random.default_rng(seed).permutation(len(X))
    half = len(X) // 2
    return reference_cka(X[permutation[:half]], X[permutation[half:2 * half]])


def features(rng, n=40, d1=12, d2=7, noise=0.5):
    x = rng.normal(size=(n, d1))
    y = x[:, :d2] @ rng.normal(size=(d2, d2)) + noise * rng.normal(size=(n, d2))
    return x, y


# ----------------------------------------------------------------------------- HSIC / CKA
def rbf_gram(x, gamma=0.3):
    sq = ((x[:, None] - x[None]) ** 2).sum(-1)
    return np.exp(-gamma * sq)


@pytest.mark.parametrize('kernel', ['linear', 'rbf'])
@pytest.mark.parametrize('n', [4, 7, 30])
def test_hsic_unbiased_matches_the_formula(kernel, n):
    rng = np.random.default_rng(n)
    x, y = features(rng, n=n, d1=5, d2=3)
    K, L = (x @ x.T, y @ y.T) if kernel == 'linear' else (rbf_gram(x), rbf_gram(y))
    expected = reference_hsic(K, L)
    assert hsic_unbiased(K, L) == pytest.approx(expected, rel=1e-10, abs=1e-12)
    assert hsic_unbiased(torch.from_numpy(K).float(), torch.from_numpy(L).float()) == \
        pytest.approx(expected, rel=1e-5, abs=1e-6)
    if n == 7:  # 840 quadruples: the U-statistic by brute force
        assert hsic_unbiased(K, L) == pytest.approx(u_statistic_hsic(K, L), rel=1e-9)


def test_hsic_unbiased_has_zero_mean_for_independent_data():
    rng = np.random.default_rng(0)
    unbiased, biased = [], []
    n = 10
    centring = np.eye(n) - 1 / n
    for _ in range(400):
        x, y = rng.normal(size=(n, 3)), rng.normal(size=(n, 3))
        K, L = x @ x.T, y @ y.T
        unbiased.append(hsic_unbiased(K, L))
        biased.append(np.trace(K @ centring @ L @ centring) / (n - 1) ** 2)
    standard_error = np.std(unbiased) / np.sqrt(len(unbiased))
    assert abs(np.mean(unbiased)) < 3 * standard_error
    assert np.mean(biased) > 10 * np.std(biased) / np.sqrt(len(biased))  # the biased one is not


def test_hsic_unbiased_rejects_bad_input():
    with pytest.raises(ValueError, match='n >= 4'):
        hsic_unbiased(np.eye(3), np.eye(3))
    with pytest.raises(ValueError, match='square'):
        hsic_unbiased(np.ones((5, 4)), np.ones((5, 4)))
    with pytest.raises(ValueError, match='same shape'):
        hsic_unbiased(np.eye(5), np.eye(6))
    with pytest.raises(ValueError, match='same number of rows'):
        linear_cka(np.ones((5, 2)), np.ones((6, 2)))
    with pytest.raises(ValueError, match='n >= 4'):
        linear_cka(np.ones((3, 2)), np.ones((3, 2)))


@pytest.mark.parametrize('shape', [(4, 3), (50, 8), (20, 64)])
def test_linear_cka_of_identical_features_is_one(shape):
    x = np.random.default_rng(1).normal(size=shape)
    assert linear_cka(x, x) == pytest.approx(1.0, abs=1e-12)
    assert linear_cka(torch.from_numpy(x), x + 5.0) == pytest.approx(1.0, abs=1e-12)


def test_linear_cka_matches_reference_and_invariances():
    rng = np.random.default_rng(2)
    x, y = features(rng)
    base = linear_cka(x, y)
    assert base == pytest.approx(reference_cka(x, y), rel=1e-10)
    assert 0.2 < base < 0.99
    q = random_orthogonal(x.shape[1], rng)
    assert linear_cka(x @ q, y) == pytest.approx(base, rel=1e-10)
    assert linear_cka(3.7 * x, 0.01 * y) == pytest.approx(base, rel=1e-10)
    assert linear_cka(y, x) == pytest.approx(base, rel=1e-10)
    # not invariant to anisotropic scaling: the invariance checks can fail
    stretched = x * np.linspace(0.1, 10.0, x.shape[1])
    assert abs(linear_cka(stretched, y) - base) > 1e-3
    assert abs(linear_cka(x, rng.normal(size=y.shape))) < 0.2


def test_linear_cka_of_constant_features_is_nan():
    x = np.random.default_rng(0).normal(size=(10, 3))
    assert np.isnan(linear_cka(x, np.ones((10, 2))))


# ----------------------------------------------------------------------------- streaming CKA
def test_streaming_cka_is_the_ratio_of_mean_hsics():
    rng = np.random.default_rng(3)
    x, y = features(rng, n=100)
    splits = np.split(np.arange(100), [10, 35, 36 + 4, 70])  # sizes 10, 25, 5, 30, 30
    streaming = StreamingCKA()
    xy, xx, yy = [], [], []
    for rows in splits:
        streaming.update(x[rows], y[rows])
        K, L = x[rows] @ x[rows].T, y[rows] @ y[rows].T
        xy.append(reference_hsic(K, L))
        xx.append(reference_hsic(K, K))
        yy.append(reference_hsic(L, L))
    expected = np.mean(xy) / np.sqrt(np.mean(xx) * np.mean(yy))
    assert streaming.compute() == pytest.approx(expected, rel=1e-10)
    result = streaming.result()
    assert result['hsic_xy'] == pytest.approx(np.mean(xy), rel=1e-10)
    assert result['num_minibatches'] == 5 and result['num_samples'] == 100
    json.dumps(result)
    # differs from the full-batch CKA (minibatch CKA is its own estimator)
    assert streaming.compute() != pytest.approx(linear_cka(x, y), rel=1e-6)
    # merging partial accumulators sums them
    first, second = StreamingCKA(), StreamingCKA()
    for rows in splits[:2]:
        first.update(x[rows], y[rows])
    for rows in splits[2:]:
        second.update(x[rows], y[rows])
    assert first.merge(second).compute() == pytest.approx(expected, rel=1e-12)


def test_streaming_accumulators_start_undefined():
    assert StreamingCKA().result()['cka'] is None
    assert StreamingCosine().result()['cosine'] is None
    assert StreamingParticipationRatio().result()['participation_ratio'] is None
    json.dumps(DriftAccumulator().result())


# ----------------------------------------------------------------------------- cosine
def test_token_cosine_matches_direct_computation():
    rng = np.random.default_rng(4)
    clean = rng.normal(size=(3, 9, 5))
    corrupted = clean + rng.normal(size=clean.shape)
    corrupted[1, 2] = 0.0  # one zero vector: cosine 0
    clean[2, 4] = corrupted[2, 4] = 0.0  # both zero: identical, cosine 1
    expected = []
    for b in range(3):
        values = []
        for t in range(9):
            u, v = clean[b, t], corrupted[b, t]
            nu, nv = np.linalg.norm(u), np.linalg.norm(v)
            values.append(1.0 if nu == nv == 0 else 0.0 if nu * nv == 0 else u @ v / (nu * nv))
        expected.append(np.mean(values))
    np.testing.assert_allclose(token_cosine_similarity(clean, corrupted), expected, rtol=1e-12)
    streaming = StreamingCosine().update(clean[:1], corrupted[:1])
    streaming.merge(StreamingCosine().update(clean[1:], corrupted[1:]))
    assert streaming.compute() == pytest.approx(np.mean(expected), rel=1e-12)
    assert StreamingCosine().update(clean[0], clean[0]).compute() == pytest.approx(1.0)
    with pytest.raises(ValueError, match='same shape'):
        token_cosine_similarity(clean, corrupted[:, :4])


# ----------------------------------------------------------------------------- participation ratio
@pytest.mark.parametrize('offset', [0.0, 100.0])
def test_participation_ratio_matches_eigenvalues(offset):
    rng = np.random.default_rng(5)
    x = rng.normal(size=(300, 6)) * np.array([5.0, 3.0, 1.0, 1.0, 0.5, 0.1]) + offset
    eigenvalues = np.linalg.eigvalsh(np.cov(x, rowvar=False))
    expected = eigenvalues.sum() ** 2 / (eigenvalues ** 2).sum()
    streaming = StreamingParticipationRatio(convention='centred')
    for chunk in np.array_split(x, 7):
        streaming.update(torch.from_numpy(chunk).float() if offset == 0 else chunk)
    rtol = 1e-5 if offset == 0 else 1e-9
    np.testing.assert_allclose(streaming.covariance(), np.cov(x, rowvar=False),
                               rtol=rtol, atol=1e-9 * (1 + offset ** 2))
    assert streaming.compute() == pytest.approx(expected, rel=rtol)
    merged = StreamingParticipationRatio(convention='centred').update(x[:100]).merge(
        StreamingParticipationRatio(convention='centred').update(x[100:]))
    assert merged.compute() == pytest.approx(expected, rel=1e-9)
    assert 1.0 < expected < 6.0


@pytest.mark.parametrize('convention', ['raw', 'centred'])
def test_participation_ratio_conventions_match_numpy(convention):
    rng = np.random.default_rng(15)
    # non-negative features with a shared mean direction, as after a ReLU
    x = np.maximum(rng.normal(size=(120, 24)) @ rng.normal(size=(24, 24)), 0.0)
    expected = reference_pr(x, convention)
    assert participation_ratio(x, convention) == pytest.approx(expected, rel=1e-9)
    streaming = StreamingParticipationRatio(convention=convention)
    for chunk in np.array_split(x, 5):
        streaming.update(chunk)
    assert streaming.compute() == pytest.approx(expected, rel=1e-9)
    assert streaming.result()['convention'] == convention
    # the raw matrix is XᵀX itself; both are scale-invariant
    if convention == 'raw':
        np.testing.assert_allclose(streaming.second_moment(), x.T @ x, rtol=1e-10)
    assert participation_ratio(7.5 * x, convention) == pytest.approx(expected, rel=1e-9)


def test_participation_ratio_conventions_differ_and_default_is_raw():
    rng = np.random.default_rng(16)
    x = np.maximum(rng.normal(size=(200, 64)) @ rng.normal(size=(64, 64)), 0.0)
    raw, centred = participation_ratio(x, 'raw'), participation_ratio(x, 'centred')
    assert participation_ratio(x) == raw
    assert StreamingParticipationRatio().convention == 'raw'
    assert raw < 0.5 * centred  # the mean direction dominates the raw matrix
    # centring is what differs: on zero-mean columns they agree up to n vs n − 1
    centred_x = x - x.mean(0)
    assert participation_ratio(centred_x, 'raw') == pytest.approx(centred, rel=1e-9)
    with pytest.raises(ValueError, match="one of \\['raw', 'centred'\\]"):
        participation_ratio(x, 'covariance')
    with pytest.raises(ValueError, match='cannot merge'):
        StreamingParticipationRatio().update(x).merge(
            StreamingParticipationRatio(convention='centred').update(x))


def test_participation_ratio_extremes_and_errors():
    rng = np.random.default_rng(6)
    line = np.outer(rng.normal(size=50), rng.normal(size=4))
    assert StreamingParticipationRatio().update(line).compute() == pytest.approx(1.0)
    with pytest.raises(ValueError, match='has 4 features'):
        StreamingParticipationRatio(dim=3).update(line)
    with pytest.raises(ValueError, match='positive integer'):
        StreamingParticipationRatio(dim=0)


# ----------------------------------------------------------------------------- split-half floor
def test_split_half_indices_are_the_documented_seeded_split():
    first, second = split_half_indices(11, seed=3)
    permutation = np.random.default_rng(3).permutation(11)
    assert np.array_equal(first, permutation[:5]) and np.array_equal(second, permutation[5:10])
    assert not set(first) & set(second)
    again = split_half_indices(11, seed=3)
    assert np.array_equal(again[0], first) and np.array_equal(again[1], second)
    assert not np.array_equal(split_half_indices(11, seed=4)[0], first)
    pair = split_half_indices(40, seed=[3, 2])
    assert np.array_equal(pair[0], np.random.default_rng([3, 2]).permutation(40)[:20])
    for bad in (1, 0, 2.5, True):
        with pytest.raises(ValueError, match='num_rows'):
            split_half_indices(bad, seed=0)
    for bad in (-1, 1.5, True, [], [1, -2]):
        with pytest.raises(ValueError, match='seed'):
            split_half_indices(10, seed=bad)


def test_split_half_cka_matches_numpy_and_sits_near_zero():
    rng = np.random.default_rng(17)
    x, _ = features(rng, n=400, d1=16)
    floor = split_half_cka(x, seed=5)
    assert floor == pytest.approx(reference_split_half(x, 5), rel=1e-10)
    assert split_half_cka(torch.from_numpy(x), seed=5) == floor
    # unrelated rows: the unbiased estimator is centred on 0, far below any real pairing
    floors = [split_half_cka(x, seed=s) for s in range(20)]
    assert abs(np.mean(floors)) < 0.02 and max(map(abs, floors)) < 0.1
    assert linear_cka(x, x + 0.5 * rng.normal(size=x.shape)) > 0.5
    with pytest.raises(ValueError, match='n >= 8'):
        split_half_cka(x[:7])
    with pytest.raises(ValueError, match='n×d'):
        split_half_cka(x[0])


# ----------------------------------------------------------------------------- per sample
def test_row_cosine_matches_numpy():
    rng = np.random.default_rng(18)
    x, y = rng.normal(size=(9, 5)), rng.normal(size=(9, 5))
    np.testing.assert_allclose(row_cosine_similarity(x, y), reference_cosines(x, y),
                               rtol=1e-12)
    np.testing.assert_allclose(row_cosine_similarity(x[0], y[0]), reference_cosines(x, y)[:1])
    with pytest.raises(ValueError, match='same shape'):
        row_cosine_similarity(x, y[:, :4])


def test_sample_drift_matches_numpy_and_does_not_depend_on_batching():
    rng = np.random.default_rng(19)
    clean = np.maximum(rng.normal(size=(30, 10)) @ rng.normal(size=(10, 10)), 0.0)
    corrupted = clean + 0.8 * rng.normal(size=clean.shape)
    whole = SampleDriftAccumulator(floor_seed=2).update(clean, corrupted).result()
    assert whole['cka'] == pytest.approx(reference_cka(clean, corrupted), rel=1e-10)
    assert whole['cosine'] == pytest.approx(reference_cosines(clean, corrupted).mean(),
                                            rel=1e-12)
    assert whole['cka_floor'] == pytest.approx(reference_split_half(clean, 2), rel=1e-10)
    assert whole['pr_clean'] == pytest.approx(reference_pr(clean, 'raw'), rel=1e-9)
    assert whole['pr_corrupted'] == pytest.approx(reference_pr(corrupted, 'raw'), rel=1e-9)
    assert whole['num_samples'] == 30 and whole['dim'] == 10
    assert 0.3 < whole['cka'] < 0.99 and abs(whole['cka_floor']) < whole['cka']
    # one sample at a time, then merged, gives the same numbers
    parts = [SampleDriftAccumulator(floor_seed=2) for _ in range(2)]
    for i in range(30):
        parts[i // 20].update(clean[i], torch.from_numpy(corrupted[i]))
    assert parts[0].merge(parts[1]).result() == pytest.approx(whole, rel=1e-12)
    centred = SampleDriftAccumulator('centred', floor_seed=2).update(clean, corrupted).result()
    assert centred['pr_clean'] == pytest.approx(reference_pr(clean, 'centred'), rel=1e-9)
    assert centred['cka'] == whole['cka']
    same = SampleDriftAccumulator().update(clean, clean).result()
    assert same['cka'] == pytest.approx(1.0) and same['cosine'] == pytest.approx(1.0)
    json.dumps(whole)


def test_sample_drift_undefined_and_bad_input():
    rng = np.random.default_rng(20)
    x = rng.normal(size=(6, 3))
    few = SampleDriftAccumulator().update(x, x + 1).result()
    assert few['cka'] is not None and few['cka_floor'] is None  # 6 rows: CKA yes, floor no
    assert SampleDriftAccumulator().update(x[:3], x[:3]).result()['cka'] is None
    assert SampleDriftAccumulator().result()['num_samples'] == 0
    json.dumps(SampleDriftAccumulator().result())
    with pytest.raises(ValueError, match='have 2 features, this accumulator has 3'):
        SampleDriftAccumulator().update(x, x).update(x[:, :2], x[:, :2])
    with pytest.raises(ValueError, match='same shape'):
        SampleDriftAccumulator().update(x, x[:5])
    with pytest.raises(ValueError, match='convention'):
        SampleDriftAccumulator('covariance')
    with pytest.raises(ValueError, match='floor_seed'):
        SampleDriftAccumulator(floor_seed=-1)


def test_pool_tokens_is_the_mean_over_tokens():
    tokens = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
    torch.testing.assert_close(pool_tokens(tokens), torch.from_numpy(tokens.numpy().mean(1)))
    with pytest.raises(ValueError, match='B×N×C'):
        pool_tokens(tokens[0])


# ----------------------------------------------------------------------------- one layer
def test_drift_accumulator_does_not_depend_on_batching():
    rng = np.random.default_rng(7)
    clean = rng.normal(size=(11, 16, 6))
    corrupted = clean + 0.7 * rng.normal(size=clean.shape)
    one_by_one, in_threes = DriftAccumulator(4), DriftAccumulator(4)
    for i in range(11):
        one_by_one.update(clean[i:i + 1], corrupted[i:i + 1])
    for start in range(0, 11, 3):
        in_threes.update(clean[start:start + 3], corrupted[start:start + 3])
    a, b = one_by_one.result(), in_threes.result()
    assert a == pytest.approx(b, rel=1e-12)
    assert a['num_minibatches'] == 3 and a['num_samples'] == 11 and a['num_tokens'] == 176
    # CKA over groups of 4 images' tokens (4, 4, 3 images)
    expected = StreamingCKA()
    for start in (0, 4, 8):
        expected.update(clean[start:start + 4].reshape(-1, 6),
                        corrupted[start:start + 4].reshape(-1, 6))
    assert a['cka'] == pytest.approx(expected.compute(), rel=1e-12)
    assert a['cosine'] == pytest.approx(token_cosine_similarity(clean, corrupted).mean())
    # token-level floor: minibatch CKA of random halves of each minibatch's clean rows,
    # seeded by (floor_seed, minibatch index)
    halves = []
    for index, start in enumerate((0, 4, 8)):
        rows = clean[start:start + 4].reshape(-1, 6)
        permutation = np.random.default_rng([0, index]).permutation(len(rows))
        half = len(rows) // 2
        halves.append((rows[permutation[:half]], rows[permutation[half:2 * half]]))
    xy = np.mean([reference_hsic(u @ u.T, v @ v.T) for u, v in halves])
    xx = np.mean([reference_hsic(u @ u.T, u @ u.T) for u, v in halves])
    yy = np.mean([reference_hsic(v @ v.T, v @ v.T) for u, v in halves])
    assert a['cka_floor'] == pytest.approx(xy / np.sqrt(xx * yy), rel=1e-10)
    assert abs(a['cka_floor']) < 0.2 < a['cka']
    assert DriftAccumulator(4, floor_seed=1).update(clean, corrupted).result()['cka_floor'] \
        != pytest.approx(a['cka_floor'])
    json.dumps(a)
    same = DriftAccumulator(4).update(clean, clean).result()
    assert same['cka'] == pytest.approx(1.0) and same['cosine'] == pytest.approx(1.0)
    assert same['pr_clean'] == same['pr_corrupted']


def test_sample_token_positions_are_deterministic():
    first = sample_token_positions(1000, 64, seed=0, image_index=3)
    assert np.array_equal(first, sample_token_positions(1000, 64, seed=0, image_index=3))
    assert len(np.unique(first)) == 64 and np.all(np.diff(first) > 0) and first.max() < 1000
    assert not np.array_equal(first, sample_token_positions(1000, 64, seed=1, image_index=3))
    assert not np.array_equal(first, sample_token_positions(1000, 64, seed=0, image_index=4))
    assert sample_token_positions(64, 64, seed=0, image_index=0) is None


# ----------------------------------------------------------------------------- layers
class _Holder(nn.Module):
    def __init__(self, backbone):
        super().__init__()
        self.backbone = backbone


@pytest.mark.parametrize('backbone_type', sorted(dense_backbone_types()))
def test_vit_block_selection_and_tokens(backbone_type):
    from mmengine.registry import MODELS
    torch.manual_seed(0)
    # final_norm=False: the levels are the raw blocks (TerraMind's default norms the last)
    backbone = MODELS.build(dict(type=backbone_type, arch=dict(embed_dims=32, depth=8,
                                                               num_heads=2),
                                 img_size=64, out_indices=(1, 3, 5, 7),
                                 final_norm=False)).eval()
    model = _Holder(backbone)
    layers = select_drift_layers(model, num_blocks=4)
    names = [layer.name for layer in layers]
    prefix = 'backbone.vit.blocks' if hasattr(backbone, 'vit') else \
        'backbone.' + backbone.block_prefix.rstrip('.')
    assert names == [f'{prefix}.{i}' for i in (1, 3, 5, 7)]
    assert all(layer.kind == 'vit_block' for layer in layers)
    captured = {}
    handles = [layer.module.register_forward_hook(
        lambda module, inputs, output, name=layer.name: captured.__setitem__(name, output))
        for layer in layers]
    with torch.no_grad():
        levels = backbone(torch.rand(2, getattr(backbone, 'in_channels', None) or 3, 64, 64))
    for handle in handles:
        handle.remove()
    grid = 64 // backbone.patch_size
    for layer in layers:
        tokens = layer_tokens(captured[layer.name], layer)
        assert tokens.shape == (2, grid * grid, 32)
    # without a final norm the last returned level is the last selected block's tokens
    last = levels[-1].flatten(2).transpose(1, 2)
    torch.testing.assert_close(layer_tokens(captured[names[-1]], layers[-1]), last)
    assert select_drift_layers(model, num_blocks=2)[0].name == f'{prefix}.3'
    explicit = select_drift_layers(model, layers=[f'{prefix}.0'])
    assert explicit[0].kind == 'vit_block'
    with pytest.raises(ValueError, match='no module named'):
        select_drift_layers(model, layers=['backbone.nothing'])
    with pytest.raises(ValueError, match='num_blocks=9'):
        select_drift_layers(model, num_blocks=9)


# ----------------------------------------------------------------------------- end to end
@pytest.fixture(scope='module')
def tiny_segmentor(seg_model):
    """The cached 30-iteration demo UperNet: its training config and checkpoint."""
    assert osp.isfile(seg_model.config) and osp.isfile(seg_model.checkpoint)
    return seg_model.config, seg_model.checkpoint


@pytest.fixture(scope='module')
def tool_run(tiny_segmentor, tmp_path_factory):
    """tools/analysis_tools/representation_drift.py in a subprocess, started before the
    in-process runs so that its start-up overlaps them; yields ``(process, work_dir)``."""
    config, checkpoint = tiny_segmentor
    out = str(tmp_path_factory.mktemp('drift_tool'))
    env = dict(os.environ, OMP_NUM_THREADS='1')
    process = subprocess.Popen(
        [sys.executable, TOOL, config, checkpoint, '--corruptions', 'gaussian_noise',
         '--severities', '1', '--representation', 'token', '--pr-convention', 'centred',
         '--tokens-per-image', '64', '--work-dir', out,
         '--cfg-options', 'test_dataloader.num_workers=0'],
        cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=env)
    yield process, out
    if process.poll() is None:
        process.kill()
        process.communicate()


@pytest.fixture(scope='module')
def drift_run(tiny_segmentor, tool_run, tmp_path_factory):
    config, checkpoint = tiny_segmentor
    work_dir = str(tmp_path_factory.mktemp('drift'))
    document = representation_drift(config, checkpoint, ['clean', 'gaussian_noise', 'rotate'],
                                    [1], seed=0, tokens_per_image=64, work_dir=work_dir,
                                    representation='token', pr_convention='centred')
    return document, work_dir


def _clean_layer4_tokens(config, checkpoint, num_images):
    """layer4 maps of the first clean test images, straight from the backbone."""
    from mmengine.config import Config
    from mmengine.registry import MODELS, init_default_scope
    from mmengine.runner import Runner, load_checkpoint
    cfg = Config.fromfile(config)
    init_default_scope(cfg.default_scope)
    model = MODELS.build(cfg.model)
    load_checkpoint(model, checkpoint, map_location='cpu', strict=True)
    model.eval()
    loader_cfg = dict(cfg.test_dataloader, num_workers=0, persistent_workers=False)
    tokens = []
    with torch.no_grad():
        for batch in Runner.build_dataloader(loader_cfg):
            inputs = model.data_preprocessor(batch, False)['inputs']
            layer4 = model.backbone(inputs)[3]  # out_indices (0, 1, 2, 3) = layer1..4
            tokens.append(layer4.flatten(2).transpose(1, 2).reshape(-1, layer4.shape[1]))
    return torch.cat(tokens)[:num_images * 64].double().numpy()


@pytest.mark.slow
def test_drift_end_to_end(tiny_segmentor, drift_run):
    config, checkpoint = tiny_segmentor
    document, work_dir = drift_run
    blocks = [f'backbone.layer{i}' for i in range(1, 5)]
    assert [b['name'] for b in document['blocks']] == blocks
    with open(osp.join(work_dir, 'representation_drift.json'), encoding='utf-8') as handle:
        assert json.load(handle) == json.loads(json.dumps(document))
    with open(osp.join(work_dir, 'representation_drift.png'), 'rb') as handle:
        assert handle.read(8) == b'\x89PNG\r\n\x1a\n'
    assert [c['condition'] for c in document['conditions']] == \
        ['clean', 'gaussian_noise@1', 'rotate@1']
    provenance = document['provenance']
    assert provenance['checkpoint_sha256'] == file_sha256(checkpoint)
    assert provenance['seed'] == 0 and provenance['blocks'] == blocks
    clean, noise, rotate = document['conditions']
    for condition in document['conditions']:
        assert condition['num_images'] == 3
        for block in blocks:
            values = condition['blocks'][block]
            assert -1.0 <= values['cka'] <= 1.0 + 1e-9
            assert values['pr_clean'] == pytest.approx(clean['blocks'][block]['pr_clean'])
    for block in blocks:
        reference = clean['blocks'][block]
        assert reference['cka'] == pytest.approx(1.0, abs=1e-9)
        assert reference['cosine'] == pytest.approx(1.0, abs=1e-6)
        assert reference['pr_clean'] == pytest.approx(reference['pr_corrupted'], rel=1e-9)
        assert noise['blocks'][block]['cka'] < 0.999
        assert noise['blocks'][block]['pr_corrupted'] != pytest.approx(reference['pr_clean'])
        # rotation moves content: position-paired statistics fall far
        assert rotate['blocks'][block]['cka'] < noise['blocks'][block]['cka']
    assert clean['blocks']['backbone.layer1']['tokens_available'] == 64 * 64
    assert clean['blocks']['backbone.layer1']['tokens_per_image'] == 64
    # layer4 of a 256×256 tile is 8×8 = 64 tokens, all kept: its clean PR is that of
    # the backbone's own output
    tokens = _clean_layer4_tokens(config, checkpoint, num_images=3)
    eigenvalues = np.linalg.eigvalsh(np.cov(tokens, rowvar=False))
    expected = eigenvalues.sum() ** 2 / (eigenvalues ** 2).sum()
    assert clean['blocks']['backbone.layer4']['pr_clean'] == pytest.approx(expected, rel=1e-6)


@pytest.mark.slow
def test_drift_does_not_depend_on_batch_size(tiny_segmentor, drift_run, tmp_path):
    config, checkpoint = tiny_segmentor
    document, _ = drift_run
    batched = representation_drift(config, checkpoint, ['gaussian_noise'], [1], seed=0,
                                   tokens_per_image=64, work_dir=str(tmp_path),
                                   representation='token', pr_convention='centred',
                                   cfg_options={'test_dataloader.batch_size': 2})
    expected = document['conditions'][1]['blocks']
    for block, values in batched['conditions'][0]['blocks'].items():
        for key in ('cka', 'cosine', 'pr_clean', 'pr_corrupted'):
            assert values[key] == pytest.approx(expected[block][key], rel=1e-5), (block, key)
    assert batched['provenance']['cfg_options'] == {'test_dataloader.batch_size': 2}
    # max_images cuts a batch; the clean-vs-clean reference is exact
    few = representation_drift(config, checkpoint, ['clean'], [0], tokens_per_image=16,
                               representation='token',
                               max_images=1, work_dir=str(tmp_path / 'few'),
                               cfg_options={'test_dataloader.batch_size': 2})
    (reference,) = few['conditions']
    assert reference['num_images'] == 1 and reference['severity'] == 0
    for values in reference['blocks'].values():
        assert values['num_tokens'] == 16 and values['num_minibatches'] == 1
        assert values['cka'] == pytest.approx(1.0) and values['cosine'] == pytest.approx(1.0)


@pytest.mark.slow
def test_drift_tool_reproduces_the_library(drift_run, tool_run):
    document, _ = drift_run
    process, out = tool_run
    output, _ = process.communicate(timeout=300)
    assert process.returncode == 0, output[-3000:]
    assert 'gaussian_noise@1' in output and 'representation_drift.json' in output
    with open(osp.join(out, 'representation_drift.json'), encoding='utf-8') as handle:
        written = json.load(handle)
    assert osp.isfile(osp.join(out, 'representation_drift.png'))
    # same seed, same numbers as the in-process run
    expected = document['conditions'][1]['blocks']
    assert set(written['conditions'][0]['blocks']) == set(expected)
    for block, values in written['conditions'][0]['blocks'].items():
        assert values == pytest.approx(expected[block], rel=1e-6), block


def test_drift_rejects_bad_arguments(tmp_path):
    checkpoint = tmp_path / 'missing.pth'
    with pytest.raises(KeyError):
        representation_drift(SEG_DEMO_CONFIG, str(checkpoint), ['no_such_corruption'], [1])
    with pytest.raises(ValueError, match='severity'):
        representation_drift(SEG_DEMO_CONFIG, str(checkpoint), ['haze'], [7])
    with pytest.raises(ValueError, match='tokens_per_image'):
        representation_drift(SEG_DEMO_CONFIG, str(checkpoint), ['haze'], [1],
                             tokens_per_image=0, representation='token')
    # token-level options are refused with the per-sample representation
    for option in ('tokens_per_image', 'images_per_minibatch'):
        with pytest.raises(ValueError, match=f"{option} applies to representation='token'"):
            representation_drift(SEG_DEMO_CONFIG, str(checkpoint), ['haze'], [1],
                                 **{option: 8})
    with pytest.raises(ValueError, match='max_images >= 8'):
        representation_drift(SEG_DEMO_CONFIG, str(checkpoint), ['haze'], [1], max_images=5)
    with pytest.raises(ValueError, match="representation must be one of \\['sample', 'token'\\]"):
        representation_drift(SEG_DEMO_CONFIG, str(checkpoint), ['haze'], [1],
                             representation='pooled')
    with pytest.raises(ValueError, match='pr_convention'):
        representation_drift(SEG_DEMO_CONFIG, str(checkpoint), ['haze'], [1],
                             pr_convention='covariance')
    with pytest.raises(ValueError, match='unknown protocol'):
        representation_drift(SEG_DEMO_CONFIG, str(checkpoint), ['haze'], [1],
                             protocol='imagenet_c')
    # a corruption of the other protocol: the message says which protocol has it
    with pytest.raises(KeyError, match='geofm_calibration'):
        representation_drift(SEG_DEMO_CONFIG, str(checkpoint), ['poisson_gaussian_noise'], [1])
    with pytest.raises(KeyError, match='reobench'):
        representation_drift(SEG_DEMO_CONFIG, str(checkpoint), ['haze'], [1],
                             protocol='geofm_calibration')
    with pytest.raises(FileNotFoundError, match='missing.pth'):
        representation_drift(SEG_DEMO_CONFIG, str(checkpoint), ['haze'], [1])


# ------------------------------------------------------------------------ end to end, per sample
SAMPLE_TEST_IMAGES = 12


@pytest.fixture(scope='module')
def sample_test_root(tmp_path_factory):
    """A Potsdam-format test split of 12 images: the per-sample statistics compare images
    (the split-half floor needs at least 8)."""
    root = str(tmp_path_factory.mktemp('drift_samples'))
    write_potsdam(root, num_train=0, num_val=SAMPLE_TEST_IMAGES, size=256, seed=3)
    return root


@pytest.fixture(scope='module')
def geofm_tool_run(tiny_segmentor, sample_test_root, tmp_path_factory):
    """The tool with the calibration study's protocol and the default (per-sample)
    representation, started before the in-process runs; yields ``(process, work_dir)``."""
    config, checkpoint = tiny_segmentor
    out = str(tmp_path_factory.mktemp('drift_geofm_tool'))
    env = dict(os.environ, OMP_NUM_THREADS='1')
    process = subprocess.Popen(
        [sys.executable, TOOL, config, checkpoint, '--protocol', 'geofm_calibration',
         '--corruptions', 'poisson_gaussian_noise', 'cloud_shadow', '--severities', '3',
         '--work-dir', out, '--cfg-options',
         f'test_dataloader.dataset.data_root={sample_test_root}',
         'test_dataloader.num_workers=0'],
        cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=env)
    yield process, out
    if process.poll() is None:
        process.kill()
        process.communicate()


@pytest.fixture(scope='module')
def sample_run(tiny_segmentor, sample_test_root, geofm_tool_run, tmp_path_factory):
    config, checkpoint = tiny_segmentor
    document = representation_drift(
        config, checkpoint, ['clean', 'gaussian_noise', 'rotate'], [3], seed=0,
        work_dir=str(tmp_path_factory.mktemp('drift_sample')),
        cfg_options={'test_dataloader.dataset.data_root': sample_test_root})
    return document


def _pooled_backbone_levels(config, checkpoint, data_root, condition=None):
    """Each ResNet stage's map, averaged over its positions, per test image: straight
    from the backbone (layer1..4 = out_indices 0..3); one ``N×C`` array per stage."""
    from mmengine.config import Config
    from mmengine.registry import MODELS, init_default_scope
    from mmengine.runner import Runner, load_checkpoint

    from reobench_mm.utils.config import insert_corruption
    cfg = Config.fromfile(config)
    cfg.test_dataloader.dataset.data_root = data_root
    if condition is not None:
        insert_corruption(cfg, condition)
    init_default_scope(cfg.default_scope)
    model = MODELS.build(cfg.model)
    load_checkpoint(model, checkpoint, map_location='cpu', strict=True)
    model.eval()
    loader_cfg = dict(cfg.test_dataloader, num_workers=0, persistent_workers=False)
    pooled = [[] for _ in range(4)]
    with torch.no_grad():
        for batch in Runner.build_dataloader(loader_cfg):
            inputs = model.data_preprocessor(batch, False)['inputs']
            for level, stage in zip(pooled, model.backbone(inputs)):
                level.append(stage.double().numpy().mean(axis=(2, 3)))
    return [np.concatenate(level) for level in pooled]


@pytest.mark.slow
def test_sample_drift_end_to_end_matches_numpy(tiny_segmentor, sample_test_root, sample_run):
    from reobench_corruptions.condition import Condition
    config, checkpoint = tiny_segmentor
    document = sample_run
    settings = document['settings']
    assert settings['representation'] == 'sample' and settings['pr_convention'] == 'raw'
    assert settings['protocol'] == 'reobench' and settings['tokens_per_image'] is None
    assert document['format'] == 'reobench_mm.representation_drift/3'
    clean, noise, rotate = document['conditions']
    blocks = [f'backbone.layer{i}' for i in range(1, 5)]
    clean_levels = _pooled_backbone_levels(config, checkpoint, sample_test_root)
    noisy_levels = _pooled_backbone_levels(config, checkpoint, sample_test_root,
                                           Condition('gaussian_noise', 3, 0))
    for block, x, y in zip(blocks, clean_levels, noisy_levels):
        assert x.shape == (SAMPLE_TEST_IMAGES, noise['blocks'][block]['dim'])
        values = noise['blocks'][block]
        assert values['num_samples'] == SAMPLE_TEST_IMAGES
        assert values['cka'] == pytest.approx(reference_cka(x, y), rel=1e-5)
        assert values['cosine'] == pytest.approx(reference_cosines(x, y).mean(), rel=1e-6)
        assert values['pr_clean'] == pytest.approx(reference_pr(x, 'raw'), rel=1e-5)
        assert values['pr_corrupted'] == pytest.approx(reference_pr(y, 'raw'), rel=1e-5)
        # the split-half floor on real activations: below 1, below the corrupted CKA, the
        # same for every condition (it only sees the clean images)
        floor = values['cka_floor']
        assert floor == pytest.approx(reference_split_half(x, 0), rel=1e-5, abs=1e-9)
        assert floor < 0.9 and floor < values['cka']
        assert clean['blocks'][block]['cka_floor'] == rotate['blocks'][block]['cka_floor'] \
            == floor
        assert clean['blocks'][block]['cka'] == pytest.approx(1.0, abs=1e-9)
        assert clean['blocks'][block]['cosine'] == pytest.approx(1.0, abs=1e-9)
        assert values['cka'] < 1 - 1e-4
        # the study's raw participation ratio is well below the centred one on ReLU maps
        assert values['pr_clean'] < reference_pr(x, 'centred')
        # pooling over the image removes most of the position pairing that sends the
        # token-level CKA of a rotation to ~0.01 (test_drift_end_to_end)
        assert rotate['blocks'][block]['cka'] > 0.5
    for condition in document['conditions']:
        assert condition['num_images'] == SAMPLE_TEST_IMAGES


@pytest.mark.slow
def test_drift_tool_accepts_the_calibration_protocol(sample_run, geofm_tool_run):
    process, out = geofm_tool_run
    output, _ = process.communicate(timeout=300)
    assert process.returncode == 0, output[-3000:]
    assert 'split-half floor' in output and 'protocol geofm_calibration' in output
    with open(osp.join(out, 'representation_drift.json'), encoding='utf-8') as handle:
        written = json.load(handle)
    assert written['settings']['protocol'] == 'geofm_calibration'
    assert written['settings']['representation'] == 'sample'
    assert [c['condition'] for c in written['conditions']] == \
        ['poisson_gaussian_noise@3', 'cloud_shadow@3']
    reference = sample_run['conditions'][0]['blocks']  # clean, same images and seed
    for condition in written['conditions']:
        assert condition['num_images'] == SAMPLE_TEST_IMAGES
        for block, values in condition['blocks'].items():
            # the corruption ran: the features moved
            assert -1.0 <= values['cka'] < 1 - 1e-4, (condition['condition'], block)
            assert values['cosine'] < 1 - 1e-6
            assert values['cka_floor'] == pytest.approx(reference[block]['cka_floor'],
                                                        rel=1e-6, abs=1e-9)
            assert values['pr_clean'] == pytest.approx(reference[block]['pr_clean'], rel=1e-6)
