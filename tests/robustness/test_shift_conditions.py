"""Other test sets as conditions of the robustness loops (real distribution shifts): the
shift sets' options and names, their numbers against the toolboxes' own tools/test.py on
the shifted set alone, corruptions on top of a set, resuming, the fingerprint of the
shifted data, the class check, the report block against direct numpy, the validation
loop's keys."""
import glob
import json
import math
import os
import os.path as osp
import zlib

import numpy as np
import pytest
from mmengine.config import Config
from mmengine.runner import Runner

import reobench_mm  # noqa: F401  (registration)
from helpers import (DET_DEMO_CONFIG, SEG_DEMO_CONFIG, call_tool,
                     run_tools_together, stock_tool_here, toolbox_file)
from reobench_corruptions.condition import Condition
from reobench_mm.analysis.shift_table import shift_block, shift_lines, shift_metric_keys
from reobench_mm.errors import FingerprintMismatchError, SweepError
from reobench_mm.evaluation.functional.bootstrap import resample_counts
from reobench_mm.evaluation.functional.condition_stats import ImageStats
from reobench_mm.evaluation.functional.image_stats import SegmentationImageStats
from reobench_mm.robustness.options import RobustnessOptions
from reobench_mm.robustness.conditions.shifts import ShiftCondition, parse_shifts
from sweep_helpers import condition_records, untrained_checkpoint



def _potsdam_set(root, **extra):
    return dict(type='PotsdamDataset', data_root=root,
                data_prefix=dict(img_path='img_dir/val', seg_map_path='ann_dir/val'), **extra)


def _dior_set(root):
    """The demo DIOR-R test set of the config (its four demo classes) at ``root``."""
    dataset = Config.fromfile(DET_DEMO_CONFIG).test_dataloader.dataset.to_dict()
    dataset.pop('pipeline')
    return dict(dataset, data_root=root)


def _logged_metrics(work_dir):
    """The metrics MMEngine's LoggerHook wrote at the end of a test run (the scalars JSON
    of its log folder, full precision)."""
    found = sorted(glob.glob(osp.join(work_dir, '*', 'vis_data', 'scalars.json')) +
                   glob.glob(osp.join(work_dir, '*', '*.json')))
    assert found, os.listdir(work_dir)
    for path in reversed(found):
        with open(path) as handle:
            lines = [json.loads(line) for line in handle if line.strip()]
        if lines:
            return lines[-1]
    raise AssertionError(found)


# ----------------------------------------------------------------------------- options
def test_shift_sets_are_parsed_once_and_named():
    shifts = parse_shifts(dict(
        vaihingen=dict(shift_type='geographic', dataset=dict(type='ISPRSDataset')),
        rural=dict(shift_type='my-own', dataset=dict(type='LoveDADataset'),
                   corruptions=['haze', 'cloud'], severities=[5, 3])))
    assert [s.name for s in shifts] == ['vaihingen', 'rural']
    assert shifts[1].severities == (3, 5) and shifts[1].corruptions == ('haze', 'cloud')
    conditions = [c for s in shifts for c in s.conditions(Condition(seed=2))]
    assert [c.key for c in conditions] == [
        'shift/vaihingen', 'shift/rural', 'shift/rural/haze@3', 'shift/rural/haze@5',
        'shift/rural/cloud@3', 'shift/rural/cloud@5']
    assert [c.tag for c in conditions][:3] == ['shift-vaihingen', 'shift-rural',
                                               'shift-rural_haze_s3_seed2']
    assert conditions[2].settings() == dict(shift='rural', shift_type='my-own',
                                            corruption='haze', severity=3, seed=2,
                                            protocol='reobench', border='reflect')
    # never a corruption condition, never clean; equal only to itself
    assert not conditions[0].is_clean
    assert conditions[0] != Condition() and conditions[0] != ('clean', 0)
    assert conditions[2] == ShiftCondition('rural', 'my-own', Condition('haze', 3, seed=2))
    assert len({*conditions, Condition(), Condition('haze', 3)}) == len(conditions) + 2
    # the options hold them, and give them back as config
    options = RobustnessOptions.create(dict(shifts=dict(
        v=dict(shift_type='scale', dataset=dict(type='X')))))
    assert options.to_dict()['shifts'] == dict(v=dict(shift_type='scale',
                                                      dataset=dict(type='X')))
    assert [c.key for c in options.all_conditions if c.key.startswith('shift/')] == ['shift/v']
    assert 'shifts' not in options.fingerprint_part()  # adding a set keeps the others


