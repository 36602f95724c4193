"""Maximum calibration error and adaptive (equal-mass) ECE of the segmentation
calibration metric, and MCE / classwise errors of the rotated-detection calibration
metric, against direct numpy computations on small constructed inputs; the adaptive
ECE's error bound against the exact computation that sorts every pixel."""
import math

import numpy as np
import pytest
import torch

import reobench_mm  # noqa: F401  (registration)
from calibration_reference import (exact_adaptive_ece, fine_bins, reference_mce,
                                   whole_bin_adaptive_ece)
from reobench_mm.evaluation.functional.calibration import PixelCalibrationStats
from reobench_mm.evaluation.functional.calibration_bins import (adaptive_calibration,
                                                                maximum_calibration_error)
from reobench_mm.evaluation.functional.streaming import RankSum
from reobench_mm.evaluation.keys import CALIBRATION_METRICS
from reobench_mm.evaluation.metrics.detection_calibration import \
    RotatedDetectionCalibrationMetric
from reobench_mm.evaluation.metrics.seg_calibration import SegCalibrationMetric

IGNORE = 255


def softmax(logits, temperature=1.0):
    z = np.asarray(logits, np.float64) / temperature
    z = z - z.max(axis=0, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=0, keepdims=True)


def top_label(probs, labels):
    """(confidence, correct) of the valid pixels: probs (C, N), labels (N,)."""
    valid = labels != IGNORE
    p, y = probs[:, valid], labels[valid]
    return p.max(axis=0), (p.argmax(axis=0) == y).astype(float)


def histogram_adaptive(conf, correct, fine_count, num_bins=15):
    """adaptive_calibration() of a fine histogram built here with numpy."""
    fine = fine_bins(conf, fine_count)
    size = fine_count + 1
    edges = np.linspace(0, 1, fine_count + 1)
    return adaptive_calibration(
        np.bincount(fine, minlength=size), np.bincount(fine, weights=conf, minlength=size),
        np.bincount(fine, weights=1 - correct, minlength=size),
        np.append(edges[:-1], 1.0), np.append(edges[1:], 1.0), num_bins)


