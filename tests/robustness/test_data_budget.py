"""FractionDataset, apply_data_fraction and the multi-seed data-budget sweep: REOBench's
ΔTP per run, the seed-noise band against numpy, resuming across seeds, and the
frozen-encoder demo probe trained through it."""
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
from reobench_mm.analysis.report import write_results_json
from reobench_mm.analysis.results_file import read_results
from reobench_mm.analysis.results import aggregate
from reobench_mm.datasets.subset import (FractionDataset, apply_data_fraction,
                                         subset_indices)
from reobench_mm.fileio import json_round_trip
from reobench_mm.analysis.data_budget import (BAND_KEYS, DATA_BUDGET_FILES, MODEL_TAU_KEYS,
                                              budget_row,
                                              data_budget_csv_text, data_budget_markdown,
                                              data_budget_seeds_csv_text,
                                              kendall_tau_by_fraction, seed_band,
                                              summarize_seeds, write_data_budget_report)
from reobench_mm.robustness.data_budget import (check_seeds, fraction_dirname,
                                                run_data_budget, seed_dirname)

from helpers import DET_DEMO_CONFIG, PROJECT_ROOT, SEG_DEMO_CONFIG, demo_config
from sweep_helpers import probe_training_options

# the module's tests share one fixture: one worker runs them all (--dist loadgroup)
pytestmark = pytest.mark.xdist_group('data_budget_run')


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


# ----------------------------------------------------------------------------- seeds

@pytest.mark.parametrize('seeds, expected', [
    ((0, 1, 2), [0, 1, 2]), ([5], [5]), (3, [3]), ((2, 0), [2, 0]), ((np.int64(4), ), [4])])
def test_check_seeds(seeds, expected):
    assert check_seeds(seeds) == expected
    assert all(type(s) is int for s in check_seeds(seeds))


@pytest.mark.parametrize('seeds, match', [
    ((), 'no training seed'), ((0, 0, 1), 'more than once'), ((-1, ), 'integers >= 0'),
    ((True, ), 'integers >= 0'), ((1.0, ), 'integers >= 0'), (('1', ), 'integers >= 0'),
    ('012', 'list of integers'), (None, 'list of integers')])
def test_invalid_seeds(seeds, match):
    with pytest.raises(ValueError, match=match):
        check_seeds(seeds)
    with pytest.raises(ValueError, match='seed'):
        run_data_budget([SEG_DEMO_CONFIG], seeds=seeds, work_dir='/nonexistent/never/written')


def test_dirnames():
    assert fraction_dirname(0.5) == 'fraction_0.5' and fraction_dirname(1) == 'fraction_1'
    assert seed_dirname(0) == 'seed_0' and seed_dirname(12) == 'seed_12'


# ----------------------------------------------------------------------------- ΔTP

#: per-condition numbers with unequal severities per corruption: the mean over the
#: conditions (50.5) and REOBench's mean of the per-corruption means (137 / 3) differ
UNEQUAL = {'clean': 80.0, 'cloud@1': 70.0, 'cloud@2': 60.0, 'cloud@3': 50.0, 'cloud@4': 40.0,
           'cloud@5': 30.0, 'gaussian_noise@3': 20.0, 'haze@1': 70.0, 'haze@5': 64.0}
UNEQUAL_ECE = {'clean': 0.02, 'cloud@1': 0.05, 'cloud@2': 0.06, 'cloud@3': 0.08,
               'cloud@4': 0.11, 'cloud@5': 0.15, 'gaussian_noise@3': 0.30, 'haze@1': 0.04,
               'haze@5': 0.10}


def _by_hand(values):
    """REOBench by hand: per corruption the mean over its severities, Avg the mean over
    the corruptions, ΔTP = clean − Avg."""
    groups = {}
    for key, value in values.items():
        if key != 'clean':
            groups.setdefault(key.split('@')[0], []).append(value)
    per_corruption = {name: sum(v) / len(v) for name, v in groups.items()}
    avg = sum(per_corruption.values()) / len(per_corruption)
    return per_corruption, avg, values['clean'] - avg