@pytest.mark.parametrize('shifts, message', [
    ([1], 'shifts must be a dict'),
    (dict(a=1), r"shifts\['a'\] must be a dict"),
    ({'a b': dict(shift_type='scale', dataset=dict(type='X'))}, 'letters, digits'),
    (dict(a=dict(shift_type='scale', dataset=dict(type='X'), dataroot=1)),
     r"unknown key\(s\) \['dataroot'\]"),
    (dict(a=dict(shift_type='', dataset=dict(type='X'))), 'shift_type must be one of'),
    (dict(a=dict(shift_type='scale', dataset=dict(data_root='x'))), 'with a "type"'),
    (dict(a=dict(shift_type='scale', dataset=dict(type='X'), severities=[3])),
     'severities without corruptions'),
    (dict(a=dict(shift_type='scale', dataset=dict(type='X'), corruptions=['hase'])),
     r"shifts\['a'\]: unknown corruption"),
])
def test_bad_shift_sets_are_refused_by_name(shifts, message):
    with pytest.raises(SweepError, match=message):
        RobustnessOptions.create(dict(shifts=shifts))


def test_a_shard_takes_every_kind_of_condition_in_turn():
    """The shards split the run's whole list (corruptions, then the shift sets', then the
    attacks'), each its every n-th condition: together every condition once."""
    options = dict(corruptions=['haze'], severities=[3], attacks=dict(pgd=dict(eps=[4])),
                   shifts=dict(a=dict(shift_type='scale', dataset=dict(type='X'),
                                      corruptions=['cloud'], severities=[2])))
    whole = RobustnessOptions.create(options).conditions
    assert [c.key for c in whole] == ['clean', 'haze@3', 'shift/a', 'shift/a/cloud@2',
                                      'adv/pgd_eps4']
    shards = [RobustnessOptions.create(dict(options, shard=f'{i}/2')).conditions
              for i in range(2)]
    assert [c.key for c in shards[0]] == ['clean', 'shift/a', 'adv/pgd_eps4']
    assert [c.key for c in shards[1]] == ['haze@3', 'shift/a/cloud@2']


@pytest.mark.slow  # 3 s or more: left out of make test-fast
def test_shards_with_shift_sets_and_attacks_merge_to_the_unsharded_run(demo_data,
                                                                       untrained_seg_checkpoint,
                                                                       tmp_path):
    """Two shards of a run with a shift set (a corruption on top) and an attack, merged:
    every record, number and block (the shifts' and attacks' with their intervals) and
    the report as the run in one piece writes them."""
    from reobench_mm.robustness.shards import merge_sweeps
    from sweep_helpers import robustness_cfg
    data_root = osp.join(demo_data, 'potsdam')
    loop = dict(corruptions=['haze'], severities=[3], bootstrap=100,
                attacks=dict(fgsm=dict(eps=[4])),
                shifts=dict(shifted=dict(shift_type='sensor', dataset=_potsdam_set(
                    osp.join(demo_data, 'potsdam_shifted')), corruptions=['cloud'],
                    severities=[2])))
    for work, shard in (('whole', None), ('shard0', '0/2'), ('shard1', '1/2')):
        Runner.from_cfg(robustness_cfg(SEG_DEMO_CONFIG, data_root, str(tmp_path / work),
                                       untrained_seg_checkpoint, shard=shard,
                                       **loop)).test()
    merged = merge_sweeps([str(tmp_path / 'shard0'), str(tmp_path / 'shard1')],
                          str(tmp_path / 'merged'), plots=False)
    whole = condition_records(str(tmp_path / 'whole'))
    sharded = {**condition_records(str(tmp_path / 'shard0')),
               **condition_records(str(tmp_path / 'shard1'))}
    assert sorted(sharded) == sorted(whole) == [
        'adv/fgsm_eps4', 'clean', 'haze@3', 'shift/shifted', 'shift/shifted/cloud@2']
    for key, record in whole.items():
        assert sharded[key]['metrics'] == record['metrics'], key
    with open(merged.files['results.json']) as handle:
        got = json.load(handle)['numbers']
    with open(tmp_path / 'whole' / 'results.json') as handle:
        expected = json.load(handle)['numbers']
    for row in expected['attacks']['attacks'] + got['attacks']['attacks']:
        for name in ('seconds', 'seconds_per_image', 'peak_memory_bytes'):
            row.pop(name)  # what each run measured of the machine
    assert got == expected
    assert got['shifts']['sets'][1]['condition'] == 'cloud@2'
    assert got['attacks']['attacks'][0]['value_ci'] is not None


# ----------------------------------------------------------------------------- the block
def _seg_stats(rng, images, classes=3):
    label = rng.integers(50, 200, (images, classes))
    pred = rng.integers(50, 200, (images, classes))
    inter = np.minimum(label, pred) - rng.integers(0, 40, (images, classes))
    areas = np.stack([np.maximum(inter, 0), pred, label], axis=-1)
    return ImageStats(tuple(f'i{k}' for k in range(images)), SegmentationImageStats(areas))


def _miou(stats, counts):
    """mIoU of per-image areas under bootstrap counts, directly in numpy."""
    areas = stats.task.areas.astype(np.float64)
    out = []
    for row in counts:
        sums = (areas * row[:, None, None]).sum(axis=0)
        out.append(np.mean(100 * sums[:, 0] / (sums[:, 1] + sums[:, 2] - sums[:, 0])))
    return np.array(out)


