"""Time of the bootstrap intervals of a sweep, single-threaded, on synthetic statistics.

    python benchmarks/bootstrap_intervals.py [--images 2016] [--conditions 61]
        [--resamples 1000] [--repeats 3] [--objects 30] [--eval-mode 11points]
        [--smallest]

One set of ``--resamples`` count rows of ``--images`` images
(:func:`~reobench_mm.evaluation.functional.bootstrap.resample_counts`) is shared by
``--conditions`` conditions, and each condition's metric is computed on every row:

- segmentation: mIoU of 6 classes from per-image areas of 512 x 512 images
  (``SegmentationImageStats.values``); target <= 10 s for all conditions;
- rotated detection: mAP of 20 classes, about ``--objects`` objects and as many
  detections per image, IoU threshold 0.5 (``DetectionImageStats.values``); target
  <= 60 s for all conditions.

The median of ``--repeats`` runs is printed with its ratio to the target (the targets
are for the default sizes). Beside it, a baseline measured in the same run: the
straightforward per-resample loop (segmentation: gather the drawn images' areas and sum
them; detection: repeat the drawn detections, sort them by score and call MMDetection's
``average_precision`` per class, as MMRotate does for the whole set), timed on a few
resamples of one condition and scaled to all resamples and conditions. ``--smallest``
runs tiny sizes (a check that the script works, not a measurement).
"""
import os

for _name in ('OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS', 'MKL_NUM_THREADS'):
    os.environ[_name] = '1'

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from reobench_mm.evaluation.functional.bootstrap import resample_counts  # noqa: E402
from reobench_mm.evaluation.functional.detection_ap import (FP, IGNORED, TP,  # noqa: E402
                                                            DetectionImageStats)
from reobench_mm.evaluation.functional.image_stats import SegmentationImageStats  # noqa: E402

TARGET_SEG_S, TARGET_DET_S = 10.0, 60.0
SEG_CLASSES, DET_CLASSES, PIXELS = 6, 20, 512 * 512
SMALLEST = dict(images=40, conditions=2, resamples=10, repeats=1, objects=5)


def segmentation_stats(rng, num_images: int) -> SegmentationImageStats:
    """Per-image areas: class shares per image, 60-95 % of the labelled pixels right."""
    share = rng.dirichlet(np.full(SEG_CLASSES, 0.7), size=num_images)
    label = rng.multinomial(PIXELS, share)
    intersection = rng.binomial(label, rng.uniform(0.6, 0.95, size=label.shape))
    pred = intersection + rng.multinomial((label - intersection).sum(1),
                                          np.full(SEG_CLASSES, 1 / SEG_CLASSES))
    return SegmentationImageStats(np.stack([intersection, pred, label], axis=-1))


def detection_stats(rng, num_images: int, objects: int, eval_mode: str
                    ) -> DetectionImageStats:
    """About ``objects`` boxes per image (classes of uneven frequency), 80 % of them
    detected, a few detected twice, false positives, 2 % of the boxes ignored."""
    class_share = rng.dirichlet(np.full(DET_CLASSES, 0.8))
    per_image = rng.poisson(objects, num_images)
    image = np.repeat(np.arange(num_images), per_image)
    label = rng.choice(DET_CLASSES, size=len(image), p=class_share)
    ignored = rng.random(len(image)) < 0.02
    num_gts = np.zeros((num_images, DET_CLASSES), np.int64)
    np.add.at(num_gts, (image[~ignored], label[~ignored]), 1)
    found = rng.random(len(image)) < 0.8
    twice = found & (rng.random(len(image)) < 0.05)
    false = rng.poisson(objects * 0.25, num_images)
    false_image = np.repeat(np.arange(num_images), false)
    det_image = np.concatenate([image[found], image[twice], false_image])
    det_label = np.concatenate([label[found], label[twice],
                                rng.choice(DET_CLASSES, size=len(false_image), p=class_share)])
    det_state = np.concatenate([np.where(ignored[found], IGNORED, TP),
                                np.where(ignored[twice], IGNORED, FP),
                                np.full(len(false_image), FP)])
    det_score = np.concatenate([rng.beta(5, 2, int(found.sum())),
                                rng.beta(3, 3, int(twice.sum())),
                                rng.beta(2, 5, len(false_image))])
    order = np.lexsort((det_image, det_label))  # by class, then image
    offsets = np.concatenate([[0], np.cumsum(np.bincount(det_label, minlength=DET_CLASSES))])
    return DetectionImageStats(num_gts, offsets, det_image[order], det_score[order],
                               det_state[order][None], (0.5, ), eval_mode)


