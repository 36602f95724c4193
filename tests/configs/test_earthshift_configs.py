"""EarthShift's training protocol as configs (configs/earthshift/ and its bases).

- every config resolves to the protocol: the ImageNet ViT-B/16 baseline encoder returning
  its last block after the final norm, no stochastic depth; the simple convolutional head;
  AdamW (weight decay 0), batch 32, 40 epochs frozen and 50 full, warm-up then cosine;
- MMSegmentation's FCNHead with the configs' settings is EarthShift's SimpleDecoder:
  equal, bit for bit, to ``Conv2d(C, 256, 3, padding=1) -> ReLU -> Conv2d(256, classes,
  1)`` holding the same weights, and the model's logits are that decoder's on the
  normalised last-block tokens, upsampled bilinearly (align_corners=False);
- at tiny widths every config trains one step: frozen, nothing of the encoder moves (its
  final norm included, which gets a gradient and lr 0) and the head does; full, the
  encoder moves; the 13-band config takes 13-band inputs through its frozen adapter;
- the learning rate of every iteration, from MMEngine's schedulers built from the configs,
  is torch's ``SequentialLR(LinearLR(start_factor=1e-6), CosineAnnealingLR)`` of the
  official code from the end of the warm-up on, and during the warm-up torch's ramp one
  iteration shorter (MMEngine's LinearLR reaches the full lr on the last iteration of its
  range), at most W / (W - 1) above the official one;
- the demo config trains with MMEngine's Runner on the demo data: the frozen grey-band
  adapter and encoder stay as they were loaded, the head trains, the lr follows the
  rescaled schedule and validation runs on the grey test pipeline.
"""
import copy
import math
import os.path as osp

import pytest
import torch
import torch.nn.functional as F
from mmengine.config import Config
from mmengine.optim import OptimWrapper, build_optim_wrapper
from mmengine.registry import MODELS, PARAM_SCHEDULERS, init_default_scope
from torch import nn

import reobench_mm  # noqa: F401  (registration)
from helpers import PROJECT_ROOT, SEG_DEMO_CONFIG, demo_config

CONFIGS = osp.join(PROJECT_ROOT, 'configs', 'earthshift')
SCHEDULES = osp.join(PROJECT_ROOT, 'configs', '_base_', 'schedules')
FROZEN = osp.join(CONFIGS, 'earthshift-head_vit-b16-in1k_frozen_1xb32-40e_potsdam-512x512.py')
FULL = osp.join(CONFIGS, 'earthshift-head_vit-b16-in1k_full_1xb32-50e_potsdam-512x512.py')
BANDS_13 = osp.join(CONFIGS, 'earthshift-head_vit-b16-in1k_adapter-13ch_frozen_1xb32-40e_'
                             'potsdam-512x512.py')
DEMO = osp.join(CONFIGS, 'earthshift-head_r18-tiny_grey-adapter_frozen_1xb4-40i_'
                         'demo-potsdam-128x128.py')
BASELINE = osp.join(PROJECT_ROOT, 'configs', '_base_', 'baselines', 'vit-b16-in1k.py')
POTSDAM = {FROZEN: dict(epochs=40, frozen=True, bands=3), FULL: dict(epochs=50, frozen=False,
                                                                    bands=3),
           BANDS_13: dict(epochs=40, frozen=True, bands=13)}
TINY_CHANNELS, TINY_DEPTH, NUM_CLASSES, SIZE = 32, 4, 6, 64


def _name(path):
    return osp.basename(path)


def _vit(model_cfg):
    backbone = model_cfg.backbone
    return backbone.backbone if backbone.type == 'ChannelAdapter' else backbone


# ------------------------------------------------------------------------------- settings

def test_the_config_folder_holds_the_potsdam_configs_and_the_demo():
    import glob
    assert sorted(glob.glob(osp.join(CONFIGS, '*.py'))) == sorted([*POTSDAM, DEMO])