def test_the_shift_block_against_direct_numpy():
    rng = np.random.default_rng(0)
    clean, far, near = _seg_stats(rng, 7), _seg_stats(rng, 5), _seg_stats(rng, 6)
    value = lambda s: float(_miou(s, np.ones((1, s.num_images)))[0])  # noqa: E731
    rows = [dict(name='far', shift_type='geographic', condition='clean', key='shift/far',
                 value=value(far), stats=far, images=5),
            dict(name='near', shift_type='scale', condition='clean', key='shift/near',
                 value=value(near), stats=near, images=6),
            dict(name='near', shift_type='scale', condition='haze@3',
                 key='shift/near/haze@3', value=value(near) - 3.0, stats=near, images=6)]
    block = shift_block(rows, id_value=value(clean), metric='mIoU', id_stats=clean,
                        resamples=400, level=0.9, seed=3)
    ident = value(clean)
    far_row, near_row, haze_row = block['sets']
    assert far_row['drop'] == pytest.approx(ident - value(far))
    assert far_row['relative_drop'] == pytest.approx((ident - value(far)) / ident)
    assert haze_row['ood'] == pytest.approx(value(near) - 3.0)
    # the means are over the sets as they are (not the corruption on top)
    assert block['means']['all']['sets'] == 2
    assert block['means']['all']['relative_drop'] == pytest.approx(
        np.mean([far_row['relative_drop'], near_row['relative_drop']]))
    assert block['means']['scale']['ood'] == pytest.approx(value(near))
    # intervals: ID on the summary's resamples, OOD on the set's own stream
    id_reps = _miou(clean, resample_counts(7, 400, 3))
    far_reps = _miou(far, resample_counts(5, 400, (3, 2, zlib.crc32(b'far'))))
    low, high = np.percentile(id_reps - far_reps, [5, 95])
    assert far_row['drop_ci'] == pytest.approx([low, high])
    low, high = np.percentile(far_reps, [5, 95])
    assert far_row['ood_ci'] == pytest.approx([low, high])
    near_reps = _miou(near, resample_counts(6, 400, (3, 2, zlib.crc32(b'near'))))
    mean_rel = ((id_reps - far_reps) / id_reps + (id_reps - near_reps) / id_reps) / 2
    assert block['means']['all']['relative_drop_ci'] == pytest.approx(
        list(np.percentile(mean_rel, [5, 95])))
    # keys and lines
    keys = shift_metric_keys(block)
    assert keys['shift/far/mIoU'] == pytest.approx(value(far))
    assert keys['shift/near/haze@3/drop'] == pytest.approx(ident - value(near) + 3.0)
    assert keys['shift/avg'] == pytest.approx(np.mean([value(far), value(near)]))
    text = '\n'.join(shift_lines(block))
    assert '## Real distribution shifts' in text and '| near | scale | haze@3 | 6 |' in text
    # without statistics: the numbers, no intervals
    plain = shift_block([dict(r, stats=None) for r in rows], id_value=ident, metric='mIoU',
                        id_stats=clean, resamples=400)
    assert plain['intervals'] is None and 'drop_ci' not in plain['sets'][0]
    assert plain['sets'][0]['drop'] == far_row['drop']


def test_a_mapped_set_is_compared_like_for_like():
    """A model perfect on the class the shift set cannot hold (class 2): its all-class ID
    is 64.44, over the set's two classes 46.67; the drop on those classes is the hand
    computation, with paired intervals, keys and the report's table."""
    ident = ImageStats([f'{i}.png' for i in range(4)], SegmentationImageStats(np.array(
        [[[50, 100, 100], [60, 80, 80], [100, 100, 100]]] * 4)))
    ood = ImageStats([f'o{i}.png' for i in range(3)], SegmentationImageStats(np.array(
        [[[30, 100, 100], [40, 80, 80], [0, 20, 0]]] * 3)))
    id_all = float(ident.task.values()[0])
    row = dict(name='mapped', shift_type='source', condition='clean', key='shift/mapped',
               value=float(ood.task.values()[0]), stats=ood, images=3,
               compared_classes=dict(names=['a', 'b'], indices=[0, 1]))
    block = shift_block([row], id_value=id_all, metric='mIoU', id_stats=ident,
                        resamples=200, seed=1)
    entry = block['sets'][0]
    id_shared = 100 * np.mean([50 / 150, 60 / 100])
    ood_shared = 100 * np.mean([30 / 170, 40 / 120])
    assert id_all == pytest.approx(100 * np.mean([50 / 150, 60 / 100, 1.0]))
    assert entry['id_shared'] == pytest.approx(id_shared)
    assert entry['ood_shared'] == pytest.approx(ood_shared)
    assert entry['drop_shared'] == pytest.approx(id_shared - ood_shared)
    assert entry['relative_drop_shared'] == pytest.approx((id_shared - ood_shared) / id_shared)
    assert entry['drop'] == pytest.approx(id_all - row['value'])  # all classes: larger
    assert entry['drop'] > entry['drop_shared']
    # every image alike: every resample gives the same numbers
    assert entry['drop_shared_ci'] == pytest.approx([id_shared - ood_shared] * 2)
    keys = shift_metric_keys(block)
    assert keys['shift/mapped/id_shared'] == pytest.approx(id_shared)
    assert keys['shift/mapped/drop_shared'] == pytest.approx(id_shared - ood_shared)
    text = '\n'.join(shift_lines(block))
    assert '| mapped | clean | a, b | 64.44 | 46.67 [46.67, 46.67] | 25.49 | 21.18' in text
    # without per-image statistics it says why there is no like-for-like number
    plain = shift_block([dict(row, stats=None)], id_value=id_all, metric='mIoU')
    assert plain['sets'][0]['shared_note'].startswith('no per-image statistics')


