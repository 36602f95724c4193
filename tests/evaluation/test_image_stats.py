"""Per-image statistics give the numbers of the metrics they come from: mIoU as MMSeg's
``IoUMetric``, ECE/gap/NLL/Brier as ``PixelCalibrationStats``, rotated mAP as MMRotate's
``eval_rbbox_map``; weighted sets of images as the same metrics on the images repeated;
and the statistics file reads back (and says what is wrong with a damaged one)."""
import io
import zipfile

import numpy as np
import pytest
import torch

import reobench_mm  # noqa: F401  (registration)
from reobench_mm.evaluation.functional.bootstrap import resample_counts
from reobench_mm.evaluation.functional.calibration import PixelCalibrationStats
from reobench_mm.evaluation.functional.condition_stats import IMAGE_STATS_FORMAT, ImageStats
from reobench_mm.evaluation.functional.detection_ap import DetectionImageStats
from reobench_mm.evaluation.functional.image_stats import (CalibrationImageStats,
                                                           SegmentationImageStats)
from reobench_mm.evaluation.metrics.rotated_map import in_process_rbbox_map
from reobench_mm.fileio import plain_float

IGNORE = 255
SEG_CLASSES = ('impervious', 'building', 'low_vegetation', 'tree', 'car', 'clutter')
ABSENT = 4  # neither labelled nor predicted anywhere: a NaN class of IoUMetric


# ----------------------------------------------------------------------------------
# Segmentation: against MMSeg's IoUMetric
# ----------------------------------------------------------------------------------
def segmentation_samples(seed, count=7, shape=(24, 32)):
    """``IoUMetric`` data samples: labels with ignored pixels, predictions that are
    right on about 60 % of the pixels; class ``ABSENT`` occurs in neither."""
    rng = np.random.default_rng(seed)
    present = [c for c in range(len(SEG_CLASSES)) if c != ABSENT]
    samples = []
    for i in range(count):
        label = rng.choice(present, size=shape, p=[0.4, 0.25, 0.2, 0.1, 0.05])
        pred = np.where(rng.random(shape) < 0.6, label, rng.choice(present, size=shape))
        label[rng.random(shape) < 0.1] = IGNORE
        if i == 1:
            label[:] = IGNORE  # an image without any valid pixel
        samples.append({'pred_sem_seg': {'data': torch.from_numpy(pred[None]).long()},
                        'gt_sem_seg': {'data': torch.from_numpy(label[None]).long()}})
    return samples


def run_iou_metric(samples, nan_to_num=None):
    """(metrics, per-image results) of ``IoUMetric`` over ``samples``."""
    from mmseg.evaluation import IoUMetric
    metric = IoUMetric(ignore_index=IGNORE, nan_to_num=nan_to_num)
    metric.dataset_meta = {'classes': SEG_CLASSES}
    metric.process(data_batch={}, data_samples=samples)
    return metric.compute_metrics(list(metric.results)), list(metric.results)


@pytest.mark.parametrize('nan_to_num', [None, 0])
def test_segmentation_matches_iou_metric(nan_to_num):
    samples = segmentation_samples(0)
    metrics, results = run_iou_metric(samples, nan_to_num)
    stats = SegmentationImageStats.from_iou_results(results, nan_to_num)
    assert stats.areas.shape == (len(samples), len(SEG_CLASSES), 3)
    recorded, value = stats.recorded_value(), stats.values()
    assert abs(recorded - plain_float(metrics['mIoU'])) <= 1e-9, (recorded, metrics)
    assert np.float32(recorded) == metrics['mIoU']
    assert value.shape == (1, ) and abs(value[0] - float(metrics['mIoU'])) <= 0.005 + 1e-6
    # the per-class IoU, unrounded, as IoUMetric computes it from the summed areas
    from mmseg.evaluation import IoUMetric
    totals = [sum(column) for column in zip(*results)]
    iou = IoUMetric.total_area_to_metrics(*totals, nan_to_num=nan_to_num)['IoU']
    np.testing.assert_allclose(stats.class_iou()[0] / 100, iou, rtol=1e-6, equal_nan=True)
    assert np.isfinite(np.delete(stats.class_iou()[0], ABSENT)).all()
    absent = stats.class_iou()[0, ABSENT]
    assert np.isnan(absent) if nan_to_num is None else absent == 0.0


