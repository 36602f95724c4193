"""Robustness aggregation and reports: the published table, hand-computed scores,
deterministic results.json, report.md / plots, the several-model table (its refusal of
files of different conditions and their restriction on request), shard merging, input
errors and atomic writes."""
import csv
import json
import math
import os
import os.path as osp

import pytest

import reobench_mm  # noqa: F401
from reobench_mm.analysis.model_set import build_comparison
from reobench_mm.analysis.report import make_provenance, write_report
from reobench_mm.analysis.results_file import RESULTS_FORMAT, read_results
from reobench_mm.analysis.results import (REOBENCH_TABLE_ORDER,
                                          ConditionResult, aggregate,
                                          condition_result_from_metrics, merge_results,
                                          paper_to_engine_name, results_from_jsonable,
                                          results_to_jsonable, robustness_scores)
from reobench_mm.analysis.tables import comparison_csv_text
from reobench_corruptions.condition import CLEAN as CLEAN_CONDITION
from reobench_mm.fileio import atomic_write_text
from reobench_cli import run_tool
from reobench_mm.version import package_versions

from helpers import PROJECT_ROOT, load_tool

REFERENCE = osp.join(osp.dirname(PROJECT_ROOT), 'shared', 'reference',
                     'reobench_table2_potsdam_miou.csv')
PAPER_HEADER = ('| Model | Backbone | Clean | Brightness Contrast | Cloud | Compression '
                'Artifacts | Data Gaps | Gaussian Blur | Gaussian Noise | Haze | Motion Blur | '
                'Rotate | Salt Pepper Noise | Scale | Translate | Avg | ΔTP |')
VERSIONS = {'numpy': '0', 'torch': '0'}  # fixed so that files do not depend on the env


def _subset():
    """A made-up sweep: 4 corruptions over severities 1..3, haze lacks 2, rotate
    lacks 1 and 3. Hand-computed below."""
    return {
        ('clean', 0): 80.0,
        ('cloud', 1): 70.0, ('cloud', 2): 60.0, ('cloud', 3): 50.0,
        ('haze', 1): 75.0, ('haze', 3): 65.0,
        ('gaussian_noise', 1): 40.0, ('gaussian_noise', 2): 30.0, ('gaussian_noise', 3): 20.0,
        ('rotate', 2): 72.0,
    }


def _with_classes(results):
    """The subset with per-class IoU (a = metric + 10, b = metric - 10) and aAcc."""
    return {c: ConditionResult(v, {'a': v + 10, 'b': v - 10}, {'aAcc': v / 2})
            for c, v in results.items()}


# --------------------------------------------------------------------------- reference
def test_reference_table_reproduced():
    """Avg and ΔTP of every row of the published Potsdam table from its
    per-corruption columns (salt_pepper mapped to salt_pepper_noise)."""
    if not osp.isfile(REFERENCE):
        pytest.skip(f'reference table {REFERENCE} is absent (it lives beside the project '
                    'checkout as ../shared/reference)')
    with open(REFERENCE, newline='') as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 8
    columns = [c for c in rows[0] if c not in ('model', 'backbone', 'clean', 'avg', 'delta_tp')]
    assert [paper_to_engine_name(c) for c in columns] == list(REOBENCH_TABLE_ORDER)
    for row in rows:
        means = {paper_to_engine_name(c): float(row[c]) for c in columns}
        overall = robustness_scores(float(row['clean']), means)['overall']
        assert abs(overall.avg - float(row['avg'])) <= 0.01, row
        assert abs(overall.delta_tp - float(row['delta_tp'])) <= 0.01, row
        # the same through the condition path, one severity per corruption
        results = {('clean', 0): float(row['clean'])}
        results.update({(c, 3): v for c, v in means.items()})
        summary = aggregate(results, task='segmentation')
        assert abs(summary.avg - float(row['avg'])) <= 0.01
        assert abs(summary.delta_tp - float(row['delta_tp'])) <= 0.01
        assert not summary.missing_severities and not summary.not_evaluated