# ----------------------------------------------------------------------------- end to end
@pytest.mark.slow
def test_a_shifted_segmentation_set_equals_mmsegs_stock_tool(demo_data, tmp_path, seg_model):
    """The OOD number the loop records for a shift set (through mmseg's own tools/test.py
    with RobustnessTestLoop) equals mmseg's tools/test.py on the shifted set alone; a
    corruption on top equals the sweep's condition on that set; the keys reach the
    logger; the report has the block."""
    stock = toolbox_file('mmseg', 'tools', 'test.py')
    data_root = osp.join(demo_data, 'potsdam')
    shifted = osp.join(demo_data, 'potsdam_shifted')
    checkpoint = seg_model.checkpoint
    derived = tmp_path / 'upernet_shift.py'
    derived.write_text(
        f"_base_ = ['{SEG_DEMO_CONFIG}']\n"
        "test_cfg = dict(type='RobustnessTestLoop', corruptions=['haze'], severities=[3],"
        f" plots=False, shifts=dict(potsdam_shifted=dict(shift_type='sensor', "
        f"dataset={_potsdam_set(shifted)!r}, corruptions=['haze'], severities=[3])))\n")
    common = ['log_level=INFO', 'test_dataloader.num_workers=0',
              'test_dataloader.persistent_workers=False']

    def sweep():  # this package's sweep tool, in process beside the stock tool
        assert call_tool('robustness_test.py', [
            SEG_DEMO_CONFIG, checkpoint, '--corruptions', 'haze', '--severities', '3',
            '--no-plots', '--work-dir', tmp_path / 'sweep', '--cfg-options',
            f'test_dataloader.dataset.data_root={shifted}', *common]) == 0

    def references():  # the sweep, and the stock tool on the shifted set alone
        sweep()
        stock_tool_here(stock, [
            SEG_DEMO_CONFIG, checkpoint, '--work-dir', tmp_path / 'alone',
            '--cfg-options', f'test_dataloader.dataset.data_root={shifted}', *common])

    outputs = run_tools_together(
        [stock, str(derived), checkpoint, '--work-dir', str(tmp_path / 'loop'),
         '--cfg-options', f'test_dataloader.dataset.data_root={data_root}', *common],
        meanwhile=references)
    records = condition_records(str(tmp_path / 'loop'))
    assert sorted(records) == ['clean', 'haze@3', 'shift/potsdam_shifted',
                               'shift/potsdam_shifted/haze@3']
    alone = _logged_metrics(str(tmp_path / 'alone'))  # the scalars file holds float32
    ood = records['shift/potsdam_shifted']['metrics']
    assert ood['mIoU'] == pytest.approx(alone['mIoU'], abs=1e-5)
    assert ood['aAcc'] == pytest.approx(alone['aAcc'], abs=1e-5)
    assert ood['mIoU'] != records['clean']['metrics']['mIoU']
    on_top = condition_records(str(tmp_path / 'sweep'))
    assert records['shift/potsdam_shifted/haze@3']['metrics'] == on_top['haze@3']['metrics']
    assert on_top['clean']['metrics'] == ood
    record = records['shift/potsdam_shifted']
    assert record['shift_type'] == 'sensor' and record['tag'] == 'shift-potsdam_shifted'
    assert record['fingerprint']['data']['shift_set']['samples'] == 3
    # the logger got the keys, the report the block
    assert 'shift/potsdam_shifted/mIoU' in outputs[0]
    assert 'shift/potsdam_shifted/haze@3/relative_drop' in outputs[0]
    with open(tmp_path / 'loop' / 'results.json') as handle:
        numbers = json.load(handle)['numbers']
    row = numbers['shifts']['sets'][0]
    assert row['ood'] == pytest.approx(ood['mIoU'])
    assert row['id'] == pytest.approx(records['clean']['metrics']['mIoU'])
    assert row['drop_ci'][0] <= row['drop'] <= row['drop_ci'][1]
    assert numbers['conditions'][-1]['condition'] == 'haze@3'  # not among the corruptions
    report = (tmp_path / 'loop' / 'report.md').read_text()
    assert '## Real distribution shifts' in report and '| potsdam_shifted | sensor |' in report