def test_segmentation_weights_equal_repeated_images():
    samples = segmentation_samples(1, count=6)
    _, results = run_iou_metric(samples)
    stats = SegmentationImageStats.from_iou_results(results)
    weights = np.array([[2, 0, 1, 3, 1, 0], [1, 1, 1, 1, 1, 1], [0, 0, 4, 0, 0, 2]])
    values = stats.values(weights)
    assert values.shape == (3, )
    for row, value in zip(weights, values):
        repeated = [s for s, k in zip(samples, row) for _ in range(k)]
        metrics, repeated_results = run_iou_metric(repeated)
        assert abs(value - float(metrics['mIoU'])) <= 0.005 + 1e-6
        direct = SegmentationImageStats.from_iou_results(repeated_results)
        assert abs(value - direct.values()[0]) <= 1e-9
        assert direct.recorded_value() == plain_float(metrics['mIoU'])
        totals = stats.totals(row[None])[0]
        summed = [sum(column).numpy() for column in zip(*repeated_results)]
        np.testing.assert_array_equal(totals[:, 0], summed[0])  # intersection
        np.testing.assert_array_equal(totals[:, 1], summed[1])  # union
    np.testing.assert_allclose(values[1], stats.values()[0], rtol=0, atol=1e-12)
    # resamples are independent rows
    counts = resample_counts(stats.num_images, 25, seed=0)
    together = stats.values(counts)
    one_by_one = np.concatenate([stats.values(row[None]) for row in counts])
    np.testing.assert_allclose(together, one_by_one, rtol=0, atol=1e-12)
    assert len(np.unique(together)) > 5


@pytest.mark.parametrize('seed', [0, 1, 2, 1151, 1229, 1601])
def test_segmentation_recorded_value_at_full_size(seed):
    """Test sets of realistic size (2,016 images of 512 x 512): IoUMetric adds up the
    per-image float32 areas in float32 (their totals pass 2**24, so the sums are
    rounded), and the recorded mIoU is the rounded mean of the IoUs of those sums. The
    seeds 1151, 1229 and 1601 give sets whose mIoU from exact sums rounds to another
    hundredth than IoUMetric's."""
    from mmseg.evaluation import IoUMetric
    metric = IoUMetric(ignore_index=IGNORE)
    metric.dataset_meta = {'classes': SEG_CLASSES}
    areas = synthetic_segmentation_areas(np.random.default_rng(seed), 2016,
                                         len(SEG_CLASSES), 512 * 512)
    assert areas[..., 2].sum(0).min() > 2**24
    results = [tuple(torch.from_numpy(a.astype(np.float32)) for a in
                     (row[:, 0], row[:, 1] + row[:, 2] - row[:, 0], row[:, 1], row[:, 2]))
               for row in areas]
    expected = plain_float(metric.compute_metrics(results)['mIoU'])
    stats = SegmentationImageStats.from_iou_results(results)
    assert abs(stats.recorded_value() - expected) <= 1e-9, (stats.recorded_value(), expected)
    assert abs(stats.values()[0] - expected) <= 0.005 + 1e-3


def test_segmentation_checks_its_areas():
    with pytest.raises(ValueError, match='shape'):
        SegmentationImageStats(np.zeros((3, 2)))
    with pytest.raises(ValueError, match='intersection'):
        SegmentationImageStats(np.array([[[5, 3, 9]]]))
    with pytest.raises(ValueError, match='whole'):
        SegmentationImageStats.from_iou_results([(np.array([0.5]), np.array([1.0]),
                                                  np.array([1.0]), np.array([1.0]))])
    stats = SegmentationImageStats(np.ones((4, 2, 3), np.int64))
    with pytest.raises(ValueError, match='weights'):
        stats.values(np.ones((2, 5)))