def test_budget_row_delta_tp_is_reobench(tmp_path):
    per_corruption, avg, delta_tp = _by_hand(UNEQUAL)
    _, ece_avg, _ = _by_hand(UNEQUAL_ECE)
    corrupted = [v for k, v in UNEQUAL.items() if k != 'clean']
    assert sum(corrupted) / len(corrupted) == 50.5  # the two definitions differ here
    assert (avg, delta_tp) == (pytest.approx(137 / 3), pytest.approx(80 - 137 / 3))
    results = {k: dict(value=v, extra={'calib/ECE': UNEQUAL_ECE[k], 'aAcc': 90.0})
               for k, v in UNEQUAL.items()}
    # the way run_data_budget reads a run: its results.json, aggregated again
    path = write_results_json(str(tmp_path / 'results.json'),
                              aggregate(results, task='segmentation'))
    for summary in (aggregate(results, task='segmentation'), read_results(path).summary):
        row = budget_row('m', 0.25, 3, summary, 10, 40)
        assert (row['model'], row['fraction'], row['seed']) == ('m', 0.25, 3)
        assert (row['num_train_images'], row['full_train_images']) == (10, 40)
        assert row['metric'] == 'mIoU' and row['clean'] == 80.0
        assert row['conditions'] == {k: v for k, v in UNEQUAL.items() if k != 'clean'}
        assert row['per_corruption'] == pytest.approx(per_corruption)
        assert row['corrupted_avg'] == pytest.approx(avg)
        assert row['delta_tp'] == pytest.approx(delta_tp)
        assert row['ece_clean'] == 0.02
        assert row['ece_conditions'] == {k: v for k, v in UNEQUAL_ECE.items() if k != 'clean'}
        assert row['ece_corrupted_avg'] == pytest.approx(ece_avg)
    # without ECE in every condition: none reported
    del results['haze@5']['extra']['calib/ECE']
    row = budget_row('m', 0.25, 3, aggregate(results), 10, 40)
    assert row['ece_clean'] is None and row['ece_corrupted_avg'] is None
    assert row['ece_conditions'] == {}


# ----------------------------------------------------------------------------- seed band

def _seed_rows(models, fractions, seeds, conditions, rng, with_ece=True):
    """Rows as budget_row makes them (one severity per corruption: Avg is the mean of the
    conditions), random numbers."""
    rows = []
    for model in models:
        for fraction in fractions:
            for seed in seeds:
                values = {c: float(rng.uniform(10, 60)) for c in conditions}
                clean = float(rng.uniform(60, 80))
                ece = {c: float(rng.uniform(0.01, 0.2)) for c in conditions}
                avg = float(np.mean(list(values.values())))
                rows.append(dict(
                    model=model, fraction=fraction, seed=seed,
                    num_train_images=max(1, round(fraction * 100)), full_train_images=100,
                    metric='mIoU', clean=clean, conditions=values,
                    per_corruption={c.split('@')[0]: v for c, v in values.items()},
                    corrupted_avg=avg, delta_tp=clean - avg,
                    ece_clean=float(rng.uniform(0.01, 0.1)) if with_ece else None,
                    ece_conditions=ece if with_ece else {},
                    ece_corrupted_avg=float(np.mean(list(ece.values()))) if with_ece else None))
    return rows


def _check_band(band, values):
    values = np.asarray(values, dtype=np.float64)
    n = values.size
    assert band['n'] == n
    assert band['mean'] == pytest.approx(values.sum() / n, rel=1e-12)
    if n > 1:
        sample_std = math.sqrt(((values - values.sum() / n)**2).sum() / (n - 1))
        assert band['std'] == pytest.approx(sample_std, rel=1e-12)
    else:
        assert band['std'] is None
    assert (band['min'], band['max']) == (min(values), max(values))