@pytest.mark.slow
def test_a_shifted_detection_set_equals_mmrotates_stock_tool(demo_data, tmp_path, det_model):
    """The same for Oriented R-CNN: the loop's OOD mAP equals mmrotate's own
    tools/test.py on the shifted DIOR-R set alone."""
    stock = toolbox_file('mmrotate', 'tools', 'test.py')
    data_root = osp.join(demo_data, 'dior')
    shifted = osp.join(demo_data, 'dior_shifted')
    checkpoint = det_model.checkpoint
    derived = tmp_path / 'orcnn_shift.py'
    derived.write_text(
        f"_base_ = ['{DET_DEMO_CONFIG}']\n"
        "test_cfg = dict(type='RobustnessTestLoop', corruptions=['haze'], severities=[3],"
        f" plots=False, shifts=dict(dior_shifted=dict(shift_type='scale', "
        f"dataset={_dior_set(shifted)!r})))\n")
    common = ['log_level=INFO', 'test_dataloader.num_workers=0',
              'test_dataloader.persistent_workers=False']
    outputs = run_tools_together(  # the reference in this process meanwhile
        [stock, str(derived), checkpoint, '--work-dir', str(tmp_path / 'loop'),
         '--cfg-options', f'test_dataloader.dataset.data_root={data_root}', *common],
        meanwhile=lambda: stock_tool_here(stock, [
            DET_DEMO_CONFIG, checkpoint, '--work-dir', tmp_path / 'alone',
            '--cfg-options', f'test_dataloader.dataset.data_root={shifted}', *common]))
    records = condition_records(str(tmp_path / 'loop'))
    assert sorted(records) == ['clean', 'haze@3', 'shift/dior_shifted']
    alone = _logged_metrics(str(tmp_path / 'alone'))
    ood = records['shift/dior_shifted']['metrics']
    assert ood['dota/mAP'] == pytest.approx(alone['dota/mAP'], abs=1e-7)
    assert 'shift/dior_shifted/mAP' in outputs[0]


@pytest.mark.slow  # 8 s or more: left out of make test-fast
def test_a_map_written_for_all_dior_r_classes_serves_a_model_of_four(demo_data, tmp_path,
                                                                    det_model):
    """The demo detector has 4 of DIOR-R's 20 classes. A shift set labelled with all 20,
    wrapped with a map written for the 20 (the shipped bases' form: no classes, map_classes
    the 20, an entry for a class the set lacks), gives the numbers of the same images read
    with the model's 4 classes, as the model's own test set reads them."""
    from helpers import PROJECT_ROOT
    base = Config.fromfile(osp.join(PROJECT_ROOT, 'configs', '_base_', 'shifts',
                                    'dior-r_dota.py'))
    every = list(base.dior_r_classes)
    shifted = osp.join(demo_data, 'dior_shifted')
    mapping = dict({c: c for c in every}, helicopter=None)  # helicopter: a DOTA class
    mapped = dict(type='reobench_mm.ClassMappedDataset', mapping=mapping, map_classes=every,
                  dataset=dict(_dior_set(shifted), metainfo=dict(classes=tuple(every))))
    cfg = Config.fromfile(DET_DEMO_CONFIG)
    cfg.work_dir = str(tmp_path / 'run')
    cfg.log_level = 'WARNING'
    cfg.custom_hooks = []
    cfg.test_dataloader.dataset.data_root = osp.join(demo_data, 'dior')
    cfg.test_dataloader.num_workers = 0
    cfg.test_dataloader.persistent_workers = False
    cfg.load_from = det_model.checkpoint
    cfg.test_cfg = dict(type='RobustnessTestLoop', corruptions=['haze'], severities=[1],
                        plots=False, shifts=dict(
                            mapped=dict(shift_type='source', dataset=mapped),
                            plain=dict(shift_type='source', dataset=_dior_set(shifted))))
    metrics = Runner.from_cfg(cfg).test()
    assert metrics['shift/mapped/mAP'] == metrics['shift/plain/mAP'] > 0
    # what the map left out is in the report, under the shift table
    report = (tmp_path / 'run' / 'report.md').read_text(encoding='utf-8')
    assert "Class maps (what each set's map left out of the comparison):" in report
    assert '- mapped: ignored as the model lacks their class: airport (-> airport), ' in report
    assert 'map entries the set has no class for: helicopter' in report
    # the same map refusing unused entries, and a target outside the map's classes
    from reobench_mm.structures.class_map import ClassMap
    with pytest.raises(ValueError, match="'helicopter', which is not a class of the test set"):
        ClassMap.create(every, every[:4], mapping, target_vocabulary=every)
    typo = dict(mapping, airplane='airplain')
    with pytest.raises(ValueError, match="sends 'airplane' to 'airplain', a class the model "
                                         "does not have \\(did you mean 'airplane'\\?\\)"):
        ClassMap.create(every, every[:4], typo, unused_sources=True, target_vocabulary=every)
    kept = ClassMap.create(every, ('airplane', 'ship'), mapping, unused_sources=True,
                           target_vocabulary=every)
    assert kept.unused == ('helicopter', ) and \
        set(kept.ignored) == set(every) - {'airplane', 'ship'} and \
        ('vehicle', 'vehicle') in kept.absent_targets
    assert 'map entries the set has no class for: helicopter' in kept.describe()