# ----------------------------------------------------------------------------------
# Calibration: against PixelCalibrationStats
# ----------------------------------------------------------------------------------
def calibration_images(seed, count=6, classes=6, shape=(20, 16)):
    rng = np.random.default_rng(seed)
    images = []
    for i in range(count):
        logits = rng.normal(0, 2.5, size=(classes, *shape))
        label = rng.integers(0, classes, size=shape)
        logits[(label, *np.indices(shape))] += rng.uniform(0, 4, size=shape)
        probs = np.exp(logits - logits.max(0))
        probs /= probs.sum(0)
        label[rng.random(shape) < 0.1] = IGNORE
        if i == 2:
            label[:] = IGNORE  # no valid pixel
        images.append((probs, label))
    return images


def pixel_stats(images, repeats=None, num_bins=15):
    stats = PixelCalibrationStats(images[0][0].shape[0], num_bins=num_bins)
    for k, (probs, label) in zip(repeats if repeats is not None else [1] * len(images),
                                 images):
        for _ in range(int(k)):
            stats.update(probs, label, ignore_index=IGNORE)
    return stats


def calibration_image_stats(images, num_bins=15):
    bins, sums = [], []
    for probs, label in images:
        one = pixel_stats([(probs, label)], num_bins=num_bins)
        bins.append(np.stack([one.top_count, one.top_confidence_sum, one.top_correct], -1))
        sums.append([one.nll_sum, one.brier_sum])
    return CalibrationImageStats(np.stack(bins), np.array(sums))


def assert_calibration_equal(values, row, stats):
    assert abs(values['ECE'][row] - stats.expected_calibration_error()) <= 1e-12
    assert abs(values['gap'][row] - stats.calibration_gap()) <= 1e-12
    assert abs(values['NLL'][row] - stats.negative_log_likelihood()) <= 1e-12
    assert abs(values['Brier'][row] - stats.brier_score()) <= 1e-12


def test_calibration_matches_pixel_stats():
    images = calibration_images(0)
    image_stats = calibration_image_stats(images)
    assert image_stats.names == ('ECE', 'gap', 'NLL', 'Brier')
    values = image_stats.values()
    assert {k: v.shape for k, v in values.items()} == {k: (1, ) for k in image_stats.names}
    total = pixel_stats(images)
    assert_calibration_equal(values, 0, total)
    assert 0 < values['ECE'][0] < 0.5 and values['NLL'][0] > 0


def test_calibration_weights_equal_repeated_images():
    images = calibration_images(1)
    image_stats = calibration_image_stats(images)
    weights = np.array([[0, 3, 1, 0, 2, 1], [1, 0, 0, 0, 0, 0], [2, 2, 2, 2, 2, 2]])
    values = image_stats.values(weights)
    for b, row in enumerate(weights):
        assert_calibration_equal(values, b, pixel_stats(images, row))
    # doubling every image changes nothing
    for name in image_stats.names:
        assert abs(values[name][2] - image_stats.values()[name][0]) <= 1e-12
    # no image, or only the image without valid pixels: no value
    nothing = image_stats.values(np.array([[0] * 6, [0, 0, 5, 0, 0, 0]]))
    assert all(np.isnan(v).all() for v in nothing.values())


def test_detection_calibration_has_no_pixel_sums():
    rng = np.random.default_rng(3)
    counts = rng.integers(0, 20, size=(5, 10, 1)).astype(float)
    scores = counts * rng.uniform(0.05, 1, size=(5, 10, 1))
    correct = np.floor(counts * rng.uniform(0, 1, size=(5, 10, 1)))
    bins = np.concatenate([counts, scores, correct], -1)
    stats = CalibrationImageStats(bins, np.zeros((5, 0)))
    values = stats.values()
    assert stats.names == ('ECE', 'gap') and set(values) == {'ECE', 'gap'}
    total = bins.sum(0)
    ece = np.abs(total[:, 1] - total[:, 2]).sum() / total[:, 0].sum()
    assert abs(values['ECE'][0] - ece) <= 1e-12
    with pytest.raises(ValueError, match='sums'):
        CalibrationImageStats(np.zeros((5, 10, 3)), np.zeros((4, 2)))


