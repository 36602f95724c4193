"""FractionDataset, apply_data_fraction and the data-budget sweep."""
import csv
import importlib.util
import io
import json
import math
import os
import os.path as osp

import numpy as np
import pytest
from mmengine.config import Config
from mmengine.dataset import BaseDataset
from mmengine.registry import DATASETS as MMENGINE_DATASETS
from mmengine.registry import init_default_scope
from mmengine.runner import Runner
from scipy.stats import kendalltau

import reobench_mm  # noqa: F401  (registration)
from reobench_mm.analysis.report import load_results_json
from reobench_mm.datasets.subset import (FractionDataset, apply_data_fraction,
                                         subset_indices)
from reobench_mm.robustness.data_budget import (DATA_BUDGET_FILES, data_budget_csv_text,
                                                data_budget_markdown, kendall_tau_by_fraction,
                                                run_data_budget, write_data_budget_report)

from conftest import DET_DEMO_CONFIG, PROJECT_ROOT, SEG_DEMO_CONFIG, demo_config


class NumberDataset(BaseDataset):
    """``num_items`` samples ``{'number': i}`` (a real MMEngine dataset, no files)."""

    METAINFO = dict(classes=('a', 'b'))

    def __init__(self, num_items: int, **kwargs) -> None:
        self.num_items = num_items
        super().__init__(serialize_data=False, **kwargs)

    def load_data_list(self):
        return [dict(number=i) for i in range(self.num_items)]


# ----------------------------------------------------------------------------- the subset

@pytest.mark.parametrize('num_items, fraction, expected', [
    (100, 0.1, 10), (100, 1.0, 100), (100, 1, 100), (6, 0.34, 2), (6, 0.01, 1),
    (1000, 1e-4, 1), (1, 0.5, 1), (6, 0.25, 2), (6, 0.75, 4), (7, 0.5, 4)])
def test_subset_size_and_content(num_items, fraction, expected):
    dataset = FractionDataset(NumberDataset(num_items), fraction=fraction, seed=0)
    assert len(dataset) == expected
    assert dataset.full_len == num_items
    indices = dataset.indices
    assert indices == sorted(indices) and len(set(indices)) == expected
    assert all(0 <= i < num_items for i in indices)
    # first k of one permutation drawn from a Generator seeded with the seed
    permutation = np.random.default_rng(0).permutation(num_items)
    assert indices == sorted(permutation[:expected].tolist())
    assert [dataset[i]['number'] for i in range(len(dataset))] == indices
    assert [dataset.get_data_info(i)['number'] for i in range(len(dataset))] == indices
    assert dataset.metainfo == dict(classes=('a', 'b'))


@pytest.mark.parametrize('seed', [0, 1, 7])
def test_subsets_are_deterministic_and_nested(seed):
    fractions = [0.01, 0.1, 0.25, 0.34, 0.5, 0.75, 1.0]
    subsets = [set(FractionDataset(NumberDataset(200), fraction=f, seed=seed).indices)
               for f in fractions]
    again = [set(subset_indices(200, f, seed)) for f in fractions]
    assert subsets == again
    for smaller, larger in zip(subsets, subsets[1:]):
        assert smaller < larger
    assert subsets[-1] == set(range(200))


def test_other_seed_other_subset():
    assert subset_indices(100, 0.1, seed=0) != subset_indices(100, 0.1, seed=1)
    # whole set for every seed
    assert subset_indices(50, 1.0, seed=3) == list(range(50))


@pytest.mark.parametrize('fraction', [0, 0.0, -0.1, 1.0001, 2, math.nan, math.inf, True,
                                      '0.5', None])
def test_invalid_fraction(fraction):
    with pytest.raises(ValueError, match='fraction'):
        FractionDataset(NumberDataset(10), fraction=fraction)
    with pytest.raises(ValueError, match='fraction'):
        apply_data_fraction(Config(dict(train_dataloader=dict(dataset=dict(type='X')))),
                            fraction)


