"""tools/train.py and tools/test.py, and the corruption insertion behind ``--corruption``."""
import glob
import importlib.util
import json
import os
import os.path as osp
import pickle
import subprocess
import sys

import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.registry import DATASETS, DefaultScope

import reobench_mm  # noqa: F401  (registration)
from helpers import (DET_DEMO_CONFIG, PROJECT_ROOT, SEG_DEMO_CONFIG, call_tool,
                     call_tool_command, run_tools_together)
from reobench_mm.fileio import dump_json_atomic
from reobench_mm.utils.config import (check_corruption_args, corruption_settings,
                                      corruption_tag, get_test_pipelines, infer_task,
                                      insert_corruption, prepare_test_config,
                                      prepare_train_config, tagged_path)
from reobench_corruptions import list_corruptions

TRAIN_TOOL = osp.join(PROJECT_ROOT, 'tools', 'train.py')
TEST_TOOL = osp.join(PROJECT_ROOT, 'tools', 'test.py')


def _types(pipeline):
    return [step['type'] for step in pipeline]


def _stock_config(tmp_path, base: str, scope: str) -> Config:
    """A toolbox's own dataset config, loaded by package scope."""
    path = tmp_path / f'{scope}_stock.py'
    path.write_text(f"_base_ = ['{base}']\ndefault_scope = '{scope}'\n")
    return Config.fromfile(str(path))


# ----------------------------------------------------------------------------- insertion

def test_demo_configs_test_under_a_corruption_loop():
    for path in (SEG_DEMO_CONFIG, DET_DEMO_CONFIG):
        cfg = Config.fromfile(path)
        # without a condition the loop runs the pipeline as written: clean here
        assert cfg.test_cfg == dict(type='CorruptionTestLoop')
        assert 'corruption_cfg' not in cfg
        for key, pipeline in get_test_pipelines(cfg):
            # the loop places the step when it is built
            assert 'ApplyCorruption' not in _types(pipeline), key
            assert {'corruption', 'severity'} <= set(pipeline[-1]['meta_keys'])
        assert corruption_settings(cfg)['corruption'] == 'clean'


def test_insert_replaces_the_step_of_the_demo_configs():
    cfg = Config.fromfile(SEG_DEMO_CONFIG)
    val_before = cfg.val_dataloader.to_dict()
    insert_corruption(cfg, 'gaussian_noise', 5, seed=3)
    keys = [key for key, _ in get_test_pipelines(cfg)]
    assert keys == ['test_dataloader.dataset.pipeline', 'test_pipeline']
    for _, pipeline in get_test_pipelines(cfg):
        assert _types(pipeline) == ['LoadImageFromFile', 'LoadAnnotations', 'ApplyCorruption',
                                    'PackSegInputs']
        assert pipeline[2] == dict(type='ApplyCorruption', corruption='gaussian_noise',
                                   severity=5, seed=3, protocol='reobench', border='reflect')
        assert pipeline[3]['meta_keys'].count('corruption') == 1
    assert cfg.val_dataloader.to_dict() == val_before, 'only the test pipelines change'
    # the config's CorruptionTestLoop runs the pipeline as written
    assert cfg.test_cfg == dict(type='CorruptionTestLoop')
    assert corruption_settings(cfg) == dict(corruption='gaussian_noise', severity=5, seed=3,
                                            protocol='reobench', border='reflect')
    # again: still one step, now with the new settings
    insert_corruption(cfg, 'rotate', 2, border='constant')
    pipeline = cfg.test_dataloader.dataset.pipeline
    assert _types(pipeline).count('ApplyCorruption') == 1
    assert pipeline[2]['corruption'] == 'rotate' and pipeline[2]['border'] == 'constant'

    cfg = Config.fromfile(DET_DEMO_CONFIG)
    insert_corruption(cfg, 'cloud_shadow', 4, protocol='geofm_calibration')
    assert _types(cfg.test_dataloader.dataset.pipeline) == [
        'mmdet.LoadImageFromFile', 'mmdet.LoadAnnotations', 'ConvertBoxType', 'ApplyCorruption',
        'mmdet.Resize', 'mmdet.PackDetInputs'
    ]
    assert cfg.test_dataloader.dataset.pipeline[3]['corruption'] == 'cloud_shadow'
    assert infer_task(cfg) == 'rotated_detection'
    assert infer_task(Config.fromfile(SEG_DEMO_CONFIG)) == 'segmentation'


