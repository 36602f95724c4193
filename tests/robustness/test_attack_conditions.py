"""Attacks as conditions of ``RobustnessTestLoop`` on the demo models: ε = 0 gives the
clean numbers exactly, the metric falls with ε, the records (budget checked, curve,
cost), the worst of the battery recomputed from the per-image statistics, the logger
keys, the report, resuming, batch sizes 1 and 4, an attack on a corrupted image, rotated
detection, and mmseg's own ``tools/test.py`` in a subprocess."""
import json
import os.path as osp

import numpy as np
import pytest
from mmengine.runner import Runner

import reobench_mm  # noqa: F401
from reobench_mm.errors import SweepError
from reobench_mm.evaluation.functional.condition_stats import read_stats_file

from helpers import (DET_DEMO_CONFIG, SEG_DEMO_CONFIG, call_tool_command, run_tools_together,
                     toolbox_file)
from sweep_helpers import condition_records, robustness_cfg, untrained_checkpoint

SEG_ATTACKS = dict(pgd=dict(eps=[0, 2, 8], steps=3), fgsm=dict(eps=[8]),
                   segpgd=dict(eps=[8], steps=3), cospgd=dict(eps=[8], steps=3),
                   apgd=dict(eps=[8], steps=4),
                   pgd_haze=dict(type='pgd', eps=[8], steps=2, corruptions=['haze'],
                                 severities=[3]))


def _cfg(config, data_root, work_dir, checkpoint, batch_size=1, **test_cfg):
    return robustness_cfg(config, data_root, work_dir, checkpoint, batch_size, **test_cfg)


@pytest.fixture(scope='module')
def seg_run(demo_data, trained_seg_checkpoint, tmp_path_factory):
    work_dir = str(tmp_path_factory.mktemp('seg_attacks'))
    cfg = _cfg(SEG_DEMO_CONFIG, osp.join(demo_data, 'potsdam'), work_dir, trained_seg_checkpoint,
               corruptions=['haze'], severities=[3], bootstrap=200, attacks=SEG_ATTACKS)
    cfg.test_cfg.plots = True
    runner = Runner.from_cfg(cfg)
    metrics = runner.test()
    return work_dir, metrics, runner.test_loop


def test_zero_budget_gives_the_clean_numbers_exactly(seg_run):
    work_dir, _, _ = seg_run
    records = condition_records(work_dir)
    assert records['adv/pgd_eps0']['metrics'] == records['clean']['metrics']


def test_the_metric_falls_with_the_budget(seg_run):
    records = condition_records(seg_run[0])
    values = [records[f'adv/pgd_eps{e}']['result']['value'] for e in (0, 2, 8)]
    assert values[0] >= values[1] >= values[2]
    assert values[2] < values[0]
    for name in ('fgsm', 'segpgd', 'cospgd', 'apgd'):
        assert records[f'adv/{name}_eps8']['result']['value'] < values[0]


def test_the_records_hold_the_budget_check_the_cost_and_the_curve(seg_run):
    records = condition_records(seg_run[0])
    for key, record in records.items():
        if not key.startswith('adv/'):
            continue
        attack = record['attack_run']
        assert 0 <= attack['largest_budget_ratio'] <= 1 + 1e-5
        assert attack['images'] == 3 and attack['seconds'] > 0
        assert attack['peak_memory'] == 'process_rss_high_water'
        assert record['images']['num_images'] == 3
    pgd = records['adv/pgd_eps8']
    assert pgd['attack_run']['largest_budget_ratio'] == pytest.approx(1.0, abs=1e-5)
    curve = pgd['attack_run']['curve']
    assert curve['steps'] == [0, 1, 2, 3]
    assert curve['values'][-1] == pgd['result']['value']
    assert 'curve' not in records['adv/apgd_eps8']['attack_run']
    assert 'curve' not in records['adv/fgsm_eps8']['attack_run']
    assert records['adv/pgd_eps8']['eps'] == 8.0 and records['adv/pgd_eps8']['steps'] == 3


def test_an_attack_on_a_corrupted_image(seg_run):
    records = condition_records(seg_run[0])
    on_haze = records['adv/pgd_haze_eps8/haze@3']
    assert on_haze['corruption'] == 'haze' and on_haze['severity'] == 3
    assert on_haze['result']['value'] < records['haze@3']['result']['value']
    assert osp.isfile(osp.join(seg_run[0], 'conditions', 'adv-pgd_haze_eps8_haze_s3.json'))