def test_reference_table_through_results_files(tmp_path):
    """Reports of each reference row, combined by the table builder, give back the
    published CSV layout and numbers (paper column names); the two models published
    with two backbones each are named by their backbones."""
    if not osp.isfile(REFERENCE):
        pytest.skip(f'reference table {REFERENCE} is absent')
    with open(REFERENCE, newline='') as handle:
        rows = list(csv.DictReader(handle))
    columns = [c for c in rows[0] if c not in ('model', 'backbone', 'clean', 'avg', 'delta_tp')]
    paths = []
    for i, row in enumerate(rows):
        results = {('clean', 0): float(row['clean'])}
        results.update({(paper_to_engine_name(c), 1): float(row[c]) for c in columns})
        prov = make_provenance(model=row['model'], backbone=row['backbone'], versions=VERSIONS)
        out = tmp_path / f'm{i}'
        write_report(str(out), results, task='segmentation', provenance=prov, plots=False)
        paths.append(str(out / 'results.json'))
    with pytest.warns(UserWarning, match='named by their backbones'):
        table = build_comparison(paths)
    repeated = {r['model'] for r in rows if [x['model'] for x in rows].count(r['model']) > 1}
    assert repeated == {'RemoteCLIP', 'GeoRSCLIP'}
    assert [m for m in table.warnings if 'repeats in 2 results files' in m] == table.warnings
    assert len(table.warnings) == 2
    text = comparison_csv_text(table, paper_names=True)
    got = list(csv.DictReader(text.splitlines()))
    assert list(got[0]) == list(rows[0])
    for ref, row in zip(rows, got):
        name = f'{ref["model"]} ({ref["backbone"]})' if ref['model'] in repeated \
            else ref['model']
        assert (row['model'], row['backbone']) == (name, ref['backbone'])
        for key in ['clean'] + columns:
            assert row[key] == f'{float(ref[key]):.2f}'
        for key in ('avg', 'delta_tp'):
            assert abs(float(row[key]) - float(ref[key])) <= 0.01


# --------------------------------------------------------------------------- aggregation
def test_hand_computed_subset():
    s = aggregate(_subset(), task='segmentation')
    assert s.metric == 'mIoU' and s.clean == 80.0
    assert s.corruptions == ('cloud', 'gaussian_noise', 'haze', 'rotate')  # table order
    assert s.severities == (1, 2, 3)
    assert s.per_corruption == {'cloud': 60.0, 'gaussian_noise': 30.0, 'haze': 70.0,
                                'rotate': 72.0}
    assert s.missing_severities == {'haze': (2, ), 'rotate': (1, 3)}
    assert len(s.not_evaluated) == 8 and 'translate' in s.not_evaluated
    assert s.avg == pytest.approx(232 / 4)
    assert s.delta_tp == pytest.approx(80 - 58)
    assert s.mpc == pytest.approx(482 / 9)  # 9 (corruption, severity) values
    assert s.rpc == pytest.approx(482 / 9 / 80)
    cat = s.per_category
    assert list(cat) == ['environmental', 'sensor', 'geometric']
    assert cat['environmental'].corruptions == ('cloud', 'haze')
    assert (cat['environmental'].avg, cat['environmental'].delta_tp) == (65.0, 15.0)
    assert (cat['environmental'].mpc, cat['environmental'].rpc) == (64.0, 0.8)
    assert (cat['sensor'].avg, cat['sensor'].delta_tp, cat['sensor'].rpc) == (30.0, 50.0, 0.375)
    assert (cat['geometric'].avg, cat['geometric'].mpc, cat['geometric'].rpc) == (72.0, 72.0, 0.9)
    numbers = s.to_dict()
    assert numbers['included']['missing_severities'] == {'haze': [2], 'rotate': [1, 3]}
    assert numbers['included']['complete'] is False
    assert [c['condition'] for c in numbers['conditions']][:4] == [
        'clean', 'cloud@1', 'cloud@2', 'cloud@3']

    # the runner's own severity list: 4 and 5 are then missing everywhere
    s5 = aggregate(_subset(), expected_severities=[1, 2, 3, 4, 5])
    assert s5.missing_severities['cloud'] == (4, 5)
    assert s5.avg == s.avg
    with pytest.raises(ValueError, match='not in expected_severities'):
        aggregate(_subset(), expected_severities=[1, 2])


