"""Detection calibration error of oriented detectors against a direct computation with
an independent rotated IoU (shapely) and matcher, on random boxes and on the
predictions of the tiny demo Oriented R-CNN."""

import numpy as np
import pytest
import torch
from mmengine.hooks import Hook
from mmengine.runner import Runner
from shapely.geometry import Polygon

import reobench_mm  # noqa: F401
from reobench_mm.evaluation.functional.detection_calibration import match_rotated_detections
from reobench_mm.evaluation.metrics.detection_calibration import \
    RotatedDetectionCalibrationMetric
from reobench_mm.registry import METRICS

from calibration_reference import reference_mce
from helpers import DET_DEMO_CONFIG, demo_config

CLASSES = ('airplane', 'ship', 'storagetank')


# ----------------------------------------------------------------------------------------
# Independent reference: shapely polygons, a plain matcher, numpy histograms
# ----------------------------------------------------------------------------------------
def _polygon(box) -> Polygon:
    cx, cy, w, h, angle = (float(v) for v in box)
    cos, sin = np.cos(angle), np.sin(angle)
    corners = [(dx * cos - dy * sin + cx, dx * sin + dy * cos + cy)
               for dx, dy in ((-w / 2, -h / 2), (w / 2, -h / 2), (w / 2, h / 2),
                              (-w / 2, h / 2))]
    return Polygon(corners)


def _iou(box_a, box_b) -> float:
    a, b = _polygon(box_a), _polygon(box_b)
    inter = a.intersection(b).area
    union = a.area + b.area - inter
    return inter / union if union > 0 else 0.0


def _to_numpy(value):
    value = getattr(value, 'tensor', value)
    return value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)


def _reference_flags(sample, iou_thr, score_thr):
    """(scores, labels, flags) of one image: flag 1 TP, 0 FP, -1 excluded."""
    pred = sample['pred_instances']
    boxes, scores = _to_numpy(pred['bboxes']), _to_numpy(pred['scores']).astype(float)
    labels = _to_numpy(pred['labels'])
    gt = sample.get('gt_instances') or {}
    ignored = sample.get('ignored_instances') or {}
    gt_boxes = _to_numpy(gt['bboxes']) if 'bboxes' in gt else np.zeros((0, 5))
    gt_labels = _to_numpy(gt['labels']) if 'labels' in gt else np.zeros(0, int)
    ig_boxes = _to_numpy(ignored['bboxes']) if 'bboxes' in ignored else np.zeros((0, 5))
    ig_labels = _to_numpy(ignored['labels']) if 'labels' in ignored else np.zeros(0, int)
    out_scores, out_labels, out_flags = [], [], []
    for label in sorted(set(labels.tolist())):
        dets = [i for i in range(len(scores)) if labels[i] == label and scores[i] >= score_thr]
        dets.sort(key=lambda i: -scores[i])  # stable: ties keep input order
        gts = [gt_boxes[j] for j in range(len(gt_labels)) if gt_labels[j] == label]
        igs = [ig_boxes[j] for j in range(len(ig_labels)) if ig_labels[j] == label]
        taken = [False] * len(gts)
        for i in dets:
            best_iou, best_gt = -1.0, None
            for j, gt_box in enumerate(gts):
                if not taken[j]:
                    iou = _iou(boxes[i], gt_box)
                    if iou > best_iou:
                        best_iou, best_gt = iou, j
            if best_gt is not None and best_iou >= iou_thr:
                taken[best_gt] = True
                flag = 1
            elif any(_iou(boxes[i], ig_box) >= iou_thr for ig_box in igs):
                flag = -1
            else:
                flag = 0
            out_scores.append(scores[i])
            out_labels.append(label)
            out_flags.append(flag)
    return np.array(out_scores), np.array(out_labels, dtype=int), np.array(out_flags, int)


def _reference_bins(scores, num_bins=15):
    """Right-closed bins (edges[b], edges[b + 1]], 0 in the first: the pixel ECE's."""
    edges = np.linspace(0.0, 1.0, num_bins + 1)
    return np.clip(np.searchsorted(edges, scores, side='left') - 1, 0, num_bins - 1)