# ----------------------------------------------------------------------------------
# Rotated detection: against MMRotate's eval_rbbox_map
# ----------------------------------------------------------------------------------
DET_CLASSES = 4
NO_GT_CLASS = 3       # detections but never a ground-truth box
NO_DET_IMAGE = 5      # ground truth but no detection
NO_GT_IMAGE = 7       # no regular ground truth (one ignored box, some detections)
IOU_THRS = (0.5, 0.75)
LOW, HIGH = [30, 30, 12, 8, -1.4], [480, 480, 70, 40, 1.4]
TIGHT = np.array([0.4, 0.4, 0.2, 0.2, 0.02])  # jitter of a detection with IoU > 0.75


def rotated_detections(seed, num_images=9, tied_scores=True):
    """``eval_rbbox_map`` inputs: jittered copies of the boxes (some loose enough to
    pass 0.5 but not 0.75), repeated detections of a box, random false positives,
    detections of ignored boxes. ``tied_scores``: scores on a 0.05 grid (equal scores
    across images); otherwise all distinct."""
    rng = np.random.default_rng(seed)
    det_results, annotations = [], []
    for i in range(num_images):
        num = 0 if i == NO_GT_IMAGE else int(rng.integers(2, 9))
        gts = rng.uniform(LOW, HIGH, size=(num, 5)).astype(np.float32)
        labels = rng.integers(0, NO_GT_CLASS, size=num)
        ignored = rng.uniform(LOW, HIGH, size=(int(rng.integers(0, 3)) + (i == NO_GT_IMAGE),
                                               5)).astype(np.float32)
        ignored_labels = rng.integers(0, NO_GT_CLASS, size=len(ignored))
        annotations.append(dict(bboxes=gts, labels=labels, bboxes_ignore=ignored,
                                labels_ignore=ignored_labels))
        scale = np.where(rng.random(num) < 0.3, 6.0, 1.0)[:, None] * TIGHT
        kept = rng.random(num) < 0.85
        boxes = [gts[kept] + rng.normal(0, 1, (int(kept.sum()), 5)) * scale[kept]]
        again = rng.random(num) < 0.2  # a second detection of the same box
        boxes.append(gts[again] + rng.normal(0, 1, (int(again.sum()), 5)) * TIGHT)
        false = int(rng.integers(1, 5))
        boxes.append(rng.uniform(LOW, HIGH, size=(false, 5)))
        false_labels = rng.integers(0, DET_CLASSES, size=false)
        boxes.append(ignored + rng.normal(0, 1, ignored.shape) * TIGHT)
        boxes = np.concatenate(boxes)
        box_labels = np.concatenate([labels[kept], labels[again], false_labels,
                                     ignored_labels])
        per_class = []
        for c in range(DET_CLASSES):
            chosen = boxes[box_labels == c]
            scores = rng.uniform(0.05, 1.0, len(chosen))
            scores = np.round(scores * 20) / 20 if tied_scores else scores
            dets = np.concatenate([chosen, scores[:, None]], axis=1).astype(np.float32)
            per_class.append(dets if i != NO_DET_IMAGE else np.zeros((0, 6), np.float32))
        det_results.append(per_class)
    return det_results, annotations


def mmrotate_tpfp(det_results, annotations, iou_thrs):
    """``per_threshold[t][c][i] = (dets, num_gts, tp, fp)`` from MMRotate's own
    ``tpfp_default``, called with the arguments ``eval_rbbox_map`` gives it."""
    from mmrotate.evaluation.functional.mean_ap import get_cls_results, tpfp_default
    per_threshold = []
    for iou_thr in iou_thrs:
        per_class = []
        for c in range(len(det_results[0])):
            dets, gts, ignored = get_cls_results(det_results, annotations, c, 'rbox')
            per_class.append([(d, len(g), *tpfp_default(d, g, ig, iou_thr, 'rbox', None))
                              for d, g, ig in zip(dets, gts, ignored)])
        per_threshold.append(per_class)
    return per_threshold


