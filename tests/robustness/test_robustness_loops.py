"""Robustness inside any MMEngine run: RobustnessTestLoop through the toolboxes' own
tools/test.py and Runner.test(), RobustnessValLoop while fine-tuning with the toolboxes'
own tools/train.py (scalar log, save_best), and the numbers against independent
single-condition evaluations."""
import glob
import json
import os.path as osp
import re
import signal
import subprocess
import sys
import time

import pytest
from mmengine.config import Config
from mmengine.runner import Runner

import reobench_mm  # noqa: F401  (registration)
from helpers import (DET_DEMO_CONFIG, PROJECT_ROOT, SEG_DEMO_CONFIG, call_tool,
                     run_tools_together, stock_tool_here, toolbox_file)
from reobench_corruptions.condition import Condition
from reobench_mm.errors import SweepError
from reobench_mm.robustness.test_loop import RobustnessTestLoop
from reobench_mm.robustness.val_loop import RobustnessValLoop
from sweep_helpers import untrained_checkpoint




def _data_options(data_root: str, splits=('test', )) -> dict:
    options = {'log_level': 'WARNING'}
    for split in splits:
        options[f'{split}_dataloader.dataset.data_root'] = data_root
        options[f'{split}_dataloader.num_workers'] = 0
        options[f'{split}_dataloader.persistent_workers'] = False
    return options


def _cli(options: dict) -> list:
    return [f'{key}={value}' for key, value in options.items()]


def _records(folder: str) -> dict:
    out = {}
    for path in sorted(glob.glob(osp.join(folder, 'conditions', '*.json'))):
        with open(path) as handle:
            record = json.load(handle)
        out[record['condition']] = record['metrics']
    return out


def _numbers(folder: str) -> dict:
    with open(osp.join(folder, 'results.json')) as handle:
        return json.load(handle)['numbers']


# ----------------------------------------------------------------------------- test loop

@pytest.mark.slow
def test_stock_mmseg_test_tool_with_the_robustness_loop_matches_the_sweep(demo_data, tmp_path, seg_model):
    """mmseg's own tools/test.py (installed package, subprocess) and this package's
    tools/test.py on a demo config whose test_cfg is RobustnessTestLoop give the sweep's
    per-condition numbers and results."""
    stock = toolbox_file('mmseg', 'tools', 'test.py')
    data_root = osp.join(demo_data, 'potsdam')
    checkpoint = seg_model.checkpoint
    derived = tmp_path / 'upernet_robustness.py'
    derived.write_text(
        f"_base_ = ['{SEG_DEMO_CONFIG}']\n"
        "test_cfg = dict(type='RobustnessTestLoop', corruptions=['gaussian_noise', 'rotate'],"
        " severities=[1, 5])\n")
    options = _cli(_data_options(data_root))
    stock_dir, sweep_dir = str(tmp_path / 'stock'), str(tmp_path / 'sweep')
    ours_dir = str(tmp_path / 'ours')

    def ours():  # this package's tools in process (the stock tool's boundary is checked)
        assert call_tool('test.py', [derived, checkpoint, '--work-dir', ours_dir,
                                     '--cfg-options', *options]) == 0
        assert call_tool('robustness_test.py', [
            SEG_DEMO_CONFIG, checkpoint, '--corruptions', 'gaussian_noise', 'rotate',
            '--severities', '1', '5', '--work-dir', sweep_dir, '--cfg-options',
            *options]) == 0

    outputs = run_tools_together(
        [stock, str(derived), checkpoint, '--work-dir', stock_dir, '--cfg-options', *options,
         'log_level=INFO'], meanwhile=ours)
    stock_records, sweep_records = _records(stock_dir), _records(sweep_dir)
    assert _records(ours_dir) == sweep_records  # this package's tools/test.py too
    with open(osp.join(ours_dir, 'metrics_robustness.json')) as handle:
        ours = json.load(handle)
    assert ours['tag'] == 'robustness' and 'corruption' not in ours
    assert ours['metrics']['robust/avg'] == pytest.approx(_numbers(sweep_dir)['avg'])
    assert sorted(stock_records) == ['clean', 'gaussian_noise@1', 'gaussian_noise@5',
                                     'rotate@1', 'rotate@5']
    assert stock_records == sweep_records  # every metric of every condition, exactly
    assert _numbers(stock_dir) == _numbers(sweep_dir)
    with open(osp.join(stock_dir, 'results.json')) as handle:
        provenance = json.load(handle)['provenance']
    assert provenance['config'] == str(derived) and provenance['model'] == derived.stem
    assert provenance['checkpoint'] == checkpoint
    assert len({m['mIoU'] for m in stock_records.values()}) == 5, stock_records
    for name in ('results.csv', 'report.md', 'severity_curves.png'):
        assert osp.isfile(osp.join(stock_dir, name)), name
    # the stock tool logged the run's metrics: robust/avg equals results.json's avg
    logged = re.findall(r'robust/avg: ([0-9.]+)', outputs[0])
    assert logged and float(logged[-1]) == pytest.approx(_numbers(stock_dir)['avg'],
                                                         abs=5e-5)
    assert 'rotate_s5/mIoU' in outputs[0]
    assert 'ApplyCorruption after LoadAnnotations' in outputs[0]  # geometric placement

    # a rerun resumes: nothing evaluated again, the same bytes
    with open(osp.join(stock_dir, 'results.json'), 'rb') as handle:
        before = handle.read()
    # (in this process: the stock tool's own process was checked above)
    output = stock_tool_here(stock, [derived, checkpoint, '--work-dir', stock_dir,
                                     '--cfg-options', *options, 'log_level=INFO'])
    assert '5 of 5 conditions already finished' in output
    assert 'robustness [1/' not in output
    with open(osp.join(stock_dir, 'results.json'), 'rb') as handle:
        assert handle.read() == before


