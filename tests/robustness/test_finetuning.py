"""Frozen encoder against full fine-tuning: the frozen twin of a config, and the
comparison tool end to end on the demo UperNet (with a shift set), its numbers against
each run's results.json and the frozen run's encoder left as it started."""
import json
import os.path as osp

import pytest
import torch
from mmengine.config import Config

import reobench_mm  # noqa: F401  (registration)
from helpers import SEG_DEMO_CONFIG, load_tool
from reobench_mm.analysis.results_file import read_results
from reobench_mm.robustness.finetuning import frozen_stages_of, write_frozen_twin

MODEL = osp.splitext(osp.basename(SEG_DEMO_CONFIG))[0]


@pytest.mark.parametrize('backbone, expected', [
    (dict(type='SatMAE', arch='l'), dict(frozen_stages=24)),
    (dict(type='SatMAE'), dict(frozen_stages=24)),  # its default arch, ViT-L
    (dict(type='RVSA', arch='b'), dict(frozen_stages=12)),
    (dict(type='CLIPVisionTransformer', arch='ViT-H/14'), dict(frozen_stages=32)),
    (dict(type='ImageNetViT', arch=dict(embed_dims=32, depth=4, num_heads=2)),
     dict(frozen_stages=4)),
    (dict(type='ResNetV1c', depth=50), dict(frozen_stages=4, norm_eval=True)),
    (dict(type='mmdet.ResNet', depth=50, num_stages=3), dict(frozen_stages=3, norm_eval=True)),
    # the adapter too (the official EarthShift code's frozen mode), and what it wraps
    (dict(type='ChannelAdapter', in_channels=13, backbone=dict(type='ImageNetViT', arch='b')),
     dict(frozen=True, backbone=dict(frozen_stages=12))),
    (dict(type='reobench_mm.ChannelAdapter', in_channels=1,
          backbone=dict(type='ResNetV1c', depth=18)),
     dict(frozen=True, backbone=dict(frozen_stages=4, norm_eval=True))),
])
def test_every_encoder_stage_is_frozen(backbone, expected):
    assert frozen_stages_of(backbone) == expected


def test_an_adapter_around_an_unknown_encoder_needs_its_frozen_config():
    with pytest.raises(ValueError, match="cannot freeze a backbone of type 'SwinTransformer'"):
        frozen_stages_of(dict(type='ChannelAdapter', in_channels=13,
                              backbone=dict(type='mmseg.SwinTransformer')))
    with pytest.raises(ValueError, match='ChannelAdapter whose backbone is None'):
        frozen_stages_of(dict(type='ChannelAdapter', in_channels=13))


def test_the_frozen_twin_of_an_adapter_config_freezes_adapter_and_encoder(tmp_path):
    config = tmp_path / 'upernet_adapter.py'
    config.write_text(
        f"_base_ = ['{SEG_DEMO_CONFIG}']\n"
        "model = dict(backbone=dict(_delete_=True, type='ChannelAdapter', in_channels=13,\n"
        "                           backbone=_base_.model.backbone))\n")
    twin, original = Config.fromfile(write_frozen_twin(str(config), str(tmp_path))), \
        Config.fromfile(str(config))
    adapter = twin.model.backbone
    assert adapter.frozen is True and adapter.in_channels == 13
    assert adapter.backbone.frozen_stages == 4 and adapter.backbone.norm_eval is True
    adapter.pop('frozen'), adapter.backbone.pop('frozen_stages'), adapter.backbone.pop('norm_eval')
    original.model.backbone.backbone.pop('frozen_stages', None)
    original.model.backbone.backbone.pop('norm_eval', None)
    assert twin.model.to_dict() == original.model.to_dict()


def test_an_unknown_encoder_needs_its_frozen_config():
    with pytest.raises(ValueError, match="cannot freeze a backbone of type 'SwinTransformer'"):
        frozen_stages_of(dict(type='mmseg.SwinTransformer'))


