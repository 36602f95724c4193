"""Deep ensembles (SegmentationEnsemble, tools/model_converters/make_ensemble.py) against
the members run alone as mmseg segmentors and their softmax probabilities averaged in
numpy."""
import copy
import importlib.util
import json
import os.path as osp

import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.registry import DefaultScope
from mmengine.structures import PixelData
from mmseg.structures import SegDataSample

import reobench_mm  # noqa: F401  (registration)
from helpers import DET_DEMO_CONFIG, PROJECT_ROOT, SEG_DEMO_CONFIG
from reobench_mm.engine.checkpoint import load_checkpoint_strict, read_checkpoint
from reobench_mm.models.segmentors import (SegmentationEnsemble, ensemble_checkpoint,
                                           ensemble_model_cfg, ensemble_state_dict)
from reobench_mm.registry import MODELS
from reobench_mm.robustness.sweep import run_sweep
from sweep_helpers import sweep_options

ENSEMBLE_CONFIG = osp.join(PROJECT_ROOT, 'configs', 'demo',
                           'ensemble-2x_upernet_r18-tiny_demo-potsdam-128x128.py')
MAKE_ENSEMBLE = osp.join(PROJECT_ROOT, 'tools', 'model_converters', 'make_ensemble.py')
POTSDAM_CLASSES = ('impervious_surface', 'building', 'low_vegetation', 'tree', 'car',
                   'clutter')
#: Standard deviation of the random 1x1 classifier of the test members: confident
#: (mean top probability about 0.8) and spatially varied, unlike a fresh UperNet.
HEAD_SCALE = 4.0