def test_per_class_extra_and_raw_metrics():
    s = aggregate(_with_classes(_subset()), task='segmentation')
    pc = s.per_class
    assert pc['classes'] == ['a', 'b']
    assert pc['clean'] == {'a': 90.0, 'b': 70.0}
    assert pc['per_corruption']['haze'] == {'a': 80.0, 'b': 60.0}
    assert pc['avg'] == {'a': pytest.approx(68.0), 'b': pytest.approx(48.0)}
    assert pc['delta_tp'] == {'a': pytest.approx(22.0), 'b': pytest.approx(22.0)}
    assert s.extra['aAcc']['clean'] == 40.0
    assert s.extra['aAcc']['avg'] == pytest.approx(29.0)

    # IoUMetric output (percentages) and DOTAMetric output (fractions)
    seg = condition_result_from_metrics({'aAcc': 91.5, 'mIoU': 61.25, 'mAcc': 70.0},
                                        'segmentation', per_class={'road': 80.0})
    assert (seg.value, seg.per_class, seg.extra) == (61.25, {'road': 80.0},
                                                     {'aAcc': 91.5, 'mAcc': 70.0})
    # per-class keys carry the evaluator's prefix, like InProcessDOTAMetric's
    det = condition_result_from_metrics({'dota/mAP': 0.5125, 'dota/AP50': 0.513,
                                         'dota/AP.plane': 0.9}, 'detection')
    assert det.value == pytest.approx(51.25) and det.per_class == {'plane': pytest.approx(90.0)}
    assert det.extra == {'dota/AP50': 0.513}
    plain = condition_result_from_metrics({'mAP': 0.5, 'AP.plane': 0.9}, 'detection')
    assert plain.per_class == {'plane': pytest.approx(90.0)} and plain.extra == {}
    with pytest.raises(ValueError, match='outside 0..100'):
        condition_result_from_metrics({'dota/mAP': 51.25}, 'detection')
    raw = {('clean', 0): {'dota/mAP': 0.6}, ('cloud', 1): {'dota/mAP': 0.3}}
    s = aggregate(raw, task='detection')
    assert (s.metric, s.clean, s.delta_tp) == ('mAP', 60.0, 30.0)


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match='empty results'):
        aggregate({})
    with pytest.raises(ValueError, match='no clean condition'):
        aggregate({('cloud', 1): 50.0})
    with pytest.raises(ValueError, match='only the clean condition'):
        aggregate({('clean', 0): 50.0})
    with pytest.raises(ValueError, match="unknown corruption 'salt_pepper'.*salt_pepper_noise"):
        aggregate({('clean', 0): 50.0, ('salt_pepper', 1): 40.0})
    with pytest.raises(ValueError, match="unknown corruption 'fog'"):
        aggregate({('clean', 0): 50.0, ('fog', 1): 40.0})
    for severity in (6, -1):
        with pytest.raises(ValueError, match='severity must be in 1..5'):
            aggregate({('clean', 0): 50.0, ('cloud', severity): 40.0})
    with pytest.raises(ValueError, match='severity 0 is the clean condition'):
        aggregate({('clean', 0): 50.0, ('cloud', 0): 40.0})
    with pytest.raises(ValueError, match="clean condition is \\('clean', 0\\)"):
        aggregate({('clean', 2): 50.0, ('cloud', 1): 40.0})
    with pytest.raises(ValueError, match='must be an integer'):
        aggregate({('clean', 0): 50.0, ('cloud', 1.5): 40.0})
    with pytest.raises(ValueError, match='0-100 scale'):
        aggregate({('clean', 0): 150.0, ('cloud', 1): 40.0})
    with pytest.raises(ValueError, match='0-100 scale'):
        aggregate({('clean', 0): math.nan, ('cloud', 1): 40.0})
    with pytest.raises(ValueError, match='needs task='):
        aggregate({('clean', 0): {'mIoU': 50.0}, ('cloud', 1): {'mIoU': 40.0}})
    with pytest.raises(ValueError, match='unknown task'):
        aggregate(_subset(), task='classification')
    with pytest.raises(ValueError, match='expected severities are integers in 1..5'):
        aggregate(_subset(), expected_severities=[0, 1])
    with pytest.raises(ValueError, match='unknown protocol'):
        aggregate(_subset(), protocol='imagenet-c')
    # a geofm_calibration corruption is unknown to the reobench protocol, fine in its own
    with pytest.raises(ValueError, match='cloud_shadow'):
        aggregate({('clean', 0): 50.0, ('cloud_shadow', 1): 40.0})
    s = aggregate({('clean', 0): 50.0, ('cloud_shadow', 1): 40.0},
                  protocol='geofm_calibration')
    assert s.delta_tp == 10.0 and len(s.not_evaluated) == 2