@pytest.mark.slow
def test_stock_test_tool_killed_between_conditions_resumes_to_the_same_bytes(demo_data,
                                                                             tmp_path):
    """mmseg's own tools/test.py with RobustnessTestLoop, killed (SIGKILL) after some
    conditions and run again: the rerun evaluates only the rest, and results.json is
    byte-identical to that of an uninterrupted run."""
    stock = toolbox_file('mmseg', 'tools', 'test.py')
    data_root = osp.join(demo_data, 'potsdam')
    checkpoint = untrained_checkpoint(SEG_DEMO_CONFIG, str(tmp_path / 'model.pth'))
    derived = tmp_path / 'upernet_robustness.py'
    derived.write_text(
        f"_base_ = ['{SEG_DEMO_CONFIG}']\n"
        "test_cfg = dict(type='RobustnessTestLoop', corruptions=['haze', 'motion_blur', "
        "'rotate'], severities=[1, 3, 5], plots=False)\n")
    options = _cli(_data_options(data_root))
    killed, whole = str(tmp_path / 'killed'), str(tmp_path / 'whole')

    def command(work_dir):
        return [sys.executable, stock, str(derived), checkpoint, '--work-dir', work_dir,
                '--cfg-options', *options]

    process = subprocess.Popen(command(killed), cwd=PROJECT_ROOT, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while len(glob.glob(osp.join(killed, 'conditions', '*.json'))) < 3:
        assert process.poll() is None and time.time() < deadline, 'no conditions written'
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    finished = len(glob.glob(osp.join(killed, 'conditions', '*.json')))
    assert 3 <= finished < 10 and not osp.exists(osp.join(killed, 'results.json'))
    outputs = run_tools_together(  # the uninterrupted run in this process meanwhile
        [stock, str(derived), checkpoint, '--work-dir', killed, '--cfg-options', *options,
         'log_level=INFO'],
        meanwhile=lambda: stock_tool_here(stock, [derived, checkpoint, '--work-dir', whole,
                                                  '--cfg-options', *options]))
    assert f'{finished} of 10 conditions already finished' in outputs[0]
    assert len(re.findall(r'robustness \[\d+/\d+\]', outputs[0])) == 10 - finished
    with open(osp.join(killed, 'results.json'), 'rb') as a, \
            open(osp.join(whole, 'results.json'), 'rb') as b:
        assert a.read() == b.read(), 'resumed and uninterrupted results differ'


def _seg_cfg(data_root: str, work_dir: str, test_cfg=None, val_cfg=None) -> Config:
    cfg = Config.fromfile(SEG_DEMO_CONFIG)
    cfg.merge_from_dict(dict(_data_options(data_root, ('train', 'val', 'test')),
                             work_dir=work_dir))
    cfg.custom_hooks = []
    if test_cfg is not None:
        cfg.test_cfg = test_cfg
    if val_cfg is not None:
        cfg.val_cfg = val_cfg
    return cfg


@pytest.mark.slow  # 3 s or more: left out of make test-fast
def test_runner_test_returns_the_robustness_metrics(demo_data, tmp_path):
    """Runner.from_cfg(cfg).test() in-process: the returned metrics against separate
    single-condition runs of CorruptionTestLoop, and REOBench's Avg and ΔTP."""
    data_root = osp.join(demo_data, 'potsdam')
    checkpoint = untrained_checkpoint(SEG_DEMO_CONFIG, str(tmp_path / 'model.pth'))
    cfg = _seg_cfg(data_root, str(tmp_path / 'robust'),
                   test_cfg=dict(type='RobustnessTestLoop', corruptions=['haze', 'scale'],
                                 severities=[2, 4], plots=False))
    cfg.load_from = checkpoint
    metrics = Runner.from_cfg(cfg).test()
    single = {}
    for condition in [Condition(), Condition('haze', 2), Condition('haze', 4),
                      Condition('scale', 2), Condition('scale', 4)]:
        one = _seg_cfg(data_root, str(tmp_path / condition.tag),
                       test_cfg=dict(type='CorruptionTestLoop', **condition.settings()))
        one.load_from = checkpoint
        single[condition.tag] = float(Runner.from_cfg(one).test()['mIoU'])
    for tag, value in single.items():
        assert metrics[f'{tag}/mIoU'] == pytest.approx(value, abs=1e-9), tag
    assert metrics['mIoU'] == pytest.approx(single['clean'], abs=1e-9)
    haze = (single['haze_s2'] + single['haze_s4']) / 2
    scale = (single['scale_s2'] + single['scale_s4']) / 2
    assert metrics['robust/haze'] == pytest.approx(haze, abs=1e-9)
    assert metrics['robust/avg'] == pytest.approx((haze + scale) / 2, abs=1e-9)
    assert metrics['robust/delta_tp'] == pytest.approx(single['clean'] - (haze + scale) / 2,
                                                       abs=1e-9)
    assert metrics['robust/rpc'] == pytest.approx(metrics['robust/mpc'] / single['clean'])
    assert osp.isfile(tmp_path / 'robust' / 'results.json')


@pytest.mark.slow  # 3 s or more: left out of make test-fast
def test_robustness_loops_refuse_bad_options(demo_data, tmp_path):
    data_root = osp.join(demo_data, 'potsdam')

    def build(**loop):
        cfg = _seg_cfg(data_root, str(tmp_path / 'work'),
                       test_cfg=dict(type='RobustnessTestLoop', **loop))
        return Runner.from_cfg(cfg).test_loop

    with pytest.raises(SweepError, match=r"unknown corruption name\(s\) \['fog'\].*valid:"):
        build(corruptions=['fog'])
    with pytest.raises(SweepError, match='severity must be an integer in 1..5'):
        build(severities=[6])
    with pytest.raises(SweepError, match='decode_cache_bytes'):
        build(decode_cache_bytes=-1)
    with pytest.raises(SweepError, match=r"'corruption' is not an option of RobustnessTestLoop "
                       r"\(did you mean 'corruptions'\?\)"):
        build(corruption='cloud')  # a CorruptionTestLoop option: a typo, not ignored
    with pytest.raises(SweepError, match="'force' is an option of other runs, not of "
                       'RobustnessValLoop'):
        Runner.from_cfg(_seg_cfg(data_root, str(tmp_path / 'work'),
                                 val_cfg=dict(type='RobustnessValLoop', force=True))).val_loop
    with pytest.raises(ValueError, match='corruption_cfg, which nothing reads'):
        cfg = _seg_cfg(data_root, str(tmp_path / 'work'),
                       val_cfg=dict(type='RobustnessValLoop'))
        cfg.corruption_cfg = dict(corruption='cloud', severity=3)
        Runner.from_cfg(cfg).val_loop
    loop = build(corruptions='geometric', severities=[1])
    assert isinstance(loop, RobustnessTestLoop)
    assert [c.key for c in loop.options.conditions] == ['clean', 'rotate@1', 'scale@1',
                                                        'translate@1']


# ----------------------------------------------------------------------------- validation

@pytest.mark.slow  # 3 s or more: left out of make test-fast
def test_val_loop_metrics_match_single_condition_runs(demo_data, tmp_path):
    data_root = osp.join(demo_data, 'potsdam')
    checkpoint = untrained_checkpoint(SEG_DEMO_CONFIG, str(tmp_path / 'model.pth'))
    cfg = _seg_cfg(data_root, str(tmp_path / 'val'), val_cfg=dict(
        type='RobustnessValLoop', corruptions=['cloud', 'rotate'], severities=[3]))
    cfg.load_from = checkpoint
    runner = Runner.from_cfg(cfg)
    assert isinstance(runner.val_loop, RobustnessValLoop)
    metrics = runner.val()
    single = {}
    for condition in [Condition(), Condition('cloud', 3), Condition('rotate', 3)]:
        one = _seg_cfg(data_root, str(tmp_path / condition.tag),
                       test_cfg=dict(type='CorruptionTestLoop', **condition.settings()))
        one.load_from = checkpoint
        single[condition.tag] = float(Runner.from_cfg(one).test()['mIoU'])
    assert metrics['mIoU'] == pytest.approx(single['clean'], abs=1e-9)
    assert metrics['cloud_s3/mIoU'] == pytest.approx(single['cloud_s3'], abs=1e-9)
    assert metrics['rotate_s3/mIoU'] == pytest.approx(single['rotate_s3'], abs=1e-9)
    avg = (single['cloud_s3'] + single['rotate_s3']) / 2
    assert metrics['robust/avg'] == pytest.approx(avg, abs=1e-9)
    assert metrics['robust/delta_tp'] == pytest.approx(single['clean'] - avg, abs=1e-9)
    # the runner's message hub has them for the hooks
    assert runner.message_hub.get_scalar('val/robust/avg').current() == \
        pytest.approx(avg, abs=1e-9)
    # decoding once for all conditions and validations changes no number
    cfg.val_cfg.decode_cache_bytes = 2**30
    cfg.work_dir = str(tmp_path / 'val_cached')
    runner = Runner.from_cfg(cfg)
    assert runner.val() == metrics and runner.val() == metrics
    assert len(runner.val_loop.decode_caches) == 1


def _scalars(work_dir: str) -> list:
    (path, ) = glob.glob(osp.join(work_dir, '*', 'vis_data', 'scalars.json'))
    with open(path) as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _check_save_best(work_dir: str, log: str, key: str, val_iters: list) -> list:
    """Every validation logged the robustness scores; the kept best checkpoint is the
    first iteration with the highest logged value of ``key``."""
    rows = [row for row in _scalars(work_dir) if 'robust/avg' in row]
    assert [row['step'] for row in rows] == val_iters, rows
    for row in rows:
        assert 'robust/delta_tp' in row and 'robust/clean' in row
        assert row['robust/delta_tp'] == pytest.approx(row['robust/clean'] - row['robust/avg'],
                                                       abs=1e-3)
    values = [row[key] for row in rows]
    best_step = rows[values.index(max(values))]['step']
    best = glob.glob(osp.join(work_dir, 'best_*.pth'))
    assert [osp.basename(p) for p in best] == \
        [f'best_{key.replace("/", "_")}_iter_{best_step}.pth'], (best, values)
    assert len(re.findall(r'robustness validation: \d+ conditions in [0-9.]+ s', log)) == \
        len(val_iters)
    return values


@pytest.mark.trains("validation inside the toolboxes' own training is what it checks")
@pytest.mark.slow
def test_stock_train_tools_validate_robustness_and_keep_the_best(demo_data, tmp_path):
    """mmseg's and mmrotate's own tools/train.py (installed packages, subprocesses) with
    RobustnessValLoop: robust/avg and robust/delta_tp in the scalar log at each validation,
    and CheckpointHook(save_best='robust/avg') keeps the checkpoint of the best value."""
    seg_tool = toolbox_file('mmseg', 'tools', 'train.py')
    rot_tool = toolbox_file('mmrotate', 'tools', 'train.py')
    val_cfg = ("val_cfg = dict(type='RobustnessValLoop', corruptions=['cloud', "
               "'gaussian_noise', 'haze'], severities=[3])\n")
    hooks = ("default_hooks = dict(logger=dict(interval=5), checkpoint=dict("
             "type='CheckpointHook', by_epoch=False, interval=10, max_keep_ckpts=1, "
             "save_best='robust/avg', rule='greater'))\n")
    commands, work_dirs = [], {}
    # two validations each: enough for a best to be kept over another value
    for task, config, tool, iters in (('seg', SEG_DEMO_CONFIG, seg_tool, 20),
                                      ('det', DET_DEMO_CONFIG, rot_tool, 20)):
        derived = tmp_path / f'{task}_robust_val.py'
        derived.write_text(f"_base_ = ['{config}']\n" + val_cfg + hooks
                           + 'custom_hooks = []\n')
        data_root = osp.join(demo_data, 'potsdam' if task == 'seg' else 'dior')
        options = _data_options(data_root, ('train', 'val'))
        options.update({'train_cfg.max_iters': iters, 'train_cfg.val_interval': 10,
                        'train_dataloader.batch_size': 2, 'log_level': 'INFO'})
        work_dirs[task] = str(tmp_path / task)
        commands.append([tool, str(derived), '--work-dir', work_dirs[task], '--cfg-options',
                         *_cli(options)])
    outputs = run_tools_together(*commands)
    seg_values = _check_save_best(work_dirs['seg'], outputs[0], 'robust/avg', [10, 20])
    det_values = _check_save_best(work_dirs['det'], outputs[1], 'robust/avg', [10, 20])
    assert len(set(seg_values)) > 1, seg_values  # the segmentor learns something
    det_rows = [row for row in _scalars(work_dirs['det']) if 'robust/avg' in row]
    for row in det_rows:  # the detector's task metric is DOTAMetric's dota/mAP
        assert row['robust/clean'] == pytest.approx(100 * row['dota/mAP'], abs=1e-3)
        assert 'haze_s3/mAP' in row
    del det_values


# ----------------------------------------------------------------------------- temperature

def test_held_out_indices_are_seeded_stratified_and_exact():
    from reobench_mm.datasets.subset import held_out_indices
    strata = ['a'] * 10 + ['b'] * 6 + ['c'] * 4
    chosen = held_out_indices(strata, 5, seed=3)
    assert chosen == held_out_indices(strata, 5, seed=3) == sorted(chosen)
    assert chosen != held_out_indices(strata, 5, seed=4)
    # shares 2.5, 1.5, 1.0 -> floors 2, 1, 1 and the one left to the largest remainder
    # (a tie between a and b goes to the larger stratum)
    assert [strata[i] for i in chosen].count('a') == 3
    assert [strata[i] for i in chosen].count('b') == 1
    assert [strata[i] for i in chosen].count('c') == 1
    for bad in (0, 20, 2.5, True):
        with pytest.raises(ValueError, match='1 <= size < 20'):
            held_out_indices(strata, bad)


@pytest.mark.slow  # 7 s or more: left out of make test-fast
def test_temperature_is_fitted_on_held_out_images_only(demo_data, tmp_path):
    """temperature_split holds test images out (the split dataset's two parts are disjoint
    and cover the test set), fits the temperature on them and evaluates the rest; the
    images are recorded; fitting on evaluated images is refused without the opt-in."""
    from reobench_mm.datasets.subset import HeldOutSplitDataset
    data_root = osp.join(demo_data, 'potsdam')
    checkpoint = untrained_checkpoint(SEG_DEMO_CONFIG, str(tmp_path / 'model.pth'))

    def run(work_dir, **loop):
        cfg = _seg_cfg(data_root, str(tmp_path / work_dir), test_cfg=dict(
            type='RobustnessTestLoop', corruptions=['haze'], severities=[3], plots=False,
            temperature_scaling=True, **loop))
        cfg.load_from = checkpoint
        runner = Runner.from_cfg(cfg)
        return runner, runner.test()

    with pytest.raises(SweepError, match='fitted on evaluated images.*shares 3 of the 3'):
        run('refused')
    with pytest.raises(SweepError, match='need temperature_scaling=True'):
        cfg = _seg_cfg(data_root, str(tmp_path / 'x'), test_cfg=dict(
            type='RobustnessTestLoop', temperature_split=1))
        Runner.from_cfg(cfg).test_loop
    runner, metrics = run('split', temperature_split=1, temperature_split_seed=0)
    loop = runner.test_loop
    evaluated = [loop.dataloader.dataset.get_data_info(i)['img_path']
                 for i in range(len(loop.dataloader.dataset))]
    assert isinstance(loop.dataloader.dataset, HeldOutSplitDataset)
    with open(tmp_path / 'split' / 'temperature.json') as handle:
        fitted = json.load(handle)
    assert fitted['num_images'] == 1 and len(evaluated) == 2
    assert not set(fitted['images']) & set(evaluated)
    assert sorted(fitted['images'] + evaluated) == sorted(
        glob.glob(osp.join(data_root, 'img_dir', 'val', '*.png')))
    assert fitted['source'].startswith('held-out split of the test set (1 images, seed 0')
    with open(tmp_path / 'split' / 'results.json') as handle:
        doc = json.load(handle)
    assert doc['provenance']['extra']['temperature']['images'] == fitted['images']
    assert doc['provenance']['extra']['fingerprint']['data']['samples'] == 2
    assert 'calib_ts/ECE' in doc['numbers']['conditions'][0]['extra']
    with open(tmp_path / 'split' / 'report.md') as handle:
        assert 'held-out split of the test set (1 images' in handle.read()
    # the same split again: same images; the clean mIoU is that of the 2 evaluated images
    _, again = run('split_again', temperature_split=1, temperature_split_seed=0)
    assert again['mIoU'] == metrics['mIoU']
    one = _seg_cfg(data_root, str(tmp_path / 'two_images'))
    one.test_dataloader.dataset = dict(type='HeldOutSplitDataset',
                                       dataset=one.test_dataloader.dataset, size=1, seed=0)
    one.load_from = checkpoint
    assert float(Runner.from_cfg(one).test()['mIoU']) == metrics['mIoU']