# ----------------------------------------------------------------------------------
# Segmentation: hand-computed and constructed cases
# ----------------------------------------------------------------------------------
def test_constructed_pixels_by_hand():
    """Empty bins, probabilities exactly 1.0 (one right, one wrong), an ignored pixel, a
    class absent from the labels; every number worked out by hand."""
    probs = np.array([[0.5, 0.52, 1.0, 0.0, 0.1, 0.9],
                      [0.3, 0.28, 0.0, 1.0, 0.1, 0.05],
                      [0.2, 0.2, 0.0, 0.0, 0.8, 0.05],
                      [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    labels = np.array([0, 1, 0, 2, 2, IGNORE])  # class 3 never occurs
    stats = PixelCalibrationStats(4).update(probs, labels)
    # bins of 1/15: 0.5 and 0.52 in bin 7 (acc 1/2, conf 0.51), 0.8 on the edge 12/15 in
    # bin 11 (acc 1), 1.0 twice in bin 14 (acc 1/2); the other 12 bins are empty
    assert stats.top_count.tolist() == [0] * 7 + [2, 0, 0, 0, 1, 0, 0, 2]
    assert stats.maximum_calibration_error() == pytest.approx(0.5, abs=1e-15)
    assert stats.expected_calibration_error() == pytest.approx(
        (2 * 0.01 + 0.2 + 2 * 0.5) / 5, abs=1e-15)
    # equal mass over 5 pixels, 15 bins: array_split cuts after ranks 1, 2, 3, 4, 5; the
    # cut at rank 4 falls inside the fine bin of the two 1.0 pixels (ranks 4-5) and goes
    # to its lower edge (a tie): groups [0.5], [0.52], [0.8], [], [1.0, 1.0], [] x 10
    adaptive = stats.adaptive_calibration()
    assert adaptive.count.tolist() == [1, 1, 1, 0, 2] + [0] * 10
    assert adaptive.ece == pytest.approx((0.5 + 0.52 + 0.2 + 1.0) / 5, abs=1e-15)
    # the exact computation puts the two tied 1.0 pixels in groups of their own, in
    # either order: |1 - 1| + |1 - 0| = 1, the same value here
    conf, correct = top_label(probs, labels)
    assert exact_adaptive_ece(conf, correct) == pytest.approx(adaptive.ece, abs=1e-15)
    # bound: one pixel moved inside the 1.0 bin (1 error, 1 correct, lo = hi = 1)
    assert adaptive.bound == pytest.approx(2 * 1.0 / 5, abs=1e-15)
    details = adaptive.to_dict()
    assert details['count'][3] == 0 and details['accuracy'][3] is None
    assert details['accuracy'][4] == 0.5 and details['confidence_range'][4] == [1.0, 1.0]
    # classwise MCE: class 0 holds p = 0.5 (y = 0), 0.52 (y = 1) -> bin 7, |0.51 - 0.5|;
    # 1.0 (y = 0) -> 0; 0.0 (y = 2) -> 0; 0.1 (y = 2) -> bin 1, |0.1 - 0| = 0.1
    class_mce = stats.classwise_maximum_calibration_errors()
    assert class_mce[0] == pytest.approx(0.1, abs=1e-15)
    assert np.isnan(class_mce[3])  # absent from the labels
    for k in range(3):
        assert class_mce[k] == pytest.approx(
            reference_mce(probs[k, :5], (labels[:5] == k).astype(float)), abs=1e-15)
    summary = stats.summary()
    assert list(summary) == list(CALIBRATION_METRICS)
    assert summary['MCE'] == stats.maximum_calibration_error()
    assert summary['aECE'] == adaptive.ece
    assert stats.reliability_diagram()['MCE'] == summary['MCE']


@pytest.mark.parametrize('all_correct', [True, False])
def test_all_correct_and_all_wrong(all_correct):
    """Every bin miscalibrated the same way: ECE = aECE = |gap| exactly (for any binning),
    MCE = max over bins of 1 - conf (all correct) or conf (all wrong)."""
    rng = np.random.default_rng(int(all_correct))
    num_classes, n = 4, 3000
    logits = rng.normal(size=(num_classes, n)) * rng.uniform(0.2, 5, n)
    logits[0, :100] = 1000.0  # confidence exactly 1.0
    probs = softmax(logits)
    pred = probs.argmax(axis=0)
    labels = pred if all_correct else (pred + 1) % num_classes
    labels[::50] = IGNORE
    stats = PixelCalibrationStats(num_classes).update(probs, labels)
    conf, correct = top_label(probs, labels)
    assert correct.mean() == float(all_correct)
    gap = abs(conf.mean() - correct.mean())
    assert stats.expected_calibration_error() == pytest.approx(gap, rel=1e-12)
    assert stats.adaptive_calibration().ece == pytest.approx(gap, rel=1e-12)
    assert exact_adaptive_ece(conf, correct) == pytest.approx(gap, rel=1e-12)
    assert stats.maximum_calibration_error() == pytest.approx(
        reference_mce(conf, correct), rel=1e-12)


def test_no_pixels_and_fewer_pixels_than_bins():
    stats = PixelCalibrationStats(3)
    stats.update(np.full((3, 4), 1 / 3), np.full(4, IGNORE))  # only ignored pixels
    assert stats.num_pixels == 0
    assert math.isnan(stats.maximum_calibration_error())
    adaptive = stats.adaptive_calibration()
    assert math.isnan(adaptive.ece) and math.isnan(adaptive.bound)
    assert adaptive.count.tolist() == [0] * 15
    assert math.isnan(stats.summary()['aECE']) and math.isnan(stats.summary()['MCE'])
    assert np.isnan(stats.classwise_maximum_calibration_errors()).all()
    # 4 pixels of distinct fine bins: each exact group holds one pixel or none, every
    # cut falls on a fine-bin edge, the bound is 0 and aECE = mean |c - correct|
    probs = np.array([[0.9, 0.2, 0.4, 0.35], [0.05, 0.7, 0.3, 0.35], [0.05, 0.1, 0.3, 0.3]])
    labels = np.array([0, 0, 0, 1])
    stats.update(probs, labels)
    conf, correct = top_label(probs, labels)
    adaptive = stats.adaptive_calibration()
    assert adaptive.bound == 0.0
    assert adaptive.count.tolist() == [1, 1, 1, 1] + [0] * 11
    assert adaptive.ece == pytest.approx(np.mean(np.abs(conf - correct)), abs=1e-15)
    assert adaptive.ece == pytest.approx(exact_adaptive_ece(conf, correct), abs=1e-15)


def test_maximum_calibration_error_function():
    counts = np.array([[0, 2, 4], [0, 0, 0]])
    conf = np.array([[0.0, 1.2, 3.0], [0, 0, 0]])
    correct = np.array([[0, 2, 1], [0, 0, 0]])
    got = maximum_calibration_error(counts, conf, correct)
    assert got[0] == pytest.approx(max(abs(2 - 1.2) / 2, abs(1 - 3.0) / 4))
    assert np.isnan(got[1])
    assert maximum_calibration_error(counts[0], conf[0], correct[0]) == pytest.approx(0.5)
    with pytest.raises(ValueError, match='one shape'):
        maximum_calibration_error(counts, conf[0], correct)


# ----------------------------------------------------------------------------------
# Adaptive ECE against the exact sort-based computation
# ----------------------------------------------------------------------------------
def test_bound_is_attained():
    """Both neighbours of a moved cut are miscalibrated in opposite directions and the
    moved pixel pushes both further: the error equals the bound.

    20 pixels, 2 equal-mass groups (cut after rank 10), fine bins of 0.1: seven wrong
    pixels at 0.3 (ranks 1-7), four at 0.6 (ranks 8-11: three right, then one wrong),
    nine right at 0.7. The cut at rank 10 moves to rank 11 (the edge of the 0.6 bin at
    distance 1, against 3), taking the wrong 0.6 pixel into the overconfident group."""
    conf = np.array([0.3] * 7 + [0.6] * 4 + [0.7] * 9)
    correct = np.array([0.0] * 7 + [1, 1, 1, 0] + [1.0] * 9)
    adaptive = histogram_adaptive(conf, correct, fine_count=10, num_bins=2)
    assert adaptive.achieved.tolist() == [0, 11, 20]
    exact = exact_adaptive_ece(conf, correct, num_bins=2)
    # exact groups: |2.1 + 3 * 0.6 - 3| + |0.6 + 9 * 0.7 - 9| = 0.9 + 2.1
    assert exact == pytest.approx(3.0 / 20, abs=1e-15)
    assert adaptive.ece == pytest.approx((1.5 + 2.7) / 20, abs=1e-15)
    # delta = max(min(1, 1 error) * 0.6, min(1, 3 right) * (1 - 0.5)) = 0.6
    assert adaptive.bound == pytest.approx(2 * 0.6 / 20, abs=1e-15)
    assert abs(adaptive.ece - exact) == pytest.approx(adaptive.bound, abs=1e-15)


def _random_case(rng, kind, accuracy, n):
    """Confidences of several shapes (smooth, heavy ties, a mass at exactly 1.0, peaked
    near 1) and correctness that is over- or under-confident throughout, crosses the
    diagonal, or is calibrated."""
    conf = rng.uniform(0, 1, n)
    if kind == 'ties':
        conf = np.round(conf * 7) / 7
    elif kind == 'ones':
        conf[rng.random(n) < 0.3] = 1.0
    elif kind == 'peaked':
        conf = rng.beta(8, 1, n)
    if accuracy == 'one-sided':
        chance = conf ** rng.uniform(0.3, 3)
    elif accuracy == 'crossing':
        chance = np.clip(conf + 0.15 * np.sin(6 * np.pi * conf), 0, 1)
    else:
        chance = conf
    return conf, (rng.random(n) < chance).astype(float)


def test_adaptive_ece_within_the_bound_on_random_inputs():
    """|whole-fine-bin aECE - exact aECE| <= bound for the stable and random orders of
    ties; the implementation equals the plain-loop version of the rule; the bound is at
    most (B - 1) max_f n_f / n and small for smooth confidences on 10,000 fine bins."""
    rng = np.random.default_rng(0)
    worst_ratio, worst_error, smooth_bounds = 0.0, 0.0, []
    for trial in range(240 + 12):
        kind = ('uniform', 'ties', 'ones', 'peaked')[trial % 4]
        accuracy = ('one-sided', 'crossing', 'calibrated')[trial // 4 % 3]
        n = int(rng.integers(1, 4000)) if trial < 240 else 50000
        fine_count = int(rng.choice([5, 20, 100, 1000, 10000])) if trial < 240 else 10000
        num_bins = int(rng.choice([1, 2, 15])) if trial < 240 else 15
        conf, correct = _random_case(rng, kind, accuracy, n)
        adaptive = histogram_adaptive(conf, correct, fine_count, num_bins)
        loop_value, loop_bound, loop_counts = whole_bin_adaptive_ece(conf, correct,
                                                                     fine_count, num_bins)
        assert adaptive.ece == pytest.approx(loop_value, rel=1e-12, abs=1e-15)
        assert adaptive.bound == pytest.approx(loop_bound, rel=1e-9, abs=1e-15)
        assert adaptive.count.tolist() == loop_counts
        fine_mass = np.bincount(fine_bins(conf, fine_count)).max() / n
        assert adaptive.bound <= (num_bins - 1) * fine_mass + 1e-12
        for order_rng in (None, rng):
            error = abs(adaptive.ece - exact_adaptive_ece(conf, correct, num_bins, order_rng))
            assert error <= adaptive.bound + 1e-12, (trial, kind, n, fine_count, num_bins)
            worst_error = max(worst_error, error)
            if adaptive.bound > 0:
                worst_ratio = max(worst_ratio, error / adaptive.bound)
        if trial >= 240 and kind in ('uniform', 'peaked'):
            smooth_bounds.append((accuracy, adaptive.bound, error))
    print(f'adaptive ECE: largest |approx - exact| {worst_error:.3g}, largest error / bound '
          f'{worst_ratio:.3f}; 50,000 smooth pixels on 10,000 fine bins: (bound, error) '
          + ', '.join(f'{a} ({b:.1e}, {e:.1e})' for a, b, e in smooth_bounds))
    assert worst_ratio > 0.5  # the bound is reached closely on some random inputs
    assert max(b for _, b, _ in smooth_bounds) < 2e-3
    assert min(b for a, b, _ in smooth_bounds if a == 'one-sided') == 0.0


def test_adaptive_ece_of_softmax_pixels_within_the_bound():
    """Through PixelCalibrationStats (several batches, ignore pixels, saturated pixels of
    confidence exactly 1.0), at 100 and 10,000 fine bins."""
    rng = np.random.default_rng(5)
    num_classes, n = 6, 30000
    labels = rng.integers(0, num_classes, n)
    logits = rng.normal(size=(num_classes, n)) * rng.uniform(0.3, 4.0, n)
    logits[labels, np.arange(n)] += rng.uniform(0, 3, n)
    logits[0, rng.random(n) < 0.05] = 1000.0
    labels[rng.random(n) < 0.1] = IGNORE
    probs = softmax(logits)
    conf, correct = top_label(probs, labels)
    for fine_count in (100, 10000):
        stats = PixelCalibrationStats(num_classes, selective_bins=fine_count)
        for part in np.array_split(np.arange(n), 3):
            stats.update(probs[:, part], labels[part])
        adaptive = stats.adaptive_calibration()
        loop_value, loop_bound, _ = whole_bin_adaptive_ece(conf, correct, fine_count)
        assert adaptive.ece == pytest.approx(loop_value, rel=1e-12)
        assert adaptive.bound == pytest.approx(loop_bound, rel=1e-9)
        for order_rng in (None, np.random.default_rng(1)):
            error = abs(adaptive.ece - exact_adaptive_ece(conf, correct, 15, order_rng))
            assert error <= adaptive.bound + 1e-12
        print(f'{fine_count} fine bins: aECE {adaptive.ece:.5f}, ECE '
              f'{stats.expected_calibration_error():.5f}, |approx - exact| {error:.2e}, '
              f'bound {adaptive.bound:.2e}')


# ----------------------------------------------------------------------------------
# Reduction, serialisation and the MMEngine metric
# ----------------------------------------------------------------------------------
def test_merge_and_serialisation_keep_the_fine_confidence_sums():
    rng = np.random.default_rng(2)
    probs = softmax(rng.normal(size=(3, 4000)) * 3)
    labels = rng.integers(0, 3, 4000)
    whole = PixelCalibrationStats(3).update(probs, labels)
    first = PixelCalibrationStats(3).update(probs[:, :1500], labels[:1500])
    second = PixelCalibrationStats(3).update(probs[:, 1500:], labels[1500:])
    merged = first + second
    np.testing.assert_allclose(merged.selective_confidence_sum,
                               whole.selective_confidence_sum, rtol=1e-12)
    assert merged.adaptive_calibration().ece == pytest.approx(
        whole.adaptive_calibration().ece, rel=1e-12)
    restored = PixelCalibrationStats.from_dict(whole.to_dict())
    assert np.array_equal(restored.selective_confidence_sum, whole.selective_confidence_sum)
    assert restored.summary() == whole.summary()
    old = dict(whole.to_dict(), format='reobench_mm.pixel_calibration_stats/1')
    with pytest.raises(ValueError, match='expected format'):
        PixelCalibrationStats.from_dict(old)


def _segmentation_samples(seed, batch=3, size=(30, 26), num_classes=5):
    """Logits with some probabilities exactly 1.0, ignored pixels, class 4 never a label."""
    generator = torch.Generator().manual_seed(seed)
    samples = []
    for _ in range(batch):
        logits = torch.randn((num_classes, ) + size, generator=generator) * 2.5
        labels = torch.randint(0, num_classes - 1, (1, ) + size, generator=generator)
        labels[0, :2] = IGNORE
        logits[1, 4, :6] = 300.0
        samples.append(dict(seg_logits=dict(data=logits), gt_sem_seg=dict(data=labels)))
    return samples


def test_segmentation_metric_reports_mce_and_adaptive_ece():
    """process / compute_metrics in one process and in two (DefaultSampler's
    interleaving, one accumulator per process, summed)."""
    samples = _segmentation_samples(0) + _segmentation_samples(1)
    metric = SegCalibrationMetric()
    metric.dataset_meta = dict(classes=('a', 'b', 'c', 'd', 'e'))
    for start in range(0, len(samples), 2):
        metric.process({}, samples[start:start + 2])
    got = metric.evaluate(len(samples))
    assert set(got) == {f'calib/{k}' for k in CALIBRATION_METRICS}

    probs = np.concatenate([softmax(s['seg_logits']['data'].numpy()).reshape(5, -1)
                            for s in samples], axis=1)
    labels = np.concatenate([s['gt_sem_seg']['data'].numpy().reshape(-1) for s in samples])
    conf, correct = top_label(probs, labels)
    assert np.sum(conf == 1.0) >= 6 * 6
    assert got['calib/MCE'] == pytest.approx(reference_mce(conf, correct), rel=1e-12)
    value, bound, counts = whole_bin_adaptive_ece(conf, correct, 10000)
    assert got['calib/aECE'] == pytest.approx(value, rel=1e-12)
    assert abs(got['calib/aECE'] - exact_adaptive_ece(conf, correct)) <= bound + 1e-12
    details = metric.last_details
    assert details['adaptive']['bound'] == pytest.approx(bound, rel=1e-9)
    assert details['adaptive']['count'] == counts and sum(counts) == len(conf)
    assert details['reliability']['MCE'] == pytest.approx(got['calib/MCE'], rel=1e-15)
    valid = labels != IGNORE
    for k, name in enumerate('abcd'):
        want = reference_mce(probs[k, valid], (labels[valid] == k).astype(float))
        assert details['classwise_mce'][name] == pytest.approx(want, rel=1e-12), name
    assert details['classwise_mce']['e'] is None  # never a label

    parts = []
    for rank in (0, 1):
        part = SegCalibrationMetric()
        part.results.append(RankSum(rank=rank, world_size=2))
        for index in range(rank, len(samples), 2):
            part.process({}, [samples[index]])
        parts.extend(part.results)
    combined = SegCalibrationMetric().compute_metrics(parts)
    for key in CALIBRATION_METRICS:
        assert combined[key] == pytest.approx(got[f'calib/{key}'], rel=1e-12), key


# ----------------------------------------------------------------------------------
# Detection: constructed matches
# ----------------------------------------------------------------------------------
def _box(cx, cy, w=20.0, h=10.0, angle=0.0):
    return [cx, cy, w, h, angle]


def _detection_samples():
    """Detections whose matches are fixed by construction: a box equal to a ground-truth
    box is its match (IoU 1), a box far from every object is a false positive, a second
    box on an already matched object is a false positive, a box on a difficult object
    is left out. Scores are float64, away from the bin edges except 1.0 and 0.0."""
    g1, g2, g3 = _box(50, 50), _box(150, 50), _box(50, 150, 30, 10, 0.3)
    difficult, far = _box(100, 200, 10, 10), _box(230, 230, 8, 8)
    first = dict(
        gt_instances=dict(bboxes=torch.tensor([g1, g2, g3, _box(200, 120)]),
                          labels=torch.tensor([0, 0, 1, 2])),
        ignored_instances=dict(bboxes=torch.tensor([difficult]), labels=torch.tensor([0])),
        pred_instances=dict(
            bboxes=torch.tensor([g1, g1, g2, far, difficult, g3, far]),
            scores=torch.tensor([0.95, 0.9, 1.0, 0.0, 0.5, 0.58, 0.62], dtype=torch.float64),
            labels=torch.tensor([0, 0, 0, 0, 0, 1, 1])))
    second = dict(  # class 2 has an object but no detection in either image
        gt_instances=dict(bboxes=torch.tensor([_box(80, 80)]), labels=torch.tensor([2])),
        ignored_instances={},
        pred_instances=dict(bboxes=torch.tensor([far]),
                            scores=torch.tensor([0.3], dtype=torch.float64),
                            labels=torch.tensor([1])))
    # (score, class, true positive) of every counted detection, by construction
    counted = [(0.95, 0, 1), (0.9, 0, 0), (1.0, 0, 1), (0.0, 0, 0), (0.58, 1, 1),
               (0.62, 1, 0), (0.3, 1, 0)]
    return [first, second], counted


def test_detection_mce_and_classwise_errors_on_constructed_matches():
    samples, counted = _detection_samples()
    metric = RotatedDetectionCalibrationMetric()
    metric.dataset_meta = dict(classes=('a', 'b', 'c'))
    metric.process({}, samples)
    got = metric.evaluate(len(samples))
    details = metric.last_details
    # by hand, bins of 1/15. Class a: {0.95, 1.0} (2 TP) in bin 14 -> |1 - 0.975|,
    # 0.9 (FP) in bin 13 -> 0.9, 0.0 (FP) in bin 0 -> 0. Class b: 0.58 (TP) in bin 8
    # -> 0.42, 0.62 (FP) in bin 9, 0.3 (FP) in bin 4.
    assert details['reliability']['count'] == [1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 0, 1, 2]
    assert got['calib/num_detections'] == 7
    assert got['calib/ECE'] == pytest.approx((2 * 0.025 + 0.9 + 0.42 + 0.62 + 0.3) / 7)
    assert got['calib/MCE'] == pytest.approx(0.9)
    assert details['per_class']['a']['ECE'] == pytest.approx((2 * 0.025 + 0.9) / 4)
    assert details['per_class']['a']['MCE'] == pytest.approx(0.9)
    assert details['per_class']['b']['ECE'] == pytest.approx((0.42 + 0.62 + 0.3) / 3)
    assert details['per_class']['b']['MCE'] == pytest.approx(0.62)
    assert details['per_class']['c'] == dict(ECE=None, MCE=None, gap=None, num_detections=0)
    assert got['calib/cwECE'] == pytest.approx(((2 * 0.025 + 0.9) / 4 + 1.34 / 3) / 2)
    assert details['reliability']['MCE'] == pytest.approx(0.9)
    # the same from the direct formulas
    scores = np.array([s for s, _, _ in counted])
    classes = np.array([c for _, c, _ in counted])
    tps = np.array([t for _, _, t in counted], float)
    assert got['calib/MCE'] == pytest.approx(reference_mce(scores, tps), abs=1e-12)
    for index, name in enumerate('ab'):
        mine = classes == index
        assert details['per_class'][name]['MCE'] == pytest.approx(
            reference_mce(scores[mine], tps[mine]), abs=1e-12)
    assert got['calib/gap'] == pytest.approx(scores.mean() - tps.mean())


def test_detection_all_true_and_all_false_positives():
    """One class all true positives, another all false: MCE of each is its largest
    |1 - score| or score; with no detections at all, MCE is NaN."""
    objects = [_box(40 + 45 * i, 60) for i in range(4)]
    scores = [0.97, 0.81, 0.55, 0.99]
    sample = dict(
        gt_instances=dict(bboxes=torch.tensor(objects), labels=torch.tensor([0] * 4)),
        ignored_instances={},
        pred_instances=dict(
            bboxes=torch.tensor(objects + [_box(40, 200 + 10 * i) for i in range(3)]),
            scores=torch.tensor(scores + [0.2, 0.45, 0.71], dtype=torch.float64),
            labels=torch.tensor([0] * 4 + [1] * 3)))
    metric = RotatedDetectionCalibrationMetric()
    metric.dataset_meta = dict(classes=('a', 'b'))
    metric.process({}, [sample])
    got = metric.evaluate(1)
    per_class = metric.last_details['per_class']
    assert per_class['a']['MCE'] == pytest.approx(1 - 0.55)
    assert per_class['b']['MCE'] == pytest.approx(0.71)
    assert got['calib/MCE'] == pytest.approx(0.71)  # bins: 0.55 and 0.71 apart
    empty = RotatedDetectionCalibrationMetric()
    empty.dataset_meta = dict(classes=('a', 'b'))
    empty.process({}, [dict(sample, pred_instances=dict(
        bboxes=torch.zeros(0, 5), scores=torch.zeros(0), labels=torch.zeros(0).long()))])
    assert math.isnan(empty.evaluate(1)['calib/MCE'])
