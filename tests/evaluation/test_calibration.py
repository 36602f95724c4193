"""Pixel calibration / selective-prediction metrics against direct numpy computations
over all pixels."""
import itertools
import json
import math
import os
import os.path as osp
import time
import tracemalloc

import numpy as np
import pytest
import torch
from mmengine.runner import Runner

import reobench_mm  # noqa: F401  (registration)
from calibration_reference import reference_mce, whole_bin_adaptive_ece
from helpers import SEG_DEMO_CONFIG, demo_config, free_port
from reobench_mm.analysis.plotting import plot_reliability_diagrams
from reobench_mm.evaluation.functional.calibration import NLL_EPSILON, PixelCalibrationStats
from reobench_mm.evaluation.keys import CALIBRATION_METRICS as METRIC_KEYS
from reobench_mm.evaluation.metrics.seg_calibration import SegCalibrationMetric

IGNORE = 255


# ----------------------------------------------------------------------------------
# Direct reference computations (plain numpy over every valid pixel)
# ----------------------------------------------------------------------------------
def softmax(logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    z = logits.astype(np.float64) / temperature
    z = z - z.max(axis=0, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=0, keepdims=True)


def right_closed_bins(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Bin b holds edges[b] < v <= edges[b + 1]; 0 in the first bin."""
    return np.clip(np.digitize(values, edges, right=True) - 1, 0, len(edges) - 2)


def expected_cumulative_errors(keys: np.ndarray, errors: np.ndarray) -> np.ndarray:
    """Pixels ranked by decreasing key; among equal keys every order is equally likely.
    Returns E[#errors among the top i] for i = 1..n."""
    order = np.argsort(-keys, kind='stable')
    keys, errors = keys[order], errors[order].astype(np.float64)
    expected = np.empty(len(keys))
    before = 0.0
    start = 0
    while start < len(keys):
        stop = start
        while stop < len(keys) and keys[stop] == keys[start]:
            stop += 1
        rate = errors[start:stop].mean()
        expected[start:stop] = before + rate * np.arange(1, stop - start + 1)
        before += errors[start:stop].sum()
        start = stop
    return expected


def reference_metrics(probs: np.ndarray, labels: np.ndarray, num_bins: int = 15,
                      selective_bins: int = 1000) -> dict:
    """Every metric from all valid pixels: probs (C, N), labels (N,)."""
    valid = labels != IGNORE
    p, y = probs[:, valid].astype(np.float64), labels[valid]
    num_classes, n = p.shape
    pred = np.argmax(p, axis=0)
    conf = p.max(axis=0)
    correct = (pred == y).astype(np.float64)
    edges = np.linspace(0, 1, num_bins + 1)
    top_bin = right_closed_bins(conf, edges)
    ece, counts, mean_conf, acc = 0.0, [], [], []
    for b in range(num_bins):
        in_bin = top_bin == b
        counts.append(int(in_bin.sum()))
        if in_bin.any():
            mean_conf.append(conf[in_bin].mean())
            acc.append(correct[in_bin].mean())
            ece += in_bin.sum() / n * abs(conf[in_bin].mean() - correct[in_bin].mean())
        else:
            mean_conf.append(None)
            acc.append(None)
    one_hot = np.eye(num_classes)[:, y]
    p_true = p[y, np.arange(n)]
    per_class = []
    for k in range(num_classes):
        if not (y == k).any():
            per_class.append(math.nan)
            continue
        class_bin = right_closed_bins(p[k], edges)
        error = 0.0
        for b in range(num_bins):
            in_bin = class_bin == b
            if in_bin.any():
                error += in_bin.sum() / n * abs(p[k][in_bin].mean() - (y[in_bin] == k).mean())
        per_class.append(error)
    fine = right_closed_bins(conf, np.linspace(0, 1, selective_bins + 1))
    fine[conf == 1.0] = selective_bins
    ranks = np.arange(1, n + 1)
    errors = 1.0 - correct
    quantised = expected_cumulative_errors(fine.astype(np.float64), errors)
    raw = expected_cumulative_errors(conf, errors)
    oracle = np.cumsum(np.sort(errors))  # correct pixels first, errors last
    keep = -(-9 * n // 10)  # ceil(0.9 n)
    # risk-coverage points at the end of each fine bin (most confident first)
    order = np.argsort(-fine, kind='stable')
    sorted_fine = fine[order]
    ends = np.flatnonzero(np.append(sorted_fine[1:] != sorted_fine[:-1], True))
    cum_errors = np.cumsum(errors[order])
    aurc = np.mean(quantised / ranks)
    # worst case over the orders inside each regular fine bin of |E(i) - E[E(i)]| / i
    bound = 0.0
    for start, stop in zip(np.append(0, ends[:-1] + 1), ends + 1):
        if sorted_fine[start] == selective_bins:
            continue
        size, errs = stop - start, errors[order][start:stop].sum()
        for t in range(1, size + 1):
            bound += min(t, size - t, errs, size - errs) / (start + t)
    class_mce = [reference_mce(p[k], (y == k).astype(float), num_bins)
                 if (y == k).any() else math.nan for k in range(num_classes)]
    adaptive, adaptive_bound, _ = whole_bin_adaptive_ece(conf, correct, selective_bins,
                                                         num_bins)
    return {
        'ECE': ece,
        'aECE': adaptive,
        'MCE': reference_mce(conf, correct, num_bins),
        'gap': conf.mean() - correct.mean(),
        'NLL': np.mean(-np.log(np.maximum(p_true, NLL_EPSILON))),
        'Brier': np.mean(np.sum((p - one_hot) ** 2, axis=0)),
        'cwECE': np.nanmean(per_class),
        'AURC': aurc,
        'eAURC': aurc - np.mean(oracle / ranks),
        'acc@90cov': 1.0 - quantised[keep - 1] / keep,
        # extras
        'per_class': per_class,
        'per_class_mce': class_mce,
        'aECE_bound': adaptive_bound,
        'reliability': dict(count=counts, mean_confidence=mean_conf, accuracy=acc),
        'AURC_raw': np.mean(raw / ranks),
        'acc@90cov_raw': 1.0 - raw[keep - 1] / keep,
        'curve_coverage': (ends + 1) / n,
        'curve_risk': cum_errors[ends] / (ends + 1),
        'num_exact_one': int((conf == 1.0).sum()),
        'quantisation_bound': bound / n,
        'num_pixels': n,
    }


def assert_metrics_equal(got: dict, want: dict, rel: float = 1e-10) -> None:
    for key in METRIC_KEYS:
        assert got[key] == pytest.approx(want[key], rel=rel, abs=1e-13), key


def make_pixels(rng: np.random.Generator, num_classes: int, num_pixels: int):
    """Logits with a learnable signal, ~10 % ignored pixels and ~5 % saturated pixels
    (one logit +1000: probability exactly 1.0, some of them wrong)."""
    labels = rng.integers(0, num_classes, num_pixels)
    logits = rng.normal(size=(num_classes, num_pixels)) * rng.uniform(0.3, 4.0, num_pixels)
    logits[labels, np.arange(num_pixels)] += rng.uniform(0, 3, num_pixels)
    saturated = rng.random(num_pixels) < 0.05
    logits[rng.integers(0, num_classes, num_pixels)[saturated], np.flatnonzero(saturated)] = 1000
    labels[rng.random(num_pixels) < 0.1] = IGNORE
    return logits, labels


# ----------------------------------------------------------------------------------
# The accumulator against the reference
# ----------------------------------------------------------------------------------
@pytest.mark.parametrize('num_classes', [2, 3, 6, 11])
def test_stats_match_direct_computation(num_classes):
    rng = np.random.default_rng(num_classes)
    logits, labels = make_pixels(rng, num_classes, 24000)
    probs = softmax(logits)
    ref = reference_metrics(probs, labels, selective_bins=1000)
    assert ref['num_exact_one'] > 100  # saturated pixels are really exactly 1.0

    stats = PixelCalibrationStats(num_classes, num_bins=15, selective_bins=1000)
    # three batches: (C, H, W) numpy, (C, N) torch float64, (C, N) numpy
    stats.update(probs[:, :10000].reshape(num_classes, 100, 100), labels[:10000].reshape(100, 100))
    stats.update(torch.from_numpy(probs[:, 10000:20000]), torch.from_numpy(labels[10000:20000]))
    stats.update(probs[:, 20000:], labels[20000:], ignore_index=IGNORE)
    assert stats.num_pixels == ref['num_pixels']
    assert stats.selective_count[-1] == ref['num_exact_one']
    assert_metrics_equal(stats.summary(), ref)

    np.testing.assert_allclose(stats.classwise_calibration_errors(), ref['per_class'],
                               rtol=1e-10)
    np.testing.assert_allclose(stats.classwise_maximum_calibration_errors(),
                               ref['per_class_mce'], rtol=1e-10)
    assert stats.adaptive_calibration().bound == pytest.approx(ref['aECE_bound'], rel=1e-9)
    reliability = stats.reliability_diagram()
    assert reliability['bin_edges'] == np.linspace(0, 1, 16).tolist()
    assert reliability['count'] == ref['reliability']['count']
    for key in ('mean_confidence', 'accuracy'):
        for got, want in zip(reliability[key], ref['reliability'][key]):
            assert (got is None) == (want is None)
            if want is not None:
                assert got == pytest.approx(want, rel=1e-12)
    assert reliability['ECE'] == pytest.approx(ref['ECE'], rel=1e-10)

    curve = stats.risk_coverage_curve()
    np.testing.assert_allclose(curve['coverage'], ref['curve_coverage'], rtol=1e-13)
    np.testing.assert_allclose(curve['risk'], ref['curve_risk'], rtol=1e-12)
    short = stats.risk_coverage_curve(max_points=201)
    assert 2 <= len(short['coverage']) <= 201 and short['coverage'][-1] == 1.0
    assert set(short['coverage']) <= set(curve['coverage'])

    # quantised vs unquantised (sort by the raw confidence): within the worst-case bound
    # (checked against a plain loop), and in fact below the bin width 1 / 1000
    bound = stats.aurc_quantisation_bound()
    assert bound == pytest.approx(ref['quantisation_bound'], rel=1e-9)
    error = abs(stats.aurc() - ref['AURC_raw'])
    print(f'C={num_classes}: AURC {stats.aurc():.6f} raw {ref["AURC_raw"]:.6f} '
          f'|diff| {error:.2e} bound {bound:.2e}')
    assert error <= bound + 1e-12
    assert error < 1.0 / 1000
    assert abs(stats.accuracy_at_coverage(0.9) - ref['acc@90cov_raw']) < 1e-3
    assert stats.excess_aurc() >= 0


def test_finer_bins_shrink_the_quantisation_error():
    rng = np.random.default_rng(7)
    logits, labels = make_pixels(rng, 6, 20000)
    probs = softmax(logits)
    raw = reference_metrics(probs, labels)['AURC_raw']
    bounds = []
    for bins in (50, 500, 5000):
        stats = PixelCalibrationStats(6, selective_bins=bins).update(probs, labels)
        bounds.append(stats.aurc_quantisation_bound())
        assert abs(stats.aurc() - raw) <= bounds[-1] + 1e-12
    assert bounds[0] > bounds[1] > bounds[2]
    assert bounds[2] < 1.0 / 500


def test_tie_handling_is_the_mean_over_all_orders():
    """Few pixels, coarse fine bins: AURC and acc@cov equal the average over every
    ranking that respects the bins (exhaustive enumeration)."""
    probs = np.array([[0.9, 0.85, 0.7, 0.65, 0.6, 1.0, 0.95],
                      [0.1, 0.15, 0.3, 0.35, 0.4, 0.0, 0.05]])
    labels = np.array([0, 1, 0, 1, 1, 1, 0])
    stats = PixelCalibrationStats(2, selective_bins=4).update(probs, labels)
    conf, errors = probs.max(0), (probs.argmax(0) != labels).astype(float)
    fine = np.where(conf == 1.0, 4, np.clip(np.ceil(conf * 4) - 1, 0, 3))
    aurcs, accs = [], []
    for order in itertools.permutations(range(7)):
        if np.any(np.diff(fine[list(order)]) > 0):
            continue  # not ranked by decreasing bin
        cum = np.cumsum(errors[list(order)])
        aurcs.append(np.mean(cum / np.arange(1, 8)))
        accs.append(1 - cum[5] / 6)  # ceil(0.8 * 7) = 6
    assert len(aurcs) > 1
    assert stats.aurc() == pytest.approx(np.mean(aurcs), rel=1e-12)
    worst = np.max(np.abs(np.array(aurcs) - np.mean(aurcs)))
    assert 0 < worst <= stats.aurc_quantisation_bound() + 1e-12
    assert stats.accuracy_at_coverage(0.8) == pytest.approx(np.mean(accs), rel=1e-12)


def test_bin_edges_are_right_closed():
    edges = np.linspace(0, 1, 16)
    confidence = np.concatenate([edges[8:], [1 - 1e-12]])  # all >= 0.5: the top class
    probs = np.stack([confidence, 1 - confidence])
    stats = PixelCalibrationStats(2, selective_bins=10).update(probs, np.zeros(len(confidence),
                                                                               np.int64))
    expected = np.zeros(15, np.int64)
    for b in range(7, 15):  # edges[b + 1] lies in bin b; 1.0 in the last bin
        expected[b] += 1
    expected[14] += 1  # 1 - 1e-12
    assert stats.top_count.tolist() == expected.tolist()
    assert stats.selective_count[10] == 1  # exactly 1.0 has its own fine bin
    assert stats.selective_count[9] == 2  # (0.9, 1): 14/15 and 1 - 1e-12


def test_order_and_batching_invariance():
    rng = np.random.default_rng(3)
    logits, labels = make_pixels(rng, 6, 30000)
    probs = softmax(logits)
    whole = PixelCalibrationStats(6).update(probs, labels)
    perm = rng.permutation(30000)
    cuts = np.sort(rng.choice(np.arange(1, 30000), 6, replace=False))
    parts = []
    for chunk in np.split(perm, cuts):
        parts.append(PixelCalibrationStats(6).update(probs[:, chunk], labels[chunk]))
    streamed = PixelCalibrationStats(6)
    for chunk in np.split(perm, cuts[::2]):
        streamed.update(probs[:, chunk], labels[chunk])
    for other in (sum(parts), parts[0] + parts[1] + sum(parts[2:]), streamed):
        for name in ('top_count', 'top_correct', 'class_count', 'class_label_count',
                     'selective_count', 'selective_errors'):
            assert np.array_equal(getattr(other, name), getattr(whole, name)), name
        assert_metrics_equal(other.summary(), whole.summary(), rel=1e-12)
    # JSON round trip is exact
    restored = PixelCalibrationStats.from_dict(json.loads(json.dumps(whole.to_dict())))
    assert restored.to_dict() == whole.to_dict()
    assert restored.summary() == whole.summary()
    with pytest.raises(ValueError, match='different'):
        whole + PixelCalibrationStats(6, selective_bins=100)


def test_stats_reject_bad_inputs():
    stats = PixelCalibrationStats(3)
    probs = softmax(np.random.default_rng(0).normal(size=(3, 4, 5)))
    labels = np.zeros((4, 5), np.int64)
    with pytest.raises(ValueError, match='3 classes'):
        PixelCalibrationStats(4).update(probs, labels)
    with pytest.raises(ValueError, match='does not match'):
        stats.update(probs, labels.T)
    bad = probs.copy()
    bad[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match='NaN'):
        stats.update(bad, labels)
    with pytest.raises(ValueError, match='softmax outputs'):
        stats.update(probs * 3 - 1, labels)
    with pytest.raises(ValueError, match='sum to 1'):
        stats.update(probs * 0.5, labels)
    with pytest.raises(ValueError, match='outside'):
        stats.update(probs, labels + 3)
    with pytest.raises(ValueError, match='integer dtype'):
        stats.update(probs, labels.astype(float))
    with pytest.raises(ValueError, match='num_classes'):
        PixelCalibrationStats(1)
    assert stats.num_pixels == 0 and all(math.isnan(v) for v in stats.summary().values())


# ----------------------------------------------------------------------------------
# The MMEngine metric
# ----------------------------------------------------------------------------------
def fake_batch(seed: int, num_classes: int = 6, size=(48, 40), batch: int = 2):
    generator = torch.Generator().manual_seed(seed)
    samples = []
    for _ in range(batch):
        logits = torch.randn((num_classes, ) + size, generator=generator) * 3
        labels = torch.randint(0, num_classes, (1, ) + size, generator=generator)
        labels[0, :3] = IGNORE
        logits[0, 5, :5] = 200.0  # probability exactly 1.0
        samples.append(dict(seg_logits=dict(data=logits), gt_sem_seg=dict(data=labels)))
    return samples


def reference_from_samples(samples, temperature: float = 1.0, selective_bins: int = 10000):
    probs = np.concatenate([softmax(s['seg_logits']['data'].numpy(), temperature)
                            .reshape(len(s['seg_logits']['data']), -1) for s in samples], axis=1)
    labels = np.concatenate([s['gt_sem_seg']['data'].numpy().reshape(-1) for s in samples])
    return reference_metrics(probs, labels, selective_bins=selective_bins)


@pytest.mark.parametrize('temperature', [1.0, 0.5, 2.5])
def test_metric_matches_reference_with_temperature(temperature):
    batches = [fake_batch(seed) for seed in range(3)]
    metric = SegCalibrationMetric(temperature=temperature, chunk_pixels=1000)
    for samples in batches:
        metric.process({}, samples)
    assert len(metric.results) == 1
    got = metric.evaluate(6)
    ref = reference_from_samples([s for b in batches for s in b], temperature)
    assert set(got) == {f'calib/{k}' for k in METRIC_KEYS}
    assert_metrics_equal({k: got[f'calib/{k}'] for k in METRIC_KEYS}, ref)
    assert metric.results == []


@pytest.mark.parametrize('temperature', [0, -1.0, float('nan'), float('inf')])
def test_metric_rejects_bad_temperature(temperature):
    with pytest.raises(ValueError, match='temperature'):
        SegCalibrationMetric(temperature=temperature)


def test_metric_rejects_bad_samples():
    metric = SegCalibrationMetric()
    metric.dataset_meta = dict(classes=('a', 'b', 'c', 'd', 'e', 'f'))
    with pytest.raises(ValueError, match='5 classes but dataset_meta lists 6'):
        metric.process({}, fake_batch(0, num_classes=5))
    samples = fake_batch(0)
    samples[1]['gt_sem_seg']['data'] = samples[1]['gt_sem_seg']['data'][:, :, :-1]
    with pytest.raises(ValueError, match='does not match'):
        metric.process({}, samples)
    samples = fake_batch(0)
    samples[0]['seg_logits']['data'][2, 10, 10] = float('nan')
    with pytest.raises(ValueError, match='NaN'):
        metric.process({}, samples)
    samples = fake_batch(0)
    samples[0]['gt_sem_seg']['data'][0, 10, 10] = 7
    with pytest.raises(ValueError, match='label 7'):
        metric.process({}, samples)


def test_metric_memory_does_not_grow_with_images():
    size = (256, 256)
    batch = fake_batch(0, size=size)  # made once, before tracing

    def peak_bytes(num_batches):
        metric = SegCalibrationMetric()
        tracemalloc.start()
        try:
            for _ in range(num_batches):
                metric.process({}, batch)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert len(metric.results) == 1
        total = metric.results[0].total(None, PixelCalibrationStats.merge)
        assert total.num_pixels == num_batches * (2 * 256 * 256 - 2 * 3 * 256)
        return peak

    few, many = peak_bytes(5), peak_bytes(40)
    print(f'peak traced memory: 5 batches {few / 2**20:.1f} MiB, 40 batches {many / 2**20:.1f} MiB')
    assert few > 4 * 2**20  # the numpy temporaries of a batch are traced
    assert many <= few * 1.05 + 256 * 1024


def _distributed_worker(rank: int, world_size: int, port: int, folder: str) -> None:
    torch.set_num_threads(1)
    torch.distributed.init_process_group('gloo', init_method=f'tcp://127.0.0.1:{port}',
                                         rank=rank, world_size=world_size)
    try:
        metric = SegCalibrationMetric(collect_dir=osp.join(folder, 'collect'))
        for seed in range(rank, 4, world_size):
            metric.process({}, fake_batch(seed))
        metrics = metric.evaluate(8)
        if rank == 0:
            with open(osp.join(folder, 'rank0.json'), 'w') as handle:
                json.dump(dict(metrics=metrics, stats=metric.last_details['stats']), handle)
    finally:
        torch.distributed.destroy_process_group()


def _padded_worker(rank: int, world_size: int, port: int, folder: str) -> None:
    """5 images over 2 processes, split by MMEngine's DefaultSampler, which pads rank 1
    with a repeat of image 0."""
    from mmengine.dataset import DefaultSampler
    torch.set_num_threads(1)
    torch.distributed.init_process_group('gloo', init_method=f'tcp://127.0.0.1:{port}',
                                         rank=rank, world_size=world_size)
    try:
        pool = fake_batch(7, batch=5)
        metric = SegCalibrationMetric(collect_dir=osp.join(folder, 'collect'))
        indices = list(DefaultSampler(list(range(5)), shuffle=False))
        for index in indices:
            metric.process({}, [pool[index]])
        metrics = metric.evaluate(5)
        if rank == 0:
            with open(osp.join(folder, 'rank0.json'), 'w') as handle:
                json.dump(dict(metrics=metrics, indices=indices), handle)
    finally:
        torch.distributed.destroy_process_group()


def _run_two_processes(worker, folder) -> dict:
    """Run ``worker(rank, 2, port, folder)`` in 2 processes; rank 0's ``rank0.json``."""
    # forked (not spawned) workers: a spawned one re-imports torch and the stack (~10 s)
    workers = torch.multiprocessing.start_processes(
        worker, args=(2, free_port(), str(folder)), nprocs=2, join=False,
        start_method='fork')
    deadline = time.monotonic() + 120
    while not workers.join(timeout=1):
        if time.monotonic() > deadline:
            for process in workers.processes:
                process.terminate()
            pytest.fail('the two distributed workers did not finish within 120 s')
    with open(osp.join(folder, 'rank0.json')) as handle:
        return json.load(handle)


@pytest.mark.slow
def test_two_processes_equal_one(tmp_path):
    distributed = _run_two_processes(_distributed_worker, tmp_path)
    single = SegCalibrationMetric()
    for seed in range(4):
        single.process({}, fake_batch(seed))
    metrics = single.evaluate(8)
    assert set(distributed['metrics']) == set(metrics)
    for key, value in metrics.items():
        assert distributed['metrics'][key] == pytest.approx(value, rel=1e-12), key
    one = single.last_details['stats']
    for name in ('top_count', 'top_correct', 'class_count', 'class_label_count',
                 'selective_nonzero_bins', 'selective_count', 'selective_errors', 'num_pixels'):
        assert distributed['stats'][name] == one[name], name


@pytest.mark.slow
def test_two_processes_leave_out_the_sampler_padding(tmp_path):
    distributed = _run_two_processes(_padded_worker, tmp_path)
    assert distributed['indices'] == [0, 2, 4]  # rank 1: [1, 3, 0], the 0 is padding
    pool = fake_batch(7, batch=5)
    single = SegCalibrationMetric()
    single.process({}, pool)
    metrics = single.evaluate(5)
    for key, value in metrics.items():
        assert distributed['metrics'][key] == pytest.approx(value, rel=1e-12), key
    counted_twice = SegCalibrationMetric()
    counted_twice.process({}, pool + pool[:1])
    assert counted_twice.evaluate(6)['calib/NLL'] != pytest.approx(metrics['calib/NLL'], rel=1e-9)


# ----------------------------------------------------------------------------------
# Real model outputs
# ----------------------------------------------------------------------------------
@pytest.fixture(scope='module')
def trained_seg(seg_model, tmp_path_factory):
    work_dir = str(tmp_path_factory.mktemp('calib_seg'))
    cfg = demo_config(SEG_DEMO_CONFIG, seg_model.data_root, work_dir, iters=10)
    return cfg, seg_model.checkpoint


def _tester(trained_seg, evaluator, name):
    cfg, checkpoint = trained_seg
    cfg = cfg.copy()
    cfg.load_from = checkpoint
    cfg.test_evaluator = evaluator
    cfg.experiment_name = name
    return Runner.from_cfg(cfg)


@pytest.mark.slow
def test_metric_on_real_model_outputs(trained_seg, tmp_path):
    iou = dict(type='IoUMetric', iou_metrics=['mIoU'])
    plain = _tester(trained_seg, iou, 'calib-plain').test()
    # the calibration metric first: it must leave the data samples untouched for IoUMetric
    tester = _tester(trained_seg, [dict(type='SegCalibrationMetric'), iou], 'calib-both')
    metrics = tester.test()
    assert metrics['mIoU'] == plain['mIoU'] and metrics['aAcc'] == plain['aAcc']

    # the same seg_logits, from the loaded model, computed directly
    model = tester.model
    samples = []
    check = SegCalibrationMetric()
    check.dataset_meta = tester.test_dataloader.dataset.metainfo
    for data_batch in tester.test_dataloader:
        with torch.no_grad():
            outputs = model.test_step(data_batch)
        dicts = [o.to_dict() for o in outputs]
        before = [(d['seg_logits']['data'].clone(), d['pred_sem_seg']['data'].clone())
                  for d in dicts]
        check.process(data_batch, dicts)
        for d, (logits, pred) in zip(dicts, before):
            assert torch.equal(d['seg_logits']['data'], logits)
            assert torch.equal(d['pred_sem_seg']['data'], pred)
            probs = torch.softmax(logits.double(), dim=0)
            assert torch.equal(probs.argmax(dim=0), pred[0])
        samples.extend(dicts)
    ref = reference_from_samples(samples)
    assert ref['num_pixels'] > 0.5 * 3 * 256 * 256
    assert_metrics_equal({k: metrics[f'calib/{k}'] for k in METRIC_KEYS}, ref, rel=1e-9)
    checked = check.evaluate(len(samples))
    assert_metrics_equal({k: checked[f'calib/{k}'] for k in METRIC_KEYS}, ref)
    print('real model:', {k: round(v, 5) for k, v in checked.items()})

    details = tester.test_evaluator.metrics[0].last_details
    json.dumps(details, allow_nan=False)
    classes = list(tester.test_dataloader.dataset.metainfo['classes'])
    assert list(details['classwise_ece']) == classes
    present = [v for v in details['classwise_ece'].values() if v is not None]
    assert np.mean(present) == pytest.approx(ref['cwECE'], rel=1e-9)
    assert len(details['risk_coverage']['coverage']) <= 201
    restored = PixelCalibrationStats.from_dict(details['stats'])
    assert_metrics_equal(restored.summary(), ref, rel=1e-9)

    path = plot_reliability_diagrams({'clean': details, 'direct': check.last_details},
                                     str(tmp_path / 'plots' / 'reliability.png'), title='demo')
    with open(path, 'rb') as handle:
        assert handle.read(8) == b'\x89PNG\r\n\x1a\n'
    assert os.listdir(tmp_path / 'plots') == ['reliability.png']
    with pytest.raises(ValueError, match='empty'):
        plot_reliability_diagrams({}, str(tmp_path / 'none.png'))