def test_insert_into_stock_toolbox_configs(tmp_path):
    cfg = _stock_config(tmp_path, 'mmseg::_base_/datasets/potsdam.py', 'mmseg')
    assert 'ApplyCorruption' not in _types(cfg.test_dataloader.dataset.pipeline)
    insert_corruption(cfg, 'haze', 3)
    for _, pipeline in get_test_pipelines(cfg):
        # a pixel-value corruption: on the original image, before Resize
        assert _types(pipeline) == ['LoadImageFromFile', 'ApplyCorruption', 'Resize',
                                    'LoadAnnotations', 'PackSegInputs']
        # PackSegInputs had no meta_keys: its defaults plus the corruption keys
        assert pipeline[-1]['meta_keys'] == (
            'img_path', 'seg_map_path', 'ori_shape', 'img_shape', 'pad_shape', 'scale_factor',
            'flip', 'flip_direction', 'reduce_zero_label', 'corruption', 'severity')
    assert infer_task(cfg) == 'segmentation'

    cfg = _stock_config(tmp_path, 'mmrotate::_base_/datasets/dota.py', 'mmrotate')
    insert_corruption(cfg, 'translate', 5)
    pipelines = dict(get_test_pipelines(cfg))
    # a geometric corruption in mmrotate's order: the image before Resize, the boxes moved
    # after their loading, by the same recorded transform
    assert _types(pipelines['test_dataloader.dataset.pipeline']) == [
        'mmdet.LoadImageFromFile', 'ApplyCorruption', 'mmdet.Resize', 'mmdet.LoadAnnotations',
        'ConvertBoxType', 'ApplyCorruptionToLabels', 'mmdet.PackDetInputs'
    ]
    assert pipelines['test_dataloader.dataset.pipeline'][1]['labels_later'] is True
    # DOTA's test_pipeline (for unlabelled test images) loads no annotations
    assert _types(pipelines['test_pipeline']) == [
        'mmdet.LoadImageFromFile', 'ApplyCorruption', 'mmdet.Resize', 'mmdet.PackDetInputs'
    ]
    for pipeline in pipelines.values():
        assert pipeline[-1]['meta_keys'] == ('img_id', 'img_path', 'ori_shape', 'img_shape',
                                             'scale_factor', 'corruption', 'severity')


def test_insert_position_rules_and_dataset_wrappers():
    load, ann = dict(type='LoadImageFromFile'), dict(type='mmdet.LoadAnnotations')
    convert = dict(type='ConvertBoxType', box_type_mapping=dict(gt_bboxes='rbox'))
    resize, pack = dict(type='mmdet.Resize', scale=(64, 64)), dict(type='mmdet.PackDetInputs')
    normalize = dict(type='Normalize', mean=[0, 0, 0], std=[1, 1, 1])

    def inner(pipeline):
        return dict(type='DIORDataset', pipeline=pipeline)

    cfg = Config(dict(
        default_scope='mmrotate',
        test_dataloader=dict(dataset=dict(
            type='ConcatDataset',
            datasets=[
                inner([load, ann, convert, resize, normalize, pack]),
                dict(type='RepeatDataset', times=2, dataset=inner([load, resize, pack])),
            ]))))
    insert_corruption(cfg, 'gaussian_blur', 1)
    first, second = (p for _, p in get_test_pipelines(cfg))
    assert _types(first) == ['LoadImageFromFile', 'mmdet.LoadAnnotations', 'ConvertBoxType',
                             'ApplyCorruption', 'mmdet.Resize', 'Normalize',
                             'mmdet.PackDetInputs']
    assert _types(second) == ['LoadImageFromFile', 'ApplyCorruption', 'mmdet.Resize',
                              'mmdet.PackDetInputs']
    assert [k for k, _ in get_test_pipelines(cfg)] == [
        'test_dataloader.dataset.datasets.0.pipeline',
        'test_dataloader.dataset.datasets.1.dataset.pipeline'
    ]


