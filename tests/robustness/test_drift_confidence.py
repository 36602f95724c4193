"""Drift–confidence coupling of the representation-drift tool: the statistics
(reobench_mm.evaluation.functional.drift_confidence), the token-grid resampling and the
recorder (reobench_mm.robustness.drift_confidence), the figure
(reobench_mm.analysis.drift_plots) and the end-to-end numbers on the demo UperNet, checked
against a direct computation from hooked features and the model's own predictions."""
import importlib.util
import json
import os.path as osp

import numpy as np
import pytest
import torch
from scipy import stats

import reobench_mm  # noqa: F401  (registration)
from helpers import DET_DEMO_CONFIG, PROJECT_ROOT, SEG_DEMO_CONFIG
from reobench_mm.analysis.drift_plots import plot_drift_confidence
from reobench_mm.datasets.synthetic import write_potsdam
from reobench_mm.evaluation.functional.drift_confidence import (
    drift_confidence_summary, overconfident_drift_fraction, spearman_correlation)
from reobench_mm.robustness.drift import representation_drift
from reobench_mm.robustness.drift_confidence import (DriftConfidenceRecorder,
                                                     drift_confidence_support,
                                                     token_grid_pixels, token_grid_shape)

TOOL = osp.join(PROJECT_ROOT, 'tools', 'analysis_tools', 'representation_drift.py')


# ----------------------------------------------------------------------------- references
def reference_spearman(x, y):
    """Pearson correlation of the average ranks, and the t-approximation p-value."""
    rx, ry = stats.rankdata(x), stats.rankdata(y)
    rho = np.corrcoef(rx, ry)[0, 1]
    n = len(x)
    t = rho * np.sqrt((n - 2) / (1 - rho ** 2))
    return rho, 2 * stats.t.sf(abs(t), n - 2)


def reference_bilinear(x, out_h, out_w):
    """``C×H×W`` → ``C×out_h×out_w``, bilinear with half-pixel centres (align_corners
    False), edge-clamped, written out."""
    def axis(n_out, n_in):
        src = np.clip((np.arange(n_out) + 0.5) * n_in / n_out - 0.5, 0, None)
        low = np.minimum(np.floor(src).astype(int), n_in - 1)
        high = np.minimum(low + 1, n_in - 1)
        return low, high, src - low
    y0, y1, wy = axis(out_h, x.shape[1])
    x0, x1, wx = axis(out_w, x.shape[2])
    top = x[:, y0][:, :, x0] * (1 - wx) + x[:, y0][:, :, x1] * wx
    bottom = x[:, y1][:, :, x0] * (1 - wx) + x[:, y1][:, :, x1] * wx
    return top * (1 - wy)[:, None] + bottom * wy[:, None]


def reference_grid_pixels(logits, labels, h, w, ignore_index):
    """Max softmax and correctness of the valid cells of an h×w grid (labels at the
    cells' centres)."""
    z = reference_bilinear(logits, h, w)
    z = z - z.max(0)
    probs = np.exp(z) / np.exp(z).sum(0)
    rows = np.floor((np.arange(h) + 0.5) * labels.shape[0] / h).astype(int)
    cols = np.floor((np.arange(w) + 0.5) * labels.shape[1] / w).astype(int)
    grid_labels = labels[rows][:, cols]
    valid = grid_labels != ignore_index
    return probs.max(0)[valid], (probs.argmax(0) == grid_labels)[valid]


# ----------------------------------------------------------------------------- Spearman
@pytest.mark.parametrize('ties', [False, True])
def test_spearman_matches_ranks_and_scipy(ties):
    rng = np.random.default_rng(0 if ties else 1)
    x = rng.normal(size=25)
    y = -0.6 * x + rng.normal(size=25)
    if ties:  # integer-valued: many ties, average ranks
        x, y = np.round(2 * x), np.round(2 * y)
        assert len(np.unique(x)) < 15
    result = spearman_correlation(x, y)
    rho, p = reference_spearman(x, y)
    assert result['rho'] == pytest.approx(rho, rel=1e-12)
    assert result['p_value'] == pytest.approx(p, rel=1e-9)
    expected = stats.spearmanr(x, y)
    assert result['rho'] == pytest.approx(expected.statistic, rel=1e-12)
    assert result['n'] == 25 and result['note'] is None and result['rho'] < -0.2
    # a monotone transform changes nothing; reversing one side flips the sign
    again = spearman_correlation(np.exp(x), y ** 3)
    assert again['rho'] == pytest.approx(result['rho'], rel=1e-12)
    assert spearman_correlation(-x, y)['rho'] == pytest.approx(-result['rho'], rel=1e-12)
    json.dumps(result)


