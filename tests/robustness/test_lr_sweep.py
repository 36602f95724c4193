"""The learning-rate sweep (EarthShift's protocol): the package's grid, the derived configs
read back, the selection rule on its own, refused inputs, and the driver end to end on the
frozen-encoder demo probe with a shift set: the choice against the selection runs'
results.json, the final runs at the chosen rate, a sweep killed twice and resumed without
training a finished run again, a rate given for another pair, and the command-line tool."""
import json
import math
import os
import os.path as osp
from decimal import Decimal

import numpy as np
import pytest
from mmengine.config import Config

import reobench_mm  # noqa: F401  (registration)
from helpers import PROJECT_ROOT, SEG_DEMO_CONFIG, load_tool
from reobench_mm.analysis.results_file import read_results
from reobench_mm.robustness import data_budget
from reobench_mm.robustness.lr_sweep import (DEFAULT_LRS, SELECTION_OPTIONS, check_lrs,
                                             choose_lr, lr_tag, run_lr_sweep,
                                             write_lr_configs)
from sweep_helpers import probe_training_options

# the module's tests share one sweep: one worker runs them all (--dist loadgroup)
pytestmark = pytest.mark.xdist_group('lr_sweep_run')

PROBE_CONFIG = osp.join(PROJECT_ROOT, 'configs', 'demo',
                        'linear-probe_r18-tiny_frozen_1xb4-600i_demo-potsdam-128x128.py')
PROBE = osp.splitext(osp.basename(PROBE_CONFIG))[0]


# ----------------------------------------------------------------------------- the grid

def test_the_default_grid_is_1_2_5_per_decade_from_1e_6_to_5e_1():
    expected = sorted(float(Decimal(m) * Decimal(10) ** k) for k in range(-6, 0)
                      for m in (1, 2, 5))
    assert list(DEFAULT_LRS) == expected and len(DEFAULT_LRS) == 18
    assert (DEFAULT_LRS[0], DEFAULT_LRS[-1]) == (1e-6, 0.5)
    assert [lr_tag(lr) for lr in DEFAULT_LRS[:4]] == ['lr1e-06', 'lr2e-06', 'lr5e-06',
                                                      'lr1e-05']
    assert len({lr_tag(lr) for lr in DEFAULT_LRS}) == 18


def test_a_rate_is_named_by_its_shortest_exact_form():
    assert lr_tag(1e-4) == 'lr1e-04' and lr_tag(2.5e-4) == 'lr2.5e-04'
    assert lr_tag(0.1) == 'lr1e-01' and lr_tag(3) == 'lr3e+00'
    assert float(lr_tag(1.2345e-5)[2:]) == 1.2345e-5
    assert check_lrs([1e-2, 1e-4, 1e-3]) == [1e-4, 1e-3, 1e-2]


@pytest.mark.parametrize('lrs, message', [
    ([], 'no learning rate given'), ([0], 'finite number > 0'), ([1e-3, -1e-3], '> 0'),
    ([math.nan], 'finite'), ([math.inf], 'finite'), ([1e-3, 1e-3], 'more than once'),
    ([True], 'number'), (['1e-3'], 'number'), ('1e-3', 'list of learning rates'),
    (None, 'list of learning rates')])
def test_a_bad_grid_is_one_value_error(lrs, message):
    with pytest.raises(ValueError, match=message):
        check_lrs(lrs)


# ----------------------------------------------------------------------------- the configs

def test_the_derived_configs_set_exactly_the_rate(tmp_path):
    rates = [1e-4, 2.5e-3]
    paths = write_lr_configs(PROBE_CONFIG, rates, str(tmp_path))
    assert sorted(paths) == rates
    original = Config.fromfile(PROBE_CONFIG)
    for lr, path in paths.items():
        assert osp.basename(path) == f'{PROBE}_{lr_tag(lr)}.py'
        derived = Config.fromfile(path)
        assert derived.optim_wrapper.optimizer.lr == lr
        assert type(derived.optim_wrapper.optimizer.lr) is float
        derived.optim_wrapper.optimizer.lr = original.optim_wrapper.optimizer.lr
        assert derived.to_dict() == original.to_dict()
        assert 'shifts' not in derived.test_cfg
    # written again with the same text: left as it is
    stamp = os.stat(paths[1e-4]).st_mtime_ns
    write_lr_configs(PROBE_CONFIG, [1e-4], str(tmp_path))
    assert os.stat(paths[1e-4]).st_mtime_ns == stamp
    # the selection runs' configs drop the shift sets
    dropped = write_lr_configs(PROBE_CONFIG, [1e-4], str(tmp_path / 'drop'), drop_shifts=True)
    assert Config.fromfile(dropped[1e-4]).test_cfg.shifts is None