def test_inserted_step_corrupts_the_loaded_samples(demo_data):
    """Build the test dataset of the edited config and read a sample through it."""
    samples = {}
    for corruption, severity in (('clean', 0), ('gaussian_noise', 5)):
        cfg = Config.fromfile(SEG_DEMO_CONFIG)
        insert_corruption(cfg, corruption, severity)
        dataset_cfg = cfg.test_dataloader.dataset
        dataset_cfg.data_root = osp.join(demo_data, 'potsdam')
        with DefaultScope.overwrite_default_scope('mmseg'):
            samples[corruption] = DATASETS.build(dataset_cfg)[0]
    clean, noisy = samples['clean'], samples['gaussian_noise']
    assert clean['data_samples'].metainfo['corruption'] == 'clean'
    assert noisy['data_samples'].metainfo['corruption'] == 'gaussian_noise'
    assert noisy['data_samples'].metainfo['severity'] == 5
    difference = (noisy['inputs'].float() - clean['inputs'].float()).abs().mean()
    assert difference > 10, 'severity-5 noise changes the pixels'
    torch.testing.assert_close(noisy['data_samples'].gt_sem_seg.data,
                               clean['data_samples'].gt_sem_seg.data)


def test_insert_errors(tmp_path):
    cfg = Config.fromfile(SEG_DEMO_CONFIG)
    with pytest.raises(KeyError, match="unknown corruption 'fog'.*valid:.*gaussian_noise"):
        insert_corruption(cfg, 'fog', 3)
    with pytest.raises(KeyError, match='cloud_shadow'):  # a calibration-study shift only
        insert_corruption(cfg, 'cloud_shadow', 3, protocol='reobench')
    with pytest.raises(ValueError, match=r'severity must be an integer in 0\.\.5'):
        insert_corruption(cfg, 'cloud', 6)
    with pytest.raises(ValueError, match='unknown protocol'):
        insert_corruption(cfg, 'cloud', 2, protocol='imagenet_c')
    with pytest.raises(ValueError, match='border must be one of'):
        insert_corruption(cfg, 'rotate', 2, border='wrap')
    assert corruption_settings(cfg)['corruption'] == 'clean', 'failed calls change nothing'

    with pytest.raises(ValueError, match='no test_dataloader'):
        insert_corruption(Config(dict(model=dict(type='EncoderDecoder'))), 'cloud', 1)
    no_loader = Config(dict(test_dataloader=dict(dataset=dict(
        type='PotsdamDataset', pipeline=[dict(type='PackSegInputs')]))))
    with pytest.raises(ValueError, match='no test pipeline'):
        insert_corruption(no_loader, 'cloud', 1)
    doubled = Config.fromfile(SEG_DEMO_CONFIG)
    for _ in range(2):
        doubled.test_dataloader.dataset.pipeline.insert(1, dict(type='ApplyCorruption'))
    with pytest.raises(ValueError, match='2 ApplyCorruption steps'):
        insert_corruption(doubled, 'cloud', 1)


