"""Temperature scaling: the LBFGS fit against scipy, recovery of known temperatures and
a pixel subsample independent of batching and order."""
import math

import numpy as np
import pytest
import torch
from scipy.optimize import minimize_scalar
from scipy.special import log_softmax

import reobench_mm  # noqa: F401
from reobench_mm.evaluation.functional.temperature import fit_temperature, temperature_nll
from reobench_mm.evaluation.metrics.temperature import TemperatureFitMetric
from reobench_mm.registry import METRICS


def _calibrated(num_pixels: int, num_classes: int, seed: int, scale: float = 1.0):
    """Logits and labels drawn from softmax(logits): calibrated at T = 1; the logits
    times ``scale`` are calibrated at T = ``scale``."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(0.0, 2.0, size=(num_pixels, num_classes))
    probs = np.exp(log_softmax(logits, axis=1))
    cumulative = probs.cumsum(axis=1)
    labels = (rng.random((num_pixels, 1)) > cumulative).sum(axis=1)
    labels = np.minimum(labels, num_classes - 1)
    return torch.tensor(logits * scale), torch.tensor(labels)


def _scipy_nll(logits: np.ndarray, labels: np.ndarray, log_temperature: float) -> float:
    log_probs = log_softmax(logits / math.exp(log_temperature), axis=1)
    return float(-log_probs[np.arange(len(labels)), labels].mean())


def _scipy_temperature(logits: torch.Tensor, labels: torch.Tensor) -> float:
    x, y = logits.double().numpy(), labels.numpy()
    found = minimize_scalar(lambda t: _scipy_nll(x, y, t), bounds=(-5.0, 5.0),
                            method='bounded', options=dict(xatol=1e-10))
    return math.exp(found.x)


@pytest.mark.parametrize('scale,seed', [(0.5, 0), (2.0, 1), (3.0, 2), (1.0, 3)])
def test_fit_equals_scipy_bounded_minimum(scale, seed):
    logits, labels = _calibrated(3000, 5, seed)
    # mislabel a fifth of the pixels so that the optimum is not at T = scale
    labels[::5] = (labels[::5] + 1) % 5
    logits = logits * scale
    got = fit_temperature(logits, labels)
    expected = _scipy_temperature(logits, labels)
    assert got == pytest.approx(expected, rel=1e-4)
    assert temperature_nll(logits, labels, got) == pytest.approx(
        _scipy_nll(logits.numpy(), labels.numpy(), math.log(got)), rel=1e-10)


def test_overconfident_logits_recover_the_scale_and_calibrated_give_one():
    logits, labels = _calibrated(40000, 6, seed=4)
    assert fit_temperature(logits, labels) == pytest.approx(1.0, abs=0.04)
    assert fit_temperature(logits * 3.0, labels) == pytest.approx(3.0, rel=0.04)
    assert fit_temperature(logits / 2.0, labels) == pytest.approx(0.5, rel=0.04)


def test_ignored_pixels_are_ignored():
    logits, labels = _calibrated(2000, 4, seed=5, scale=2.5)
    expected = fit_temperature(logits, labels)
    rng = np.random.default_rng(6)
    junk_logits = torch.tensor(rng.normal(0, 30, size=(700, 4)))
    padded_logits = torch.cat([logits, junk_logits])
    padded_labels = torch.cat([labels, torch.full((700,), 255)])
    order = torch.from_numpy(rng.permutation(2700))
    got = fit_temperature(padded_logits[order], padded_labels[order])
    assert got == pytest.approx(expected, rel=1e-8)
    assert fit_temperature(padded_logits, torch.cat([labels, torch.full((700,), -1)]),
                           ignore_index=-1) == pytest.approx(expected, rel=1e-8)
    # if the junk pixels counted, the temperature would change a lot
    assert fit_temperature(padded_logits, torch.cat([labels, torch.zeros(700).long()])) \
        > 1.5 * expected


@pytest.mark.parametrize('logits,labels,message', [
    (torch.zeros(0, 3), torch.zeros(0).long(), 'empty'),
    (torch.zeros(4, 3), torch.full((4,), 255), 'no valid pixels'),
    (torch.zeros(4, 3), torch.zeros(5).long(), r'shape \(N,\)'),
    (torch.zeros(4, 3, 2), torch.zeros(4).long(), r'shape \(N, C\)'),
    (torch.zeros(4, 3), torch.tensor([0, 1, 3, 255]), r'labels must be in \[0, 3\)'),
    (torch.zeros(4, 1), torch.zeros(4).long(), 'at least 2 classes'),
])
def test_bad_inputs_give_clear_errors(logits, labels, message):
    with pytest.raises(ValueError, match=message):
        fit_temperature(logits, labels)


def _segmentation_samples(num_images: int = 5, num_classes: int = 4, scale: float = 2.5):
    rng = np.random.default_rng(7)
    samples = []
    for index in range(num_images):
        height, width = 24 + 4 * index, 30
        logits, labels = _calibrated(height * width, num_classes, seed=100 + index)
        labels = labels.reshape(height, width).clone()
        labels[rng.random((height, width)) < 0.2] = 255
        samples.append(dict(
            img_path=f'/data/img_dir/test/tile_{index:03d}.png',
            seg_logits=dict(data=(logits * scale).float().T.reshape(num_classes, height,
                                                                    width)),
            gt_sem_seg=dict(data=labels[None])))
    return samples


def _evaluate(samples, batch_size, pixels_per_image=300, seed=0):
    metric = METRICS.build(dict(type='TemperatureFitMetric',
                                pixels_per_image=pixels_per_image, seed=seed))
    metric.dataset_meta = dict(classes=('a', 'b', 'c', 'd'))
    for start in range(0, len(samples), batch_size):
        metric.process({}, samples[start:start + batch_size])
    stored = {path: (logits.copy(), labels.copy())
              for (_, path), logits, labels in metric.results}
    return metric.evaluate(len(samples)), stored


def test_metric_is_independent_of_batch_size_and_order():
    samples = _segmentation_samples()
    by_one, stored = _evaluate(samples, batch_size=1)
    by_three, _ = _evaluate(samples, batch_size=3)
    shuffled = [samples[i] for i in (3, 0, 4, 2, 1)]
    reordered, stored_reordered = _evaluate(shuffled, batch_size=2)
    assert by_one == by_three == reordered
    for path, (logits, labels) in stored.items():
        assert np.array_equal(logits, stored_reordered[path][0])
        assert np.array_equal(labels, stored_reordered[path][1])
        assert len(labels) == 300 and not np.any(labels == 255)
    assert by_one['tscale/num_pixels'] == 5 * 300
    assert by_one['tscale/temperature'] == pytest.approx(2.5, rel=0.15)
    assert by_one['tscale/nll_after'] <= by_one['tscale/nll_before']
    # a different seed draws other pixels
    other, _ = _evaluate(samples, batch_size=1, seed=1)
    assert other['tscale/temperature'] != by_one['tscale/temperature']


def test_metric_does_not_depend_on_where_the_data_lies():
    """The same images in another folder: the same pixels, the same temperature (the
    subsample is keyed by the file name, not the path)."""
    samples = _segmentation_samples()
    moved = [dict(s, img_path=s['img_path'].replace('/data/', '/elsewhere/copy/'))
             for s in samples]
    here, stored = _evaluate(samples, batch_size=2)
    there, stored_there = _evaluate(moved, batch_size=3)
    assert here == there
    for path, (logits, labels) in stored.items():
        other = stored_there[path.replace('/data/', '/elsewhere/copy/')]
        assert np.array_equal(logits, other[0]) and np.array_equal(labels, other[1])


def test_metric_fit_equals_direct_fit_on_the_kept_pixels():
    samples = _segmentation_samples(num_images=3)
    # more pixels per image than any image has: every valid pixel is kept
    result, stored = _evaluate(samples, batch_size=2, pixels_per_image=10 ** 6)
    logits, labels = [], []
    for sample in samples:
        data = sample['seg_logits']['data']
        flat_labels = sample['gt_sem_seg']['data'].reshape(-1)
        valid = flat_labels != 255
        logits.append(data.reshape(data.shape[0], -1).T[valid])
        labels.append(flat_labels[valid])
        assert len(stored[sample['img_path']][1]) == int(valid.sum())
    logits, labels = torch.cat(logits).double(), torch.cat(labels)
    assert result['tscale/num_pixels'] == len(labels)
    expected = _scipy_temperature(logits, labels)
    assert result['tscale/temperature'] == pytest.approx(expected, rel=1e-4)
    assert result['tscale/nll_before'] == pytest.approx(
        _scipy_nll(logits.numpy(), labels.numpy(), 0.0), rel=1e-6)
    assert result['tscale/nll_after'] == pytest.approx(
        _scipy_nll(logits.numpy(), labels.numpy(), math.log(expected)), rel=1e-6)
    assert result['tscale/nll_after'] < result['tscale/nll_before']


def test_metric_checks_its_inputs():
    with pytest.raises(ValueError, match='pixels_per_image'):
        TemperatureFitMetric(pixels_per_image=0)
    metric = TemperatureFitMetric()
    sample = _segmentation_samples(num_images=1)[0]
    with pytest.raises(KeyError, match='img_path'):
        metric.process({}, [{k: v for k, v in sample.items() if k != 'img_path'}])
    with pytest.raises(KeyError, match='seg_logits'):
        metric.process({}, [{k: v for k, v in sample.items() if k != 'seg_logits'}])
    wrong_size = dict(sample, gt_sem_seg=dict(data=torch.zeros(1, 5, 5).long()))
    with pytest.raises(ValueError, match='differ in size'):
        metric.process({}, [wrong_size])
    all_ignored = dict(sample, gt_sem_seg=dict(
        data=torch.full_like(sample['gt_sem_seg']['data'], 255)))
    metric.process({}, [all_ignored])
    with pytest.raises(ValueError, match='no pixel'):
        metric.compute_metrics(metric.results)