def test_spearman_undefined_cases_give_none_with_a_note():
    x = np.arange(6.0)
    constant = spearman_correlation(np.zeros(6), x, 'drift', 'confidence')
    assert constant['rho'] is None and constant['p_value'] is None and constant['n'] == 6
    assert 'drift is constant' in constant['note'] and 'undefined' in constant['note']
    both = spearman_correlation(np.ones(6), np.ones(6), 'drift', 'accuracy')
    assert 'drift and accuracy are constant' in both['note']
    few = spearman_correlation([1.0, 2.0], [2.0, 1.0])
    assert few['rho'] is None and 'at least 3' in few['note']
    perfect = spearman_correlation(x, x ** 2)
    assert perfect['rho'] == pytest.approx(1.0) and perfect['p_value'] == pytest.approx(0.0)
    with pytest.raises(ValueError, match='finite'):
        spearman_correlation([1.0, np.nan, 2.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match='one value per sample'):
        spearman_correlation(x, x[:4])
    with pytest.raises(ValueError, match='1-D'):
        spearman_correlation(np.ones((3, 2)), np.ones((3, 2)))


# ----------------------------------------------------------------------------- fraction
def test_overconfident_drift_fraction_by_hand():
    # median of (1, 2, 2, 3, 5) is 2: only the images drifting 3 and 5 count (strictly)
    drift = [2.0, 1.0, 3.0, 2.0, 5.0]
    pixels = [10, 10, 20, 10, 30]
    wrong = [9, 9, 4, 9, 6]
    assert overconfident_drift_fraction(drift, pixels, wrong) == pytest.approx(10 / 80)
    # even count: the median is the mean of the middle two
    assert overconfident_drift_fraction([1.0, 2.0, 4.0, 8.0], [5, 5, 5, 5], [1, 2, 3, 4]) \
        == pytest.approx(7 / 20)
    # every drift equal: nothing is above the median
    assert overconfident_drift_fraction([0.0] * 4, [5] * 4, [5] * 4) == 0.0
    assert overconfident_drift_fraction([1.0], [0], [0]) is None
    with pytest.raises(ValueError, match='between 0 and num_pixels'):
        overconfident_drift_fraction([1.0, 2.0], [3, 3], [4, 0])
    with pytest.raises(ValueError, match='one value per sample'):
        overconfident_drift_fraction([1.0, 2.0], [3], [0])


def test_summary_leaves_out_images_without_pixels():
    rng = np.random.default_rng(2)
    drift = rng.uniform(size=9)
    confidence = rng.uniform(0.2, 1.0, size=9)
    accuracy = rng.uniform(size=9)
    pixels = rng.integers(5, 20, size=9)
    wrong = (pixels * rng.uniform(size=9)).astype(int)
    pixels[4], wrong[4], confidence[4], accuracy[4] = 0, 0, np.nan, np.nan
    drift[4] = 100.0  # would move the median if it were counted
    summary = drift_confidence_summary(drift, confidence, accuracy, pixels, wrong)
    keep = np.arange(9) != 4
    d, c, a = drift[keep], confidence[keep], accuracy[keep]
    assert summary['num_samples'] == 8 and summary['num_pixels'] == pixels.sum()
    assert summary['median_drift'] == pytest.approx(np.median(d))
    assert summary['spearman_drift_confidence']['rho'] == pytest.approx(
        reference_spearman(d, c)[0], rel=1e-12)
    assert summary['spearman_drift_accuracy']['p_value'] == pytest.approx(
        reference_spearman(d, a)[1], rel=1e-9)
    far = d > np.median(d)
    assert summary['overconfident_drift_fraction'] == pytest.approx(
        wrong[keep][far].sum() / pixels.sum())
    assert summary['mean_confidence'] == pytest.approx(c.mean())
    json.dumps(summary)
    with pytest.raises(ValueError, match=r'\[0, 1\]'):
        drift_confidence_summary(drift, confidence * 2, accuracy, pixels, wrong)


# ----------------------------------------------------------------------------- token grid
@pytest.mark.parametrize('size,grid', [((32, 24), (4, 3)), ((17, 9), (5, 4)), ((8, 8), (8, 8))])
def test_token_grid_pixels_match_numpy(size, grid):
    rng = np.random.default_rng(sum(size))
    logits = 3 * rng.normal(size=(5, *size))
    labels = rng.integers(0, 5, size=size)
    labels[rng.uniform(size=size) < 0.3] = 255
    confidence, correct = token_grid_pixels(torch.from_numpy(logits).float(),
                                            torch.from_numpy(labels), grid, 255)
    expected_conf, expected_correct = reference_grid_pixels(logits, labels, *grid, 255)
    assert confidence.shape == expected_conf.shape and correct.dtype == bool
    np.testing.assert_allclose(confidence, expected_conf, rtol=1e-5)
    np.testing.assert_array_equal(correct, expected_correct)
    assert 0 < correct.size < grid[0] * grid[1] or size == (8, 8)
    with pytest.raises(ValueError, match='same size'):
        token_grid_pixels(torch.zeros(5, 4, 4), torch.zeros(4, 5, dtype=torch.long), (2, 2), 255)


def test_token_grid_shape():
    assert token_grid_shape(torch.zeros(2, 8, 3, 5), False, 15, (96, 160)) == (3, 5)
    assert token_grid_shape((torch.zeros(2, 3, 5, 8),), True, 15, (96, 160)) == (3, 5)
    assert token_grid_shape(torch.zeros(2, 15, 8), False, 15, (96, 160)) == (3, 5)
    assert token_grid_shape(torch.zeros(2, 196, 8), True, 196, (224, 224)) == (14, 14)
    with pytest.raises(ValueError, match='cannot lay 13 tokens'):
        token_grid_shape(torch.zeros(2, 13, 8), False, 13, (64, 64))


class _FixedPredictions:
    """Stands in for a segmentor: ``predict`` returns the given data samples."""

    def __init__(self, clean, corrupted):
        self.outputs = {'clean': clean, 'corrupted': corrupted}

    def predict(self, inputs, data_samples):
        return self.outputs[inputs]


def _seg_sample(logits, labels):
    from mmengine.structures import PixelData
    from mmseg.structures import SegDataSample
    sample = SegDataSample()
    sample.seg_logits = PixelData(data=torch.from_numpy(logits).float())
    sample.gt_sem_seg = PixelData(data=torch.from_numpy(labels)[None])
    return sample


def test_recorder_keeps_per_image_values_and_skips_unlabelled_images():
    rng = np.random.default_rng(4)
    logits = [5 * rng.normal(size=(3, 16, 16)) for _ in range(4)]
    labels = [rng.integers(0, 3, size=(16, 16)) for _ in range(4)]
    labels[2][:] = 255  # an image without a valid pixel
    clean = [_seg_sample(z, y) for z, y in zip(logits, labels)]
    corrupted = [_seg_sample(z[::-1].copy(), y) for z, y in zip(logits, labels)]
    pooled_clean = torch.from_numpy(rng.normal(size=(4, 6))).float()
    pooled_corrupted = pooled_clean + torch.from_numpy(rng.normal(size=(4, 6))).float()
    recorder = DriftConfidenceRecorder('backbone.layer4', 255)
    # keep=3 (a cut batch): the fourth image is not added
    recorder.update(_FixedPredictions(clean, corrupted), dict(inputs='clean', data_samples=None),
                    dict(inputs='corrupted', data_samples=None), pooled_clean[:3],
                    pooled_corrupted[:3], (4, 4), keep=3)
    result = recorder.result()
    per_image = result['per_image']
    difference = pooled_corrupted.double().numpy() - pooled_clean.double().numpy()
    np.testing.assert_allclose(per_image['drift'], np.linalg.norm(difference[:3], axis=1),
                               rtol=1e-12)
    for i in (0, 1):
        conf, ok = reference_grid_pixels(logits[i][::-1], labels[i], 4, 4, 255)
        clean_conf, _ = reference_grid_pixels(logits[i], labels[i], 4, 4, 255)
        assert per_image['confidence'][i] == pytest.approx(conf.mean(), rel=1e-5)
        assert per_image['accuracy'][i] == pytest.approx(ok.mean())
        assert per_image['clean_confidence'][i] == pytest.approx(clean_conf.mean(), rel=1e-5)
        assert per_image['num_confident_wrong'][i] == int(np.sum((conf > 0.9) & ~ok))
    assert per_image['num_pixels'] == [16, 16, 0]
    assert per_image['confidence'][2] is None and per_image['accuracy'][2] is None
    assert result['num_samples'] == 2 and result['token_grid'] == [[4, 4]]
    # two images: too few for a rank correlation
    assert result['spearman_drift_accuracy']['rho'] is None
    json.dumps(result)


# ----------------------------------------------------------------------------- figure
def _document(conditions):
    rng = np.random.default_rng(3)
    out = []
    for name, spread in conditions:
        drift = list(spread * rng.uniform(size=10))
        confidence = list(rng.uniform(0.4, 1.0, size=10))
        accuracy = list(rng.uniform(size=10))
        pixels, wrong = [16] * 10, [int(v) for v in rng.integers(0, 16, size=10)]
        summary = drift_confidence_summary(drift, confidence, accuracy, pixels, wrong)
        out.append(dict(condition=name, drift_confidence=dict(
            layer='backbone.layer4', **summary,
            per_image=dict(drift=drift, confidence=confidence, accuracy=accuracy,
                           num_pixels=pixels, num_confident_wrong=wrong))))
    return dict(conditions=out)


def test_plot_drift_confidence_writes_a_png(tmp_path):
    document = _document([('clean', 0.0), ('gaussian_noise@3', 2.0), ('rotate@3', 5.0),
                          ('haze@5', 1.0)])
    path = plot_drift_confidence(document, str(tmp_path / 'drift_confidence.png'))
    with open(path, 'rb') as handle:
        assert handle.read(8) == b'\x89PNG\r\n\x1a\n'
    with pytest.raises(ValueError, match='no drift_confidence results'):
        plot_drift_confidence(dict(conditions=[dict(condition='haze@1', blocks={})]),
                              str(tmp_path / 'old.png'))


# ----------------------------------------------------------------------------- options
def test_drift_confidence_refusals(tmp_path):
    from mmengine.config import Config
    from mmengine.registry import MODELS, init_default_scope
    with pytest.raises(ValueError, match='drift_confidence must be None, True or False'):
        representation_drift(SEG_DEMO_CONFIG, str(tmp_path / 'x.pth'), ['haze'], [1],
                             drift_confidence='yes')
    cfg = Config.fromfile(DET_DEMO_CONFIG)
    init_default_scope(cfg.default_scope)
    detector = MODELS.build(cfg.model)
    assert 'segmentors only' in drift_confidence_support(detector)
    checkpoint = str(tmp_path / 'detector.pth')
    torch.save(dict(state_dict=detector.state_dict()), checkpoint)
    with pytest.raises(ValueError, match='drift_confidence=True: .*segmentors only'):
        representation_drift(DET_DEMO_CONFIG, checkpoint, ['haze'], [1],
                             drift_confidence=True, work_dir=str(tmp_path / 'out'))
    assert not osp.exists(tmp_path / 'out')
    cfg = Config.fromfile(SEG_DEMO_CONFIG)
    init_default_scope(cfg.default_scope)
    assert drift_confidence_support(MODELS.build(cfg.model)) is None


# ----------------------------------------------------------------------------- end to end
NUM_IMAGES = 8
SIZE = 128


@pytest.fixture(scope='module')
def coupled_model(seg_model, tmp_path_factory):
    """The demo UperNet after 30 iterations (a soft softmax), its classifier's logits
    scaled by 150 (the arg-max is unchanged) so that confidences above 0.9, and confident
    errors, occur; and 8 test images of 128×128."""
    work_dir = str(tmp_path_factory.mktemp('coupling_model'))
    config = seg_model.config
    checkpoint = torch.load(seg_model.checkpoint, map_location='cpu', weights_only=False)
    for key in ('decode_head.conv_seg.weight', 'decode_head.conv_seg.bias'):
        checkpoint['state_dict'][key] = 150.0 * checkpoint['state_dict'][key]
    sharpened = osp.join(work_dir, 'sharpened.pth')
    torch.save(checkpoint, sharpened)
    root = str(tmp_path_factory.mktemp('coupling_data'))
    write_potsdam(root, num_train=0, num_val=NUM_IMAGES, size=SIZE, seed=5)
    return config, sharpened, root


@pytest.fixture(scope='module')
def coupled_run(coupled_model, tmp_path_factory):
    config, checkpoint, root = coupled_model
    work_dir = str(tmp_path_factory.mktemp('coupling_run'))
    document = representation_drift(
        config, checkpoint, ['clean', 'gaussian_noise', 'rotate'], [3], seed=0,
        work_dir=work_dir, cfg_options={'test_dataloader.dataset.data_root': root})
    return document, work_dir


def _direct(config, checkpoint, root, condition):
    """Per image, straight from the model: layer4 (hooked during model.predict) mean-pooled
    in float64, and the predicted logits with the labels of the same data samples."""
    from mmengine.config import Config
    from mmengine.registry import MODELS, init_default_scope
    from mmengine.runner import Runner, load_checkpoint

    from reobench_mm.utils.config import insert_corruption
    cfg = Config.fromfile(config)
    cfg.test_dataloader.dataset.data_root = root
    if condition is not None:
        insert_corruption(cfg, condition)
    init_default_scope(cfg.default_scope)
    model = MODELS.build(cfg.model)
    load_checkpoint(model, checkpoint, map_location='cpu', strict=True)
    model.eval()
    captured = []
    handle = model.backbone.layer4.register_forward_hook(
        lambda module, inputs, output: captured.append(output.double().numpy()))
    pooled, logits, labels, grids = [], [], [], []
    loader_cfg = dict(cfg.test_dataloader, num_workers=0, persistent_workers=False)
    with torch.no_grad():
        for batch in Runner.build_dataloader(loader_cfg):
            data = model.data_preprocessor(batch, False)
            captured.clear()
            samples = model.predict(data['inputs'], data['data_samples'])
            (layer4,) = captured
            pooled.extend(layer4.mean(axis=(2, 3)))
            grids.extend([layer4.shape[2:]] * len(samples))
            for sample in samples:
                logits.append(sample.seg_logits.data.double().numpy())
                labels.append(sample.gt_sem_seg.data[0].numpy())
    handle.remove()
    return np.array(pooled), logits, labels, grids


@pytest.mark.slow
def test_coupling_on_the_demo_matches_a_direct_computation(coupled_model, coupled_run):
    from reobench_corruptions.condition import Condition
    config, checkpoint, root = coupled_model
    document, work_dir = coupled_run
    assert document['format'] == 'reobench_mm.representation_drift/3'
    settings = document['settings']['drift_confidence']
    assert settings['enabled'] and settings['layer'] == 'backbone.layer4'
    assert document['files']['drift_confidence_plot'] == 'drift_confidence.png'
    with open(osp.join(work_dir, 'drift_confidence.png'), 'rb') as handle:
        assert handle.read(8) == b'\x89PNG\r\n\x1a\n'
    with open(osp.join(work_dir, 'representation_drift.json'), encoding='utf-8') as handle:
        assert json.load(handle) == json.loads(json.dumps(document))
    clean_pooled, clean_logits, clean_labels, _ = _direct(config, checkpoint, root, None)
    confident_errors = 0
    for condition, spec in zip(document['conditions'], [None, ('gaussian_noise', 3),
                                                        ('rotate', 3)]):
        coupling = condition['drift_confidence']
        assert coupling['layer'] == 'backbone.layer4' and coupling['token_grid'] == [[4, 4]]
        if spec is None:
            pooled, logits, labels, grids = clean_pooled, clean_logits, clean_labels, None
        else:
            pooled, logits, labels, grids = _direct(config, checkpoint, root,
                                                    Condition(*spec, 0))
        drift = np.linalg.norm(pooled - clean_pooled, axis=1)
        conf, acc, clean_conf, clean_acc, pixel_rows = [], [], [], [], []
        for z, y, z0, y0 in zip(logits, labels, clean_logits, clean_labels):
            c, ok = reference_grid_pixels(z, y, 4, 4, 255)
            c0, ok0 = reference_grid_pixels(z0, y0, 4, 4, 255)
            conf.append(c.mean())
            acc.append(ok.mean())
            clean_conf.append(c0.mean())
            clean_acc.append(ok0.mean())
            pixel_rows.append((c, ok))
        per_image = coupling['per_image']
        np.testing.assert_allclose(per_image['drift'], drift, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(per_image['confidence'], conf, rtol=1e-5)
        np.testing.assert_allclose(per_image['accuracy'], acc, rtol=1e-12)
        np.testing.assert_allclose(per_image['clean_confidence'], clean_conf, rtol=1e-5)
        np.testing.assert_allclose(per_image['clean_accuracy'], clean_acc, rtol=1e-12)
        assert per_image['num_pixels'] == [len(c) for c, _ in pixel_rows]
        assert coupling['num_samples'] == NUM_IMAGES
        # the fraction, pixel by pixel
        far = drift > np.median(drift)
        flagged = sum(int(np.sum((c > 0.9) & ~ok)) for (c, ok), f in zip(pixel_rows, far) if f)
        total = sum(len(c) for c, _ in pixel_rows)
        confident_errors += sum(int(np.sum((c > 0.9) & ~ok)) for c, ok in pixel_rows)
        assert coupling['overconfident_drift_fraction'] == pytest.approx(flagged / total)
        assert coupling['num_pixels'] == total
        if spec is None:  # clean vs clean: no drift, no correlation
            assert np.all(drift == 0) and coupling['overconfident_drift_fraction'] == 0
            for key in ('spearman_drift_confidence', 'spearman_drift_accuracy'):
                assert coupling[key]['rho'] is None
                assert 'drift is constant' in coupling[key]['note']
            continue
        assert np.all(drift > 0)
        for key, values in (('spearman_drift_confidence', conf),
                            ('spearman_drift_accuracy', acc)):
            expected = stats.spearmanr(drift, values)
            assert coupling[key]['rho'] == pytest.approx(expected.statistic, rel=1e-6)
            assert coupling[key]['p_value'] == pytest.approx(expected.pvalue, rel=1e-5)
            assert coupling[key]['n'] == NUM_IMAGES
    assert confident_errors > 0  # the > 0.9 branch was exercised


def _load_tool():
    spec = importlib.util.spec_from_file_location('representation_drift_tool', TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_tool_prints_and_writes_the_coupling(coupled_model, coupled_run, tmp_path, capsys):
    config, checkpoint, root = coupled_model
    document, _ = coupled_run
    tool = _load_tool()
    tool.main([config, checkpoint, '--corruptions', 'gaussian_noise', '--severities', '3',
               '--representation', 'token', '--tokens-per-image', '16',
               '--work-dir', str(tmp_path), '--cfg-options',
               f'test_dataloader.dataset.data_root={root}'])
    output = capsys.readouterr().out
    assert 'rho(drift,conf)' in output and 'drift_confidence.png' in output
    with open(tmp_path / 'representation_drift.json', encoding='utf-8') as handle:
        written = json.load(handle)
    (condition,) = written['conditions']
    expected = document['conditions'][1]['drift_confidence']  # gaussian_noise@3
    # the drift always uses the pooled sample representation, whatever --representation
    for key in ('drift', 'confidence', 'accuracy', 'num_pixels'):
        np.testing.assert_allclose(condition['drift_confidence']['per_image'][key],
                                   expected['per_image'][key], rtol=1e-6)
    rho = expected['spearman_drift_accuracy']['rho']
    assert condition['drift_confidence']['spearman_drift_accuracy']['rho'] == \
        pytest.approx(rho, rel=1e-9)
    table = output[output.index('rho(drift,conf)'):].splitlines()
    line = next(row for row in table if row.startswith('gaussian_noise@3'))
    assert f'{rho:+.3f}' in line
    assert osp.isfile(tmp_path / 'drift_confidence.png')
    # switched off: no coupling, no second plot
    tool.main([config, checkpoint, '--corruptions', 'clean', '--representation', 'token',
               '--tokens-per-image', '4', '--max-images', '2', '--no-drift-confidence',
               '--work-dir', str(tmp_path / 'off'), '--cfg-options',
               f'test_dataloader.dataset.data_root={root}'])
    capsys.readouterr()
    with open(tmp_path / 'off' / 'representation_drift.json', encoding='utf-8') as handle:
        off = json.load(handle)
    assert not off['settings']['drift_confidence']['enabled']
    assert 'drift_confidence' not in off['conditions'][0]
    assert not osp.exists(tmp_path / 'off' / 'drift_confidence.png')