def mmrotate_map(det_results, annotations, eval_mode, iou_thrs=IOU_THRS):
    """(mAP averaged over the thresholds as DOTAMetric does, per-threshold per-class
    results of ``eval_rbbox_map``)."""
    from mmrotate.evaluation.functional import eval_rbbox_map
    maps, per_class = [], []
    with in_process_rbbox_map():
        for iou_thr in iou_thrs:
            mean_ap, results = eval_rbbox_map(det_results, annotations, iou_thr=iou_thr,
                                              use_07_metric=eval_mode == '11points',
                                              box_type='rbox', logger='silent', nproc=1)
            maps.append(mean_ap)
            per_class.append(results)
    return sum(maps) / len(maps), per_class


@pytest.fixture(scope='module', params=[(0, 9), (2, 40)], ids=['9-images', '40-images'])
def tied_detections(request):
    seed, num_images = request.param
    det_results, annotations = rotated_detections(seed, num_images)
    return det_results, annotations, mmrotate_tpfp(det_results, annotations, IOU_THRS)


@pytest.mark.parametrize('eval_mode', ['11points', 'area'])
def test_detection_matches_eval_rbbox_map(tied_detections, eval_mode):
    det_results, annotations, per_threshold = tied_detections
    stats = DetectionImageStats.from_tpfp(per_threshold, IOU_THRS, eval_mode)
    assert stats.num_images == len(det_results) and stats.num_classes == DET_CLASSES
    assert stats.num_gts[:, NO_GT_CLASS].sum() == 0 == stats.num_gts[NO_GT_IMAGE].sum()
    assert not np.any(stats.image == NO_DET_IMAGE)
    assert len(np.unique(stats.score)) < len(stats.score)  # ties across images
    assert {0, 1, 2} <= set(np.unique(stats.state).tolist())  # FP, TP and ignored
    assert not np.array_equal(stats.state[0], stats.state[1])  # the thresholds differ
    expected, per_class = mmrotate_map(det_results, annotations, eval_mode)
    got = stats.mean_ap()
    assert got.shape == (1, )
    assert abs(got[0] - expected) <= 1e-9, (got[0], expected)
    assert abs(stats.recorded_value() - expected) <= 1e-9
    assert abs(stats.values()[0] - 100 * expected) <= 1e-7
    assert 0.2 < expected < 0.95
    for t in range(len(IOU_THRS)):
        aps, gts = stats.class_ap(None, t)
        for c, result in enumerate(per_class[t]):
            assert gts[0, c] == result['num_gts']
            if result['num_gts'] > 0:
                assert aps[0, c] == np.float32(result['ap']), (t, c)


@pytest.mark.parametrize('eval_mode', ['11points', 'area'])
def test_detection_weights_equal_repeated_images(eval_mode):
    det_results, annotations = rotated_detections(1, tied_scores=False)
    per_threshold = mmrotate_tpfp(det_results, annotations, IOU_THRS)
    stats = DetectionImageStats.from_tpfp(per_threshold, IOU_THRS, eval_mode)
    assert len(np.unique(stats.score)) == len(stats.score)
    weights = np.array([[1, 1, 1, 1, 1, 1, 1, 1, 1],
                        [2, 0, 1, 3, 1, 0, 2, 1, 0],
                        [0, 0, 0, 4, 0, 1, 0, 1, 0],
                        [0, 0, 0, 0, 0, 2, 0, 3, 0]])  # no detection or no ground truth
    got = stats.mean_ap(weights)
    assert got.shape == (len(weights), )
    for row, value in zip(weights, got):
        repeated = [i for i, k in enumerate(row) for _ in range(k)]
        expected, _ = mmrotate_map([det_results[i] for i in repeated],
                                   [annotations[i] for i in repeated], eval_mode)
        assert abs(value - expected) <= 1e-6, (row, value, expected)
    assert abs(got[0] - stats.mean_ap()[0]) <= 1e-12
    assert got[3] == 0.0  # the set has ground truth but none of it is detected