def test_invalid_seed_dataset_and_empty():
    with pytest.raises(ValueError, match='seed'):
        FractionDataset(NumberDataset(10), fraction=0.5, seed=-1)
    with pytest.raises(TypeError, match='config dict or a BaseDataset'):
        FractionDataset([1, 2, 3], fraction=0.5)
    with pytest.raises(ValueError, match='empty'):
        FractionDataset(NumberDataset(0), fraction=0.5)


def test_lazy_init_and_registry_build():
    MMENGINE_DATASETS.register_module(module=NumberDataset, force=True)
    dataset = MMENGINE_DATASETS.build(dict(
        type='FractionDataset', dataset=dict(type='NumberDataset', num_items=30),
        fraction=0.2, seed=4, lazy_init=True))
    assert isinstance(dataset, FractionDataset)
    assert not dataset._fully_initialized
    assert len(dataset) == 6  # initialises on demand
    assert dataset._fully_initialized
    assert dataset.indices == subset_indices(30, 0.2, 4)


def test_apply_data_fraction_wraps_once():
    cfg = Config.fromfile(SEG_DEMO_CONFIG)
    original = cfg.train_dataloader.dataset.to_dict()
    apply_data_fraction(cfg, 0.5, seed=2)
    wrapped = cfg.train_dataloader.dataset
    assert wrapped.type == 'FractionDataset'
    assert (wrapped.fraction, wrapped.seed) == (0.5, 2)
    assert wrapped.dataset.to_dict() == original
    assert 'reobench_mm.datasets.subset' in cfg.custom_imports.imports
    with pytest.raises(ValueError, match='already holds a FractionDataset'):
        apply_data_fraction(cfg, 0.25)
    # also when the FractionDataset sits inside another wrapper
    nested = Config(dict(train_dataloader=dict(dataset=dict(
        type='ConcatDataset', datasets=[dict(type='X'), dict(
            type='RepeatDataset', times=2, dataset=wrapped.to_dict())]))))
    with pytest.raises(ValueError, match='already holds a FractionDataset'):
        apply_data_fraction(nested, 0.25)
    with pytest.raises(ValueError, match='no train_dataloader'):
        apply_data_fraction(Config(dict()), 0.5)


@pytest.mark.parametrize('config, subdir, scope, fraction, seed, expected', [
    (SEG_DEMO_CONFIG, 'potsdam', 'mmseg', 0.34, 0, 2),
    (SEG_DEMO_CONFIG, 'potsdam', 'mmseg', 0.01, 5, 1),
    (DET_DEMO_CONFIG, 'dior', 'mmrotate', 0.5, 3, 3),
])
def test_through_runner_dataloader(demo_data, tmp_path, config, subdir, scope, fraction, seed,
                                   expected):
    data_root = osp.join(demo_data, subdir)
    cfg = demo_config(config, data_root, str(tmp_path), iters=2)
    full_cfg = cfg.train_dataloader.dataset.to_dict()
    apply_data_fraction(cfg, fraction, seed=seed)
    cfg.train_dataloader.batch_size = 1
    cfg.train_dataloader.sampler = dict(type='DefaultSampler', shuffle=False)
    init_default_scope(scope)
    loader = Runner.build_dataloader(cfg.train_dataloader)
    dataset = loader.dataset
    assert isinstance(dataset, FractionDataset)
    assert (len(dataset), dataset.full_len) == (expected, 6)
    # the kept images, from the full dataset built on its own
    full = MMENGINE_DATASETS.build(full_cfg)
    kept = [full.get_data_info(i)['img_path'] for i in subset_indices(len(full), fraction,
                                                                      seed)]
    assert [dataset.get_data_info(i)['img_path'] for i in range(len(dataset))] == kept
    loaded = [s.img_path for batch in loader for s in batch['data_samples']]
    assert loaded == kept


# ----------------------------------------------------------------------------- τ and report