def test_a_config_without_a_learning_rate_is_refused(tmp_path):
    config = tmp_path / 'no_lr.py'
    config.write_text(f"_base_ = ['{PROBE_CONFIG}']\noptim_wrapper = dict(_delete_=True, "
                      "type='OptimWrapper', optimizer=dict(type='SGD'))\n")
    with pytest.raises(ValueError, match='has no optim_wrapper.optimizer.lr'):
        write_lr_configs(str(config), [1e-3], str(tmp_path / 'out'))
    with pytest.raises(ValueError, match='has no optim_wrapper.optimizer.lr'):
        run_lr_sweep(str(config), [1e-3], work_dir=str(tmp_path / 'sweep'))
    assert not osp.exists(tmp_path / 'sweep' / 'selection')


# ----------------------------------------------------------------------------- the rule

def test_the_rule_takes_the_best_finite_run_and_the_smaller_rate_on_a_tie():
    never = []

    def diverged(lr):
        never.append(lr)
        return False

    assert choose_lr({1e-4: 30.0, 1e-3: 42.5, 1e-2: 41.0}, diverged) == (1e-3, {1e-3: False})
    assert choose_lr({1e-2: 42.5, 1e-4: 40.0, 1e-3: 42.5}, diverged)[0] == 1e-3
    assert choose_lr({1e-4: None, 1e-3: math.nan, 1e-2: 5.0}, diverged)[0] == 1e-2
    # a diverged run is passed over: the next in the ranking, checked in that order
    asked = []

    def blown_up(lr):
        asked.append(lr)
        return lr >= 1e-2

    chosen, checked = choose_lr({1e-4: 10.0, 1e-3: 20.0, 1e-2: 30.0, 1e-1: 35.0}, blown_up)
    assert chosen == 1e-3 and asked == [1e-1, 1e-2, 1e-3]
    assert checked == {1e-1: True, 1e-2: True, 1e-3: False}
    with pytest.raises(ValueError, match='can be chosen'):
        choose_lr({1e-4: 10.0, 1e-3: math.inf}, lambda lr: True)
    with pytest.raises(ValueError, match='can be chosen'):
        choose_lr({1e-4: None}, diverged)


# ----------------------------------------------------------------------------- inputs

@pytest.mark.parametrize('arguments, message', [
    (dict(lrs=[]), 'no learning rate given'),
    (dict(lrs=[1e-3, 0.0]), '> 0'),
    (dict(lrs=[1e-3, math.nan]), 'finite'),
    (dict(lrs=[1e-3, 1e-3]), 'more than once'),
    (dict(lr=-1.0), '> 0'),
    (dict(seeds=[]), 'no training seed'),
    (dict(selection_seed=-1), 'seeds must be integers >= 0'),
    (dict(iters=0), 'iters must be a positive integer'),
    (dict(options=dict(corruptions=('nope', ))), 'unknown corruption'),
    (dict(options=dict(fan_out=2)), 'not of run_lr_sweep'),
    (dict(cfg_options={'optim_wrapper.optimizer.lr': 0.1}), 'sets the rate'),
    (dict(cfg_options={'test_cfg.shifts': None}), 'shift sets'),
])
def test_bad_input_is_one_value_error_before_any_training(arguments, message, tmp_path):
    with pytest.raises(ValueError, match=message):
        run_lr_sweep(PROBE_CONFIG, **dict(dict(lrs=[1e-3]), **arguments),
                     work_dir=str(tmp_path))
    assert not osp.exists(tmp_path / 'selection') and not osp.exists(tmp_path / 'final')


def test_a_missing_config_and_test_sets_of_other_data_are_refused(tmp_path):
    with pytest.raises(ValueError, match='does not exist'):
        run_lr_sweep(str(tmp_path / 'missing.py'), [1e-3], work_dir=str(tmp_path))
    attacked = tmp_path / 'attacked.py'
    attacked.write_text(f"_base_ = ['{PROBE_CONFIG}']\n"
                        "test_cfg = dict(type='RobustnessTestLoop', attacks=dict(fgsm=dict("
                        "eps=[2])))\n")
    with pytest.raises(ValueError, match='gives attacks'):
        run_lr_sweep(str(attacked), [1e-3], work_dir=str(tmp_path))