# ----------------------------------------------------------------------------- in process
def _runner(tmp_path, data_root, shifts, work='run', corruptions=('haze', )):
    cfg = Config.fromfile(SEG_DEMO_CONFIG)
    cfg.work_dir = str(tmp_path / work)
    cfg.log_level = 'WARNING'
    cfg.test_dataloader.dataset.data_root = data_root
    cfg.test_dataloader.num_workers = 0
    cfg.test_dataloader.persistent_workers = False
    cfg.custom_hooks = []
    cfg.load_from = untrained_checkpoint(SEG_DEMO_CONFIG, str(tmp_path / 'model.pth'))
    cfg.test_cfg = dict(type='RobustnessTestLoop', corruptions=list(corruptions),
                        severities=[2], plots=False, shifts=shifts)
    return Runner.from_cfg(cfg)


@pytest.mark.slow  # 7 s or more: left out of make test-fast
def test_a_run_killed_in_a_shift_condition_resumes_and_changed_shift_data_is_refused(
        demo_data, tmp_path, monkeypatch):
    from reobench_mm.robustness.condition_evaluation import ConditionEvaluation
    data_root = osp.join(demo_data, 'potsdam')
    shifted = str(tmp_path / 'shifted')
    import shutil
    shutil.copytree(osp.join(demo_data, 'potsdam_shifted'), shifted)
    shifts = dict(other=dict(shift_type='sensor', dataset=_potsdam_set(shifted)))
    original = ConditionEvaluation.evaluate

    def killed(self, condition, quiet=None):  # killed while the shift set is evaluated
        if isinstance(condition, ShiftCondition):
            self.sources.feed(condition)  # its data built
            raise KeyboardInterrupt('killed')
        return original(self, condition, quiet)

    monkeypatch.setattr(ConditionEvaluation, 'evaluate', killed)
    with pytest.raises(KeyboardInterrupt):
        _runner(tmp_path, data_root, shifts).test()
    assert sorted(condition_records(str(tmp_path / 'run'))) == ['clean', 'haze@2']
    monkeypatch.setattr(ConditionEvaluation, 'evaluate', original)
    runner = _runner(tmp_path, data_root, shifts)
    metrics = runner.test()
    outcome = runner.test_loop.outcome
    assert [c.key for c in outcome.evaluated] == ['shift/other']
    assert [c.key for c in outcome.skipped] == ['clean', 'haze@2']
    assert metrics['shift/other/mIoU'] == pytest.approx(
        condition_records(str(tmp_path / 'run'))['shift/other']['metrics']['mIoU'])
    assert 'shift/other/relative_drop' in metrics and 'shift/avg' in metrics
    # a changed file of the shifted set: the shift record is refused, naming the set
    image = sorted(glob.glob(osp.join(shifted, 'img_dir', 'val', '*.png')))[0]
    with open(image, 'ab') as handle:
        handle.write(b'\0')
    with pytest.raises(FingerprintMismatchError, match="shift set 'other'"):
        _runner(tmp_path, data_root, shifts).test()
    # a set added later is evaluated alone; the others are reused
    shifts['again'] = dict(shift_type='scale', dataset=_potsdam_set(
        osp.join(demo_data, 'potsdam_shifted')))
    del shifts['other']
    runner = _runner(tmp_path, data_root, shifts)
    runner.test()
    assert [c.key for c in runner.test_loop.outcome.evaluated] == ['shift/again']


def test_a_shift_set_of_other_classes_is_refused_naming_both(demo_data, tmp_path):
    data_root = osp.join(demo_data, 'potsdam')
    classes = ('impervious_surface', 'building', 'low_vegetation', 'tree', 'car')
    shifts = dict(odd=dict(shift_type='source', dataset=_potsdam_set(
        osp.join(demo_data, 'potsdam_shifted'), metainfo=dict(classes=classes))))
    with pytest.raises(SweepError, match=r"shift set 'odd' has the classes "
                       r"\['impervious_surface', .*'car'\], the test set \(the model\) "
                       r"\['impervious_surface', .*'car', 'clutter'\]: wrap it in "
                       r"ClassMappedDataset"):
        _runner(tmp_path, data_root, shifts).test()
    # already wrapped, onto other classes: the wrapper's classes named, not "wrap it"
    shifts = dict(odd=dict(shift_type='source', dataset=dict(
        type='reobench_mm.ClassMappedDataset', classes=classes[:4],
        mapping=dict(impervious_surface='impervious_surface', building='building',
                     low_vegetation='low_vegetation', tree='tree', car=None, clutter=None),
        dataset=_potsdam_set(osp.join(demo_data, 'potsdam_shifted')))))
    with pytest.raises(SweepError, match=r"shift set 'odd': its ClassMappedDataset maps onto "
                       r"the classes \['impervious_surface', .*'tree'\], the test set \(the "
                       r"model\) has .*leave classes out"):
        _runner(tmp_path, data_root, shifts).test()