def median_seconds(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def naive_segmentation(stats: SegmentationImageStats, counts: np.ndarray) -> np.ndarray:
    """mIoU per resample by gathering the drawn images' areas (one resample at a time)."""
    areas = stats.areas.astype(np.int64)
    images = np.arange(stats.num_images)
    out = []
    for row in counts:
        total = areas[np.repeat(images, row)].sum(axis=0)
        union = total[:, 1] + total[:, 2] - total[:, 0]
        with np.errstate(invalid='ignore', divide='ignore'):
            out.append(np.nanmean(total[:, 0] / union) * 100)
    return np.array(out)


def naive_detection(stats: DetectionImageStats, counts: np.ndarray) -> np.ndarray:
    """mAP per resample as MMRotate computes it for a set: the drawn images' detections
    repeated, sorted by score, cumulative TP/FP and ``average_precision`` per class."""
    from mmdet.evaluation.functional import average_precision
    eps = np.finfo(np.float32).eps
    out = []
    for row in counts:
        aps = []
        for c in range(stats.num_classes):
            gts = int(row @ stats.num_gts[:, c].astype(np.int64))
            if gts == 0:
                continue
            block = slice(stats.class_offsets[c], stats.class_offsets[c + 1])
            repeats = row[stats.image[block].astype(np.int64)]
            score = np.repeat(stats.score[block], repeats)
            state = np.repeat(stats.state[0, block], repeats)
            order = np.argsort(-score)
            tp = np.cumsum((state[order] == TP).astype(np.float32))
            fp = np.cumsum((state[order] == FP).astype(np.float32))
            recall = tp / np.maximum(np.int64(gts), eps)  # float64, as MMRotate's
            precision = tp / np.maximum(tp + fp, eps)
            aps.append(average_precision(recall, precision, stats.eval_mode))
        out.append(np.array(aps).mean().item() * 100 if aps else 0.0)
    return np.array(out)


def report(name, seconds, target, baseline, args):
    ratio = seconds / target
    verdict = ('PASS' if ratio <= 1 else 'FAIL') if not args.smallest else 'n/a (--smallest)'
    print(f'{name}: median {seconds:.2f} s for {args.resamples} resamples x {args.images} '
          f'images x {args.conditions} conditions -> {ratio:.2f}x of the {target:.0f} s '
          f'target ({verdict}); per-resample loop ~{baseline:.1f} s '
          f'({baseline / seconds:.0f}x slower)')


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--images', type=int, default=2016)
    parser.add_argument('--conditions', type=int, default=61)
    parser.add_argument('--resamples', type=int, default=1000)
    parser.add_argument('--repeats', type=int, default=3)
    parser.add_argument('--objects', type=int, default=30,
                        help='objects (and about as many detections) per image')
    parser.add_argument('--eval-mode', default='11points', choices=['11points', 'area'])
    parser.add_argument('--baseline-resamples', type=int, default=None,
                        help='resamples the per-resample loops are timed on (default: '
                             '20 for segmentation, 3 for detection)')
    parser.add_argument('--smallest', action='store_true',
                        help='tiny sizes: check that the script runs')
    args = parser.parse_args(argv)
    if args.smallest:
        for key, value in SMALLEST.items():
            setattr(args, key, value)

    rng = np.random.default_rng(0)
    start = time.perf_counter()
    counts = resample_counts(args.images, args.resamples, seed=0)
    counts_s = time.perf_counter() - start
    print(f'resample_counts({args.images}, {args.resamples}): {counts_s:.2f} s (once, shared '
          f'by every condition)')

    seg = [segmentation_stats(rng, args.images) for _ in range(args.conditions)]
    seg_s = median_seconds(lambda: [s.values(counts) for s in seg], args.repeats)
    k = min(args.resamples, args.baseline_resamples or 20)
    start = time.perf_counter()
    naive = naive_segmentation(seg[0], counts[:k])
    seg_naive = (time.perf_counter() - start) / k * args.resamples * args.conditions
    np.testing.assert_allclose(naive, seg[0].values(counts[:k]), rtol=1e-9)

    det = [detection_stats(rng, args.images, args.objects, args.eval_mode)
           for _ in range(args.conditions)]
    detections = np.mean([len(d.score) for d in det]) / args.images
    objects = np.mean([d.num_gts.sum() for d in det]) / args.images
    det_s = median_seconds(lambda: [d.values(counts) for d in det], args.repeats)
    k = min(args.resamples, args.baseline_resamples or 3)
    start = time.perf_counter()
    naive = naive_detection(det[0], counts[:k])
    det_naive = (time.perf_counter() - start) / k * args.resamples * args.conditions
    np.testing.assert_allclose(naive, det[0].values(counts[:k]), rtol=1e-5, atol=1e-5)

    print(f'(medians of {args.repeats} runs; one thread; detection: {objects:.1f} objects and '
          f'{detections:.1f} detections per image, {DET_CLASSES} classes, '
          f'{args.eval_mode})')
    report(f'segmentation mIoU ({SEG_CLASSES} classes)', seg_s, TARGET_SEG_S, seg_naive, args)
    report(f'rotated detection mAP ({DET_CLASSES} classes)', det_s, TARGET_DET_S, det_naive,
           args)


if __name__ == '__main__':
    main()