def _reference_ece(scores, tps, num_bins=15):
    bins = _reference_bins(scores, num_bins)
    counts = np.bincount(bins, minlength=num_bins)
    score_sums = np.bincount(bins, weights=scores, minlength=num_bins)
    tp_sums = np.bincount(bins, weights=tps.astype(float), minlength=num_bins)
    error = 0.0
    for n, s, t in zip(counts, score_sums, tp_sums):
        if n:
            error += n / len(scores) * abs(t / n - s / n)
    return error, counts, score_sums, tp_sums


def _reference_metrics(samples, num_classes, iou_thr=0.5, score_thr=0.0):
    parts = [_reference_flags(s, iou_thr, score_thr) for s in samples]
    scores = np.concatenate([p[0] for p in parts])
    labels = np.concatenate([p[1] for p in parts])
    flags = np.concatenate([p[2] for p in parts])
    kept = flags >= 0
    scores, labels, tps = scores[kept], labels[kept], flags[kept] == 1
    ece, counts, score_sums, tp_sums = _reference_ece(scores, tps)
    class_eces = {c: _reference_ece(scores[labels == c], tps[labels == c])[0]
                  for c in range(num_classes) if np.any(labels == c)}
    class_mces = {c: reference_mce(scores[labels == c], tps[labels == c])
                  for c in class_eces}
    return dict(ECE=ece, MCE=reference_mce(scores, tps), gap=scores.mean() - tps.mean(),
                cwECE=float(np.mean(list(class_eces.values()))),
                num_detections=len(scores), class_mces=class_mces), class_eces, counts, flags


# ----------------------------------------------------------------------------------------
# Random boxes
# ----------------------------------------------------------------------------------------
def _random_samples(seed, num_images=5):
    """Images with TPs, duplicates, loose boxes, false positives, ignored objects and
    ties / exact 0.0 and 1.0 scores."""
    rng = np.random.default_rng(seed)
    low, high = [20, 20, 10, 10, -1.5], [230, 230, 70, 40, 1.5]
    samples = []
    for index in range(num_images):
        num_gt, num_ignored = rng.integers(2, 7), rng.integers(0, 3)
        gts = rng.uniform(low, high, size=(num_gt, 5))
        gt_labels = rng.integers(0, len(CLASSES), size=num_gt)
        ignored = rng.uniform(low, high, size=(num_ignored, 5))
        ignored_labels = rng.integers(0, len(CLASSES), size=num_ignored)
        near = np.concatenate([gts, ignored])
        near_labels = np.concatenate([gt_labels, ignored_labels])
        picks = rng.integers(0, len(near), size=2 * len(near))
        jitter = rng.normal(0, [4, 4, 4, 3, 0.15], size=(len(picks), 5))
        false = rng.uniform(low, high, size=(4, 5))
        boxes = np.concatenate([near[picks] + jitter, false])
        boxes[:, 2:4] = np.abs(boxes[:, 2:4]) + 1
        labels = np.concatenate([near_labels[picks], rng.integers(0, len(CLASSES), 4)])
        flip = rng.random(len(labels)) < 0.1  # some near boxes with the wrong class
        labels[flip] = (labels[flip] + 1) % len(CLASSES)
        scores = rng.uniform(0, 1, size=len(labels))
        scores[rng.random(len(scores)) < 0.15] = 1.0
        scores[-1] = 0.0
        scores[0:2] = scores[0]  # a tie
        samples.append(dict(
            img_id=f'img_{seed}_{index}',
            gt_instances=dict(bboxes=torch.tensor(gts, dtype=torch.float32),
                              labels=torch.tensor(gt_labels)),
            ignored_instances=dict(bboxes=torch.tensor(ignored, dtype=torch.float32)
                                   .reshape(-1, 5), labels=torch.tensor(ignored_labels)),
            pred_instances=dict(bboxes=torch.tensor(boxes, dtype=torch.float32),
                                scores=torch.tensor(scores, dtype=torch.float32),
                                labels=torch.tensor(labels))))
    # an image without objects (InstanceData.to_dict() of no fields is {})
    samples.append(dict(img_id='empty', gt_instances={}, ignored_instances={},
                        pred_instances=dict(bboxes=torch.tensor([[50., 50, 20, 10, 0.3]]),
                                            scores=torch.tensor([0.7]),
                                            labels=torch.tensor([1]))))
    return samples