def test_detection_resamples_are_independent_rows(tied_detections):
    _, _, per_threshold = tied_detections
    stats = DetectionImageStats.from_tpfp(per_threshold, IOU_THRS, 'area')
    counts = resample_counts(stats.num_images, 30, seed=1)
    together = stats.values(counts)
    one_by_one = np.concatenate([stats.values(row[None]) for row in counts])
    np.testing.assert_allclose(together, one_by_one, rtol=0, atol=1e-9)
    assert len(np.unique(together)) > 5
    with pytest.raises(ValueError, match='whole numbers'):
        stats.values(np.full((1, stats.num_images), 0.5))


def test_detection_thresholds_must_agree(tied_detections):
    _, _, per_threshold = tied_detections
    broken = [per_threshold[0], [list(column) for column in per_threshold[1]]]
    dets, num_gts, tp, fp = broken[1][0][0]
    broken[1][0][0] = (dets, num_gts + 1, tp, fp)
    with pytest.raises(ValueError, match='other detections or ground truth'):
        DetectionImageStats.from_tpfp(broken, IOU_THRS)
    with pytest.raises(ValueError, match='eval_mode'):
        DetectionImageStats.from_tpfp(per_threshold, IOU_THRS, 'voc12')


# ----------------------------------------------------------------------------------
# The statistics file
# ----------------------------------------------------------------------------------
def synthetic_segmentation_areas(rng, num_images, num_classes, pixels):
    """``(N, C, 3)`` plausible areas: class shares per image, 70-95 % of the labelled
    pixels predicted right, the rest spread over the other classes."""
    share = rng.dirichlet(np.full(num_classes, 0.7), size=num_images)
    label = rng.multinomial(pixels, share)
    intersection = rng.binomial(label, rng.uniform(0.7, 0.95, size=label.shape))
    missed = label - intersection
    pred = intersection + rng.multinomial(missed.sum(1), np.full(num_classes, 1 / num_classes))
    pred = np.maximum(pred, intersection)
    return np.stack([intersection, pred, label], axis=-1)


def synthetic_calibration(rng, num_images, num_bins, pixels, with_sums=True):
    centres = (np.arange(num_bins) + 0.5) / num_bins
    weights = np.where(centres > 1 / 6, np.exp(6 * centres), 0.0)
    count = rng.multinomial(pixels, weights / weights.sum(), size=num_images).astype(float)
    confidence = count * (centres + rng.uniform(-0.3, 0.3, count.shape) / num_bins)
    correct = rng.binomial(count.astype(np.int64), np.clip(centres - 0.05, 0, 1))
    bins = np.stack([count, confidence, correct.astype(float)], axis=-1)
    sums = np.stack([rng.gamma(4, 0.1, num_images) * pixels,
                     rng.gamma(4, 0.05, num_images) * pixels], -1) if with_sums \
        else np.zeros((num_images, 0))
    return CalibrationImageStats(bins, sums)


def synthetic_detection_stats(rng, num_images, num_classes, per_image, iou_thrs=(0.5, ),
                              eval_mode='11points'):
    counts = rng.poisson(per_image, num_images)
    image = np.repeat(np.arange(num_images), counts)
    label = rng.integers(0, num_classes, len(image))
    order = np.lexsort((image, label))
    image, label = image[order], label[order]
    state = rng.choice([0, 1, 2], p=[0.35, 0.6, 0.05], size=(len(iou_thrs), len(image)))
    num_gts = np.zeros((num_images, num_classes), np.int64)
    np.add.at(num_gts, (image, label), 1)
    offsets = np.concatenate([[0], np.cumsum(np.bincount(label, minlength=num_classes))])
    return DetectionImageStats(num_gts, offsets, image, rng.random(len(image)), state,
                               iou_thrs, eval_mode)


def segmentation_image_stats(rng, num_images=12):
    return ImageStats(tuple(f'tile_{i:04d}.png' for i in range(num_images)),
                      SegmentationImageStats(synthetic_segmentation_areas(
                          rng, num_images, 6, 64 * 64), nan_to_num=0.0),
                      {'calib': synthetic_calibration(rng, num_images, 15, 64 * 64),
                       'calib_ts': synthetic_calibration(rng, num_images, 15, 64 * 64)})