def test_the_frozen_twin_is_what_is_swept(tmp_path):
    # refused at the first training (iters=0), after the configs are written
    with pytest.raises(ValueError, match='iters'):
        run_lr_sweep(SEG_DEMO_CONFIG, [1e-3], frozen=True, iters=0, work_dir=str(tmp_path))
    stem = osp.splitext(osp.basename(SEG_DEMO_CONFIG))[0]
    derived = Config.fromfile(str(tmp_path / 'configs' / f'{stem}_frozen_lr1e-03.py'))
    assert derived.model.backbone.frozen_stages == 4 and derived.model.backbone.norm_eval
    assert derived.optim_wrapper.optimizer.lr == 1e-3


# ----------------------------------------------------------------------------- end to end

ITERS = 3
RATES = (1e-5, 1e-3, 5e-2)
SEEDS = (0, 1)


_TRAIN = data_budget._train


class Killed(Exception):
    """A stand-in for a process killed in the middle of a sweep."""


def _trainings(monkeypatch, kill=None):
    """Count the data-budget driver's trainings (their run folders); ``kill(run_dir)``
    True stops the sweep there instead, as a killed process would."""
    done = []

    def train(config, model, fraction, seed, run_dir, *args):
        if kill is not None and kill(run_dir):
            raise Killed(run_dir)
        done.append(run_dir)
        return _TRAIN(config, model, fraction, seed, run_dir, *args)

    monkeypatch.setattr(data_budget, '_train', train)
    return done


def _read(path):
    with open(path, encoding='utf-8') as handle:
        return handle.read()


@pytest.fixture(scope='module')
def sweep(demo_data, tmp_path_factory):
    """The frozen-encoder demo probe (encoder: a demo UperNet's backbone, random weights)
    with a shifted test set, swept over 3 rates and trained with 2 seeds: killed in the
    selection, killed again in the final runs, then resumed to the end."""
    import torch
    from mmengine.registry import MODELS, init_default_scope
    root = tmp_path_factory.mktemp('lr_sweep')
    init_default_scope('mmseg')
    torch.manual_seed(3)
    encoder_checkpoint = str(root / 'encoder.pth')
    torch.save(dict(state_dict=MODELS.build(Config.fromfile(SEG_DEMO_CONFIG).model)
                    .state_dict()), encoder_checkpoint)
    config = root / 'probe_with_shift.py'
    config.write_text(
        f"_base_ = ['{PROBE_CONFIG}']\n"
        "test_cfg = dict(type='RobustnessTestLoop', shifts=dict(shifted=dict("
        "shift_type='sensor', dataset=dict("
        f"type='PotsdamDataset', data_root='{osp.join(demo_data, 'potsdam_shifted')}', "
        "data_prefix=dict(img_path='img_dir/val', seg_map_path='ann_dir/val')))))\n")
    work_dir = str(root / 'work')
    settings = dict(seeds=SEEDS, selection_seed=0, work_dir=work_dir, iters=ITERS,
                    options=dict(corruptions=('haze', ), severities=(1, ), calibration=False),
                    cfg_options=probe_training_options(osp.join(demo_data, 'potsdam'),
                                             encoder_checkpoint))
    calls = []
    with pytest.MonkeyPatch.context() as patch:
        # killed at the second rate's training
        done = _trainings(patch, kill=lambda run_dir: len(done) == 1)
        with pytest.raises(Killed):
            run_lr_sweep(str(config), RATES, **settings)
        calls.append(dict(trained=list(done)))
        # killed at the final run of seed 1
        done = _trainings(patch, kill=lambda run_dir: osp.join('final', '') in run_dir
                          and run_dir.endswith('seed_1'))
        with pytest.raises(Killed):
            run_lr_sweep(str(config), RATES, **settings)
        calls.append(dict(trained=list(done),
                          record=json.loads(_read(osp.join(work_dir, 'lr_sweep.json')))))
        done = _trainings(patch)
        result = run_lr_sweep(str(config), RATES, **settings)
        calls.append(dict(trained=list(done), result=result,
                          record=_read(osp.join(work_dir, 'lr_sweep.json'))))
    return dict(result=result, calls=calls, config=str(config), settings=settings,
                work_dir=work_dir)


def _selection_metric(work_dir, model):
    return read_results(osp.join(work_dir, 'selection', model, 'fraction_1', 'seed_0',
                                 'robustness', 'results.json')).summary