def _worst_of(work_dir, records, names):
    """The worst of the battery of attacks ``names`` at ε = 8 on the clean images,
    recomputed from the per-image statistics of their records: per image the attack with
    the lowest per-image mIoU, then IoUMetric's pooled mIoU over the chosen areas."""
    stats = [read_stats_file(osp.join(work_dir, 'conditions',
                                      records[f'adv/{n}_eps8']['images']['file'])).task
             for n in names]
    per_image = np.stack([s.per_image_values() for s in stats])
    choice = np.argmin(np.where(np.isnan(per_image), np.inf, per_image), axis=0)
    areas = np.stack([stats[a].areas[i] for i, a in enumerate(choice)]).astype(np.float64)
    union = areas[..., 1].sum(0) + areas[..., 2].sum(0) - areas[..., 0].sum(0)
    with np.errstate(invalid='ignore'):
        return round(float(np.nanmean(areas[..., 0].sum(0) / union)) * 100, 2)


def test_the_worst_of_the_battery_from_the_per_image_statistics(seg_run):
    work_dir, metrics, _ = seg_run
    records = condition_records(work_dir)
    names = ['pgd', 'fgsm', 'segpgd', 'cospgd', 'apgd', 'pgd_haze']
    expected = _worst_of(work_dir, records, names)
    block = json.load(open(osp.join(work_dir, 'results.json')))['numbers']['attacks']
    (worst, ) = [w for w in block['worst'] if w['eps'] == '8' and w['base'] == 'clean']
    assert worst['attacks'] == names
    assert worst['value'] == pytest.approx(expected, abs=1e-9)
    assert sum(worst['images_per_attack'].values()) == 3
    assert worst['value'] <= min(records[f'adv/{n}_eps8']['result']['value'] for n in names)
    assert metrics['adv/worst_eps8/mIoU'] == worst['value']
    assert worst['value_ci'][0] <= worst['value'] <= worst['value_ci'][1]


@pytest.mark.slow  # 3 s or more: left out of make test-fast
def test_the_validation_loop_attacks_and_its_worst_is_a_save_best_key(seg_run, demo_data,
                                                                      trained_seg_checkpoint,
                                                                      tmp_path):
    """RobustnessValLoop with two attacks at ε = 8 on the test loop's images and model:
    each attack's number is the test loop's, the worst of the two
    (``adv/worst_eps8/mIoU``, what ``CheckpointHook(save_best=...)`` can keep the best
    checkpoint by) is the one recomputed from the test loop's per-image statistics, and
    the attacks leave the model's parameter gradients untouched."""
    cfg = _cfg(SEG_DEMO_CONFIG, osp.join(demo_data, 'potsdam'), str(tmp_path / 'val'),
               trained_seg_checkpoint)
    cfg.val_dataloader, cfg.val_evaluator = cfg.test_dataloader, cfg.test_evaluator
    cfg.val_cfg = dict(type='RobustnessValLoop', corruptions=['haze'], severities=[3],
                       attacks=dict(pgd=SEG_ATTACKS['pgd'], fgsm=SEG_ATTACKS['fgsm']))
    runner = Runner.from_cfg(cfg)
    metrics = runner.val()
    work_dir = seg_run[0]
    records = condition_records(work_dir)
    for key in ('adv/pgd_eps0', 'adv/pgd_eps2', 'adv/pgd_eps8', 'adv/fgsm_eps8', 'haze_s3'):
        record = records[key.replace('_s3', '@3')]
        assert metrics[f'{key}/mIoU'] == pytest.approx(record['result']['value'], abs=1e-9), key
    assert metrics['adv/worst_eps8/mIoU'] == pytest.approx(
        _worst_of(work_dir, records, ['pgd', 'fgsm']), abs=1e-9)
    assert 'adv/worst_eps2/mIoU' not in metrics  # one attack at ε = 2: no battery
    assert all(p.grad is None for p in runner.model.parameters())
    assert runner.message_hub.get_scalar('val/adv/worst_eps8/mIoU').current() == \
        metrics['adv/worst_eps8/mIoU']