def test_round_trip_segmentation_with_calibration():
    stats = segmentation_image_stats(np.random.default_rng(0))
    back = ImageStats.from_bytes(stats.to_bytes())
    assert back.image_ids == stats.image_ids and back.task.nan_to_num == 0.0
    assert isinstance(back.task, SegmentationImageStats)
    np.testing.assert_array_equal(back.task.areas, stats.task.areas)
    assert back.task.areas.dtype == stats.task.areas.dtype
    assert sorted(back.calibration) == ['calib', 'calib_ts']
    for prefix, calibration in stats.calibration.items():
        np.testing.assert_array_equal(back.calibration[prefix].bins, calibration.bins)
        np.testing.assert_array_equal(back.calibration[prefix].sums, calibration.sums)
    weights = resample_counts(stats.num_images, 5, seed=0)
    np.testing.assert_array_equal(back.task.values(weights), stats.task.values(weights))
    assert back.task.recorded_value() == stats.task.recorded_value()
    with np.load(io.BytesIO(stats.to_bytes())) as npz:  # named, and no pickled objects
        assert str(npz['format']) == IMAGE_STATS_FORMAT
        assert not any(npz[k].dtype == object for k in npz.files)


@pytest.mark.parametrize('eval_mode', ['11points', 'area'])
def test_round_trip_detection(eval_mode):
    rng = np.random.default_rng(1)
    task = synthetic_detection_stats(rng, 15, 5, 8, (0.5, 0.75), eval_mode)
    stats = ImageStats(tuple(f'P{i:04d}__1024__0___0.png' for i in range(15)), task,
                       {'calib': synthetic_calibration(rng, 15, 10, 30, with_sums=False)})
    back = ImageStats.from_bytes(stats.to_bytes())
    assert back.image_ids == stats.image_ids and isinstance(back.task, DetectionImageStats)
    for name, array in task.to_arrays().items():
        np.testing.assert_array_equal(back.task.to_arrays()[name], array)
    assert back.task.iou_thrs == (0.5, 0.75) and back.task.eval_mode == eval_mode
    assert back.calibration['calib'].names == ('ECE', 'gap')
    weights = resample_counts(15, 4, seed=2)
    np.testing.assert_array_equal(back.task.values(weights), task.values(weights))