def _evaluate(samples, batch_size=2, **options):
    metric = METRICS.build(dict(type='RotatedDetectionCalibrationMetric', **options))
    metric.dataset_meta = dict(classes=CLASSES)
    for start in range(0, len(samples), batch_size):
        metric.process({}, samples[start:start + batch_size])
    assert len(metric.results) == 1  # one streaming accumulator per process
    return metric.evaluate(len(samples)), metric.last_details


@pytest.mark.parametrize('iou_thr,score_thr', [(0.5, 0.0), (0.3, 0.25), (0.7, 0.0)])
def test_equals_direct_computation_on_random_boxes(iou_thr, score_thr):
    samples = _random_samples(seed=int(iou_thr * 10))
    got, details = _evaluate(samples, iou_thr=iou_thr, score_thr=score_thr)
    expected, class_eces, counts, flags = _reference_metrics(samples, len(CLASSES),
                                                             iou_thr, score_thr)
    # the random scenes exercise every case
    assert np.sum(flags == 1) >= 5 and np.sum(flags == 0) >= 5
    if iou_thr <= 0.5:
        assert np.sum(flags == -1) >= 1
    assert got['calib/num_detections'] == expected['num_detections']
    for key in ('ECE', 'MCE', 'gap', 'cwECE'):
        assert got[f'calib/{key}'] == pytest.approx(expected[key], abs=1e-9), key
    assert details['reliability']['count'] == counts.tolist()
    assert details['reliability']['count'][-1] >= 1  # the exact 1.0 scores
    for index, name in enumerate(CLASSES):
        if index in class_eces:
            assert details['per_class'][name]['ECE'] == pytest.approx(class_eces[index],
                                                                      abs=1e-9)
            assert details['per_class'][name]['MCE'] == pytest.approx(
                expected['class_mces'][index], abs=1e-9)
        else:
            assert details['per_class'][name]['ECE'] is None
            assert details['per_class'][name]['MCE'] is None


def test_matcher_flags_equal_the_reference_matcher():
    for sample in _random_samples(seed=11, num_images=4)[:4]:
        pred, gt, ignored = (sample['pred_instances'], sample['gt_instances'],
                             sample['ignored_instances'])
        _, ref_labels, ref_flags = _reference_flags(sample, 0.5, 0.0)
        for label in range(len(CLASSES)):
            in_class = (pred['labels'] == label).numpy()
            flags = match_rotated_detections(
                pred['bboxes'].numpy()[in_class], pred['scores'].numpy()[in_class],
                gt['bboxes'].numpy()[(gt['labels'] == label).numpy()],
                ignored['bboxes'].numpy()[(ignored['labels'] == label).numpy()], 0.5)
            order = np.argsort(-pred['scores'].numpy()[in_class], kind='stable')
            assert flags[order].tolist() == ref_flags[ref_labels == label].tolist()


def test_known_values_by_hand():
    box = [100.0, 100.0, 40.0, 20.0, 0.4]
    sample = dict(
        gt_instances=dict(bboxes=torch.tensor([box]), labels=torch.tensor([0])),
        ignored_instances=dict(bboxes=torch.tensor([[30.0, 30, 20, 20, 0]]),
                               labels=torch.tensor([0])),
        pred_instances=dict(
            # TP at 0.9, duplicate FP at 0.8, on the ignored box (left out) at 0.6,
            # elsewhere FP at 0.1
            bboxes=torch.tensor([box, box, [30.0, 30, 20, 20, 0], [200, 200, 10, 10, 0]]),
            scores=torch.tensor([0.9, 0.8, 0.6, 0.1]), labels=torch.tensor([0, 0, 0, 0])))
    got, details = _evaluate([sample])
    # bins: 0.1 -> 1 (FP), 0.8 -> 12 (FP), 0.9 -> 13 (TP)
    assert got['calib/num_detections'] == 3
    assert got['calib/ECE'] == pytest.approx((0.1 + 0.8 + 0.1) / 3)
    assert got['calib/gap'] == pytest.approx((0.9 + 0.8 + 0.1) / 3 - 1 / 3)
    assert got['calib/cwECE'] == pytest.approx(got['calib/ECE'])
    assert got['calib/MCE'] == pytest.approx(0.8)  # the FP at 0.8 alone in its bin
    assert details['per_class']['airplane']['MCE'] == pytest.approx(0.8)
    reliability = details['reliability']
    assert reliability['bin_edges'][13:15] == pytest.approx([13 / 15, 14 / 15])
    assert reliability['count'][13] == 1
    assert reliability['mean_confidence'][13] == pytest.approx(0.9)
    assert reliability['accuracy'][13] == 1.0
    assert reliability['count'][11] == 0 and reliability['accuracy'][11] is None