def test_logger_keys_report_and_plot(seg_run):
    work_dir, metrics, _ = seg_run
    records = condition_records(work_dir)
    assert metrics['adv/pgd_eps8/mIoU'] == records['adv/pgd_eps8']['result']['value']
    assert metrics['adv/pgd_eps8/drop'] == pytest.approx(
        records['clean']['result']['value'] - records['adv/pgd_eps8']['result']['value'])
    assert metrics['adv/pgd_haze_eps8/haze@3/mIoU'] == \
        records['adv/pgd_haze_eps8/haze@3']['result']['value']
    text = open(osp.join(work_dir, 'report.md')).read()
    assert '## Adversarial robustness' in text and '### Worst of the battery' in text
    assert '| pgd | pgd | 8 | clean |' in text
    assert osp.isfile(osp.join(work_dir, 'attack_curves.png'))
    doc = json.load(open(osp.join(work_dir, 'results.json')))
    assert doc['provenance']['extra']['attacks']['pgd'] == dict(eps=[0, 2, 8], steps=3)


def test_a_rerun_resumes_and_changed_settings_are_evaluated_again(seg_run, demo_data,
                                                                 trained_seg_checkpoint):
    work_dir, _, _ = seg_run
    before = condition_records(work_dir)
    cfg = _cfg(SEG_DEMO_CONFIG, osp.join(demo_data, 'potsdam'), work_dir, trained_seg_checkpoint,
               corruptions=['haze'], severities=[3], bootstrap=200, attacks=SEG_ATTACKS)
    runner = Runner.from_cfg(cfg)
    runner.test()
    assert runner.test_loop.outcome.evaluated == []
    assert condition_records(work_dir) == before
    changed = dict(SEG_ATTACKS, pgd=dict(eps=[8], steps=2))
    cfg = _cfg(SEG_DEMO_CONFIG, osp.join(demo_data, 'potsdam'), work_dir, trained_seg_checkpoint,
               corruptions=['haze'], severities=[3], bootstrap=200, attacks=changed)
    runner = Runner.from_cfg(cfg)
    runner.test()
    assert [c.key for c in runner.test_loop.outcome.evaluated] == ['adv/pgd_eps8']


def test_batch_sizes_one_and_four_give_the_same_numbers(demo_data, trained_seg_checkpoint, tmp_path):
    results = []
    for batch_size in (1, 4):
        work_dir = str(tmp_path / f'b{batch_size}')
        cfg = _cfg(SEG_DEMO_CONFIG, osp.join(demo_data, 'potsdam'), work_dir, trained_seg_checkpoint,
                   batch_size=batch_size, corruptions=['haze'], severities=[1], bootstrap=0,
                   attacks=dict(segpgd=dict(eps=[4], steps=2)))
        Runner.from_cfg(cfg).test()
        record = condition_records(work_dir)['adv/segpgd_eps4']
        stats = read_stats_file(osp.join(work_dir, 'conditions', record['images']['file']))
        results.append((record['metrics'], stats.task.areas))
    assert results[0][0] == results[1][0]
    assert np.array_equal(results[0][1], results[1][1])


def test_bad_attack_entries_are_refused(demo_data, trained_seg_checkpoint, tmp_path):
    root = osp.join(demo_data, 'potsdam')
    with pytest.raises(SweepError, match=r"attacks\['pgd'\]: eps is required"):
        Runner.from_cfg(_cfg(SEG_DEMO_CONFIG, root, str(tmp_path), trained_seg_checkpoint,
                             attacks=dict(pgd=dict(steps=2)))).test()
    with pytest.raises(SweepError, match='cospgd is defined for segmentation'):
        Runner.from_cfg(_cfg(DET_DEMO_CONFIG, osp.join(demo_data, 'dior'), str(tmp_path),
                             trained_seg_checkpoint, attacks=dict(cospgd=dict(eps=[8])))).test()


