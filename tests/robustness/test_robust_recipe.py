"""Plain against corruption-aware training: the per-run numbers against a direct
computation, the refusals, and the whole comparison on the demo data (slow)."""
import json
import os.path as osp

import numpy as np
import pytest

from reobench_mm.analysis.results import aggregate
from reobench_mm.robustness.recipe import (RECIPE_KEYS, compare_recipes, recipe_markdown,
                                           recipe_row)

from helpers import PROJECT_ROOT, tool_result

DEMO = osp.join(PROJECT_ROOT, 'configs', 'demo')
SEG_PLAIN = osp.join(DEMO, 'upernet_r18-tiny_1xb4-600i_demo-potsdam-128x128.py')
SEG_ROBUST = osp.join(DEMO, 'upernet_r18-tiny_1xb4-600i_demo-potsdam-128x128_robust.py')


def _results(rng):
    """clean + 3 corruptions × 2 severities, with an ECE per condition."""
    out = {('clean', 0): dict(value=80.0, extra={'calib/ECE': 0.05})}
    for name in ('gaussian_noise', 'cloud', 'rotate'):
        for severity in (1, 3):
            out[(name, severity)] = dict(value=float(rng.uniform(40, 79)),
                                         extra={'calib/ECE': float(rng.uniform(0.05, 0.3))})
    return out


def test_recipe_row_is_reobench_restricted_to_the_held_out_corruptions():
    results = _results(np.random.default_rng(0))
    summary = aggregate(results, task='segmentation', seen_in_training=['gaussian_noise'])
    row = recipe_row('m', 1, summary, ['gaussian_noise', 'salt_pepper_noise'])
    means = {n: np.mean([results[(n, s)]['value'] for s in (1, 3)])
             for n in ('gaussian_noise', 'cloud', 'rotate')}
    eces = {n: np.mean([results[(n, s)]['extra']['calib/ECE'] for s in (1, 3)])
            for n in ('cloud', 'rotate')}
    assert row['held_out'] == ['cloud', 'rotate'] and row['seen'] == ['gaussian_noise']
    assert row['held_out_avg'] == pytest.approx((means['cloud'] + means['rotate']) / 2)
    assert row['held_out_delta_tp'] == pytest.approx(80 - row['held_out_avg'])
    assert row['seen_avg'] == pytest.approx(means['gaussian_noise'])
    assert row['ece_clean'] == pytest.approx(0.05)
    assert row['ece_held_out_avg'] == pytest.approx((eces['cloud'] + eces['rotate']) / 2)
    # the summary's own held-out scores are the same numbers
    assert summary.held_out.avg == pytest.approx(row['held_out_avg'])
    with pytest.raises(ValueError, match='no held-out score'):
        recipe_row('m', 1, summary, ['gaussian_noise', 'cloud', 'rotate'])


def test_markdown_shows_both_recipes_and_the_difference():
    band = {k: dict(n=2, mean=1.0 + i, std=0.5, min=0.5, max=2.0)
            for i, k in enumerate(RECIPE_KEYS)}
    doc = dict(task='segmentation', metric='mIoU', seeds=[0, 1], pool=['gaussian_noise'],
               held_out=['cloud'], severities=[3],
               recipes={r: dict(model=f'{r}_cfg', band=band,
                                per_corruption={'cloud': band['clean']})
                        for r in ('plain', 'robust')},
               difference={k: 0.0 for k in RECIPE_KEYS})
    text = recipe_markdown(doc)
    assert '| plain | `plain_cfg` | 1.00 ± 0.50 |' in text
    assert 'robust − plain' in text and 'Held out (scored for both recipes): cloud' in text


def test_refusals(tmp_path):
    with pytest.raises(ValueError, match='no RandomCorruption'):
        compare_recipes(SEG_PLAIN, SEG_PLAIN, work_dir=str(tmp_path))
    with pytest.raises(ValueError, match='plain recipe must not'):
        compare_recipes(SEG_ROBUST, SEG_ROBUST, work_dir=str(tmp_path))
    with pytest.raises(ValueError, match='nothing is held out'):
        compare_recipes(SEG_PLAIN, SEG_ROBUST, work_dir=str(tmp_path),
                        options=dict(corruptions=['sensor']))
    assert not any(tmp_path.iterdir())


def _pointed(tmp_path, name, base, data_root, nested):
    """A config inheriting ``base`` that reads ``data_root`` (the robust configs' training
    set sits one level deeper, inside EpochIndexedDataset)."""
    train = (f'dict(dataset=dict(dataset=dict(data_root={data_root!r})))' if nested
             else f'dict(dataset=dict(data_root={data_root!r}))')
    path = tmp_path / name
    path.write_text(f"_base_ = [{base!r}]\n"
                    f"train_dataloader = {train}\n"
                    f"val_dataloader = dict(dataset=dict(data_root={data_root!r}))\n"
                    f"test_dataloader = val_dataloader\n")
    return str(path)