def test_seed_band_against_numpy():
    _check_band(seed_band([61.2, 58.9, 63.4]), [61.2, 58.9, 63.4])
    _check_band(seed_band([3.0]), [3.0])
    assert seed_band([1.0, 2.0]) == dict(n=2, mean=1.5, std=math.sqrt(0.5), min=1.0, max=2.0)
    assert seed_band([]) is None and seed_band([1.0, None]) is None


@pytest.mark.parametrize('seeds', [(0, 1, 2), (4, ), (0, 1, 2, 3, 4)])
def test_summarize_seeds_against_numpy(seeds):
    rng = np.random.default_rng(len(seeds))
    conditions = ['cloud@3', 'haze@3', 'gaussian_noise@3']
    seed_rows = _seed_rows(['A', 'B'], [0.1, 1.0], seeds, conditions, rng)
    summary = summarize_seeds(seed_rows)
    assert [(r['model'], r['fraction']) for r in summary] == \
        [('A', 0.1), ('A', 1.0), ('B', 0.1), ('B', 1.0)]
    for row in summary:
        mine = [r for r in seed_rows if (r['model'], r['fraction']) == (row['model'],
                                                                        row['fraction'])]
        assert row['seeds'] == list(seeds)
        assert row['num_train_images'] == mine[0]['num_train_images']
        for key in BAND_KEYS:
            values = [r[key] for r in mine]
            _check_band(row['band'][key], values)
            assert row[key] == pytest.approx(np.mean(values), rel=1e-12)
        # each seed's numbers, in the order of the seeds, for the per-seed τ
        for key in MODEL_TAU_KEYS:
            assert row['per_seed'][key] == [r[key] for r in mine]
        assert row['per_seed']['conditions'] == {
            c: [r['conditions'][c] for r in mine] for c in conditions}
        for condition in conditions:
            values = [r['conditions'][condition] for r in mine]
            _check_band(row['condition_band'][condition], values)
            assert row['conditions'][condition] == pytest.approx(np.mean(values), rel=1e-12)
            assert row['ece_conditions'][condition] == pytest.approx(
                np.mean([r['ece_conditions'][condition] for r in mine]), rel=1e-12)
        # the mean ΔTP is the mean clean minus the mean Avg
        assert row['delta_tp'] == pytest.approx(row['clean'] - row['corrupted_avg'])


def test_summarize_seeds_refuses_mismatched_seeds():
    rng = np.random.default_rng(0)
    rows = _seed_rows(['A'], [0.5], [0, 1], ['cloud@3', 'haze@3'], rng)
    with pytest.raises(ValueError, match='appears twice'):
        summarize_seeds(rows + [dict(rows[0])])
    other = dict(rows[1], conditions={'cloud@3': 1.0})
    with pytest.raises(ValueError, match='conditions'):
        summarize_seeds([rows[0], other])
    with pytest.raises(ValueError, match='num_train_images differs'):
        summarize_seeds([rows[0], dict(rows[1], num_train_images=7)])
    with pytest.raises(ValueError, match='no rows'):
        summarize_seeds([])
    # a missing ECE in one seed: no ECE mean and no band
    row = summarize_seeds([rows[0], dict(rows[1], ece_clean=None)])[0]
    assert row['ece_clean'] is None and row['band']['ece_clean'] is None
    assert row['band']['ece_corrupted_avg'] is not None


# ----------------------------------------------------------------------------- τ and report