def _rows(models, fractions, conditions, rng, with_ece=True):
    rows = []
    for model in models:
        for fraction in fractions:
            values = {c: float(rng.uniform(10, 60)) for c in conditions}
            clean = float(rng.uniform(60, 80))
            ece = {c: float(rng.uniform(0.01, 0.2)) for c in conditions}
            rows.append(dict(
                model=model, fraction=fraction, num_train_images=int(fraction * 100),
                full_train_images=100, metric='mIoU', clean=clean, conditions=values,
                corrupted_avg=float(np.mean(list(values.values()))),
                delta_tp=clean - float(np.mean(list(values.values()))),
                ece_clean=float(rng.uniform(0.01, 0.1)) if with_ece else None,
                ece_conditions=ece if with_ece else {},
                ece_corrupted_avg=float(np.mean(list(ece.values()))) if with_ece else None))
    return rows


def test_kendall_tau_between_models():
    rng = np.random.default_rng(0)
    models, fractions = ['A', 'B', 'C', 'D'], [0.1, 0.5, 0.25, 1.0]
    rows = _rows(models, fractions, ['cloud@3', 'haze@3'], rng)
    tau = kendall_tau_by_fraction(rows)
    assert tau['mode'] == 'models' and tau['reference_fraction'] == 1.0
    assert [e['fraction'] for e in tau['by_fraction']] == sorted(fractions)
    table = {(r['model'], r['fraction']): r for r in rows}
    for entry in tau['by_fraction']:
        for key in ('clean', 'corrupted_avg', 'ece_clean', 'ece_corrupted_avg'):
            expected = kendalltau([table[(m, entry['fraction'])][key] for m in models],
                                  [table[(m, 1.0)][key] for m in models])
            assert entry[key]['tau'] == pytest.approx(expected.statistic)
            assert entry[key]['p_value'] == pytest.approx(expected.pvalue)
    assert all(e['tau'] == pytest.approx(1.0) for k, e in tau['by_fraction'][-1].items()
               if k != 'fraction')


def test_kendall_tau_between_conditions_of_one_model():
    rng = np.random.default_rng(1)
    conditions = ['cloud@3', 'haze@3', 'gaussian_noise@3', 'motion_blur@3']
    rows = _rows(['A'], [0.01, 0.1, 0.75], conditions, rng, with_ece=False)
    tau = kendall_tau_by_fraction(rows)
    assert tau['mode'] == 'conditions' and tau['items'] == conditions
    reference = [rows[-1]['conditions'][c] for c in conditions]
    for row, entry in zip(rows, tau['by_fraction']):
        expected = kendalltau([row['conditions'][c] for c in conditions], reference)
        assert entry['conditions']['tau'] == pytest.approx(expected.statistic)
    # a constant ranking has no τ
    for row in rows[:1]:
        row['conditions'] = {c: 5.0 for c in conditions}
    assert kendall_tau_by_fraction(rows)['by_fraction'][0]['conditions']['tau'] is None


def test_report_files_from_rows(tmp_path):
    rng = np.random.default_rng(2)
    conditions = ['cloud@3', 'haze@3']
    rows = _rows(['A', 'B'], [0.1, 1.0], conditions, rng)
    doc = dict(metric='mIoU', seed=0, models=['A', 'B'], conditions=conditions, rows=rows,
               kendall_tau=kendall_tau_by_fraction(rows))
    files = write_data_budget_report(str(tmp_path), doc)
    assert sorted(files) == sorted(DATA_BUDGET_FILES)
    assert all(osp.getsize(p) > 0 for p in files.values())
    with open(files['data_budget.png'], 'rb') as handle:
        assert handle.read(8) == b'\x89PNG\r\n\x1a\n'
    parsed = list(csv.DictReader(io.StringIO(data_budget_csv_text(doc))))
    assert len(parsed) == 4
    for line, row in zip(parsed, rows):
        assert float(line['clean']) == row['clean']
        assert float(line['cloud@3']) == row['conditions']['cloud@3']
        assert float(line['ece_haze@3']) == row['ece_conditions']['haze@3']
    markdown = data_budget_markdown(doc)
    assert 'τ ECE clean' in markdown and markdown.count('\n| A |') == 2