# --------------------------------------------------------------------------- merging
def test_merge_results():
    full = _with_classes(_subset())
    items = list(full.items())
    shard_a = dict(items[:5])
    shard_b = dict([(CLEAN_CONDITION, full[CLEAN_CONDITION])] + items[5:])  # clean twice
    merged = merge_results([shard_b, results_to_jsonable(shard_a)])  # text keys too
    assert merged == aggregate(full).conditions
    assert list(merged)[0] == CLEAN_CONDITION
    # a shard file round trip
    assert results_from_jsonable(json.loads(json.dumps(results_to_jsonable(full)))) == merged

    conflict = {('cloud', 2): ConditionResult(61.0, {'a': 70.0, 'b': 50.0}, {'aAcc': 30.0})}
    with pytest.raises(ValueError, match="conflicting results for condition 'cloud@2'.*61.0"):
        merge_results([shard_a, conflict])
    per_class_conflict = {('cloud', 2): ConditionResult(60.0, {'a': 70.0, 'b': 51.0},
                                                        {'aAcc': 30.0})}
    with pytest.raises(ValueError, match='per-class or extra metrics differ'):
        merge_results([shard_a, per_class_conflict])
    # a class absent from the test set (NaN IoU) in two shards is no conflict
    nan_class = {CLEAN_CONDITION: ConditionResult(80.0, {'a': math.nan})}
    assert merge_results([nan_class, {CLEAN_CONDITION: {'value': 80.0, 'per_class': {
        'a': None}}}])[CLEAN_CONDITION].value == 80.0
    with pytest.raises(TypeError, match='sequence of condition maps'):
        merge_results(shard_a)
    with pytest.raises(ValueError, match='unknown corruption'):
        merge_results([shard_a, {('fog', 1): 3.0}])


# --------------------------------------------------------------------------- reports
def _report(out_dir, results=None, **prov_kwargs):
    prov = make_provenance(model='TinyViT', backbone='ViT-T', task='segmentation',
                           config='configs/none.py', checkpoint_sha256='ab' * 32, seed=0,
                           versions=VERSIONS, **prov_kwargs)
    return write_report(str(out_dir), _subset() if results is None else results,
                        task='segmentation', provenance=prov)


def test_results_json_is_deterministic(tmp_path):
    results = _with_classes(_subset())
    reversed_order = dict(reversed(list(results.items())))
    _report(tmp_path / 'a', results)
    _report(tmp_path / 'b', reversed_order)
    a = (tmp_path / 'a' / 'results.json').read_bytes()
    b = (tmp_path / 'b' / 'results.json').read_bytes()
    assert a == b
    assert (tmp_path / 'a' / 'results.csv').read_bytes() == \
        (tmp_path / 'b' / 'results.csv').read_bytes()
    doc = json.loads(a)
    assert doc['format'] == RESULTS_FORMAT
    assert doc['provenance']['checkpoint_sha256'] == 'ab' * 32
    assert doc['numbers']['delta_tp'] == pytest.approx(22.0)
    # a recorded time changes the provenance only
    _report(tmp_path / 'c', results, record_time=True)
    doc_c = json.loads((tmp_path / 'c' / 'results.json').read_bytes())
    assert 'created_at' in doc_c['provenance']
    assert doc_c['numbers'] == doc['numbers']
    # stored conditions aggregate back to the same numbers
    read = read_results(str(tmp_path / 'a' / 'results.json'))
    assert read.summary.to_dict() == doc['numbers']
    assert read.provenance == doc['provenance'] and read.task == 'segmentation'
    # a summary number edited by hand is refused, naming the file
    doc['numbers']['avg'] += 1.0
    (tmp_path / 'edited.json').write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=r'edited\.json: its avg do not match'):
        read_results(str(tmp_path / 'edited.json'))
    # a null value or condition: the row named
    doc['numbers']['avg'] -= 1.0
    doc['numbers']['conditions'][1]['value'] = None
    (tmp_path / 'edited.json').write_text(json.dumps(doc))
    key = doc['numbers']['conditions'][1]['condition']
    with pytest.raises(ValueError, match=rf"its conditions cannot be read \(condition "
                       rf"'{key}': the task metric must be a number, got None\)"):
        read_results(str(tmp_path / 'edited.json'))
    doc['numbers']['conditions'][1]['condition'] = None
    (tmp_path / 'edited.json').write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=r'row 2 of "conditions" names no condition \(its '
                       r'"condition" is None\)'):
        read_results(str(tmp_path / 'edited.json'))
    (tmp_path / 'empty.json').write_text('')
    with pytest.raises(ValueError, match=r'empty\.json is not valid JSON'):
        read_results(str(tmp_path / 'empty.json'))