def test_tags_paths_and_atomic_json(tmp_path):
    assert corruption_tag() == 'clean'
    assert corruption_tag('cloud', 0) == 'clean'
    assert corruption_tag('gaussian_noise', 5) == 'gaussian_noise_s5'
    assert corruption_tag('motion_blur', 3, protocol='geofm_calibration') == \
        'geofm_calibration_motion_blur_s3'
    assert corruption_tag('rotate', 2, seed=1, border='constant') == 'rotate_s2_constant_seed1'
    assert corruption_tag('haze', 2, border='constant') == 'haze_s2', 'border only for geometric'
    assert tagged_path('out/preds.pkl', 'cloud_s3') == 'out/preds_cloud_s3.pkl'
    assert tagged_path('out/maps/', 'clean', is_dir=True) == 'out/maps_clean'
    assert check_corruption_args('clean', 0)['corruption'] == 'clean'

    path = tmp_path / 'sub' / 'metrics.json'
    dump_json_atomic({'mIoU': 1.5}, str(path))
    dump_json_atomic({'mIoU': 2.5}, str(path))
    assert json.loads(path.read_text()) == {'mIoU': 2.5}
    assert os.listdir(path.parent) == ['metrics.json'], 'no temporary file left'


def test_prepare_test_config(tmp_path):
    checkpoint = tmp_path / 'model.pth'
    checkpoint.write_bytes(b'')
    # the condition of the config's CorruptionTestLoop, set by --cfg-options
    setup = prepare_test_config(SEG_DEMO_CONFIG, str(checkpoint), out=str(tmp_path / 'maps'),
                                cfg_options={'test_cfg.corruption': 'cloud',
                                             'test_cfg.severity': 3})
    assert setup.tag == 'cloud_s3' and setup.task == 'segmentation'
    assert setup.cfg.test_dataloader.dataset.pipeline[2]['corruption'] == 'cloud'
    assert setup.cfg.work_dir == osp.join('./work_dirs', osp.basename(SEG_DEMO_CONFIG)[:-3])
    assert setup.metrics_file == osp.join(setup.cfg.work_dir, 'metrics_cloud_s3.json')
    assert setup.cfg.test_evaluator.output_dir == str(tmp_path / 'maps_cloud_s3')
    assert setup.cfg.load_from == str(checkpoint)
    assert 'reobench_mm' in setup.cfg.custom_imports.imports
    assert setup.cfg.test_cfg.corruption == 'cloud' and setup.cfg.test_cfg.severity == 3
    # the command-line flags win over test_cfg
    setup = prepare_test_config(DET_DEMO_CONFIG, str(checkpoint), work_dir=str(tmp_path / 'w'),
                                out=str(tmp_path / 'p.pkl'),
                                cfg_options={'test_cfg.corruption': 'cloud',
                                             'test_cfg.severity': 2},
                                corruption=dict(corruption='rotate', severity=1))
    assert setup.tag == 'rotate_s1' and setup.task == 'rotated_detection'
    assert setup.cfg.test_cfg.corruption == 'rotate' and setup.cfg.test_cfg.severity == 1
    assert setup.dump_file == str(tmp_path / 'p_rotate_s1.pkl')
    assert setup.metrics_file == str(tmp_path / 'w' / 'metrics_rotate_s1.json')
    with pytest.raises(ValueError, match='must be a .pkl file'):
        prepare_test_config(DET_DEMO_CONFIG, str(checkpoint), out=str(tmp_path / 'p.json'))
    with pytest.raises(ValueError, match=r"'level' is not an option of CorruptionTestLoop"):
        prepare_test_config(SEG_DEMO_CONFIG, str(checkpoint),
                            cfg_options={'test_cfg.level': 3})
    # a corruption_cfg variable (read by nothing) is refused rather than ignored
    with pytest.raises(ValueError, match='corruption_cfg, which nothing reads'):
        prepare_test_config(SEG_DEMO_CONFIG, str(checkpoint),
                            cfg_options={'corruption_cfg.corruption': 'cloud'})
    with pytest.raises(FileNotFoundError, match='does not exist'):
        prepare_test_config(SEG_DEMO_CONFIG, str(tmp_path / 'missing.pth'))