def test_rotated_detection_attacks(demo_data, det_model, tmp_path):
    checkpoint = det_model.checkpoint
    work_dir = str(tmp_path / 'det')
    cfg = _cfg(DET_DEMO_CONFIG, osp.join(demo_data, 'dior'), work_dir, checkpoint,
               corruptions=['haze'], severities=[3], bootstrap=100,
               attacks=dict(fgsm=dict(eps=[8]), pgd=dict(eps=[0, 2, 8], steps=2),
                            pgd_cls=dict(type='pgd', eps=[8], steps=2, losses=['cls'])))
    metrics = Runner.from_cfg(cfg).test()
    records = condition_records(work_dir)
    assert records['adv/pgd_eps0']['metrics'] == records['clean']['metrics']
    clean = records['clean']['result']['value']
    values = [records[f'adv/pgd_eps{e}']['result']['value'] for e in (0, 2, 8)]
    assert values[0] >= values[1] >= values[2] and values[2] < values[0]
    for key in ('adv/fgsm_eps8', 'adv/pgd_eps8', 'adv/pgd_cls_eps8'):
        assert records[key]['result']['value'] <= clean
        assert records[key]['attack_run']['largest_budget_ratio'] <= 1 + 1e-5
    assert metrics['adv/pgd_eps8/mAP'] == records['adv/pgd_eps8']['result']['value']
    block = json.load(open(osp.join(work_dir, 'results.json')))['numbers']['attacks']
    (worst, ) = block['worst']
    names = ['fgsm', 'pgd', 'pgd_cls']
    assert worst['attacks'] == names
    stats = [read_stats_file(osp.join(work_dir, 'conditions',
                                      records[f'adv/{n}_eps8']['images']['file'])).task
             for n in names]
    per_image = np.stack([s.per_image_values() for s in stats])
    choice = np.argmin(np.where(np.isnan(per_image), np.inf, per_image), axis=0)
    # the worst images' detections evaluated by mmrotate's own AP code
    assert worst['value'] == pytest.approx(100 * _rotated_map(stats, choice), abs=1e-6)
    assert metrics['adv/worst_eps8/mAP'] == worst['value']


def _rotated_map(stats, choice):
    """mAP of image i's detections from ``stats[choice[i]]``, by mmrotate's
    ``average_precision`` over each class's flags (as ``eval_rbbox_map`` computes it)."""
    from mmdet.evaluation.functional import average_precision
    first = stats[0]
    aps = []
    for c in range(first.num_classes):
        scores, tps = [], []
        for k, item in enumerate(stats):
            block = slice(item.class_offsets[c], item.class_offsets[c + 1])
            keep = choice[item.image[block].astype(int)] == k
            scores.append(item.score[block][keep])
            tps.append(item.state[0, block][keep])
        score, state = np.concatenate(scores), np.concatenate(tps)
        gts = int(sum(stats[k].num_gts[i, c] for i, k in enumerate(choice)))
        if gts == 0:
            continue
        order = np.argsort(-score, kind='stable')
        tp = np.cumsum(state[order] == 1)
        fp = np.cumsum(state[order] == 0)
        recall = tp / gts
        precision = tp / np.maximum(tp + fp, np.finfo(np.float32).eps)
        aps.append(float(average_precision(recall, precision, first.eval_mode)))
    return float(np.mean(aps))


@pytest.mark.slow
def test_mmseg_tools_test_runs_an_attack_condition(demo_data, trained_seg_checkpoint, tmp_path):
    stock = toolbox_file('mmseg', 'tools', 'test.py')
    data_root = osp.join(demo_data, 'potsdam')
    derived = tmp_path / 'upernet_attack.py'
    derived.write_text(
        f"_base_ = ['{SEG_DEMO_CONFIG}']\n"
        "test_cfg = dict(type='RobustnessTestLoop', corruptions=['haze'], severities=[3],"
        " plots=False, attacks=dict(pgd=dict(eps=[0, 4], steps=2)))\n")
    common = ['--cfg-options', f'test_dataloader.dataset.data_root={data_root}',
              'log_level=WARNING', 'test_dataloader.num_workers=0',
              'test_dataloader.persistent_workers=False']
    sweep_tool = osp.join(osp.dirname(SEG_DEMO_CONFIG), '..', '..', 'tools',
                          'robustness_test.py')
    run_tools_together(  # the sweep tool in this process meanwhile
        [stock, str(derived), trained_seg_checkpoint, '--work-dir', str(tmp_path / 'loop'),
         *common],
        meanwhile=lambda: call_tool_command(
            [sweep_tool, str(derived), trained_seg_checkpoint, '--corruptions', 'haze',
             '--severities', '3', '--no-plots', '--work-dir', str(tmp_path / 'sweep'),
             *common]))
    records = condition_records(str(tmp_path / 'loop'))
    assert sorted(records) == ['adv/pgd_eps0', 'adv/pgd_eps4', 'clean', 'haze@3']
    assert records['adv/pgd_eps0']['metrics'] == records['clean']['metrics']
    assert records['adv/pgd_eps4']['result']['value'] < records['clean']['result']['value']
    # the sweep tool reads the attacks from the config's test_cfg: the same numbers
    swept = condition_records(str(tmp_path / 'sweep'))
    assert sorted(swept) == sorted(records)
    assert swept['adv/pgd_eps4']['metrics'] == records['adv/pgd_eps4']['metrics']