@pytest.mark.parametrize('path', sorted(POTSDAM), ids=_name)
def test_potsdam_config_resolves_to_the_protocol(path):
    cfg, expected = Config.fromfile(path), POTSDAM[path]
    baseline = Config.fromfile(BASELINE)
    vit = _vit(cfg.model)
    assert (vit.type, vit.arch, vit.init_cfg) == \
        ('ImageNetViT', 'b', baseline.backbone.init_cfg)
    assert tuple(vit.out_indices) == (11, ) and vit.final_norm is True
    assert vit.drop_path_rate == 0.0 and vit.img_size == 512
    assert vit.get('frozen_stages', -1) == (12 if expected['frozen'] else -1)
    preprocessor = cfg.model.data_preprocessor
    assert len(preprocessor.mean) == len(preprocessor.std) == expected['bands']
    if expected['bands'] == 13:
        adapter = cfg.model.backbone
        assert (adapter.type, adapter.in_channels, adapter.out_channels, adapter.frozen) == \
            ('ChannelAdapter', 13, 3, True)
        assert preprocessor.bgr_to_rgb is False
    else:
        assert cfg.model.backbone.type == 'ImageNetViT'
        assert (preprocessor.mean, preprocessor.std) == \
            (baseline.img_norm_cfg.mean, baseline.img_norm_cfg.std)
    assert cfg.model.neck is None and cfg.model.auxiliary_head is None
    head = cfg.model.decode_head
    assert (head.type, head.in_channels, head.channels, head.in_index) == \
        ('FCNHead', 768, 256, -1)
    assert (head.num_convs, head.kernel_size, head.concat_input, head.dropout_ratio) == \
        (1, 3, False, 0.0)
    assert head.norm_cfg is None and head.act_cfg == dict(type='ReLU')
    assert (head.num_classes, head.align_corners) == (NUM_CLASSES, False)
    optimizer = cfg.optim_wrapper.optimizer
    assert (cfg.optim_wrapper.type, optimizer.type, optimizer.lr, optimizer.weight_decay) == \
        ('OptimWrapper', 'AdamW', 1e-4, 0.0)
    assert tuple(optimizer.betas) == (0.9, 0.999) and 'constructor' not in cfg.optim_wrapper
    keys = cfg.optim_wrapper.get('paramwise_cfg', {}).get('custom_keys', {})
    assert keys == ({'backbone.vit.norm.': dict(lr_mult=0.0, decay_mult=0.0)}
                    if expected['frozen'] else {})
    epochs = expected['epochs']
    assert [s.to_dict() for s in cfg.param_scheduler] == [
        dict(type='LinearLR', start_factor=1e-6, end_factor=1.0, by_epoch=True, begin=0,
             end=20, convert_to_iter_based=True),
        dict(type='CosineAnnealingLR', T_max=epochs - 20, eta_min=0.0, by_epoch=True,
             begin=20, end=epochs, convert_to_iter_based=True)]
    assert (cfg.train_cfg.type, cfg.train_cfg.max_epochs) == ('EpochBasedTrainLoop', epochs)
    assert cfg.train_dataloader.batch_size == 32
    assert cfg.test_cfg.type == 'CorruptionTestLoop'


def test_frozen_and_full_differ_only_in_what_trains_and_for_how_long():
    frozen, full = Config.fromfile(FROZEN), Config.fromfile(FULL)
    assert frozen.model.backbone.pop('frozen_stages') == 12
    assert frozen.model.to_dict() == full.model.to_dict()
    for key in ('train_dataloader', 'val_dataloader', 'test_dataloader', 'val_evaluator',
                'test_cfg', 'default_hooks'):
        assert frozen[key] == full[key], key
    assert frozen.optim_wrapper.optimizer == full.optim_wrapper.optimizer
    # the 13-band config is the frozen one with the adapter and its normalisation
    bands = Config.fromfile(BANDS_13)
    frozen = Config.fromfile(FROZEN)
    assert bands.model.backbone.backbone == frozen.model.backbone
    for key in ('decode_head', 'neck', 'auxiliary_head', 'train_cfg', 'test_cfg'):
        assert bands.model[key] == frozen.model[key], key
    for key in ('optim_wrapper', 'param_scheduler', 'train_cfg', 'train_dataloader'):
        assert bands[key] == frozen[key], key