POTSDAM_CLASSES = ('impervious_surface', 'building', 'low_vegetation', 'tree', 'car',
                   'clutter')


def test_a_class_maps_ignored_pixels_take_the_evaluators_ignored_label(demo_data, tmp_path):
    """The evaluator ignores label 5 (clutter, REOBench's Potsdam setting); a shift set
    mapping car to None must write car as 5, so its number equals that of the same set
    with car relabelled clutter on disk (not scoring the pixels as label 255)."""
    import cv2
    data_root = osp.join(demo_data, 'potsdam')
    relabelled = str(tmp_path / 'relabelled')
    import shutil
    shutil.copytree(osp.join(demo_data, 'potsdam_shifted'), relabelled)
    changed = 0
    for path in glob.glob(osp.join(relabelled, 'ann_dir', 'val', '*.png')):
        labels = cv2.imread(path, cv2.IMREAD_UNCHANGED)
        changed += int((labels == 5).sum())   # car on disk (reduce_zero_label: 4)
        labels[labels == 5] = 6               # clutter on disk: 5, ignored
        cv2.imwrite(path, labels)
    assert changed > 0
    mapping = {c: (None if c == 'car' else c) for c in POTSDAM_CLASSES}

    def mapped(**extra):
        return dict(type='reobench_mm.ClassMappedDataset', classes=POTSDAM_CLASSES,
                    mapping=mapping, dataset=_potsdam_set(
                        osp.join(demo_data, 'potsdam_shifted')), **extra)

    shifts = dict(mapped=dict(shift_type='sensor', dataset=mapped()),
                  on_disk=dict(shift_type='sensor', dataset=_potsdam_set(relabelled)))
    runner = _runner(tmp_path, data_root, shifts)
    runner.cfg.test_evaluator['ignore_index'] = 5
    # the demo set's label rules name 255 as its ignored label, which an evaluator ignoring
    # 5 refuses (tests/datasets/test_label_rules.py): here it states none
    runner.cfg.test_dataloader.dataset.pop('metainfo')
    runner = Runner.from_cfg(runner.cfg)
    metrics = runner.test()
    assert metrics['shift/mapped/mIoU'] == metrics['shift/on_disk/mIoU']
    # the mapped set cannot hold car: its ID side is also given without car (like for
    # like, from the clean condition's per-image statistics); the set on disk has no map
    shift = json.loads((tmp_path / 'run' / 'results.json').read_text())['numbers']['shifts']
    row = next(s for s in shift['sets'] if s['name'] == 'mapped')
    assert row['compared_classes'] == [c for c in POTSDAM_CLASSES if c != 'car']
    from reobench_mm.analysis.results_file import read_results
    clean = read_results(str(tmp_path / 'run' / 'results.json')).image_stats()
    clean_stats = next(v for c, v in clean.items() if c.is_clean)
    assert row['id_shared'] == pytest.approx(float(clean_stats.task.values(
        classes=[0, 1, 2, 3, 5])[0]))
    assert metrics['shift/mapped/drop_shared'] == pytest.approx(row['drop_shared'])
    assert 'shift/on_disk/id_shared' not in metrics
    # a map that names another label is refused before anything is scored
    shifts = dict(mapped=dict(shift_type='sensor', dataset=mapped(ignore_index=255)))
    cfg = _runner(tmp_path, data_root, shifts, work='refused').cfg
    cfg.test_evaluator['ignore_index'] = 5
    cfg.test_dataloader.dataset.pop('metainfo')
    with pytest.raises(SweepError, match=r"shift set 'mapped': its class map writes ignored "
                       r"classes as label 255 .*the test evaluator ignores label 5: .*"
                       r"ignore_index=5"):
        Runner.from_cfg(cfg).test()
    assert not osp.exists(osp.join(tmp_path, 'refused', 'results.json'))