def test_damaged_files_are_refused():
    data = segmentation_image_stats(np.random.default_rng(2)).to_bytes()
    with pytest.raises(ValueError, match='not a per-image statistics file'):
        ImageStats.from_bytes(b'not a zip file at all')
    with pytest.raises(ValueError, match='not a per-image statistics file'):
        ImageStats.from_bytes(data[:len(data) // 2])
    flipped = bytearray(data)
    middle = len(flipped) // 3
    flipped[middle:middle + 8] = bytes(255 - b for b in flipped[middle:middle + 8])
    with pytest.raises(ValueError, match='not a per-image statistics file'):
        ImageStats.from_bytes(bytes(flipped))


def rewritten(data, **changes):
    """The file ``data`` with some entries replaced (None: removed)."""
    with np.load(io.BytesIO(data)) as npz:
        arrays = {k: npz[k] for k in npz.files}
    for key, value in changes.items():
        arrays.pop(key.replace('__', '.'))
        if value is not None:
            arrays[key.replace('__', '.')] = np.asarray(value)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue()


def test_other_files_are_refused_naming_the_problem():
    data = segmentation_image_stats(np.random.default_rng(3)).to_bytes()
    with pytest.raises(ValueError, match='format'):
        ImageStats.from_bytes(rewritten(data, format='reobench_mm.image_stats/0'))
    with pytest.raises(ValueError, match='format'):
        ImageStats.from_bytes(rewritten(data, format=None))
    with pytest.raises(ValueError, match='instance_segmentation'):
        ImageStats.from_bytes(rewritten(data, task='instance_segmentation'))
    with pytest.raises(ValueError, match='images'):
        ImageStats.from_bytes(rewritten(data, image_ids=np.array(['a', 'b'])))
    # a zip of other content, and an entry that would need a pickle
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, 'w') as archive:
        archive.writestr('readme.txt', 'hello')
    with pytest.raises(ValueError):
        ImageStats.from_bytes(buffer.getvalue())
    with pytest.raises(ValueError):
        ImageStats.from_bytes(rewritten(data, task__areas=np.array([{'a': 1}], dtype=object)))


def test_mismatched_image_counts_are_refused():
    rng = np.random.default_rng(4)
    task = SegmentationImageStats(synthetic_segmentation_areas(rng, 5, 6, 100))
    with pytest.raises(ValueError, match='4 image ids but 5 images in the task'):
        ImageStats(('a', 'b', 'c', 'd'), task)
    with pytest.raises(ValueError, match='calib'):
        ImageStats(tuple('abcde'), task, {'calib': synthetic_calibration(rng, 6, 15, 100)})
    with pytest.raises(ValueError, match='unique'):
        ImageStats(('a', 'b', 'c', 'd', 'a'), task)
    with pytest.raises(ValueError, match='dot'):
        ImageStats(tuple('abcde'), task,
                   {'calib.ts': synthetic_calibration(rng, 5, 15, 100)}).to_bytes()


def test_bytes_per_image():
    """Size of the statistics file of a full condition: 2,016 segmentation images (6
    classes, 512 x 512, 15 calibration bins) and 2,016 detection images (20 classes,
    about 30 objects and detections each)."""
    rng = np.random.default_rng(5)
    n = 2016
    ids = tuple(f'top_potsdam_{i // 36:02d}_{i % 36:02d}_RGB.png' for i in range(n))
    seg = ImageStats(ids, SegmentationImageStats(synthetic_segmentation_areas(
        rng, n, 6, 512 * 512)), {'calib': synthetic_calibration(rng, n, 15, 512 * 512)})
    seg_only = ImageStats(ids, seg.task)
    det = ImageStats(tuple(f'{i:05d}.jpg' for i in range(n)),
                     synthetic_detection_stats(rng, n, 20, 30),
                     {'calib': synthetic_calibration(rng, n, 10, 30, with_sums=False)})
    sizes = {'segmentation + calibration': len(seg.to_bytes()) / n,
             'segmentation alone': len(seg_only.to_bytes()) / n,
             'detection + calibration': len(det.to_bytes()) / n}
    for name, size in sizes.items():
        print(f'bytes per image, {name}: {size:.0f}')
    assert sizes['segmentation + calibration'] < 1000
    assert sizes['segmentation alone'] < sizes['segmentation + calibration']
    assert sizes['detection + calibration'] < 2000
    assert ImageStats.from_bytes(det.to_bytes()).task.num_images == n



def test_metrics_over_a_subset_of_the_classes():
    """The like-for-like numbers of a shift set that can hold only some classes: mIoU and
    mAP over those classes equal the mean of the per-class values over them (classes
    without ground truth left out of the mAP, as DOTAMetric does), and the detections of
    the other classes are counted."""
    rng = np.random.default_rng(3)
    seg = SegmentationImageStats(synthetic_segmentation_areas(rng, 9, 6, 32 * 32))
    weights = resample_counts(9, 4, seed=2)
    iou = seg.class_iou(weights)
    np.testing.assert_allclose(seg.values(weights, classes=[0, 2, 5]),
                               np.nanmean(iou[:, [0, 2, 5]], axis=1))
    np.testing.assert_allclose(seg.values(weights), np.nanmean(iou, axis=1))
    det = synthetic_detection_stats(rng, 12, 5, 6)
    aps, gts = det.class_ap()
    subset = [1, 3, 4]
    keep = [c for c in subset if gts[0, c] > 0]
    assert det.values(classes=subset)[0] == pytest.approx(100 * aps[0, keep].mean(),
                                                          rel=1e-6)
    counts = np.diff(det.class_offsets)
    assert det.detections_outside(subset) == counts[0] + counts[2]