def test_kendall_tau_between_models():
    rng = np.random.default_rng(0)
    models, fractions = ['A', 'B', 'C', 'D'], [0.1, 0.5, 0.25, 1.0]
    rows = summarize_seeds(_seed_rows(models, fractions, [0, 1, 2], ['cloud@3', 'haze@3'], rng))
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
    rows = summarize_seeds(_seed_rows(['A'], [0.01, 0.1, 0.75], [0, 1], conditions, rng,
                                      with_ece=False))
    tau = kendall_tau_by_fraction(rows)
    assert tau['mode'] == 'conditions' and tau['items'] == conditions
    reference = [rows[-1]['conditions'][c] for c in conditions]
    for row, entry in zip(rows, tau['by_fraction']):
        expected = kendalltau([row['conditions'][c] for c in conditions], reference)
        assert entry['conditions']['tau'] == pytest.approx(expected.statistic)
    # a constant ranking has no τ
    rows[0]['conditions'] = {c: 5.0 for c in conditions}
    assert kendall_tau_by_fraction(rows)['by_fraction'][0]['conditions']['tau'] is None


def _doc(seed_rows, conditions):
    rows = summarize_seeds(seed_rows)
    return dict(metric='mIoU', protocol='reobench', corruption_seed=0,
                seeds=sorted({r['seed'] for r in seed_rows}),
                models=list(dict.fromkeys(r['model'] for r in rows)), conditions=conditions,
                rows=rows, seed_rows=seed_rows, kendall_tau=kendall_tau_by_fraction(rows))


def test_report_files_from_rows(tmp_path):
    rng = np.random.default_rng(2)
    conditions = ['cloud@3', 'haze@3']
    seed_rows = _seed_rows(['A', 'B'], [0.1, 1.0], [0, 1, 2], conditions, rng)
    doc = _doc(seed_rows, conditions)
    files = write_data_budget_report(str(tmp_path), doc)
    assert sorted(files) == sorted(DATA_BUDGET_FILES)
    assert all(osp.getsize(p) > 0 for p in files.values())
    with open(files['data_budget.png'], 'rb') as handle:
        assert handle.read(8) == b'\x89PNG\r\n\x1a\n'
    with open(files['data_budget.json'], encoding='utf-8') as handle:
        assert json.load(handle)['rows'] == json_round_trip(doc['rows'])
    # summary: seed means and bands
    parsed = list(csv.DictReader(io.StringIO(data_budget_csv_text(doc))))
    assert len(parsed) == 4
    for line, row in zip(parsed, doc['rows']):
        assert line['seeds'] == '0 1 2'
        assert float(line['clean']) == row['clean']
        assert float(line['cloud@3']) == row['conditions']['cloud@3']
        for key in BAND_KEYS:
            assert float(line[key]) == row['band'][key]['mean']
            assert [float(line[f'{key}_{s}']) for s in ('std', 'min', 'max')] == \
                [row['band'][key][s] for s in ('std', 'min', 'max')]
    # every seed
    parsed = list(csv.DictReader(io.StringIO(data_budget_seeds_csv_text(doc))))
    assert len(parsed) == 12
    for line, row in zip(parsed, seed_rows):
        assert (line['model'], int(line['seed'])) == (row['model'], row['seed'])
        assert float(line['clean']) == row['clean']
        assert float(line['delta_tp']) == row['delta_tp']
        assert float(line['ece_haze@3']) == row['ece_conditions']['haze@3']
    markdown = data_budget_markdown(doc)
    assert 'τ ECE clean' in markdown and markdown.count('\n| A |') == 2 + 6
    band = doc['rows'][0]['band']['delta_tp']
    assert f'| {band["mean"]:.2f} ± {band["std"]:.2f} | {band["min"]:.2f} – {band["max"]:.2f} |' \
        in markdown
    # one seed: means alone, no ±
    one = _doc(_seed_rows(['A'], [0.5, 1.0], [7], conditions, rng, with_ece=False), conditions)
    markdown = data_budget_markdown(one)
    assert ' ± ' not in markdown.split('\n## Every seed')[0].split('REOBench).')[1]
    assert 'ECE' not in markdown
    assert 'data_budget_seeds.csv' in write_data_budget_report(str(tmp_path / 'one'), one,
                                                               plots=False)