def _load_tool(path):
    spec = importlib.util.spec_from_file_location('make_ensemble_tool', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _seg_cfg():
    return Config.fromfile(SEG_DEMO_CONFIG)


def _slide(model_cfg):
    model_cfg = copy.deepcopy(model_cfg)
    model_cfg.test_cfg = dict(mode='slide', crop_size=(64, 64), stride=(48, 48))
    return model_cfg


def _build(model_cfg):
    with DefaultScope.overwrite_default_scope('mmseg'):
        return MODELS.build(copy.deepcopy(model_cfg))


def _member(model_cfg, seed):
    """A standalone mmseg EncoderDecoder, initialised from ``seed``, with a random
    confident classifier."""
    torch.manual_seed(seed)
    model = _build(model_cfg)
    head = model.decode_head.conv_seg
    generator = torch.Generator().manual_seed(1000 + seed)
    with torch.no_grad():
        head.weight.copy_(torch.randn(head.weight.shape, generator=generator) * HEAD_SCALE)
        head.bias.zero_()
    return model.eval()


@pytest.fixture(scope='module')
def members():
    """Three differently initialised members; the second tests with a sliding window."""
    cfg = _seg_cfg()
    model_cfgs = [cfg.model, _slide(cfg.model), cfg.model]
    return model_cfgs, [_member(c, seed) for seed, c in enumerate(model_cfgs)]


def _batch():
    """Two images as a test pipeline gives them: one resized back to a larger original
    shape and flipped, one whose padding (right, bottom) is removed."""
    generator = torch.Generator().manual_seed(0)
    images = [torch.randint(0, 256, (3, 100, 90), generator=generator, dtype=torch.uint8)
              for _ in range(2)]
    samples = [SegDataSample(metainfo=dict(ori_shape=(130, 117), img_shape=(100, 90),
                                           flip=True, flip_direction='horizontal')),
               SegDataSample(metainfo=dict(ori_shape=(94, 86), img_shape=(94, 86),
                                           padding_size=[0, 4, 0, 6], flip=False))]
    return dict(inputs=images, data_samples=samples)


def _member_logits(model, batch):
    """The ``seg_logits`` of one member run alone (float64 numpy, one per sample)."""
    with torch.no_grad():
        outputs = model.test_step(copy.deepcopy(batch))
    return [o.seg_logits.data.double().numpy() for o in outputs]


def _softmax(logits):
    shifted = np.exp(logits - logits.max(axis=0, keepdims=True))
    return shifted / shifted.sum(axis=0, keepdims=True)


def _manual_mean_probs(models, batch):
    """Per sample: the mean over the members of their softmax probabilities."""
    per_member = [_member_logits(model, batch) for model in models]
    return [np.mean([_softmax(logits[i]) for logits in per_member], axis=0)
            for i in range(len(per_member[0]))]


def _ensemble(model_cfgs, models):
    """The ensemble of ``model_cfgs`` holding the weights of ``models`` (keys prefixed
    here, independently of ensemble_state_dict)."""
    ensemble = _build(dict(type='SegmentationEnsemble', members=list(model_cfgs)))
    weights = {f'members.{i}.{key}': value for i, model in enumerate(models)
               for key, value in model.state_dict().items()}
    ensemble.load_state_dict(weights, strict=True)
    return ensemble.eval()


def _check_matches(outputs, mean_probs):
    for output, mean in zip(outputs, mean_probs):
        logits = output.seg_logits.data
        assert logits.dtype == torch.float32 and logits.shape == mean.shape
        np.testing.assert_allclose(logits.double().numpy(), np.log(mean), atol=2e-5, rtol=0)
        np.testing.assert_allclose(_softmax(logits.double().numpy()), mean, atol=2e-6,
                                   rtol=0)
        prediction = output.pred_sem_seg.data
        assert prediction.shape == (1, *mean.shape[1:]) and prediction.dtype == torch.int64
        top2 = np.sort(mean, axis=0)[-2:]
        decided = top2[1] - top2[0] > 1e-5  # not a near-tie
        assert decided.mean() > 0.99
        np.testing.assert_array_equal(prediction[0].numpy()[decided],
                                      mean.argmax(axis=0)[decided])


# ----------------------------------------------------------------------------- the model

def test_ensemble_averages_the_members_softmax_probabilities(members):
    model_cfgs, models = members
    batch = _batch()
    ensemble = _ensemble(model_cfgs, models)
    assert isinstance(ensemble, SegmentationEnsemble)
    assert (ensemble.num_classes, ensemble.out_channels, ensemble.threshold) == (6, 6, None)
    with torch.no_grad():
        outputs = ensemble.test_step(copy.deepcopy(batch))
    mean_probs = _manual_mean_probs(models, batch)
    assert [o.seg_logits.data.shape[1:] for o in outputs] == [(130, 117), (94, 86)]
    _check_matches(outputs, mean_probs)

    # the test tells the mean of probabilities from other combinations: the softmax of
    # the mean logits, and any single member
    per_member = [_member_logits(model, batch) for model in models]
    mean_logits = np.mean([logits[0] for logits in per_member], axis=0)
    assert np.abs(_softmax(mean_logits) - mean_probs[0]).max() > 0.05
    for logits in per_member:
        assert (logits[0].argmax(axis=0) != mean_probs[0].argmax(axis=0)).mean() > 0.01
    # an ensemble of one model repeated is that model
    twice = _ensemble([model_cfgs[0]] * 2, [models[0]] * 2)
    with torch.no_grad():
        repeated = twice.test_step(copy.deepcopy(batch))
    for output, logits in zip(repeated, per_member[0]):
        np.testing.assert_allclose(_softmax(output.seg_logits.data.double().numpy()),
                                   _softmax(logits), atol=1e-6, rtol=0)


def test_predict_without_data_samples_and_encode_decode(members):
    model_cfgs, models = members
    model_cfgs, models = [model_cfgs[0], model_cfgs[2]], [models[0], models[2]]
    ensemble = _ensemble(model_cfgs, models)
    inputs = torch.randn(2, 3, 64, 96)
    with torch.no_grad():
        outputs = ensemble.predict(inputs)
        alone = [model.predict(inputs) for model in models]
        metas = [dict(ori_shape=(64, 96), img_shape=(64, 96), pad_shape=(64, 96),
                      padding_size=[0, 0, 0, 0])] * 2
        encoded = ensemble.encode_decode(inputs, metas).double().numpy()
        member_encoded = [model.encode_decode(inputs, metas).double().numpy()
                          for model in models]
    for index, output in enumerate(outputs):
        mean = np.mean([_softmax(a[index].seg_logits.data.double().numpy()) for a in alone],
                       axis=0)
        _check_matches([output], [mean])
    mean = np.mean([np.stack([_softmax(x) for x in batch]) for batch in member_encoded],
                   axis=0)
    np.testing.assert_allclose(encoded, np.log(mean), atol=2e-5, rtol=0)


def test_binary_members_average_sigmoid_probabilities():
    """Members with one output channel: mmseg puts the sigmoid probability in seg_logits;
    the ensemble averages it and applies the shared threshold."""
    cfg = _seg_cfg()
    model_cfg = copy.deepcopy(cfg.model)
    model_cfg.decode_head.update(num_classes=2, out_channels=1, threshold=0.53)
    model_cfg.auxiliary_head.update(num_classes=2, out_channels=1, threshold=0.53)
    models = [_member(model_cfg, seed) for seed in range(2)]
    ensemble = _ensemble([model_cfg] * 2, models)
    assert ensemble.binary and ensemble.threshold == 0.53
    batch = _batch()
    with torch.no_grad():
        outputs = ensemble.test_step(copy.deepcopy(batch))
    per_member = [_member_logits(model, batch) for model in models]
    for index, output in enumerate(outputs):
        mean = np.mean([probs[index] for probs in per_member], axis=0)
        np.testing.assert_allclose(output.seg_logits.data.numpy(), mean, atol=1e-6, rtol=0)
        expected = (mean > 0.53).astype(np.float32)
        assert 0.0 < expected.mean() < 1.0  # both classes predicted
        assert np.abs(mean - per_member[0][index]).max() > 0.05
        np.testing.assert_array_equal(output.pred_sem_seg.data.numpy()[np.abs(mean - 0.53) >
                                                                       1e-6],
                                      expected[np.abs(mean - 0.53) > 1e-6])
    other = copy.deepcopy(model_cfg)
    other.decode_head.threshold = 0.5
    with pytest.raises(ValueError, match='share one threshold.*0.53.*0.5'):
        _build(dict(type='SegmentationEnsemble', members=[model_cfg, other]))


def test_bad_members_give_clear_errors():
    cfg = _seg_cfg()
    model = cfg.model
    with pytest.raises(ValueError, match=r'needs k >= 2 members, got 1'):
        _build(dict(type='SegmentationEnsemble', members=[model]))
    with pytest.raises(TypeError, match='must be a list of k >= 2 segmentor configs'):
        _build(dict(type='SegmentationEnsemble', members=model))
    with pytest.raises(TypeError, match='member 1 must be a segmentor config'):
        _build(dict(type='SegmentationEnsemble', members=[model, 'EncoderDecoder']))
    five = copy.deepcopy(model)
    five.decode_head.num_classes = 5
    five.auxiliary_head.num_classes = 5
    with pytest.raises(ValueError, match='same classes.*member 0 has num_classes=6.*member '
                                         '1 has num_classes=5'):
        _build(dict(type='SegmentationEnsemble', members=[model, five]))
    other = copy.deepcopy(model)
    other.data_preprocessor.mean = [0, 0, 0]
    with pytest.raises(ValueError, match='share one data preprocessor.*member 1 has'):
        _build(dict(type='SegmentationEnsemble', members=[model, other]))
    with pytest.raises(ValueError, match="differs from the members' data_preprocessor"):
        _build(dict(type='SegmentationEnsemble', members=[model, model],
                    data_preprocessor=other.data_preprocessor))
    # tuples and lists in the preprocessor config are the same setting
    as_tuple = copy.deepcopy(model)
    as_tuple.data_preprocessor.mean = tuple(model.data_preprocessor.mean)
    _build(dict(type='SegmentationEnsemble', members=[model, as_tuple]))
    # a backbone alone is not a segmentor
    with pytest.raises(ValueError, match='member 0 .ResNetV1c. is not a semantic segmentor'):
        _build(dict(type='SegmentationEnsemble', members=[model.backbone] * 2))

    ensemble = _build(dict(type='SegmentationEnsemble', members=[model, model]))
    with pytest.raises(NotImplementedError, match='evaluation only.*make_ensemble.py'):
        ensemble.loss(torch.zeros(1, 3, 32, 32), [SegDataSample()])
    with pytest.raises(NotImplementedError, match='no single feature map.*members\\[i\\]'):
        ensemble.extract_feat(torch.zeros(1, 3, 32, 32))
    raw = ensemble.eval()(torch.zeros(1, 3, 64, 64), mode='tensor')
    assert isinstance(raw, tuple) and len(raw) == 2 and raw[0].shape[1] == 6


def test_detectors_are_refused_with_the_reason():
    det = Config.fromfile(DET_DEMO_CONFIG)  # Oriented R-CNN: mmdet's FasterRCNN, rotated heads
    message = 'member 0 is the detector mmdet.FasterRCNN; averaging softmax probabilities ' \
              'is defined for per-pixel class distributions, not for detectors'
    with DefaultScope.overwrite_default_scope('mmrotate'):
        with pytest.raises(ValueError, match=message):
            MODELS.build(dict(type='SegmentationEnsemble', members=[det.model, det.model]))
    det_model = dict(copy.deepcopy(det.model), data_preprocessor=_seg_cfg().model.data_preprocessor)
    with DefaultScope.overwrite_default_scope('mmseg'):
        with pytest.raises(ValueError, match='member 1 is the detector mmdet.FasterRCNN; '
                                             'averaging softmax'):
            MODELS.build(dict(type='SegmentationEnsemble', members=[_seg_cfg().model,
                                                                    det_model]))


# ----------------------------------------------------------------------------- checkpoints

def _save_member(model, path, classes=POTSDAM_CLASSES, prefix=''):
    state = {prefix + key: value for key, value in model.state_dict().items()}
    torch.save({'state_dict': state, 'meta': {'dataset_meta': {'classes': classes}}}, path)
    return str(path)


def test_combined_checkpoint_loads_strictly_and_reproduces_the_members(members, tmp_path):
    _, models = members
    models = [models[0], models[2]]  # the demo ensemble config's members test whole images
    first = _save_member(models[0], tmp_path / 'member0.pth')
    # a checkpoint saved from a DataParallel wrapper has the 'module.' prefix
    second = _save_member(models[1], tmp_path / 'member1.pth', prefix='module.')
    out, out_config = str(tmp_path / 'ensemble.pth'), str(tmp_path / 'ensemble_cfg.py')
    tool = _load_tool(MAKE_ENSEMBLE)
    assert tool.main([SEG_DEMO_CONFIG, first, SEG_DEMO_CONFIG, second, '--out', out,
                      '--out-config', out_config]) == 0

    checkpoint = read_checkpoint(out)
    expected = {f'members.{i}.{key}' for i, model in enumerate(models)
                for key in model.state_dict()}
    assert set(checkpoint['state_dict']) == expected
    meta = checkpoint['meta']
    assert list(meta['dataset_meta']['classes']) == list(POTSDAM_CLASSES)
    assert meta['ensemble']['num_members'] == 2
    assert [m['checkpoint'] for m in meta['ensemble']['members']] == [first, second]
    assert all(len(m['checkpoint_sha256']) == 64 for m in meta['ensemble']['members'])

    batch = _batch()
    mean_probs = _manual_mean_probs(models, batch)
    for config in (ENSEMBLE_CONFIG, out_config):
        cfg = Config.fromfile(config)
        assert 'reobench_mm' in cfg.custom_imports.imports
        torch.manual_seed(123)  # other random weights, all overwritten by the checkpoint
        ensemble = _build(cfg.model)
        load_checkpoint_strict(ensemble, out, config=config)
        with torch.no_grad():
            _check_matches(ensemble.eval().test_step(copy.deepcopy(batch)), mean_probs)

    # the library functions agree with the file
    combined = ensemble_checkpoint([m.state_dict() for m in models],
                                   [{'dataset_meta': {'classes': POTSDAM_CLASSES}}] * 2)
    assert list(combined['state_dict']) == list(checkpoint['state_dict'])
    assert ensemble_model_cfg([_seg_cfg().model] * 2)['type'] == 'SegmentationEnsemble'


def test_make_ensemble_refuses_bad_members(members, tmp_path, capsys):
    _, models = members
    tool = _load_tool(MAKE_ENSEMBLE)
    first = _save_member(models[0], tmp_path / 'member0.pth')
    out = str(tmp_path / 'ensemble.pth')

    with pytest.raises(SystemExit) as exit_info:
        tool.main([SEG_DEMO_CONFIG, first, '--out', out])
    assert exit_info.value.code == 2
    assert 'expected k >= 2 pairs CONFIG CHECKPOINT' in capsys.readouterr().err
    with pytest.raises(SystemExit):
        tool.main([first, SEG_DEMO_CONFIG, first, SEG_DEMO_CONFIG, '--out', out])
    assert 'is not a config file' in capsys.readouterr().err

    # a member checkpoint that does not fit its config: named, with its keys
    state = dict(models[0].state_dict())
    del state['decode_head.conv_seg.bias']
    broken = str(tmp_path / 'broken.pth')
    torch.save({'state_dict': state, 'meta': {}}, broken)
    assert tool.main([SEG_DEMO_CONFIG, first, SEG_DEMO_CONFIG, broken, '--out', out]) == 2
    error = capsys.readouterr().err
    assert f"the checkpoint '{broken}' does not fit" in error
    assert 'missing keys (1): decode_head.conv_seg.bias' in error

    # members trained on other classes (or in another order)
    swapped = _save_member(models[2], tmp_path / 'swapped.pth',
                           classes=POTSDAM_CLASSES[::-1])
    assert tool.main([SEG_DEMO_CONFIG, first, SEG_DEMO_CONFIG, swapped, '--out', out]) == 2
    assert 'trained on different classes' in capsys.readouterr().err

    # a detector config
    assert tool.main([SEG_DEMO_CONFIG, first, DET_DEMO_CONFIG, first, '--out', out]) == 2
    assert 'different default scopes' in capsys.readouterr().err
    assert not osp.exists(out)

    with pytest.raises(ValueError, match='k >= 2 member state dicts, got 1'):
        ensemble_state_dict([models[0].state_dict()])
    with pytest.raises(ValueError, match='member 1: the state dict holds no tensor'):
        ensemble_state_dict([models[0].state_dict(), {'a': 1}])


# ----------------------------------------------------------------------------- the sweep

def _numpy_ece(probs, labels, num_bins=15):
    confidence, prediction = probs.max(axis=0), probs.argmax(axis=0)
    edges = np.linspace(0.0, 1.0, num_bins + 1)
    index = np.clip(np.searchsorted(edges, confidence, side='left') - 1, 0, num_bins - 1)
    ece = 0.0
    for b in range(num_bins):
        inside = index == b
        if inside.any():
            ece += inside.mean() * abs((prediction[inside] == labels[inside]).mean()
                                       - confidence[inside].mean())
    return ece


def _numpy_miou(predictions, labels, num_classes=6):
    intersect, union = np.zeros(num_classes), np.zeros(num_classes)
    for prediction, label in zip(predictions, labels):
        for c in range(num_classes):
            intersect[c] += np.sum((prediction == c) & (label == c))
            union[c] += np.sum((prediction == c) | (label == c))
    with np.errstate(invalid='ignore'):
        return float(np.nanmean(intersect / np.where(union > 0, union, np.nan)) * 100)


@pytest.mark.slow
def test_robustness_sweep_on_the_ensemble(members, demo_data, tmp_path):
    """The sweep runs on the ensemble checkpoint; its clean mIoU and ECE are those of the
    members' probabilities averaged by hand over the demo test images."""
    from mmengine.runner import Runner
    _, models = members
    models = [models[0], models[2]]
    paths = [_save_member(m, tmp_path / f'member{i}.pth') for i, m in enumerate(models)]
    checkpoint = str(tmp_path / 'ensemble.pth')
    assert _load_tool(MAKE_ENSEMBLE).main(
        [SEG_DEMO_CONFIG, paths[0], SEG_DEMO_CONFIG, paths[1], '--out', checkpoint]) == 0
    data_root = osp.join(demo_data, 'potsdam')
    options, _ = sweep_options(data_root)
    work_dir = str(tmp_path / 'sweep')
    outcome = run_sweep(ENSEMBLE_CONFIG, checkpoint, corruptions=['haze'], severities=[1],
                        work_dir=work_dir, cfg_options=options, calibration=True,
                        plots=False)
    assert outcome.evaluated == [('clean', 0), ('haze', 1)]
    with open(osp.join(work_dir, 'conditions', 'clean.json')) as handle:
        clean = json.load(handle)['metrics']

    # by hand: every member alone on the clean test images
    cfg = _seg_cfg()
    cfg.merge_from_dict(options)
    with DefaultScope.overwrite_default_scope('mmseg'):
        loader = Runner.build_dataloader(cfg.test_dataloader)
        batches = list(loader)
    all_probs, all_labels, predictions = [], [], []
    for batch in batches:
        for index, mean in enumerate(_manual_mean_probs(models, batch)):
            labels = batch['data_samples'][index].gt_sem_seg.data[0].numpy()
            predictions.append(mean.argmax(axis=0))
            all_labels.append(labels)
            all_probs.append(mean[:, labels != 255])
    probs = np.concatenate(all_probs, axis=1)
    labels = np.concatenate([lab[lab != 255] for lab in all_labels])
    assert len(predictions) == 3 and labels.size > 100000
    ece = _numpy_ece(probs, labels)
    miou = _numpy_miou(predictions, all_labels)
    print(f'\nensemble of 2: clean mIoU {miou:.2f}, ECE {ece:.4f}; sweep: '
          f"{clean['mIoU']}, {clean['calib/ECE']:.4f}")
    assert clean['mIoU'] == pytest.approx(round(miou, 2), abs=0.011)
    assert clean['calib/ECE'] == pytest.approx(ece, abs=1e-6)
    assert 0.01 < ece < 0.99
    for key in ('gap', 'NLL', 'Brier', 'cwECE', 'AURC', 'eAURC', 'acc@90cov'):
        assert f'calib/{key}' in clean
    # NLL of the mean probability, by hand
    nll = -np.mean(np.log(np.maximum(probs[labels, np.arange(labels.size)], 1e-12)))
    assert clean['calib/NLL'] == pytest.approx(nll, rel=1e-5)
    with open(osp.join(work_dir, 'results.json')) as handle:
        numbers = json.load(handle)['numbers']
    assert numbers['clean'] == clean['mIoU'] and len(numbers['conditions']) == 2


def test_ensemble_sample_fields_are_those_of_a_segmentor(members):
    """The data samples carry the fields, types and shapes a segmentor's do."""
    model_cfgs, models = members
    batch = _batch()
    with torch.no_grad():
        single = models[0].test_step(copy.deepcopy(batch))
        ensemble = _ensemble([model_cfgs[0], model_cfgs[2]], [models[0], models[2]])
        combined = ensemble.test_step(copy.deepcopy(batch))
    for a, b in zip(single, combined):
        assert set(a.keys()) == set(b.keys())
        assert a.metainfo == b.metainfo
        for key in ('seg_logits', 'pred_sem_seg'):
            assert isinstance(getattr(b, key), PixelData)
            assert getattr(a, key).data.shape == getattr(b, key).data.shape
            assert getattr(a, key).data.dtype == getattr(b, key).data.dtype