@pytest.mark.trains('the recipe comparison trains its plain and robust models')
@pytest.mark.slow
def test_compare_recipes_on_the_demo_data(tmp_path, demo_data):
    root = osp.join(demo_data, 'potsdam')
    plain = _pointed(tmp_path, 'plain.py', SEG_PLAIN, root, nested=False)
    robust = _pointed(tmp_path, 'plain_robust.py', SEG_ROBUST, root, nested=True)
    options = {f'{s}_dataloader.num_workers': 0 for s in ('train', 'val', 'test')}
    options.update({f'{s}_dataloader.persistent_workers': False
                    for s in ('train', 'val', 'test')})
    options['train_dataloader.batch_size'] = 2
    work = str(tmp_path / 'recipe')
    result = compare_recipes(plain, robust, work_dir=work, seeds=[0], iters=3,
                             options=dict(corruptions=['gaussian_noise', 'cloud'],
                                          severities=[2]), cfg_options=options)
    assert result['pool'][0] == 'gaussian_noise' and result['held_out'] == ['cloud']
    for recipe in ('plain', 'robust'):
        (run, ) = result['recipes'][recipe]['runs']
        doc = json.load(open(osp.join(work, run['model'], 'fraction_1', 'seed_0',
                                      'robustness', 'results.json')))
        numbers = doc['numbers']
        # both sweeps are scored against the robust recipe's pool
        assert numbers['training']['seen_corruptions'] == result['pool']
        cloud = numbers['per_corruption']['cloud']['mean']
        assert run['held_out_avg'] == pytest.approx(cloud)
        assert run['held_out_delta_tp'] == pytest.approx(numbers['clean'] - cloud)
        assert numbers['training']['held_out']['avg'] == pytest.approx(cloud)
    difference = result['difference']['held_out_delta_tp']
    bands = [result['recipes'][r]['band']['held_out_delta_tp']['mean']
             for r in ('plain', 'robust')]
    assert difference == pytest.approx(bands[1] - bands[0])
    text = open(result['files']['md'], encoding='utf-8').read()
    assert 'Seen in training by the robust recipe: gaussian_noise' in text
    report = open(osp.join(work, result['recipes']['robust']['model'], 'fraction_1',
                           'seed_0', 'robustness', 'report.md'), encoding='utf-8').read()
    assert 'gaussian_noise †' in report and 'held out from training' in report
    # shards of the robust sweep, merged, keep the seen corruptions and held-out scores
    from reobench_mm.robustness.shards import merge_sweeps
    from reobench_mm.robustness.sweep import RobustnessSweep
    (run, ) = result['recipes']['robust']['runs']
    checkpoint = json.load(open(osp.join(work, run['model'], 'fraction_1', 'seed_0',
                                         'data_budget_run.json')))['checkpoint']
    shards = [str(tmp_path / f'shard{i}') for i in range(2)]
    for i, shard in enumerate(shards):
        RobustnessSweep(robust, checkpoint, corruptions=['gaussian_noise', 'cloud'],
                        severities=[2], work_dir=shard, cfg_options=options, plots=False,
                        shard=f'{i}/2').run()
    merged = merge_sweeps(shards, str(tmp_path / 'merged'), plots=False)
    assert merged.summary.seen_in_training == tuple(result['pool'])
    assert merged.summary.held_out.avg == pytest.approx(run['held_out_avg'])
    # a rerun reuses both trainings and sweeps
    again = compare_recipes(plain, robust, work_dir=work, seeds=[0], iters=3,
                            options=dict(corruptions=['gaussian_noise', 'cloud'],
                                         severities=[2]), cfg_options=options)
    assert again['difference'] == result['difference']


def test_robustness_tool_refuses_seen_corruptions_with_held_out_only(tmp_path):
    """tools/robustness_test.py --held-out-only on a _robust config: refused before
    anything is built or written, naming the seen corruption and what is left."""
    checkpoint = tmp_path / 'model.pth'
    checkpoint.write_bytes(b'not read')
    work = tmp_path / 'sweep'
    result = tool_result('robustness_test.py', [
        SEG_ROBUST, checkpoint, '--corruptions', 'gaussian_noise', 'cloud', '--held-out-only',
        '--work-dir', work])
    assert result.returncode == 2
    assert 'gaussian_noise was in the training pool' in result.stderr
    assert 'held-out corruptions (cloud)' in result.stderr
    assert not work.exists()