def test_bad_inputs(tmp_path):
    work_dir = str(tmp_path / 'out')
    with pytest.raises(ValueError, match='differ'):
        run_data_budget([SEG_DEMO_CONFIG, SEG_DEMO_CONFIG], work_dir=work_dir)
    with pytest.raises(ValueError, match='fraction'):
        run_data_budget([SEG_DEMO_CONFIG], fractions=(0.5, 1.5), work_dir=work_dir)
    with pytest.raises(ValueError, match='one task'):
        run_data_budget([SEG_DEMO_CONFIG, DET_DEMO_CONFIG], work_dir=work_dir)
    with pytest.raises(ValueError, match='unknown corruption'):
        run_data_budget([SEG_DEMO_CONFIG], corruptions=('nope', ), work_dir=work_dir)
    with pytest.raises(ValueError, match='iters'):
        run_data_budget([SEG_DEMO_CONFIG], iters=0, work_dir=work_dir)
    assert not osp.exists(work_dir)


# ----------------------------------------------------------------------------- end to end

ITERS = 6
FRACTIONS = (0.34, 1.0)
CORRUPTIONS = ('cloud', 'gaussian_noise')


def _options(data_root):
    options = {'train_dataloader.batch_size': 2, 'log_level': 'WARNING'}
    for split in ('train', 'val', 'test'):
        options[f'{split}_dataloader.dataset.data_root'] = data_root
        options[f'{split}_dataloader.num_workers'] = 0
        options[f'{split}_dataloader.persistent_workers'] = False
    return options


@pytest.fixture(scope='module')
def budget_run(demo_data, tmp_path_factory):
    work_dir = str(tmp_path_factory.mktemp('data_budget'))
    options = _options(osp.join(demo_data, 'potsdam'))
    result = run_data_budget([SEG_DEMO_CONFIG], fractions=FRACTIONS, corruptions=CORRUPTIONS,
                             severities=(3, ), work_dir=work_dir, cfg_options=options,
                             iters=ITERS)
    return result, work_dir, options


@pytest.mark.slow
def test_end_to_end(budget_run):
    result, work_dir, _ = budget_run
    model = osp.splitext(osp.basename(SEG_DEMO_CONFIG))[0]
    assert sorted(result['files']) == sorted(DATA_BUDGET_FILES)
    assert all(osp.isfile(osp.join(work_dir, name)) for name in DATA_BUDGET_FILES)
    assert set(result['status'].values()) == {'trained'}
    with open(osp.join(work_dir, 'data_budget.json'), encoding='utf-8') as handle:
        doc = json.load(handle)
    assert doc['conditions'] == ['cloud@3', 'gaussian_noise@3']
    assert [r['fraction'] for r in doc['rows']] == list(FRACTIONS)
    assert [r['num_train_images'] for r in doc['rows']] == [2, 6]
    assert all(r['full_train_images'] == 6 for r in doc['rows'])
    for row, fraction in zip(doc['rows'], FRACTIONS):
        run_dir = osp.join(work_dir, model, f'fraction_{fraction:g}')
        assert osp.isfile(osp.join(run_dir, f'iter_{ITERS}.pth'))
        results = load_results_json(osp.join(run_dir, 'robustness', 'results.json'))
        values = {e['condition']: e['value'] for e in results['numbers']['conditions']}
        assert row['clean'] == values['clean']
        assert row['conditions'] == {k: v for k, v in values.items() if k != 'clean'}
        corrupted = [values['cloud@3'], values['gaussian_noise@3']]
        assert row['corrupted_avg'] == pytest.approx(sum(corrupted) / 2)
        assert row['delta_tp'] == pytest.approx(values['clean'] - sum(corrupted) / 2)
        ece = {e['condition']: e['extra']['calib/ECE']
               for e in results['numbers']['conditions']}
        assert 0 <= ece['clean'] <= 1
        assert row['ece_clean'] == ece['clean']
        assert row['ece_corrupted_avg'] == pytest.approx(
            (ece['cloud@3'] + ece['gaussian_noise@3']) / 2)
    # one model: τ between the rankings of the conditions, from the table's numbers
    tau = doc['kendall_tau']
    assert tau['mode'] == 'conditions' and tau['reference_fraction'] == 1.0
    reference = [doc['rows'][-1]['conditions'][c] for c in doc['conditions']]
    for row, entry in zip(doc['rows'], tau['by_fraction']):
        expected = kendalltau([row['conditions'][c] for c in doc['conditions']],
                              reference).statistic
        if math.isnan(expected):
            assert entry['conditions']['tau'] is None
        else:
            assert entry['conditions']['tau'] == pytest.approx(expected)
    with open(osp.join(work_dir, 'data_budget.csv'), encoding='utf-8') as handle:
        lines = list(csv.DictReader(handle))
    assert [float(line['clean']) for line in lines] == [r['clean'] for r in doc['rows']]