# ------------------------------------------------------------------- the head = SimpleDecoder

def _simple_decoder_of(head):
    """EarthShift's SimpleDecoder written out, holding the head's weights."""
    conv = head.convs[0].conv
    decoder = nn.Sequential(nn.Conv2d(conv.in_channels, 256, 3, padding=1), nn.ReLU(),
                            nn.Conv2d(256, head.conv_seg.out_channels, 1))
    with torch.no_grad():
        decoder[0].weight.copy_(conv.weight)
        decoder[0].bias.copy_(conv.bias)
        decoder[2].weight.copy_(head.conv_seg.weight)
        decoder[2].bias.copy_(head.conv_seg.bias)
    return decoder


def test_the_fcn_head_of_the_configs_is_the_simple_decoder():
    init_default_scope('mmseg')
    cfg = copy.deepcopy(Config.fromfile(FROZEN).model.decode_head)
    cfg.in_channels = TINY_CHANNELS
    torch.manual_seed(0)
    head = MODELS.build(cfg)
    head.init_weights()
    head.eval()
    # exactly one 3x3 convolution with bias and ReLU, nothing else around the classifier
    assert len(head.convs) == 1
    block = head.convs[0]
    assert (block.conv.kernel_size, block.conv.padding) == ((3, 3), (1, 1))
    assert block.conv.bias is not None and not block.with_norm
    assert isinstance(block.activate, nn.ReLU)
    assert head.conv_seg.kernel_size == (1, 1) and head.dropout is None
    assert sum(p.numel() for p in head.parameters()) == \
        TINY_CHANNELS * 256 * 9 + 256 + 256 * NUM_CLASSES + NUM_CLASSES
    decoder = _simple_decoder_of(head)
    features = torch.randn(2, TINY_CHANNELS, 8, 8)
    with torch.no_grad():
        expected = decoder(features)
        assert torch.equal(head([features]), expected)
        # in_index=-1: the last of the levels a backbone returns
        assert torch.equal(head([torch.randn(2, TINY_CHANNELS, 4, 4), features]), expected)


def _tiny_model_cfg(path):
    cfg = Config.fromfile(path)
    model_cfg = copy.deepcopy(cfg.model)
    vit = _vit(model_cfg)
    vit.arch = dict(embed_dims=TINY_CHANNELS, depth=TINY_DEPTH, num_heads=2, patch_size=16)
    vit.img_size, vit.out_indices = SIZE, (TINY_DEPTH - 1, )
    if 'frozen_stages' in vit:
        vit.frozen_stages = TINY_DEPTH
    vit.pop('init_cfg')
    model_cfg.data_preprocessor.size = (SIZE, SIZE)
    model_cfg.decode_head.in_channels = TINY_CHANNELS
    return cfg, model_cfg


def _build(model_cfg):
    init_default_scope('mmseg')
    torch.manual_seed(0)
    model = MODELS.build(model_cfg)
    model.init_weights()
    return model