def test_score_bins_follow_the_pixel_ece_convention():
    """A score on a bin edge goes to the bin below it, 0 to the first bin, 1 to the last:
    the same bins as the pixel ECE (checked against PixelCalibrationStats itself)."""
    from reobench_mm.evaluation.functional import PixelCalibrationStats
    from reobench_mm.evaluation.functional.detection_calibration import score_bin_indices
    scores = np.array([0.0, 0.1, 0.25, 0.2500001, 0.5, 0.75, 0.99, 1.0])
    assert score_bin_indices(scores, 4).tolist() == [0, 0, 0, 1, 1, 2, 3, 3]
    edges15 = np.linspace(0, 1, 16)
    assert score_bin_indices(edges15, 15).tolist() == [0] + list(range(15))
    for num_bins, values in ((4, scores), (15, np.concatenate([edges15, [1 / 3, 0.6]]))):
        for value in values:
            stats = PixelCalibrationStats(num_classes=2, num_bins=num_bins)
            stats.update(np.array([[[value]], [[1.0 - value]]]), np.array([[0]]))
            pixel_bin = int(np.argmax(stats.class_count[0]))
            assert score_bin_indices([value], num_bins).tolist() == [pixel_bin], value


def test_detection_on_a_bin_edge_is_counted_in_the_lower_bin():
    box = [100.0, 100.0, 40.0, 20.0, 0.4]
    sample = dict(
        gt_instances=dict(bboxes=torch.tensor([box]), labels=torch.tensor([0])),
        ignored_instances={},
        pred_instances=dict(bboxes=torch.tensor([box, [200.0, 200, 10, 10, 0]]),
                            scores=torch.tensor([0.75, 0.5]), labels=torch.tensor([0, 0])))
    got, details = _evaluate([sample], num_bins=4)
    # 0.75 (TP) in (0.5, 0.75], 0.5 (FP) in (0.25, 0.5]
    assert details['reliability']['count'] == [0, 1, 1, 0]
    assert details['reliability']['accuracy'] == [None, 0.0, 1.0, None]
    assert got['calib/ECE'] == pytest.approx((0.5 + 0.25) / 2)


def test_independent_of_image_order_batching_and_processes():
    samples = _random_samples(seed=3, num_images=6)
    reference, _ = _evaluate(samples, batch_size=1)
    shuffled = [samples[i] for i in np.random.default_rng(0).permutation(len(samples))]
    reordered, _ = _evaluate(shuffled, batch_size=3)
    assert reordered.keys() == reference.keys()
    for key in reference:
        assert reordered[key] == pytest.approx(reference[key], rel=1e-12)
    # two processes: each keeps one accumulator; the reduction is their sum
    halves = []
    for part in (samples[:4], samples[4:]):
        metric = RotatedDetectionCalibrationMetric()
        metric.dataset_meta = dict(classes=CLASSES)
        metric.process({}, part)
        halves.extend(metric.results)
    merged = RotatedDetectionCalibrationMetric()
    merged.dataset_meta = dict(classes=CLASSES)
    combined = merged.compute_metrics(halves)
    for key in reference:
        assert combined[key.split('/')[1]] == pytest.approx(reference[key], rel=1e-12)


@pytest.mark.parametrize('options,message', [
    (dict(iou_thr=0.0), r'iou_thr must be a number in \(0, 1\]'),
    (dict(iou_thr=1.5), r'iou_thr must be a number in \(0, 1\]'),
    (dict(iou_thr='0.5'), 'iou_thr'),
    (dict(score_thr=-0.1), r'score_thr must be a number in \[0, 1\]'),
    (dict(num_bins=0), 'num_bins must be a positive integer'),
])
def test_bad_options_give_clear_errors(options, message):
    with pytest.raises(ValueError, match=message):
        RotatedDetectionCalibrationMetric(**options)