def test_blocks_kept_as_written_are_checked_against_their_digests(tmp_path):
    """The shift and attack blocks, the intervals and the seeds' spread are not recomputed
    on reading: an edit of any of them is refused naming it (an OOD of 99 written over
    the record's 12.4 was used)."""
    from reobench_mm.analysis.shift_table import shift_block
    blocks = dict(shifts=shift_block(
        [dict(name='far', shift_type='sensor', condition='clean', key='shift/far',
              value=12.4, images=5, stats=None)], id_value=80.0, metric='mIoU'))
    prov = make_provenance(model='TinyViT', backbone='ViT-T', task='segmentation',
                           versions=VERSIONS)
    write_report(str(tmp_path / 'run'), _subset(), task='segmentation', provenance=prov,
                 blocks=blocks)
    path = tmp_path / 'run' / 'results.json'
    doc = json.loads(path.read_text())
    assert set(doc['digests']) == {'shifts'}
    assert read_results(str(path)).summary.blocks['shifts']['sets'][0]['ood'] == 12.4
    for edit, field in ((lambda d: d['numbers']['shifts']['sets'][0].update(ood=99.0),
                         'shifts'),
                        (lambda d: d['numbers'].update(intervals={'level': 0.95}),
                         'intervals'),
                        (lambda d: d['numbers'].update(corruption_seeds={'seeds': [0]}),
                         'corruption_seeds'),
                        (lambda d: d.pop('digests'), 'shifts')):
        edited = json.loads(path.read_text())
        edit(edited)
        (tmp_path / 'edited.json').write_text(json.dumps(edited))
        with pytest.raises(ValueError, match=rf'edited\.json: its {field} do not match the '
                           r'digests written with them \(edited by hand\?\)'):
            read_results(str(tmp_path / 'edited.json'))
    # the shift analysis reads the block through the same reader
    from reobench_mm.analysis.shifts import load_shift_points
    (tmp_path / 'points.csv').write_text(
        'model,dataset,shift_type,id_results,ood_results,group,shift\n'
        'TinyViT,far,sensor,edited.json,,,far\n')
    with pytest.raises(ValueError, match=r'edited\.json: its shifts do not match'):
        load_shift_points(str(tmp_path / 'points.csv'))
    (tmp_path / 'edited.json').write_text(path.read_text())
    points, _ = load_shift_points(str(tmp_path / 'points.csv'))
    assert points[0].ood_value == 12.4


def test_results_csv_rows(tmp_path):
    _report(tmp_path, _with_classes(_subset()))
    with open(tmp_path / 'results.csv', newline='') as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 10
    assert list(rows[0]) == ['condition', 'corruption', 'severity', 'category', 'mIoU', 'aAcc',
                             'IoU.a', 'IoU.b']
    assert rows[0]['condition'] == 'clean' and float(rows[0]['mIoU']) == 80.0
    assert rows[-1]['condition'] == 'rotate@2' and rows[-1]['category'] == 'geometric'


def test_report_md_and_plots(tmp_path):
    report = _report(tmp_path, _with_classes(_subset()))
    text = (tmp_path / 'report.md').read_text(encoding='utf-8')
    assert PAPER_HEADER in text
    # Clean, then the 12 columns (– where not evaluated), Avg, ΔTP
    assert ('| TinyViT | ViT-T | 80.00 | – | 60.00 | – | – | – | 30.00 | 70.00 | – | 72.00 | '
            '– | – | – | 58.00 | 22.00 |') in text
    assert '| Corruption | Category | 1 | 2 | 3 | Mean | Drop |' in text
    assert '| haze | environmental | 75.00 | – | 65.00 | 70.00 | 10.00 |' in text
    assert '| all | 4 | 58.00 | 22.00 | 53.56 | 66.94 |' in text  # mPC, rPC %
    assert '| geometric | 1 | 72.00 | 8.00 | 72.00 | 90.00 |' in text
    assert '**Missing severities**' in text and 'rotate: 1, 3' in text
    assert '| a | 90.00 | 68.00 | 22.00 |' in text  # per-class IoU
    assert '![severity_curves](severity_curves.png)' in text
    assert '`' + 'ab' * 32 + '`' in text
    for name in ('severity_curves.png', 'drop_by_corruption.png'):
        path = tmp_path / name
        assert report.files[name] == str(path)
        data = path.read_bytes()
        assert len(data) > 5000 and data[:8] == b'\x89PNG\r\n\x1a\n'