def test_bad_inputs(tmp_path):
    work_dir = str(tmp_path / 'out')
    with pytest.raises(ValueError, match='differ'):
        run_data_budget([SEG_DEMO_CONFIG, SEG_DEMO_CONFIG], work_dir=work_dir)
    with pytest.raises(ValueError, match='fraction'):
        run_data_budget([SEG_DEMO_CONFIG], fractions=(0.5, 1.5), work_dir=work_dir)
    with pytest.raises(ValueError, match='one task'):
        run_data_budget([SEG_DEMO_CONFIG, DET_DEMO_CONFIG], work_dir=work_dir)
    with pytest.raises(ValueError, match='unknown corruption'):
        run_data_budget([SEG_DEMO_CONFIG], options=dict(corruptions=('nope', )),
                        work_dir=work_dir)
    with pytest.raises(ValueError, match='unknown corruption'):  # not of this protocol
        run_data_budget([SEG_DEMO_CONFIG], options=dict(corruptions=('cloud_shadow', )),
                        work_dir=work_dir)
    with pytest.raises(ValueError, match='unknown protocol'):
        run_data_budget([SEG_DEMO_CONFIG], options=dict(protocol='imagenet_c'),
                        work_dir=work_dir)
    with pytest.raises(ValueError, match='iters'):
        run_data_budget([SEG_DEMO_CONFIG], iters=0, work_dir=work_dir)
    with pytest.raises(ValueError, match='seed'):
        run_data_budget([SEG_DEMO_CONFIG], options=dict(seed=-1), work_dir=work_dir)
    with pytest.raises(ValueError, match="'shard' is an option of other runs"):
        run_data_budget([SEG_DEMO_CONFIG], options=dict(shard='0/2'), work_dir=work_dir)
    assert not osp.exists(work_dir)


# ----------------------------------------------------------------------------- end to end

ITERS = 6
FRACTIONS = (0.34, 1.0)
SEEDS = (0, 1)
CORRUPTIONS = ('cloud', 'gaussian_noise')
PROBE_CONFIG = osp.join(PROJECT_ROOT, 'configs', 'demo',
                        'linear-probe_r18-tiny_frozen_1xb4-600i_demo-potsdam-128x128.py')
MODEL = osp.splitext(osp.basename(PROBE_CONFIG))[0]


def _run_dir(work_dir, fraction, seed):
    return osp.join(work_dir, MODEL, f'fraction_{fraction:g}', f'seed_{seed}')


@pytest.fixture(scope='session')  # with the xdist group: built once per run
def budget_run(demo_data, tmp_path_factory):
    """The frozen-encoder demo probe (encoder: a demo UperNet's backbone, random weights)
    over 2 fractions × 2 seeds."""
    import torch
    from mmengine.registry import MODELS
    work_dir = str(tmp_path_factory.mktemp('data_budget'))
    init_default_scope('mmseg')
    torch.manual_seed(3)
    upernet = MODELS.build(Config.fromfile(SEG_DEMO_CONFIG).model)
    encoder_checkpoint = osp.join(work_dir, 'encoder.pth')
    torch.save(dict(state_dict=upernet.state_dict()), encoder_checkpoint)
    encoder = {k: v for k, v in upernet.state_dict().items() if k.startswith('backbone.')}
    options = probe_training_options(osp.join(demo_data, 'potsdam'), encoder_checkpoint)
    result = run_data_budget([PROBE_CONFIG], fractions=FRACTIONS, seeds=SEEDS,
                             options=dict(corruptions=CORRUPTIONS, severities=(3, )),
                             work_dir=work_dir, cfg_options=options, iters=ITERS)
    return result, work_dir, options, encoder