@pytest.mark.trains('the learning-rate sweep trains its models')
@pytest.mark.slow
def test_the_choice_is_the_best_selection_run_and_the_final_runs_use_it(sweep):
    doc, work_dir = sweep['result'], sweep['work_dir']
    models = [f'probe_with_shift_{lr_tag(lr)}' for lr in RATES]
    assert [r['model'] for r in doc['rates']] == models
    # the argmax over the selection runs' results.json, ties to the smaller rate
    summaries = [_selection_metric(work_dir, m) for m in models]
    clean = [s.clean for s in summaries]
    best = max(range(len(RATES)), key=lambda i: (clean[i], -RATES[i]))
    assert doc['lr'] == RATES[best] and doc['model'] == models[best]
    assert [r['clean'] for r in doc['rates']] == clean
    assert doc['rates'][best]['diverged'] is False
    assert (doc['lr_given'], doc['selection_seed'], doc['lrs']) == (False, 0, list(RATES))
    # the selection saw the clean test set and one corruption at severity 1: no shift set
    for summary in summaries:
        assert summary.corruptions == SELECTION_OPTIONS['corruptions']
        assert summary.severities == (1, )
        assert not summary.blocks.get('shifts')
    # the final runs: the chosen rate's config, every seed, corruptions and the shift set
    assert os.listdir(osp.join(work_dir, 'final')).count(doc['model']) == 1
    assert not [m for m in models if m != doc['model']
                and osp.exists(osp.join(work_dir, 'final', m))]
    assert [r['seed'] for r in doc['runs']] == list(SEEDS)
    assert doc['keys'] == ['clean', 'avg', 'delta_tp', 'ece_clean', 'shifted/ood',
                           'shifted/relative_drop']
    for run in doc['runs']:
        folder = osp.join(work_dir, 'final', doc['model'], 'fraction_1', f'seed_{run["seed"]}')
        assert run['results'] == osp.join(folder, 'robustness', 'results.json')
        record = json.loads(_read(osp.join(folder, 'data_budget_run.json')))
        assert record['train_settings']['config'] == doc['rates'][best]['config']
        summary = read_results(run['results']).summary
        assert summary.corruptions == ('haze', )
        assert run['clean'] == pytest.approx(summary.clean)
        assert run['shifted/ood'] == pytest.approx(summary.blocks['shifts']['sets'][0]['ood'])
        # seed 0's training is the selection run's, seed 1's its own
        selection_run = osp.join(work_dir, 'selection', doc['model'], 'fraction_1', 'seed_0')
        assert record['checkpoint'].startswith(selection_run) == (run['seed'] == 0)
        assert run['training'] == ('selection run' if run['seed'] == 0 else 'own')
    assert doc['runs'][0]['clean'] == pytest.approx(summaries[best].clean)
    config = Config.fromfile(doc['rates'][best]['config'])
    assert config.optim_wrapper.optimizer.lr == doc['lr']
    for key in doc['keys']:
        values = [r[key] for r in doc['runs']]
        if None in values:
            assert doc['band'][key] is None
            continue
        assert doc['band'][key]['mean'] == pytest.approx(np.mean(values))
        assert doc['band'][key]['std'] == pytest.approx(np.std(values, ddof=1))
    text = _read(doc['files']['md'])
    assert f'| {doc["lr"]:g} | `{doc["model"]}` |' in text and 'chosen' in text
    assert '| mean ± SD |' in text


@pytest.mark.trains('resuming the learning-rate sweep is what it checks')
@pytest.mark.slow
def test_a_killed_sweep_resumes_without_training_a_finished_run(sweep, monkeypatch):
    first, second, third = sweep['calls']
    doc, work_dir = sweep['result'], sweep['work_dir']
    models = [r['model'] for r in doc['rates']]
    selection = [osp.join(work_dir, 'selection', m, 'fraction_1', 'seed_0') for m in models]
    final = [osp.join(work_dir, 'final', doc['model'], 'fraction_1', f'seed_{s}')
             for s in SEEDS]
    # the first kill: one rate trained; the second: the others, then the selection recorded
    assert first['trained'] == selection[:1]
    assert second['trained'] == selection[1:]
    partial = second['record']
    assert (partial['complete'], partial['lr']) == (False, doc['lr'])
    assert partial['rates'] == doc['rates']
    # the end: the final run of seed 1 only; the selection runs skipped
    assert third['trained'] == final[1:]
    status = doc['status']
    assert set(status['selection'].values()) == {'skipped'}
    assert status['final'] == {f'{doc["model"]}@1/seed0': 'skipped',
                               f'{doc["model"]}@1/seed1': 'trained'}
    # once more: nothing trained, nothing evaluated, the same record to the byte
    checkpoints = [json.loads(_read(osp.join(d, 'data_budget_run.json')))['checkpoint']
                   for d in selection + final]
    stamps = [os.stat(p).st_mtime_ns for p in checkpoints]
    done = _trainings(monkeypatch)
    again = run_lr_sweep(sweep['config'], RATES, **sweep['settings'])
    assert done == []
    assert {v for part in again['status'].values() for v in part.values()} == {'skipped'}
    assert _read(again['files']['json']) == third['record']
    assert [os.stat(p).st_mtime_ns for p in checkpoints] == stamps


