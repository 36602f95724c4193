"""The attacks on their own: FGSM and one PGD step against an independent computation
written here with torch autograd on the demo UperNet; SegPGD's and CosPGD's weights
against their published formulas; APGD's checkpoints; budgets, projections and the valid
range; seeding; the ignored pixels; any band count and uint16; the refusals."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from mmengine.config import Config, ConfigDict
from mmengine.registry import DefaultScope
from mmengine.structures import PixelData

import reobench_mm  # noqa: F401
from reobench_corruptions import make_rng
from reobench_mm.attacks import ATTACK_KINDS, parse_attack, perturb
from reobench_mm.attacks.functional import (apgd_checkpoints, band_budget, cospgd_weights,
                                            project, random_start, segpgd_lambda, segpgd_loss)
from reobench_mm.attacks.segmentation import SegmentationTarget, image_areas
from reobench_mm.errors import SweepError
from reobench_mm.registry import MODELS

from helpers import SEG_DEMO_CONFIG

MEAN = torch.tensor([123.675, 116.28, 103.53]).view(3, 1, 1)
STD = torch.tensor([58.395, 57.12, 57.375]).view(3, 1, 1)


def _segmentor(bands=3, seed=0):
    cfg = Config.fromfile(SEG_DEMO_CONFIG)
    model_cfg = cfg.model
    if bands != 3:
        model_cfg.backbone.in_channels = bands
        model_cfg.data_preprocessor.mean = [100.0] * bands
        model_cfg.data_preprocessor.std = [50.0] * bands
        model_cfg.data_preprocessor.bgr_to_rgb = False
    torch.manual_seed(seed)
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        model = MODELS.build(model_cfg)
    model.init_weights()
    return model.eval()


def _sample(labels, name='tile_0.png'):
    from mmseg.structures import SegDataSample
    h, w = labels.shape
    sample = SegDataSample(metainfo=dict(img_shape=(h, w), ori_shape=(h, w), pad_shape=(h, w),
                                         img_path=f'/data/{name}'))
    sample.gt_sem_seg = PixelData(data=torch.as_tensor(labels)[None].long())
    return sample


def _image(seed=0, size=64, bands=3, dtype=np.uint8, top=255):
    rng = np.random.default_rng(seed)
    return torch.from_numpy(rng.integers(0, top + 1, (bands, size, size)).astype(dtype))


def _labels(seed=0, size=64):
    rng = np.random.default_rng(seed + 100)
    labels = rng.integers(0, 6, (size, size))
    labels[:16, :16] = 255
    return labels


def _spec(kind, **settings):
    (spec, ) = parse_attack(kind, dict(eps=[8], **settings))
    return spec


@pytest.fixture(scope='module')
def model():
    return _segmentor()


def _reference_gradient(model, x0, labels):
    """∇ₓ of the mean cross-entropy over non-ignored pixels, computed directly: the
    preprocessor's arithmetic written out (BGR -> RGB, (x - mean) / std), the model's
    ``encode_decode`` (whole inference at the input size), log-softmax and the labels."""
    x = x0.clone().requires_grad_(True)
    z = (x[[2, 1, 0]] - MEAN) / STD
    h, w = labels.shape
    logits = model.encode_decode(z[None], [dict(img_shape=(h, w), ori_shape=(h, w),
                                                pad_shape=(h, w))])[0]
    target = torch.as_tensor(labels).long()
    valid = target != 255
    picked = -torch.log_softmax(logits, 0).gather(0, torch.where(valid, target, 0)[None])[0]
    loss = picked[valid].mean()
    return torch.autograd.grad(loss, x)[0]


def test_fgsm_equals_a_direct_autograd_computation(model):
    x0, labels = _image().float(), _labels()
    target = SegmentationTarget(model, 255)
    got = perturb(x0, target.objective(_sample(labels), 'ce', 'cpu'), _spec('fgsm'), None,
                  255.0)
    grad = _reference_gradient(model, x0, labels)
    expected = (x0 + 8 * grad.sign()).clamp(0, 255)
    assert torch.allclose(got, expected, atol=1e-6, rtol=0)
    assert float((got - x0).abs().max()) == 8.0


def test_one_pgd_step_equals_a_direct_autograd_computation(model):
    x0, labels = _image(1).float(), _labels(1)
    spec = _spec('pgd', steps=1, alpha=3.0)
    target = SegmentationTarget(model, 255)
    key = 'tile_0.png'
    got = perturb(x0, target.objective(_sample(labels), 'ce', 'cpu'), spec,
                  make_rng(0, 'test', 0, key), 255.0)
    # the same start, drawn from the same generator state, then one step by hand
    start = torch.from_numpy(make_rng(0, 'test', 0, key).uniform(-1, 1, x0.shape)).float() * 8
    x = (x0 + start).clamp(0, 255)
    grad = _reference_gradient(model, x, labels)
    expected = (x0 + (x + 3.0 * grad.sign() - x0).clamp(-8, 8)).clamp(0, 255)
    assert torch.allclose(got, expected, atol=1e-6, rtol=0)


def test_segpgd_weights_against_the_published_formula():
    torch.manual_seed(0)
    logits = torch.randn(4, 5, 6)
    labels = torch.randint(0, 4, (5, 6))
    labels[0, :3] = 255
    valid = labels != 255
    steps = 10
    for step in (0, 3, 9):
        lam = step / (2 * steps)
        assert segpgd_lambda(step, steps) == lam
        ce = F.cross_entropy(logits[None], labels[None], ignore_index=255, reduction='none')[0]
        correct = (logits.argmax(0) == labels) & valid
        wrong = ~(logits.argmax(0) == labels) & valid
        expected = ((1 - lam) * ce[correct].sum() + lam * ce[wrong].sum()) / valid.sum()
        assert float(segpgd_loss(logits, labels, valid, step, steps)) == \
            pytest.approx(float(expected), rel=1e-6)


def test_cospgd_weights_against_the_published_formula():
    torch.manual_seed(1)
    logits = torch.randn(5, 4, 7, requires_grad=True)
    labels = torch.randint(0, 5, (4, 7))
    labels[2, 2] = 255
    valid = labels != 255
    weights = cospgd_weights(logits, labels, valid)
    probs = torch.softmax(logits.detach(), 0)
    # cos(p, e_y) = p_y / ‖p‖₂
    expected = probs.gather(0, torch.where(valid, labels, 0)[None])[0] / probs.norm(dim=0)
    expected[~valid] = 0
    assert torch.allclose(weights, expected, atol=1e-7)
    assert not weights.requires_grad


def test_apgd_checkpoints_follow_the_authors_schedule():
    assert apgd_checkpoints(100) == [22, 41, 57, 70, 80, 87, 93, 99]
    assert apgd_checkpoints(10) == [2, 3, 4, 5, 6, 7, 8, 9, 10]
    assert apgd_checkpoints(1) == [1]


@pytest.mark.parametrize('kind', ['fgsm', 'pgd', 'pgd_l2', 'segpgd', 'cospgd', 'apgd'])
def test_every_attack_stays_in_the_budget_and_the_range(model, kind):
    x0, labels = _image(2).float(), _labels(2)
    eps = 300.0 if kind == 'pgd_l2' else 8.0
    (spec, ) = parse_attack(kind, dict(eps=[eps], **({} if kind == 'fgsm' else
                                                       dict(steps=3))))
    objective = SegmentationTarget(model, 255).objective(
        _sample(labels), ATTACK_KINDS[kind].objective, 'cpu')
    x = perturb(x0, objective, spec, make_rng(0, kind, 0, 'k'), 255.0)
    delta = x - x0
    assert float(x.min()) >= 0 and float(x.max()) <= 255
    if kind == 'pgd_l2':
        assert float(delta.norm()) <= eps * (1 + 1e-5)
    else:
        assert float(delta.abs().max()) <= eps + 1e-4
    assert float(delta.abs().max()) > 0


def test_the_attack_raises_the_loss(model):
    x0, labels = _image(3).float(), _labels(3)
    target = SegmentationTarget(model, 255)
    objective = target.objective(_sample(labels), 'ce', 'cpu')
    x = perturb(x0, objective, _spec('pgd', steps=5), make_rng(0, 'pgd', 0, 'k'), 255.0)
    with torch.no_grad():
        assert float(objective(x, 0, 1)) > float(objective(x0, 0, 1))


def test_same_seed_same_bits_and_another_seed_another_start(model):
    x0, labels = _image(4).float(), _labels(4)
    objective = SegmentationTarget(model, 255).objective(_sample(labels), 'ce', 'cpu')
    spec = _spec('pgd', steps=2)
    a = perturb(x0, objective, spec, make_rng(0, 'pgd', 0, 'k'), 255.0)
    b = perturb(x0, objective, spec, make_rng(0, 'pgd', 0, 'k'), 255.0)
    c = perturb(x0, objective, spec, make_rng(1, 'pgd', 0, 'k'), 255.0)
    assert torch.equal(a, b)
    assert not torch.equal(a, c)


def test_ignored_pixels_never_influence_the_perturbation(model):
    """The pixels of the ignored block carry the ignore label in both runs, once 255 and
    once another ignore value: the perturbations are identical."""
    x0, labels = _image(5).float(), _labels(5)
    other = labels.copy()
    other[:16, :16] = 77
    spec = _spec('segpgd', steps=2)
    runs = [perturb(x0, SegmentationTarget(model, ignore).objective(_sample(lab), 'segpgd',
                                                                     'cpu'),
                    spec, make_rng(0, 'x', 0, 'k'), 255.0)
            for ignore, lab in ((255, labels), (77, other))]
    assert torch.equal(*runs)
    # and labelling them with a class does change it (the test can fail)
    classed = labels.copy()
    classed[:16, :16] = 3
    changed = perturb(x0, SegmentationTarget(model, 255).objective(_sample(classed), 'segpgd',
                                                                   'cpu'),
                      spec, make_rng(0, 'x', 0, 'k'), 255.0)
    assert not torch.equal(changed, runs[0])


def test_four_bands_uint16_and_per_band_budgets():
    model = _segmentor(bands=4)
    x = _image(6, bands=4, dtype=np.uint16, top=4095).float()
    labels = _labels(6)
    (spec, ) = parse_attack('pgd', dict(eps=[[8, 8, 8, 100]], steps=2, max_value=4095))
    objective = SegmentationTarget(model, 255).objective(_sample(labels), 'ce', 'cpu')
    adv = perturb(x, objective, spec, make_rng(0, 'pgd', 0, 'k'), 4095.0)
    size = (adv - x).abs().amax(dim=(1, 2))
    assert torch.all(size <= torch.tensor([8, 8, 8, 100.0]) + 1e-3)
    assert float(size[3]) > 8
    assert float(adv.max()) <= 4095 and float(adv.min()) >= 0


def test_projections_and_starts():
    torch.manual_seed(0)
    delta = torch.randn(3, 8, 8) * 20
    eps = band_budget([1, 2, 3], 3)
    projected = project(delta, eps, 'linf')
    assert torch.all(projected.abs().amax(dim=(1, 2)) <= torch.tensor([1, 2, 3.0]))
    assert float(project(delta, 5.0, 'l2').norm()) == pytest.approx(5.0, rel=1e-6)
    small = delta * 1e-3
    assert torch.equal(project(small, 5.0, 'l2'), small)
    start = random_start((3, 8, 8), eps, 'linf', np.random.default_rng(0))
    assert torch.all(start.abs().amax(dim=(1, 2)) <= torch.tensor([1, 2, 3.0]))
    ball = random_start((3, 8, 8), 5.0, 'l2', np.random.default_rng(0))
    assert float(ball.norm()) <= 5.0
    with pytest.raises(ValueError, match='2 values per band but the image has 3 bands'):
        band_budget([1, 2], 3)


def test_zero_budget_returns_the_image():
    x0 = _image(7).float()
    (spec, ) = parse_attack('pgd', dict(eps=[0]))

    def never(x, step, steps):
        raise AssertionError('no gradient is needed at eps = 0')
    assert torch.equal(perturb(x0, never, spec, None, 255.0), x0)


def test_a_model_without_gradients_is_refused():
    x0, labels = _image(8).float(), _labels(8)
    model = _segmentor()
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    target = SegmentationTarget(model, 255)

    def detached(x, step, steps):
        return target.objective(_sample(labels), 'ce', 'cpu')(x.detach(), step, steps)
    with pytest.raises(RuntimeError, match='does not depend differentiably on the input'):
        perturb(x0, detached, _spec('fgsm'), None, 255.0)


def test_image_areas_equal_iou_metric_areas():
    from mmseg.evaluation.metrics import IoUMetric
    rng = np.random.default_rng(0)
    pred = torch.from_numpy(rng.integers(0, 4, (9, 9)))
    label = torch.from_numpy(rng.integers(0, 4, (9, 9)))
    label[0] = 255
    intersect, union, area_pred, area_label = IoUMetric.intersect_and_union(
        pred, label, 4, 255)
    areas = image_areas(pred, label, label != 255, 4)
    assert np.array_equal(areas, np.stack([intersect.numpy(), area_pred.numpy(),
                                           area_label.numpy()], -1))


@pytest.mark.parametrize('entry, message', [
    (dict(eps=[8], steps=0), 'steps must be an integer >= 1'),
    (dict(eps=[-1]), 'must be a number >= 0'),
    (dict(steps=3), 'eps is required'),
    (dict(eps=[8, 8.0]), 'given twice'),
    (dict(eps=[8], type='pgdd'), "unknown attack 'pgdd'"),
    (dict(eps=[8], stpes=3), r"unknown key\(s\) \['stpes'\]"),
    (dict(eps=[[8, 8]], type='pgd_l2'), 'one number per band is for L'),
    (dict(eps=[8], type='fgsm', steps=3), 'fgsm takes one step'),
    (dict(eps=[8], type='apgd', alpha=2), 'sets its own step size'),
    (dict(eps=[8], losses=['box']), 'losses must be names of'),
])
def test_bad_settings_are_refused_by_name(entry, message):
    with pytest.raises(SweepError, match=message):
        parse_attack(entry.pop('name', 'pgd'), entry)


def test_tasks_without_an_objective_are_refused():
    with pytest.raises(SweepError, match='segpgd is defined for segmentation'):
        parse_attack('segpgd', dict(eps=[8]), 'rotated_detection')
    with pytest.raises(SweepError, match='losses are for detection'):
        parse_attack('pgd', dict(eps=[8], losses=['cls']), 'segmentation')


def _backbone_names():
    from reobench_mm.models.backbones.convert import dense_backbone_types
    return sorted(dense_backbone_types())


@pytest.mark.parametrize('name', _backbone_names())
def test_every_backbone_of_the_package_can_be_attacked(name):
    """A segmentor on each of the package's backbones (tiny widths): the pixel
    gradient reaches the input and one PGD step moves every band within the budget
    (of as many bands as the backbone takes: 6 for Prithvi, 12 for TerraMind)."""
    from reobench_mm.models.backbones.convert import dense_backbone_types
    probe = dense_backbone_types()[name](arch=dict(embed_dims=32, depth=4, num_heads=2),
                                          img_size=64)
    bands = getattr(probe, 'in_channels', None) or 3
    rgb = bands == 3
    cfg = dict(
        type='EncoderDecoder',
        data_preprocessor=dict(type='SegDataPreProcessor',
                               mean=[123.675, 116.28, 103.53] if rgb else [127.5] * bands,
                               std=[58.395, 57.12, 57.375] if rgb else [73.6] * bands,
                               bgr_to_rgb=rgb, pad_val=0, seg_pad_val=255),
        backbone=dict(type=name, arch=dict(embed_dims=32, depth=4, num_heads=2), img_size=64,
                      out_indices=(0, 1, 2, 3)),
        decode_head=dict(type='FCNHead', in_channels=32, in_index=3, channels=16,
                         num_convs=1, concat_input=False, num_classes=4,
                         loss_decode=dict(type='CrossEntropyLoss')),
        train_cfg=dict(), test_cfg=dict(mode='whole'))
    torch.manual_seed(0)
    with DefaultScope.overwrite_default_scope('mmseg'):
        model = MODELS.build(ConfigDict(cfg)).eval()
    x0 = _image(9, bands=bands).float()
    labels = np.random.default_rng(9).integers(0, 4, (64, 64))
    objective = SegmentationTarget(model, 255).objective(_sample(labels), 'ce', 'cpu')
    x = perturb(x0, objective, _spec('pgd', steps=1), make_rng(0, name, 0, 'k'), 255.0)
    moved = (x - x0).abs().amax(dim=(1, 2))
    assert torch.all(moved > 0) and torch.all(moved <= 8 + 1e-4)


def test_worst_of_battery_and_image_choice_on_constructed_statistics():
    from reobench_mm.analysis.attack_table import worst_of_battery
    from reobench_mm.evaluation.functional.image_stats import SegmentationImageStats
    # 3 images, 2 classes: (intersection, prediction, label)
    a = SegmentationImageStats(np.array([[[5, 6, 7], [1, 2, 3]], [[0, 4, 4], [0, 4, 4]],
                                         [[2, 2, 2], [3, 3, 3]]]))
    b = SegmentationImageStats(np.array([[[6, 6, 7], [2, 2, 3]], [[1, 4, 4], [1, 4, 4]],
                                         [[0, 2, 2], [0, 3, 3]]]))
    chosen, choice = worst_of_battery([a, b])
    # per-image mIoU: a = [mean(5/8, 1/4), 0, 100], b = [mean(6/7, 2/3), 1/7, 0]
    assert choice.tolist() == [0, 0, 1]
    assert np.array_equal(chosen.areas, np.stack([a.areas[0], a.areas[1], b.areas[2]]))
    same, _ = worst_of_battery([a, a])
    assert np.array_equal(same.areas, a.areas)


def test_the_worst_of_the_battery_is_never_above_one_attack():
    """mIoU is pooled over the images, so the per-image choice can pool higher than one
    attack alone: image 1 chosen from A (IoU 0 on a union of 10 pixels), image 2 from B
    (0.49 of 100), while B's image 1 has IoU 0.005 on a union of 1000 — B alone pools
    to 5.0, the choice to 44.5. The worst is B's number, and says so."""
    from types import SimpleNamespace

    from reobench_mm.analysis.attack_table import attack_block, attack_lines
    from reobench_mm.evaluation.functional.image_stats import SegmentationImageStats
    a = SegmentationImageStats(np.array([[[0, 5, 5]], [[50, 75, 75]]]))
    b = SegmentationImageStats(np.array([[[5, 500, 505]], [[49, 74, 75]]]))
    values = {name: s.recorded_value() for name, s in (('a', a), ('b', b))}  # 0-100
    assert values['a'] == pytest.approx(100 * 50 / 110, abs=0.005) and \
        values['b'] == pytest.approx(100 * 54 / 1100, abs=0.005)  # as mmseg rounds
    rows = [dict(attack=name, type='pgd', eps='8', norm='linf', base='clean',
                 key=f'adv/{name}_eps8', value=values[name], stats=SimpleNamespace(task=s))
            for name, s in (('a', a), ('b', b))]
    block = attack_block(rows, clean_value=60.0, metric='mIoU')
    worst = block['worst'][0]
    assert worst['images_per_attack'] == {'a': 1, 'b': 1}
    assert worst['per_image_value'] == pytest.approx(100 * 49 / 110, abs=0.005)
    assert worst['value'] == values['b'] and worst['source'] == 'b'
    assert worst['value'] <= min(values.values())
    text = '\n'.join(attack_lines(block))
    assert 'b alone (the per-image choice, a: 1, b: 1, gives 44.55)' in text
    # where the per-image choice is the lowest, it is the worst
    rows[1]['value'] = values['b'] = b.recorded_value() + 60.0  # b made milder
    block = attack_block(rows, clean_value=60.0, metric='mIoU')
    assert block['worst'][0]['source'] == 'per image'