@pytest.mark.trains('the data-budget driver trains its models')
@pytest.mark.slow
def test_end_to_end(budget_run):
    import torch
    result, work_dir, _, encoder = budget_run
    assert sorted(result['files']) == sorted(DATA_BUDGET_FILES)
    assert all(osp.isfile(osp.join(work_dir, name)) for name in DATA_BUDGET_FILES)
    assert result['status'] == {f'{MODEL}@{f:g}/seed{s}': 'trained'
                                for f in FRACTIONS for s in SEEDS}
    with open(osp.join(work_dir, 'data_budget.json'), encoding='utf-8') as handle:
        doc = json.load(handle)
    assert doc['conditions'] == ['cloud@3', 'gaussian_noise@3']
    assert doc['seeds'] == list(SEEDS)
    assert (doc['protocol'], doc['corruption_seed']) == ('reobench', 0)
    assert [(r['fraction'], r['seed']) for r in doc['seed_rows']] == \
        [(f, s) for f in FRACTIONS for s in SEEDS]
    heads = {}
    for row in doc['seed_rows']:
        run_dir = _run_dir(work_dir, row['fraction'], row['seed'])
        checkpoint = osp.join(run_dir, f'iter_{ITERS}.pth')
        # the frozen encoder came out of training exactly as it went in
        state = torch.load(checkpoint, map_location='cpu', weights_only=False)['state_dict']
        assert {k for k in state if k.startswith('backbone.')} == set(encoder)
        assert all(torch.equal(state[k], encoder[k]) for k in encoder)
        heads[(row['fraction'], row['seed'])] = state['decode_head.conv_seg.weight']
        with open(osp.join(run_dir, 'data_budget_run.json'), encoding='utf-8') as handle:
            record = json.load(handle)
        assert (record['seed'], record['train_settings']['seed']) == (row['seed'], row['seed'])
        assert row['num_train_images'] == (2 if row['fraction'] < 1 else 6)
        # the row is the run's results.json, by hand
        with open(osp.join(run_dir, 'robustness', 'results.json'), encoding='utf-8') as handle:
            results = json.load(handle)
        values = {e['condition']: e['value'] for e in results['numbers']['conditions']}
        assert row['clean'] == values['clean']
        assert row['conditions'] == {k: v for k, v in values.items() if k != 'clean'}
        _, avg, delta_tp = _by_hand(values)
        assert row['corrupted_avg'] == pytest.approx(avg)
        assert row['delta_tp'] == pytest.approx(delta_tp)
        ece = {e['condition']: e['extra']['calib/ECE']
               for e in results['numbers']['conditions']}
        assert 0 <= ece['clean'] <= 1 and row['ece_clean'] == ece['clean']
        assert row['ece_corrupted_avg'] == pytest.approx(_by_hand(ece)[1])
    # another seed, another training
    for fraction in FRACTIONS:
        assert not torch.equal(heads[(fraction, 0)], heads[(fraction, 1)])
    # the summary: seed means and bands of the per-seed numbers
    assert [(r['fraction'], r['seeds']) for r in doc['rows']] == \
        [(f, list(SEEDS)) for f in FRACTIONS]
    for row in doc['rows']:
        mine = [r for r in doc['seed_rows'] if r['fraction'] == row['fraction']]
        for key in BAND_KEYS:
            _check_band(row['band'][key], [r[key] for r in mine])
        for condition in doc['conditions']:
            _check_band(row['condition_band'][condition],
                        [r['conditions'][condition] for r in mine])
    # one model: τ between the rankings of the conditions (seed means)
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
    with open(osp.join(work_dir, 'data_budget_seeds.csv'), encoding='utf-8') as handle:
        lines = list(csv.DictReader(handle))
    assert [float(line['clean']) for line in lines] == [r['clean'] for r in doc['seed_rows']]