def test_the_models_logits_are_the_decoders_on_the_normalised_last_block():
    _, model_cfg = _tiny_model_cfg(FROZEN)
    model = _build(model_cfg)
    model.eval()
    image = torch.randn(2, 3, SIZE, SIZE)
    metas = [dict(img_shape=(SIZE, SIZE), pad_shape=(SIZE, SIZE), ori_shape=(SIZE, SIZE))] * 2
    vit = model.backbone.vit
    with torch.no_grad():
        logits = model.encode_decode(image, metas)
        tokens = vit.forward_features(image)[:, vit.num_prefix_tokens:]  # after vit.norm
        grid = tokens.transpose(1, 2).reshape(2, TINY_CHANNELS, SIZE // 16, SIZE // 16)
        expected = F.interpolate(_simple_decoder_of(model.decode_head)(grid), size=(SIZE, SIZE),
                                 mode='bilinear', align_corners=False)
    assert logits.shape == (2, NUM_CLASSES, SIZE, SIZE)
    torch.testing.assert_close(logits, expected, rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------- one step

def _batch(bands, num_images=2, seed=0):
    from mmengine.structures import PixelData
    from mmseg.structures import SegDataSample
    generator = torch.Generator().manual_seed(seed)
    samples = []
    for _ in range(num_images):
        sample = SegDataSample(metainfo=dict(img_shape=(SIZE, SIZE), ori_shape=(SIZE, SIZE),
                                             pad_shape=(SIZE, SIZE)))
        sample.gt_sem_seg = PixelData(
            data=torch.randint(0, NUM_CLASSES, (1, SIZE, SIZE), generator=generator))
        samples.append(sample)
    inputs = [torch.randint(0, 255, (bands, SIZE, SIZE), dtype=torch.uint8,
                            generator=generator) for _ in range(num_images)]
    return dict(inputs=inputs, data_samples=samples)


def _state(module):
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def _one_step(model_cfg, optim_cfg, bands):
    """A training step at a large learning rate: (encoder entries that moved, whether
    every head entry moved)."""
    model = _build(model_cfg)
    optim_cfg = copy.deepcopy(optim_cfg)
    optim_cfg.optimizer.lr = 0.5  # any update would show
    optim = build_optim_wrapper(model, optim_cfg)
    encoder, head = _state(model.backbone), _state(model.decode_head)
    model.train()
    losses = model.train_step(_batch(bands), optim)
    assert all(torch.isfinite(v).all() for v in losses.values())
    after, head_after = _state(model.backbone), _state(model.decode_head)
    moved = sorted(k for k in encoder if not torch.equal(encoder[k], after[k]))
    return model, moved, all(not torch.equal(head[k], head_after[k]) for k in head)


@pytest.mark.parametrize('path', sorted(POTSDAM), ids=_name)
def test_potsdam_config_trains_one_step_at_tiny_size(path):
    cfg, model_cfg = _tiny_model_cfg(path)
    expected = POTSDAM[path]
    model, moved, head_moved = _one_step(model_cfg, cfg.optim_wrapper, expected['bands'])
    assert head_moved
    prefix = 'backbone.' if expected['bands'] == 13 else ''
    if expected['frozen']:
        assert moved == [], f'the frozen encoder moved: {moved}'
        trainable = {n for n, p in model.backbone.named_parameters() if p.requires_grad}
        assert trainable == {f'{prefix}vit.norm.weight', f'{prefix}vit.norm.bias'}
        # that final norm is in the forward and gets a gradient: its lr 0 is what keeps it
        plain = copy.deepcopy(cfg.optim_wrapper)
        plain.pop('paramwise_cfg')
        _, moved, _ = _one_step(model_cfg, plain, expected['bands'])
        assert moved == [f'{prefix}vit.norm.bias', f'{prefix}vit.norm.weight']
    else:
        assert {k.split('.')[1] for k in moved} >= {'blocks', 'norm', 'patch_embed'}
        assert all(p.requires_grad for p in model.backbone.parameters())
    if expected['bands'] == 13:
        assert not model.backbone.adapter.weight.requires_grad


# --------------------------------------------------------------------------- schedules

BASE_LR = 1e-4


def _mmengine_lrs(schedulers, iters, epoch_length=None):
    """The lr of each of ``iters`` iterations under MMEngine's schedulers built from the
    config entries, stepped after every iteration as the Runner's ParamSchedulerHook
    does."""
    param = nn.Parameter(torch.zeros(1))
    optimizer = OptimWrapper(torch.optim.AdamW([param], lr=BASE_LR, weight_decay=0.0))
    built = []
    for entry in schedulers:
        entry = copy.deepcopy(entry.to_dict())
        extra = dict(epoch_length=epoch_length) if entry.get('convert_to_iter_based') else {}
        built.append(PARAM_SCHEDULERS.build(entry, default_args=dict(optimizer=optimizer,
                                                                     **extra)))
    lrs = []
    for _ in range(iters):
        lrs.append(optimizer.param_groups[0]['lr'])
        optimizer.step()
        for scheduler in built:
            if not scheduler.by_epoch:
                scheduler.step()
    return torch.tensor(lrs, dtype=torch.float64)


def _torch_lrs(warmup, decay, warmup_ramp=None):
    """The official code's schedule: torch's SequentialLR of LinearLR(1e-6) over
    ``warmup_ramp`` iterations (default ``warmup``) and CosineAnnealingLR(T_max=decay),
    switching at ``warmup``."""
    param = nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.AdamW([param], lr=BASE_LR, weight_decay=0.0)
    scheduler = torch.optim.lr_scheduler.SequentialLR(optimizer, [
        torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=1e-6, end_factor=1.0,
                                          total_iters=warmup_ramp or warmup),
        torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=decay)],
        milestones=[warmup])
    lrs = []
    for _ in range(warmup + decay):
        lrs.append(optimizer.param_groups[0]['lr'])
        optimizer.step()
        scheduler.step()
    return torch.tensor(lrs, dtype=torch.float64)