def test_report_headline_columns_and_provenance_are_readable(tmp_path):
    """The headline says how many images each condition evaluated and which were held out
    for the temperature; no empty Backbone column without a backbone; the provenance
    table has one short row per field and leaves the fingerprint to results.json."""
    fingerprint = dict(config_sha256='c' * 64, checkpoint_sha256='d' * 64,
                       data=dict(files=['x' * 40] * 30), code='e' * 64)
    temperature = dict(temperature=1.5, source='held-out split of the test set (2 images, '
                       'seed 0; not evaluated)', num_images=2, images=['t1.png', 't2.png'])
    prov = make_provenance(model='TinyViT', task='segmentation', config='configs/none.py',
                           checkpoint_sha256='ab' * 32, seed=0, versions=VERSIONS,
                           extra=dict(corruptions=['cloud', 'haze'], severities=[1, 3],
                                      cfg_options={'test_dataloader.batch_size': 2},
                                      temperature=temperature, evaluated_images=6,
                                      fingerprint=fingerprint))
    write_report(str(tmp_path), _subset(), task='segmentation', provenance=prov,
                 plots=False)
    text = (tmp_path / 'report.md').read_text(encoding='utf-8')
    headline = text.split('\n')[2]
    assert headline.endswith('Each condition evaluated 6 test images; 2 more were held out '
                             'to fit the temperature and not evaluated (t1.png, t2.png).')
    assert '| Model | Clean |' in text and 'Backbone' not in text
    assert '| TinyViT | 80.00 |' in text
    provenance = text.split('## Provenance')[1]
    assert 'c' * 64 not in provenance and 'x' * 40 not in provenance  # fingerprint left out
    assert 'in `results.json`' in provenance
    assert '| corruptions | `cloud, haze` |' in provenance
    assert '| evaluated_images | `6` |' in provenance
    assert '| temperature | `1.500, from held-out split' in provenance
    assert max(len(line) for line in provenance.splitlines()) < 200
    with open(tmp_path / 'results.json') as handle:  # the fingerprint is kept there
        assert json.load(handle)['provenance']['extra']['fingerprint'] == fingerprint
    # without provenance of the images, no sentence about them
    write_report(str(tmp_path / 'bare'), _subset(), task='segmentation', plots=False,
                 provenance=make_provenance(model='M', versions=VERSIONS))
    assert 'test image' not in (tmp_path / 'bare' / 'report.md').read_text(encoding='utf-8')


def test_atomic_writes_leave_no_temp_files(tmp_path):
    _report(tmp_path)
    assert sorted(os.listdir(tmp_path)) == ['drop_by_corruption.png', 'report.md',
                                            'results.csv', 'results.json',
                                            'severity_curves.png']
    # a failed write keeps the old file and removes its temporary file
    target = tmp_path / 'results.json'
    before = target.read_bytes()
    with pytest.raises(TypeError):
        atomic_write_text(str(target), b'not text')
    assert target.read_bytes() == before
    assert not [n for n in os.listdir(tmp_path) if n.endswith('.tmp')]


def test_package_versions():
    versions = package_versions()
    assert {'torch', 'mmengine', 'mmcv', 'mmseg', 'mmdet', 'mmrotate', 'reobench_mm', 'numpy',
            'opencv', 'python'} <= set(versions)
    assert versions['reobench_mm'] == reobench_mm.__version__
    assert versions['numpy'] is not None
    assert list(versions) == sorted(versions)


# --------------------------------------------------------------------------- table tool