@pytest.mark.slow
def test_rerun_skips_finished_fractions(budget_run, capsys):
    result, work_dir, options = budget_run
    model = osp.splitext(osp.basename(SEG_DEMO_CONFIG))[0]
    checkpoints = [osp.join(work_dir, model, f'fraction_{f:g}', f'iter_{ITERS}.pth')
                   for f in FRACTIONS]
    mtimes = [os.stat(p).st_mtime_ns for p in checkpoints]
    # the command-line tool, with the same settings
    spec = importlib.util.spec_from_file_location(
        'data_budget_tool', osp.join(PROJECT_ROOT, 'tools', 'analysis_tools', 'data_budget.py'))
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    argv = [SEG_DEMO_CONFIG, '--fractions', *map(str, FRACTIONS), '--corruptions',
            *CORRUPTIONS, '--severities', '3', '--iters', str(ITERS), '--work-dir', work_dir,
            '--cfg-options'] + [f'{k}={v}' for k, v in options.items()]
    assert tool.main(argv) == 0
    assert '| Model | Fraction | Train images | Clean mIoU |' in capsys.readouterr().out
    assert [os.stat(p).st_mtime_ns for p in checkpoints] == mtimes
    again = run_data_budget([SEG_DEMO_CONFIG], fractions=FRACTIONS, corruptions=CORRUPTIONS,
                            severities=(3, ), work_dir=work_dir, cfg_options=options,
                            iters=ITERS)
    assert set(again['status'].values()) == {'skipped'}
    assert again['rows'] == result['rows']
    assert [os.stat(p).st_mtime_ns for p in checkpoints] == mtimes
    # other settings in the same folders: refused while resuming
    with pytest.raises(ValueError, match='other settings'):
        run_data_budget([SEG_DEMO_CONFIG], fractions=FRACTIONS, corruptions=CORRUPTIONS,
                        severities=(3, ), work_dir=work_dir, cfg_options=options,
                        iters=ITERS + 1)
    # other evaluation settings: evaluated again, not trained again
    plain = run_data_budget([SEG_DEMO_CONFIG], fractions=FRACTIONS, corruptions=CORRUPTIONS,
                            severities=(3, ), work_dir=work_dir, cfg_options=options,
                            iters=ITERS, calibration=False)
    assert set(plain['status'].values()) == {'evaluated'}
    assert [os.stat(p).st_mtime_ns for p in checkpoints] == mtimes
    assert [r['clean'] for r in plain['rows']] == pytest.approx(
        [r['clean'] for r in result['rows']])
    assert all(r['ece_clean'] is None and r['ece_corrupted_avg'] is None
               for r in plain['rows'])
    assert 'ECE' not in data_budget_markdown(plain)