def test_the_sweep_tool_takes_attacks_as_a_flag_or_option_and_prints_their_rows(
        demo_data, tmp_path, capsys):
    """--attacks NAME=EPS on the sweep tool, test_cfg.attacks in --cfg-options on a config
    whose test_cfg is the single-condition loop (the tool selects the robustness loop),
    and the printout after the paper table: each attack's row and each shift set's; a
    shift set given by --shifts NAME=FILE:VARIABLE gives the same record as the same set
    given in --cfg-options."""
    from helpers import call_tool
    data_root = osp.join(demo_data, 'potsdam')
    checkpoint = untrained_checkpoint(SEG_DEMO_CONFIG, str(tmp_path / 'model.pth'))
    shifted = dict(type='PotsdamDataset', data_root=osp.join(demo_data, 'potsdam_shifted'),
                   data_prefix=dict(img_path='img_dir/val', seg_map_path='ann_dir/val'))
    derived = tmp_path / 'with_shift.py'
    derived.write_text(f"_base_ = ['{SEG_DEMO_CONFIG}']\n"
                       "test_cfg = dict(type='CorruptionTestLoop')\n")
    shift_file = tmp_path / 'shift_sets.py'
    shift_file.write_text(f'other_shift = dict(shift_type="sensor", dataset={shifted!r})\n'
                          'unused = dict(a=1)\n')
    plain = ['--corruptions', 'haze', '--severities', '1', '--no-plots', '--cfg-options',
             f'test_dataloader.dataset.data_root={data_root}', 'test_dataloader.num_workers=0',
             'test_dataloader.persistent_workers=False', 'log_level=WARNING']
    common = [*plain, 'test_cfg.shifts.s.shift_type=sensor',
              *[f'test_cfg.shifts.s.dataset.{k}={v}' for k, v in
                (('type', 'PotsdamDataset'), ('data_root', shifted['data_root']),
                 ('data_prefix.img_path', 'img_dir/val'),
                 ('data_prefix.seg_map_path', 'ann_dir/val'))]]
    assert call_tool('robustness_test.py', [derived, checkpoint, '--work-dir',
                                            tmp_path / 'flag', '--attacks', 'fgsm=2,4',
                                            *common]) == 0
    printed = capsys.readouterr().out
    assert 'attack fgsm ε 2: mIoU ' in printed and 'attack fgsm ε 4: mIoU ' in printed
    assert 'ID -> OOD s (sensor): mIoU ' in printed
    flagged = condition_records(str(tmp_path / 'flag'))
    assert sorted(flagged) == ['adv/fgsm_eps2', 'adv/fgsm_eps4', 'clean', 'haze@1', 'shift/s']
    # the same attacks as a config option, the shift set as a flag: the same records
    assert call_tool('robustness_test.py', [derived, checkpoint, '--work-dir',
                                            tmp_path / 'option', '--shifts',
                                            f's={shift_file}:other_shift', *plain,
                                            'test_cfg.attacks.fgsm.eps=[2,4]']) == 0
    option = condition_records(str(tmp_path / 'option'))
    assert option['adv/fgsm_eps4']['metrics'] == flagged['adv/fgsm_eps4']['metrics']
    assert option['shift/s']['metrics'] == flagged['shift/s']['metrics']
    # and through tools/test.py: the conditions given as options select the loop
    assert call_tool('test.py', [derived, checkpoint, '--work-dir', tmp_path / 'test_tool',
                                 '--cfg-options', *common[6:], 'test_cfg.attacks.fgsm.eps=[2]',
                                 'test_cfg.corruptions=[haze]', 'test_cfg.severities=[1]',
                                 'test_cfg.plots=False']) == 0
    tested = condition_records(str(tmp_path / 'test_tool'))
    assert tested['adv/fgsm_eps2']['metrics'] == flagged['adv/fgsm_eps2']['metrics']
    # a bad flag: one line naming the form
    assert call_tool('robustness_test.py', [derived, checkpoint, '--attacks', 'fgsm']) == 2
    assert "'fgsm': an attack is NAME=EPS[,EPS...]" in capsys.readouterr().err
    # a file without that set: one line naming the file's shift sets
    assert call_tool('robustness_test.py', [derived, checkpoint, '--work-dir',
                                            tmp_path / 'bad', '--shifts',
                                            f's={shift_file}:vaihingen_shift', *plain]) == 2
    assert "has no shift set 'vaihingen_shift' (its shift sets: other_shift)" in \
        capsys.readouterr().err