def test_bad_inputs_give_clear_errors():
    sample = _random_samples(seed=1, num_images=1)[0]
    metric = RotatedDetectionCalibrationMetric()
    with pytest.raises(ValueError, match='dataset_meta'):
        metric.process({}, [sample])
    metric.dataset_meta = dict(classes=CLASSES)
    bad_scores = dict(sample, pred_instances=dict(sample['pred_instances'],
                                                  scores=sample['pred_instances']['scores'] + 1))
    with pytest.raises(ValueError, match=r'scores must lie in \[0, 1\]'):
        metric.process({}, [bad_scores])
    bad_boxes = dict(sample, pred_instances=dict(sample['pred_instances'],
                                                 bboxes=sample['pred_instances']['bboxes'][:, :4]))
    with pytest.raises(ValueError, match=r'shape \(N, 5\)'):
        metric.process({}, [bad_boxes])
    bad_labels = dict(sample, pred_instances=dict(sample['pred_instances'],
                                                  labels=sample['pred_instances']['labels'] + 3))
    with pytest.raises(ValueError, match=r'labels must be in \[0, 3\)'):
        metric.process({}, [bad_labels])


def test_no_detections_give_nan():
    sample = dict(gt_instances=dict(bboxes=torch.tensor([[50.0, 50, 10, 10, 0]]),
                                    labels=torch.tensor([0])), ignored_instances={},
                  pred_instances=dict(bboxes=torch.zeros(0, 5), scores=torch.zeros(0),
                                      labels=torch.zeros(0).long()))
    got, details = _evaluate([sample])
    assert got['calib/num_detections'] == 0
    assert np.isnan(got['calib/ECE']) and np.isnan(got['calib/cwECE'])
    assert np.isnan(got['calib/MCE'])
    assert details['per_class']['ship']['ECE'] is None


# ----------------------------------------------------------------------------------------
# Predictions of the tiny demo Oriented R-CNN in a real test loop
# ----------------------------------------------------------------------------------------
class _KeepOutputs(Hook):
    """Keeps the data samples (with predictions) of every test iteration."""

    def __init__(self):
        self.outputs = []

    def after_test_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        self.outputs.extend(sample.clone() for sample in outputs)


@pytest.fixture(scope='module')
def demo_detector_run(det_model, tmp_path_factory):
    work_dir = str(tmp_path_factory.mktemp('det_calibration'))
    cfg = demo_config(DET_DEMO_CONFIG, det_model.data_root, work_dir, iters=10)
    cfg.load_from = det_model.checkpoint
    dota = dict(cfg.test_evaluator)  # the demo's own mAP evaluator, kept
    cfg.test_evaluator = [dota, dict(type='RotatedDetectionCalibrationMetric'),
                          dict(type='RotatedDetectionCalibrationMetric', iou_thr=0.1,
                               score_thr=0.2, prefix='calib_loose')]
    runner = Runner.from_cfg(cfg)
    keep = _KeepOutputs()
    runner.register_hook(keep)
    metrics = runner.test()
    return metrics, keep.outputs, runner.test_evaluator.metrics


def test_demo_oriented_rcnn_predictions_equal_direct_computation(demo_detector_run):
    metrics, outputs, evaluator_metrics = demo_detector_run
    assert 'dota/mAP' in metrics
    assert len(outputs) == 3
    samples = [sample.to_dict() for sample in outputs]
    classes = evaluator_metrics[1].dataset_meta['classes']
    for prefix, iou_thr, score_thr in (('calib', 0.5, 0.0), ('calib_loose', 0.1, 0.2)):
        expected, _, _, flags = _reference_metrics(samples, len(classes), iou_thr, score_thr)
        assert expected['num_detections'] > 0
        if prefix == 'calib_loose':  # a loose IoU finds true positives after 10 iterations
            assert np.sum(flags == 1) >= 1
        assert metrics[f'{prefix}/num_detections'] == expected['num_detections']
        for key in ('ECE', 'MCE', 'gap', 'cwECE'):
            assert metrics[f'{prefix}/{key}'] == pytest.approx(expected[key], abs=1e-6), key
    assert 0 < metrics['calib_loose/num_detections'] < metrics['calib/num_detections']
    details = evaluator_metrics[1].last_details
    assert set(details['per_class']) == set(classes)
    assert sum(details['reliability']['count']) == metrics['calib/num_detections']