def test_robustness_table_tool(tmp_path, capsys):
    a = {('clean', 0): 70.0, ('cloud', 1): 60.0, ('cloud', 2): 50.0, ('haze', 1): 65.0,
         ('rotate', 1): 40.0}
    b = {('clean', 0): 75.0, ('cloud', 1): 50.0, ('haze', 1): 67.0, ('scale', 1): 10.0}
    prov = make_provenance(model='ModelA', backbone='ViT-B', versions=VERSIONS)
    write_report(str(tmp_path / 'A'), a, task='segmentation', provenance=prov, plots=False)
    write_report(str(tmp_path / 'folder_b'), b, task='segmentation',
                 provenance=make_provenance(versions=VERSIONS), plots=False)
    path_a = str(tmp_path / 'A' / 'results.json')
    path_b = str(tmp_path / 'folder_b' / 'results.json')
    out, out_csv = tmp_path / 'table.md', tmp_path / 'table.csv'
    tool = load_tool('analysis_tools/robustness_table.py')
    # files of different conditions are refused by default, naming what each lacks
    assert run_tool(tool.main, [path_a, path_b, '--out', str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith('error: the results files do not hold the same conditions')
    assert f'{path_a} (evaluated at severities 1, 2) lacks scale (not evaluated)' in err
    assert f'{path_b} (evaluated at severities 1) lacks cloud at severities 2; rotate (not ' \
        'evaluated)' in err
    assert '--common-conditions' in err and not out.exists()
    with pytest.raises(ValueError, match='do not hold the same conditions'):
        build_comparison([path_a, path_b])

    # restricted on request to clean, cloud@1 and haze@1
    rc = run_tool(tool.main, [path_a, path_b, '--common-conditions', '--out', str(out),
                              '--csv', str(out_csv)])
    assert rc == 0
    err = capsys.readouterr().err
    assert 'warning: restricted, as asked (--common-conditions), to the 3 conditions' in err
    assert 'warning: ModelA: conditions left out (not in every file): cloud@2, rotate@1' in err
    assert 'warning: folder_b: conditions left out (not in every file): scale@1' in err
    text = out.read_text(encoding='utf-8')
    lines = text.splitlines()
    assert lines[0] == '| Model | Backbone | Clean | Cloud | Haze | Avg | ΔTP |'
    # A: cloud 60, haze 65 -> Avg 62.5, ΔTP 7.5; B: cloud 50, haze 67 -> Avg 58.5, ΔTP 16.5
    assert lines[2] == '| ModelA | ViT-B | 70.00 | **60.00** | 65.00 | **62.50** | **7.50** |'
    assert lines[3] == '| folder_b | – | **75.00** | 50.00 | **67.00** | 58.50 | 16.50 |'
    assert lines[4] == '' and lines[5].startswith('Bold: the best value of each column as '
                                                  'written, not a significant difference')
    assert lines[6] == '' and lines[7].startswith('- restricted, as asked')
    assert '- ModelA: conditions left out (not in every file): cloud@2, rotate@1' in lines
    with open(out_csv, newline='') as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == ['model', 'backbone', 'clean', 'cloud', 'haze', 'avg', 'delta_tp']
    assert rows[1]['model'] == 'folder_b' and rows[1]['delta_tp'] == '16.50'
    with pytest.warns(UserWarning) as record:
        build_comparison([path_a, path_b], common_conditions=True)
    messages = [str(w.message) for w in record]
    assert any('not in every file' in m and 'rotate' in m for m in messages)

    # one file: its own numbers (cloud over 1 and 2), with a note on the severities
    assert run_tool(tool.main, [path_a]) == 0
    captured = capsys.readouterr()
    own = read_results(path_a).summary
    assert own.avg == pytest.approx((55.0 + 65.0 + 40.0) / 3)
    assert f'| ModelA | ViT-B | 70.00 | 55.00 | 65.00 | 40.00 | {own.avg:.2f} | ' \
        f'{own.delta_tp:.2f} |' in captured.out
    assert 'different severities (cloud: 1, 2; haze: 1; rotate: 1)' in captured.err
    # repeated names given are refused; a bad file is one error line
    assert run_tool(tool.main, [path_a, path_b, '--common-conditions', '--names', 'x',
                                'x']) == 2
    assert "given more than once: ['x']" in capsys.readouterr().err
    assert run_tool(tool.main, [str(out_csv)]) == 2
    assert capsys.readouterr().err.startswith('error: ')