def test_prepare_train_config(tmp_path):
    cfg = prepare_train_config(SEG_DEMO_CONFIG, amp=True,
                               cfg_options={'train_cfg.max_iters': 7})
    assert cfg.work_dir == osp.join('./work_dirs', osp.basename(SEG_DEMO_CONFIG)[:-3])
    assert cfg.optim_wrapper.type == 'AmpOptimWrapper' and cfg.train_cfg.max_iters == 7
    assert cfg.resume is False
    cfg = prepare_train_config(SEG_DEMO_CONFIG, work_dir=str(tmp_path), resume='auto')
    assert cfg.resume is True and cfg.load_from is None and cfg.work_dir == str(tmp_path)
    checkpoint = tmp_path / 'iter_5.pth'
    checkpoint.write_bytes(b'')
    cfg = prepare_train_config(SEG_DEMO_CONFIG, resume=str(checkpoint))
    assert cfg.resume is True and cfg.load_from == str(checkpoint)
    with pytest.raises(FileNotFoundError, match='resume'):
        prepare_train_config(SEG_DEMO_CONFIG, resume=str(tmp_path / 'nope.pth'))


# ----------------------------------------------------------------------------- tool errors

def _load_tool(path):
    spec = importlib.util.spec_from_file_location(f'tool_{osp.basename(path)[:-3]}', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize('arguments,message', [
    (['--corruption', 'fog', '--severity', '3'], "unknown corruption 'fog'"),
    (['--corruption', 'cloud', '--severity', '9'], 'severity must be an integer in 0..5'),
    (['--severity', '3'], '--severity given without --corruption'),
    (['--seed', '1'], '--seed given without --corruption'),
    (['--corruption', 'cloud'], 'needs --severity'),
    (['--protocol', 'imagenet_c'], 'invalid choice'),
])
def test_test_tool_argument_errors(tmp_path, monkeypatch, capsys, arguments, message):
    checkpoint = tmp_path / 'model.pth'
    checkpoint.write_bytes(b'')
    tool = _load_tool(TEST_TOOL)
    monkeypatch.setattr(sys, 'argv', ['test.py', SEG_DEMO_CONFIG, str(checkpoint)] + arguments)
    with pytest.raises(SystemExit) as exit_info:
        tool.main()
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert message in error, error
    if 'unknown corruption' in message:
        assert all(name in error for name in list_corruptions('reobench'))


def test_tool_file_errors(tmp_path, monkeypatch, capsys):
    no_test = tmp_path / 'no_test.py'
    no_test.write_text(
        f"_base_ = ['{PROJECT_ROOT}/configs/_base_/models/upernet_r18-tiny.py']\n"
        "default_scope = 'mmseg'\n")
    checkpoint = tmp_path / 'model.pth'
    checkpoint.write_bytes(b'')
    cases = [
        (TEST_TOOL, [SEG_DEMO_CONFIG, str(tmp_path / 'missing.pth')], 'does not exist'),
        (TEST_TOOL, [str(no_test), str(checkpoint)], 'no test_dataloader'),
        (TRAIN_TOOL, [SEG_DEMO_CONFIG, '--resume', str(tmp_path / 'gone.pth')],
         'does not exist'),
    ]
    for path, arguments, message in cases:
        tool = _load_tool(path)
        monkeypatch.setattr(sys, 'argv', [osp.basename(path)] + arguments)
        with pytest.raises(SystemExit):
            tool.main()
        error = capsys.readouterr().err
        assert message in error, error


@pytest.mark.trains('runs tools/dist_train.sh (with a stand-in interpreter that trains nothing)')
@pytest.mark.slow
def test_shell_launchers_are_executable_and_check_arguments():
    for name in ('dist_train.sh', 'dist_test.sh', 'slurm_test.sh'):
        path = osp.join(PROJECT_ROOT, 'tools', name)
        assert os.access(path, os.X_OK), f'{name} is not executable'
        result = subprocess.run(['bash', path], capture_output=True, text=True)
        assert result.returncode == 2 and 'usage' in result.stderr


@pytest.mark.trains('runs tools/dist_train.sh (with a stand-in interpreter that trains nothing)')
@pytest.mark.slow
def test_shell_launchers_forward_their_arguments(tmp_path):
    """The launch commands the scripts build, with stand-ins for python and srun."""
    echo = tmp_path / 'echo_arguments'
    echo.write_text('#!/bin/sh\nprintf "%s\\n" "$@"\n')
    echo.chmod(0o755)
    (tmp_path / 'srun').symlink_to(echo)
    env = dict(os.environ, PYTHON=str(echo), NNODES='2', NODE_RANK='1', PORT='29611',
               MASTER_ADDR='10.0.0.7', GPUS='4', GPUS_PER_NODE='2',
               PATH=f'{tmp_path}:{os.environ["PATH"]}')
    tools = osp.join(PROJECT_ROOT, 'tools')

    def launch(name, *arguments):
        result = subprocess.run([osp.join(tools, name), *arguments], env=env,
                                capture_output=True, text=True, check=True)
        return result.stdout.splitlines()

    torchrun = ['-m', 'torch.distributed.run', '--nnodes=2', '--node_rank=1',
                '--master_addr=10.0.0.7', '--master_port=29611', '--nproc_per_node=8']
    assert launch('dist_train.sh', 'c.py', '8', '--amp', '--cfg-options', 'a=1') == \
        torchrun + [f'{tools}/train.py', 'c.py', '--launcher', 'pytorch', '--amp',
                    '--cfg-options', 'a=1']
    assert launch('dist_test.sh', 'c.py', 'm.pth', '8', '--corruption', 'cloud',
                  '--severity', '3') == \
        torchrun + [f'{tools}/test.py', 'c.py', 'm.pth', '--launcher', 'pytorch',
                    '--corruption', 'cloud', '--severity', '3']
    srun = launch('slurm_test.sh', 'gpu', 'job', 'c.py', 'm.pth', '--corruption', 'haze',
                  '--severity', '1')
    assert srun == ['-p', 'gpu', '--job-name=job', '--gres=gpu:2', '--ntasks=4',
                    '--ntasks-per-node=2', '--cpus-per-task=5', '--kill-on-bad-exit=1',
                    str(echo), '-u', f'{tools}/test.py', 'c.py', 'm.pth', '--launcher=slurm',
                    '--corruption', 'haze', '--severity', '1']


# ----------------------------------------------------------------------------- end to end

def _run(tool, *arguments):
    result = subprocess.run([sys.executable, tool, *arguments], cwd=PROJECT_ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def _loader_options(data_root, splits=('train', 'test')):
    options = ['log_level=WARNING']
    for split in splits:
        options += [f'{split}_dataloader.dataset.data_root={data_root}',
                    f'{split}_dataloader.num_workers=0',
                    f'{split}_dataloader.persistent_workers=False']
    return options


def _train(config, data_root, work_dir, iters):
    _run(TRAIN_TOOL, config, '--work-dir', work_dir, '--cfg-options',
         f'train_cfg.max_iters={iters}', 'train_dataloader.batch_size=2',
         'val_cfg=None', 'val_dataloader=None', 'val_evaluator=None',
         *_loader_options(data_root, ('train', )))
    checkpoint = osp.join(work_dir, f'iter_{iters}.pth')
    assert osp.isfile(checkpoint)
    return checkpoint


def _test_command(config, checkpoint, data_root, work_dir, *arguments, options=()):
    return [TEST_TOOL, config, checkpoint, '--work-dir', work_dir, *arguments,
            '--cfg-options', *_loader_options(data_root, ('test', )), *options]


def _metrics(work_dir, tag):
    with open(osp.join(work_dir, f'metrics_{tag}.json')) as f:
        return json.load(f)


@pytest.mark.trains('tools/train.py is what it checks')
@pytest.mark.slow
def test_segmentation_train_then_test_clean_and_corrupted(demo_data, tmp_path):
    data_root, root = osp.join(demo_data, 'potsdam'), str(tmp_path)
    checkpoint = _train(SEG_DEMO_CONFIG, data_root, f'{root}/train', iters=40)
    noise = ('--corruption', 'gaussian_noise', '--severity', '5')
    in_process = (  # beside the subprocess: its boundary is checked once
        _test_command(SEG_DEMO_CONFIG, checkpoint, data_root, f'{root}/noisy', *noise),
        # the same corruption set through the config's CorruptionTestLoop
        _test_command(SEG_DEMO_CONFIG, checkpoint, data_root, f'{root}/rerun',
                      options=('test_cfg.corruption=gaussian_noise', 'test_cfg.severity=5')))
    run_tools_together(_test_command(SEG_DEMO_CONFIG, checkpoint, data_root, f'{root}/clean'),
                       meanwhile=lambda: [call_tool_command(c) for c in in_process])
    clean = _metrics(f'{root}/clean', 'clean')
    noisy = _metrics(f'{root}/noisy', 'gaussian_noise_s5')
    assert (noisy['corruption'], noisy['severity'], noisy['seed']) == ('gaussian_noise', 5, 0)
    assert noisy['task'] == 'segmentation' and set(noisy['metrics']) == {'aAcc', 'mIoU', 'mAcc'}
    print(f"\nmIoU clean {clean['metrics']['mIoU']:.2f}, gaussian_noise s5 "
          f"{noisy['metrics']['mIoU']:.2f}")
    assert noisy['metrics']['mIoU'] < clean['metrics']['mIoU'], (clean, noisy)
    assert _metrics(f'{root}/rerun', 'gaussian_noise_s5')['metrics'] == noisy['metrics']


@pytest.mark.trains('tools/train.py is what it checks')
@pytest.mark.slow
def test_rotated_detection_train_then_test_clean_and_corrupted(demo_data, tmp_path):
    data_root, root = osp.join(demo_data, 'dior'), str(tmp_path)
    checkpoint = _train(DET_DEMO_CONFIG, data_root, f'{root}/train', iters=2)
    noise = ('--corruption', 'gaussian_noise', '--severity', '5', '--seed', '1')
    clean, *in_process = (
        _test_command(DET_DEMO_CONFIG, checkpoint, data_root, f'{root}/{name}', '--out',
                      f'{root}/{name}.pkl', *arguments, options=('log_level=INFO', ))
        for name, arguments in (('clean', ()), ('noisy', noise), ('rerun', noise)))
    run_tools_together(clean, meanwhile=lambda: [call_tool_command(c) for c in in_process])
    tag = 'gaussian_noise_s5_seed1'
    clean, noisy = _metrics(f'{root}/clean', 'clean'), _metrics(f'{root}/noisy', tag)
    print(f"\nmAP clean {clean['metrics']['dota/mAP']:.4f}, {tag} "
          f"{noisy['metrics']['dota/mAP']:.4f}")
    # InProcessDOTAMetric also returns the per-class AP of the demo's 4 classes
    assert set(noisy['metrics']) == {'dota/mAP', 'dota/AP50'} | {
        f'dota/AP.{c}' for c in ('airplane', 'ship', 'storagetank', 'vehicle')}
    assert noisy['task'] == 'rotated_detection' and noisy['seed'] == 1
    assert _metrics(f'{root}/rerun', tag)['metrics'] == noisy['metrics']

    def predictions(name):
        with open(osp.join(root, name), 'rb') as f:
            return pickle.load(f)

    first, second = predictions(f'noisy_{tag}.pkl'), predictions(f'rerun_{tag}.pkl')
    reference = predictions('clean_clean.pkl')
    assert [s['corruption'] for s in first] == ['gaussian_noise'] * len(first)
    assert [s['severity'] for s in first] == [5] * len(first)
    assert [s['corruption'] for s in reference] == ['clean'] * len(reference)
    changed = False
    for a, b, c in zip(first, second, reference):
        for key in ('bboxes', 'scores', 'labels'):
            torch.testing.assert_close(a['pred_instances'][key], b['pred_instances'][key],
                                       rtol=0, atol=0)
        changed |= a['pred_instances']['scores'].shape != c['pred_instances']['scores'].shape \
            or not np.allclose(a['pred_instances']['scores'], c['pred_instances']['scores'])
    assert changed, 'the corruption changes the predictions'
    for name, expected in (('clean', 'clean'), ('noisy', tag)):
        logs = ''.join(open(p).read() for p in glob.glob(f'{root}/{name}/*/*.log'))
        assert f'corruption: {expected}' in logs and f'metrics [{expected}]' in logs


# ----------------------------------------------------------------------------- stock configs

@pytest.mark.slow
def test_the_plugin_line_on_the_command_line_is_not_imported_but_a_wrapper_is(demo_data,
                                                                             tmp_path):
    """MMEngine imports custom_imports when it reads a config file, so the plugin given as
    --cfg-options is never imported and mmseg's own tools/test.py cannot find the loop;
    the two-line wrapper config of the docs works, and so does this package's
    tools/test.py on the stock config as it is, with the same number."""
    import mmseg
    mim = osp.join(osp.dirname(mmseg.__file__), '.mim')
    stock_tool = osp.join(mim, 'tools', 'test.py')
    stock_config = osp.join(mim, 'configs', 'pspnet', 'pspnet_r18-d8_4xb4-80k_potsdam-512x512.py')
    if not (osp.isfile(stock_tool) and osp.isfile(stock_config)):
        pytest.skip(f'mmseg was installed without its .mim files ({mim})')
    from mmengine.registry import DefaultScope

    from reobench_mm.registry import MODELS
    cfg = Config.fromfile(stock_config)
    cfg.model.pretrained = None  # no download: a randomly initialised PSPNet
    torch.manual_seed(0)
    with DefaultScope.overwrite_default_scope('mmseg'):
        model = MODELS.build(cfg.model)
    checkpoint = str(tmp_path / 'pspnet.pth')
    torch.save({'state_dict': model.state_dict(), 'meta': {}}, checkpoint)
    data_root = osp.join(demo_data, 'potsdam')
    loader = _loader_options(data_root, ('test', ))
    condition = ['test_cfg.type=CorruptionTestLoop', 'test_cfg.corruption=cloud',
                 'test_cfg.severity=3']

    result = subprocess.run(
        [sys.executable, stock_tool, stock_config, checkpoint, '--work-dir',
         str(tmp_path / 'cli'), '--cfg-options', 'custom_imports.imports=[reobench_mm]',
         *condition, *loader], cwd=PROJECT_ROOT, capture_output=True, text=True)
    assert result.returncode != 0
    assert 'CorruptionTestLoop is not in the mmseg::loop registry' in result.stderr

    wrapper = tmp_path / 'pspnet_r18_potsdam_robust.py'
    wrapper.write_text("_base_ = ['mmseg::pspnet/pspnet_r18-d8_4xb4-80k_potsdam-512x512.py']\n"
                       "custom_imports = dict(imports=['reobench_mm'], "
                       "allow_failed_imports=False)\n")

    def ours():  # this package's tools/test.py, in process beside the stock tool
        assert call_tool('test.py', [stock_config, checkpoint, '--work-dir',
                                     tmp_path / 'ours', '--corruption', 'cloud',
                                     '--severity', '3', '--cfg-options', *loader]) == 0

    stock, = run_tools_together(
        [stock_tool, str(wrapper), checkpoint, '--work-dir', str(tmp_path / 'wrapper'),
         '--cfg-options', *condition, *loader, 'log_level=INFO'], meanwhile=ours)
    assert 'test condition: cloud severity 3' in stock
    logged = [float(v) for v in __import__('re').findall(r'mIoU: ([0-9.]+)', stock)]
    with open(tmp_path / 'ours' / 'metrics_cloud_s3.json') as handle:
        number = json.load(handle)['metrics']['mIoU']
    assert logged and logged[-1] == pytest.approx(number, abs=5e-5)