@pytest.mark.trains('resuming the data-budget driver across seeds is what it checks')
@pytest.mark.slow
def test_resume_across_seeds(budget_run, capsys):
    result, work_dir, options, _ = budget_run
    runs = [(f, s) for f in FRACTIONS for s in SEEDS]
    checkpoints = [osp.join(_run_dir(work_dir, f, s), f'iter_{ITERS}.pth') for f, s in runs]
    mtimes = [os.stat(p).st_mtime_ns for p in checkpoints]
    # a third seed: only its runs train
    more = run_data_budget([PROBE_CONFIG], fractions=FRACTIONS, seeds=SEEDS + (2, ),
                           options=dict(corruptions=CORRUPTIONS, severities=(3, )),
                           work_dir=work_dir, cfg_options=options, iters=ITERS)
    assert more['status'] == {f'{MODEL}@{f:g}/seed{s}': 'trained' if s == 2 else 'skipped'
                              for f in FRACTIONS for s in SEEDS + (2, )}
    assert [os.stat(p).st_mtime_ns for p in checkpoints] == mtimes
    assert [r for r in more['seed_rows'] if r['seed'] != 2] == result['seed_rows']
    assert [r['seeds'] for r in more['rows']] == [[0, 1, 2]] * len(FRACTIONS)
    for row in more['rows']:
        mine = [r for r in more['seed_rows'] if r['fraction'] == row['fraction']]
        _check_band(row['band']['delta_tp'], [r['delta_tp'] for r in mine])
    # the command-line tool, with the same settings: nothing to do
    spec = importlib.util.spec_from_file_location(
        'data_budget_tool', osp.join(PROJECT_ROOT, 'tools', 'analysis_tools', 'data_budget.py'))
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    argv = [PROBE_CONFIG, '--fractions', *map(str, FRACTIONS), '--seeds', '0', '1', '2',
            '--corruptions', *CORRUPTIONS, '--severities', '3', '--iters', str(ITERS),
            '--work-dir', work_dir, '--cfg-options'] + [f'{k}={v}' for k, v in options.items()]
    assert tool.main(argv) == 0
    out = capsys.readouterr().out
    assert '| Model | Fraction | Train images | Seeds | Clean mIoU |' in out
    assert '| Model | Fraction | Seed | Clean mIoU |' in out
    assert [os.stat(p).st_mtime_ns for p in checkpoints] == mtimes
    again = run_data_budget([PROBE_CONFIG], fractions=FRACTIONS, seeds=(2, 0, 1),
                            options=dict(corruptions=CORRUPTIONS, severities=(3, )),
                            work_dir=work_dir, cfg_options=options, iters=ITERS)
    assert set(again['status'].values()) == {'skipped'}
    assert sorted(again['seed_rows'], key=lambda r: (r['fraction'], r['seed'])) == \
        sorted(more['seed_rows'], key=lambda r: (r['fraction'], r['seed']))
    # other training settings in the same folders: refused while resuming
    with pytest.raises(ValueError, match='other settings'):
        run_data_budget([PROBE_CONFIG], fractions=FRACTIONS, seeds=SEEDS,
                        options=dict(corruptions=CORRUPTIONS, severities=(3, )),
                        work_dir=work_dir, cfg_options=options, iters=ITERS + 1)
    # other evaluation settings: evaluated again, not trained again
    plain = run_data_budget([PROBE_CONFIG], fractions=FRACTIONS, seeds=SEEDS,
                            options=dict(corruptions=CORRUPTIONS, severities=(3, ),
                                         calibration=False),
                            work_dir=work_dir, cfg_options=options, iters=ITERS)
    assert set(plain['status'].values()) == {'evaluated'}
    assert [os.stat(p).st_mtime_ns for p in checkpoints] == mtimes
    assert [r['clean'] for r in plain['seed_rows']] == pytest.approx(
        [r['clean'] for r in result['seed_rows']])
    assert all(r['ece_clean'] is None and r['ece_corrupted_avg'] is None
               for r in plain['rows'])
    assert 'ECE' not in data_budget_markdown(plain)