def test_unreadable_files_are_refused_before_the_first_condition(demo_data, tmp_path,
                                                                  monkeypatch):
    """An empty image in a shift set, a text file in the test set: one error naming the
    set and the file before anything is evaluated; a file the checks pass but the loader
    cannot decode: named at the image, with its condition, the finished records kept."""
    import shutil
    data_root, shifted = str(tmp_path / 'potsdam'), str(tmp_path / 'shifted')
    shutil.copytree(osp.join(demo_data, 'potsdam'), data_root)
    shutil.copytree(osp.join(demo_data, 'potsdam_shifted'), shifted)
    broken = sorted(glob.glob(osp.join(shifted, 'img_dir', 'val', '*.png')))[-1]
    with open(broken, 'wb'):
        pass
    shifts = dict(broken=dict(shift_type='sensor', dataset=_potsdam_set(shifted)))
    with pytest.raises(SweepError, match=rf"shift set 'broken': 1 of its \d+ image and label "
                       rf"files cannot be decoded: {broken} is empty \(0 bytes\)"):
        _runner(tmp_path, data_root, shifts).test()
    assert condition_records(str(tmp_path / 'run')) == {}
    # a set with a wrong data_root: refused before the first condition, saying where
    missing = str(tmp_path / 'no_such_set')
    with pytest.raises(SweepError, match=rf"shift set 'gone' has no samples: its image "
                       rf"folder {missing}/img_dir/val does not exist"):
        _runner(tmp_path, data_root, dict(gone=dict(shift_type='sensor', dataset=_potsdam_set(
            missing)))).test()
    assert condition_records(str(tmp_path / 'run')) == {}
    text = sorted(glob.glob(osp.join(data_root, 'ann_dir', 'val', '*.png')))[0]
    with open(text, 'w') as handle:
        handle.write('not a label map\n')
    with pytest.raises(SweepError, match=rf"the test set: 1 of its \d+ image and label files "
                       rf"cannot be decoded: {text} holds text"):
        _runner(tmp_path, data_root, dict(), work='plain').test()
    shutil.copy(osp.join(demo_data, 'potsdam', 'ann_dir', 'val', osp.basename(text)), text)
    # the checks passed, the loader fails: the condition and the file named
    import reobench_mm.datasets.image_files as image_files
    monkeypatch.setattr(image_files, 'image_file_problem', lambda path: None)
    with pytest.raises(SweepError, match=r"condition shift/broken: an image or label file "
                       r"cannot be decoded \(.*buf.empty\(\).*\); replace or remove it"):
        _runner(tmp_path, data_root, shifts).test()
    assert sorted(condition_records(str(tmp_path / 'run'))) == ['clean', 'haze@2']


def test_the_validation_loop_reports_the_shift_keys(demo_data, tmp_path):
    data_root = osp.join(demo_data, 'potsdam')
    cfg = Config.fromfile(SEG_DEMO_CONFIG)
    cfg.work_dir = str(tmp_path / 'val')
    cfg.log_level = 'WARNING'
    cfg.custom_hooks = []
    cfg.val_dataloader.dataset.data_root = data_root
    cfg.val_dataloader.num_workers = 0
    cfg.val_dataloader.persistent_workers = False
    # and a set that cannot hold car: its like-for-like numbers, as the test loop's
    mapped = dict(type='reobench_mm.ClassMappedDataset',
                  mapping={c: (None if c == 'car' else c) for c in POTSDAM_CLASSES},
                  dataset=_potsdam_set(osp.join(demo_data, 'potsdam_shifted')))
    shifts = dict(s=dict(shift_type='sensor', dataset=_potsdam_set(
        osp.join(demo_data, 'potsdam_shifted'))), m=dict(shift_type='source', dataset=mapped))
    cfg.val_cfg = dict(type='RobustnessValLoop', corruptions=['haze'], severities=[3],
                       shifts=shifts)
    cfg.load_from = untrained_checkpoint(SEG_DEMO_CONFIG, str(tmp_path / 'model.pth'))
    metrics = Runner.from_cfg(cfg).val()
    assert math.isfinite(metrics['shift/s/mIoU'])
    assert metrics['shift/s/drop'] == pytest.approx(metrics['mIoU'] - metrics['shift/s/mIoU'])
    assert 'shift/s/id_shared' not in metrics
    runner = _runner(tmp_path, data_root, shifts, work='test')
    tested = runner.test()
    assert metrics['shift/m/id_shared'] == pytest.approx(tested['shift/m/id_shared'])
    assert metrics['shift/m/drop_shared'] == pytest.approx(tested['shift/m/drop_shared'])
    assert metrics['shift/m/id_shared'] != pytest.approx(metrics['mIoU'])


def test_the_sweep_takes_the_shift_sets_and_files_from_the_config(demo_data, tmp_path):
    from reobench_mm.robustness.sweep import RobustnessSweep
    derived = tmp_path / 'with_shifts.py'
    derived.write_text(
        f"_base_ = ['{SEG_DEMO_CONFIG}']\n"
        "test_cfg = dict(type='RobustnessTestLoop', shifts=dict(s=dict(shift_type='scale', "
        f"dataset={_potsdam_set(osp.join(demo_data, 'potsdam_shifted'))!r})), "
        "corruption_files=dict(dataset=dict(data_root='x/{folder}/{severity}')))\n")
    checkpoint = untrained_checkpoint(SEG_DEMO_CONFIG, str(tmp_path / 'model.pth'))
    sweep = RobustnessSweep(str(derived), checkpoint, corruptions=['haze'], severities=[1],
                            work_dir=str(tmp_path / 'sweep'))
    assert [c.key for c in sweep.conditions] == ['clean', 'haze@1', 'shift/s']
    assert sweep.options.corruption_files.reads(Condition('haze', 1))
    assert sweep.condition_file(sweep.conditions[-1]).endswith('conditions/shift-s.json')
    # given as an argument, the config's are not used
    sweep = RobustnessSweep(str(derived), checkpoint, corruptions=['haze'], severities=[1],
                            work_dir=str(tmp_path / 'other'), shifts=dict(
                                t=dict(shift_type='sensor', dataset=dict(type='X'))))
    assert [c.key for c in sweep.conditions][-1] == 'shift/t'