def _check_against_torch(lrs, warmup, decay):
    official = _torch_lrs(warmup, decay)
    assert lrs.shape == official.shape
    # the cosine part: the official schedule's, iteration by iteration
    torch.testing.assert_close(lrs[warmup:], official[warmup:], rtol=1e-9, atol=1e-15)
    assert lrs[warmup].item() == pytest.approx(BASE_LR, rel=1e-12)
    assert lrs[-1] < BASE_LR * 1e-2
    # the warm-up: torch's ramp one iteration shorter, never more than W / (W - 1) above
    torch.testing.assert_close(lrs[:warmup], _torch_lrs(warmup, decay, warmup - 1)[:warmup],
                               rtol=1e-9, atol=1e-15)
    ratio = lrs[:warmup] / official[:warmup]
    assert lrs[0].item() == official[0].item() == pytest.approx(BASE_LR * 1e-6, rel=1e-12)
    assert (ratio >= 1 - 1e-9).all() and (ratio <= warmup / (warmup - 1) + 1e-9).all()


@pytest.mark.parametrize('name, epochs', [('schedule_earthshift_adamw_40e.py', 40),
                                          ('schedule_earthshift_adamw_50e.py', 50)])
@pytest.mark.parametrize('epoch_length', [1, 3])
def test_epoch_schedule_is_the_official_one(name, epochs, epoch_length):
    cfg = Config.fromfile(osp.join(SCHEDULES, name))
    assert cfg.train_cfg.max_epochs == epochs
    lrs = _mmengine_lrs(cfg.param_scheduler, epochs * epoch_length, epoch_length)
    _check_against_torch(lrs, 20 * epoch_length, (epochs - 20) * epoch_length)


def test_demo_schedule_is_the_official_one_by_iterations():
    cfg = Config.fromfile(osp.join(SCHEDULES, 'schedule_earthshift_demo_iters.py'))
    assert (cfg.train_cfg.type, cfg.train_cfg.max_iters) == ('IterBasedTrainLoop', 40)
    assert cfg.optim_wrapper.optimizer == dict(type='AdamW', lr=BASE_LR, betas=(0.9, 0.999),
                                               weight_decay=0.0)
    _check_against_torch(_mmengine_lrs(cfg.param_scheduler, 40), 20, 20)


# ------------------------------------------------------------------------------- demo