@pytest.mark.trains('the sweep reuses its runs for a rate given and other settings')
@pytest.mark.slow
def test_a_given_rate_and_the_tool_reuse_the_finished_runs(sweep, monkeypatch, capsys):
    doc, work_dir, settings = sweep['result'], sweep['work_dir'], sweep['settings']
    done = _trainings(monkeypatch)
    # the rate chosen here, given for another pair of the same shift type (here: the same)
    tool = load_tool('analysis_tools/lr_sweep.py')
    argv = [sweep['config'], '--lr', repr(doc['lr']), '--seeds', *map(str, SEEDS),
            '--iters', str(ITERS), '--work-dir', work_dir, '--corruptions', 'haze',
            '--severities', '1', '--no-calibration', '--cfg-options'] + \
        [f'{k}={v}' for k, v in settings['cfg_options'].items()]
    assert tool.main(argv) == 0
    printed = capsys.readouterr().out
    assert f'Rate given: {doc["lr"]:g}' in printed and '| mean ± SD |' in printed
    given = json.loads(_read(osp.join(work_dir, 'lr_sweep.json')))
    assert (given['lr_given'], given['lr'], given['rates'], given['rule']) == \
        (True, doc['lr'], [], None)
    assert given['runs'] == doc['runs'] and given['band'] == doc['band']
    # a selection seed outside the seeds: the final runs train on their own (here: done)
    other = run_lr_sweep(sweep['config'], RATES, **dict(settings, seeds=(1, )))
    assert other['lr'] == doc['lr'] and other['runs'] == doc['runs'][1:]
    # the tool, the sweep's settings: nothing to do
    argv[argv.index('--lr'):argv.index('--lr') + 2] = ['--lrs', *map(repr, RATES)]
    assert tool.main(argv) == 0
    assert '| Rate | Config | Clean mIoU | Diverged |  |' in capsys.readouterr().out
    assert done == []
    assert _read(osp.join(work_dir, 'lr_sweep.json')) == sweep['calls'][2]['record']
    # a rate added to the grid: only its selection run trains; the choice stands
    done.clear()
    added = run_lr_sweep(sweep['config'], (1e-6, ) + RATES, **settings)
    assert done == [osp.join(work_dir, 'selection', f'probe_with_shift_{lr_tag(1e-6)}',
                             'fraction_1', 'seed_0')]
    assert added['lr'] == doc['lr'] and added['runs'] == doc['runs']
    assert added['rates'][1:] == doc['rates'] and added['rates'][0]['clean'] <= \
        added['rates'][[r['lr'] for r in added['rates']].index(doc['lr'])]['clean']


@pytest.mark.trains('training everything again is what it checks')
@pytest.mark.slow
def test_no_resume_trains_again_and_hands_the_new_selection_run_over(sweep, monkeypatch):
    # (the module's last test: it trains the chosen rate's runs again)
    doc, work_dir = sweep['result'], sweep['work_dir']
    selection_run = osp.join(work_dir, 'selection', doc['model'], 'fraction_1', 'seed_0')
    final = [osp.join(work_dir, 'final', doc['model'], 'fraction_1', f'seed_{s}')
             for s in SEEDS]
    done = _trainings(monkeypatch)
    again = run_lr_sweep(sweep['config'], [doc['lr']], **sweep['settings'], resume=False)
    assert done == [selection_run, final[1]]
    assert again['status']['selection'] == {f'{doc["model"]}@1/seed0': 'trained'}
    assert again['status']['final'] == {f'{doc["model"]}@1/seed0': 'evaluated',
                                        f'{doc["model"]}@1/seed1': 'trained'}
    record = json.loads(_read(osp.join(final[0], 'data_budget_run.json')))
    assert record['checkpoint'].startswith(selection_run)
    assert [r['training'] for r in again['runs']] == ['selection run', 'own']
    assert again['lr'] == doc['lr'] and again['lrs'] == [doc['lr']]