def test_the_frozen_twin_is_the_config_with_its_encoder_frozen(tmp_path):
    path = write_frozen_twin(SEG_DEMO_CONFIG, str(tmp_path))
    assert osp.basename(path) == MODEL + '_frozen.py'
    twin, original = Config.fromfile(path), Config.fromfile(SEG_DEMO_CONFIG)
    assert twin.model.backbone.frozen_stages == 4 and twin.model.backbone.norm_eval is True
    twin.model.backbone.pop('frozen_stages'), twin.model.backbone.pop('norm_eval')
    original.model.backbone.pop('frozen_stages', None)
    original.model.backbone.pop('norm_eval', None)
    assert twin.model.to_dict() == original.model.to_dict()
    assert twin.train_dataloader.to_dict() == original.train_dataloader.to_dict()


@pytest.mark.trains('the fine-tuning driver trains its models')
@pytest.mark.slow
def test_the_comparison_tool_end_to_end(demo_data, tmp_path, capsys):
    data_root = osp.join(demo_data, 'potsdam')
    options = ['train_dataloader.batch_size=2', 'log_level=WARNING']
    for split in ('train', 'val', 'test'):
        options += [f'{split}_dataloader.dataset.data_root={data_root}',
                    f'{split}_dataloader.num_workers=0',
                    f'{split}_dataloader.persistent_workers=False']
    shifted = osp.join(demo_data, 'potsdam_shifted')
    derived = tmp_path / 'upernet_with_shift.py'
    derived.write_text(
        f"_base_ = ['{SEG_DEMO_CONFIG}']\n"
        "test_cfg = dict(type='RobustnessTestLoop', shifts=dict(shifted=dict("
        "shift_type='sensor', dataset=dict("
        f"type='PotsdamDataset', data_root='{shifted}', data_prefix=dict("
        "img_path='img_dir/val', seg_map_path='ann_dir/val')))))\n")
    work_dir = str(tmp_path / 'work')
    tool = load_tool('analysis_tools/finetune_compare.py')
    assert tool.main([str(derived), '--work-dir', work_dir, '--seeds', '0', '--iters', '6',
                      '--corruptions', 'haze', '--severities', '1', '--no-calibration',
                      '--cfg-options', *options]) == 0
    printed = capsys.readouterr().out
    assert '# Frozen encoder against full fine-tuning' in printed
    with open(osp.join(work_dir, 'finetune_comparison.json')) as handle:
        doc = json.load(handle)
    assert doc['keys'] == ['clean', 'avg', 'delta_tp', 'ece_clean', 'shifted/ood',
                           'shifted/relative_drop']
    names = {mode: doc['modes'][mode]['model'] for mode in ('full', 'frozen')}
    assert names == {'full': 'upernet_with_shift', 'frozen': 'upernet_with_shift_frozen'}
    for mode, model in names.items():
        folder = osp.join(work_dir, model, 'fraction_1', 'seed_0')
        summary = read_results(osp.join(folder, 'robustness', 'results.json')).summary
        run = doc['modes'][mode]['runs'][0]
        assert run['clean'] == pytest.approx(summary.clean)
        assert run['avg'] == pytest.approx(summary.avg)
        assert run['shifted/ood'] == pytest.approx(summary.blocks['shifts']['sets'][0]['ood'])
        assert run['ece_clean'] is None
    for key in ('clean', 'avg', 'shifted/relative_drop'):
        assert doc['difference'][key] == pytest.approx(
            doc['modes']['frozen']['band'][key]['mean'] - doc['modes']['full']['band'][key]['mean'])
    # the frozen run's encoder kept its batch-norm statistics; the full run's moved
    stats = {}
    for mode, model in names.items():
        checkpoint = torch.load(osp.join(work_dir, model, 'fraction_1', 'seed_0', 'iter_6.pth'),
                                map_location='cpu', weights_only=False)['state_dict']
        stats[mode] = checkpoint['backbone.stem.1.running_mean']
    assert torch.count_nonzero(stats['frozen']) == 0
    assert torch.count_nonzero(stats['full']) > 0
    assert osp.isfile(osp.join(work_dir, 'finetune_comparison.md'))