def test_demo_config_settings():
    cfg, demo = Config.fromfile(DEMO), Config.fromfile(SEG_DEMO_CONFIG)
    adapter = cfg.model.backbone
    assert (adapter.type, adapter.in_channels, adapter.out_channels, adapter.frozen) == \
        ('ChannelAdapter', 1, 3, True)
    encoder = copy.deepcopy(adapter.backbone)
    assert encoder.pop('init_cfg') == dict(type='Pretrained', prefix='backbone.',
                                           checkpoint='work_dirs/demo/seg/iter_600.pth')
    assert (encoder.pop('frozen_stages'), encoder.pop('norm_eval')) == (4, True)
    assert tuple(encoder.pop('out_indices')) == (3, )
    reference = copy.deepcopy(demo.model.backbone)
    reference.pop('out_indices'), reference.pop('norm_eval')
    assert encoder == reference
    preprocessor = cfg.model.data_preprocessor
    assert (len(preprocessor.mean), len(preprocessor.std), preprocessor.bgr_to_rgb) == \
        (1, 1, False)
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        pipeline = cfg[loader].dataset.pipeline
        assert pipeline[0] == dict(type='LoadImageFromFile', color_type='grayscale'), loader
        assert [t.type for t in pipeline[1:]] == \
            [t.type for t in demo[loader].dataset.pipeline[1:]], loader
    head = cfg.model.decode_head
    assert (head.type, head.in_channels, head.channels, head.num_convs, head.kernel_size,
            head.norm_cfg, head.dropout_ratio) == ('FCNHead', 128, 256, 1, 3, None, 0.0)
    assert cfg.model.auxiliary_head is None and 'neck' not in cfg.model
    schedule = Config.fromfile(osp.join(SCHEDULES, 'schedule_earthshift_demo_iters.py'))
    for key in ('optim_wrapper', 'param_scheduler', 'train_cfg'):
        assert cfg[key] == schedule[key], key


@pytest.mark.trains('training the demo config with the Runner is what it checks')
@pytest.mark.slow
def test_demo_config_trains_with_the_runner(demo_data, tmp_path):
    from mmengine.hooks import Hook
    from mmengine.runner import Runner

    init_default_scope('mmseg')
    torch.manual_seed(3)
    source = MODELS.build(Config.fromfile(SEG_DEMO_CONFIG).model)
    source.train()
    with torch.no_grad():  # batch-norm statistics that differ from the defaults
        source.extract_feat(torch.randn(2, 3, 64, 64) * 3 + 1)
    checkpoint = str(tmp_path / 'iter_600.pth')
    torch.save(dict(meta=dict(iter=600), state_dict=source.state_dict()), checkpoint)
    encoder = {k[len('backbone.'):]: v for k, v in source.state_dict().items()
               if k.startswith('backbone.')}

    iters, work_dir = 4, str(tmp_path / 'work')
    cfg = demo_config(DEMO, osp.join(demo_data, 'potsdam'), work_dir, iters)
    cfg.model.backbone.backbone.init_cfg.checkpoint = checkpoint
    cfg.custom_hooks = []

    class Watch(Hook):
        """The head after the initialisation, the validation metrics."""

        def before_train(self, runner):
            self.head = _state(runner.model.decode_head)

        def after_val_epoch(self, runner, metrics=None):
            self.metrics = metrics

    watch = Watch()
    runner = Runner.from_cfg(cfg)
    adapter = runner.model.backbone.adapter.weight.detach().clone()
    runner.register_hook(watch)
    runner.train()
    assert runner.iter == iters
    # the schedule rescaled to 4 iterations: warm-up over 2 (MMEngine's ramp: 1e-6 x lr,
    # then the full lr), cosine over 2 (T_max = 2: full lr, then half)
    lrs = runner.message_hub.get_scalar('train/lr').data[0]
    assert lrs == pytest.approx([BASE_LR * 1e-6, BASE_LR, BASE_LR, BASE_LR / 2], rel=1e-9)
    assert math.isfinite(runner.message_hub.get_scalar('train/loss').current())
    assert 'mIoU' in watch.metrics
    state = torch.load(osp.join(work_dir, f'iter_{iters}.pth'), map_location='cpu',
                       weights_only=False)['state_dict']
    assert torch.equal(state['backbone.adapter.weight'], adapter)
    assert state['backbone.adapter.weight'].shape == (3, 1, 1, 1)
    assert all(torch.equal(state[f'backbone.backbone.{k}'], v) for k, v in encoder.items())
    assert all(not torch.equal(state[f'decode_head.{k}'], v) for k, v in watch.head.items()
               if v.is_floating_point())
