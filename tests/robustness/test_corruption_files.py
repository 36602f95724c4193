"""Corrupted conditions read from files (REOBench's released test sets): the option, a
sweep over folders in the released segmentation layout generated here (images, and moved
labels for a geometric corruption), the record's source and fingerprint, the report."""
import glob
import json
import os
import os.path as osp

import cv2
import pytest
from mmengine.config import Config
from mmengine.runner import Runner

import reobench_mm  # noqa: F401  (registration)
from helpers import SEG_DEMO_CONFIG
from reobench_corruptions import corrupt, corrupt_geometric
from reobench_corruptions.condition import Condition
from reobench_mm.errors import FingerprintMismatchError, SweepError
from reobench_mm.robustness.options import RobustnessOptions
from reobench_mm.robustness.conditions.released import REOBENCH_FOLDERS, parse_corruption_files
from sweep_helpers import condition_records, untrained_checkpoint

IMAGES = '{root}/{{folder}}/severity_{{severity}}/val'
LABELS = '{root}/{{folder}}/severity_{{severity}}/label'


def test_the_option_formats_its_templates_per_condition():
    files = parse_corruption_files(dict(
        dataset=dict(data_prefix=dict(img_path='c/{folder}/{severity}')),
        geometric=dict(ann_file='c/{folder}/{severity}labels/'), folders='reobench'))
    assert files.folders == REOBENCH_FOLDERS
    assert files.changes(Condition('cloud', 3)) == dict(data_prefix=dict(img_path='c/clouds/3'))
    assert files.changes(Condition('rotate', 2)) == dict(
        data_prefix=dict(img_path='c/rotate/2'), ann_file='c/rotate/2labels/')
    assert files.reads(Condition('rotate', 2)) and not files.reads(Condition())
    only = parse_corruption_files(dict(dataset=dict(data_root='x/{corruption}'),
                                       corruptions=['haze']))
    assert only.reads(Condition('haze', 1)) and not only.reads(Condition('cloud', 1))
    # without a geometric part the geometric corruptions are synthesised
    assert not only.reads(Condition('rotate', 1))
    options = RobustnessOptions.create(dict(corruption_files=dict(dataset=dict(data_root='{folder}'))))
    assert options.to_dict()['corruption_files'] == dict(dataset=dict(data_root='{folder}'),
                                                         folders={})


@pytest.mark.parametrize('value, message', [
    ('x', 'corruption_files must be a dict'),
    (dict(dataset=dict(data_root='a/{corruptoin}')), r"names \['corruptoin'\]"),
    (dict(dataset=dict(data_root='a'), root='b'), r"unknown key\(s\) \['root'\]"),
    (dict(dataset={}), 'corruption_files.dataset must be'),
    (dict(dataset=dict(data_root='a'), folders=dict(clouds='x')), 'clouds'),
    (dict(dataset=dict(data_root='a'), folders='dota'), "folders must be 'reobench'"),
])
def test_bad_corruption_files_are_refused(value, message):
    with pytest.raises(SweepError, match=message):
        RobustnessOptions.create(dict(corruption_files=value))


def test_corruption_files_with_several_corruption_seeds_are_refused():
    with pytest.raises(SweepError, match='corruption_files with corruption_seeds > 1'):
        RobustnessOptions.create(dict(corruption_files=dict(dataset=dict(data_root='a')),
                                      corruption_seeds=2))


def test_corruption_files_with_a_temperature_split_are_refused():
    with pytest.raises(SweepError, match='corruption_files with temperature_split'):
        RobustnessOptions.create(dict(corruption_files=dict(dataset=dict(data_root='a')),
                                      temperature_scaling=True, temperature_split=2))


# ----------------------------------------------------------------------------- a run
def _write_released(root, data_root):
    """Folders in the released segmentation layout: 'haze' at severity 3 holding the
    images of haze at severity 5 (so a run that reads them is told apart from one that
    synthesises), 'rotate_image' at severity 2 with the rotated images and labels."""
    for path in sorted(glob.glob(osp.join(data_root, 'img_dir', 'val', '*.png'))):
        name = osp.basename(path)
        image = cv2.imread(path, cv2.IMREAD_COLOR)
        label = cv2.imread(osp.join(data_root, 'ann_dir', 'val', name), cv2.IMREAD_UNCHANGED)
        haze = osp.join(root, 'haze', 'severity_3', 'val')
        os.makedirs(haze, exist_ok=True)
        cv2.imwrite(osp.join(haze, name), corrupt(image, 'haze', 5))
        rotated, transform = corrupt_geometric(image, 'rotate', 2, key=name)
        for kind, array in (('val', rotated), ('label', transform.warp_label_map(label, 0))):
            folder = osp.join(root, 'rotate_image', 'severity_2', kind)
            os.makedirs(folder, exist_ok=True)
            cv2.imwrite(osp.join(folder, name), array)


def _runner(tmp_path, data_root, work, files=None, corruptions=('haze', 'rotate'),
            severities=(2, 3), prefix=None, shard=None):
    cfg = Config.fromfile(SEG_DEMO_CONFIG)
    cfg.work_dir = str(tmp_path / work)
    cfg.log_level = 'WARNING'
    cfg.custom_hooks = []
    cfg.test_dataloader.dataset.data_root = data_root
    if prefix is not None:
        cfg.test_dataloader.dataset.data_prefix = prefix
    cfg.test_dataloader.num_workers = 0
    cfg.test_dataloader.persistent_workers = False
    checkpoint = str(tmp_path / 'model.pth')
    if not osp.isfile(checkpoint):
        untrained_checkpoint(SEG_DEMO_CONFIG, checkpoint)
    cfg.load_from = checkpoint
    cfg.test_cfg = dict(type='RobustnessTestLoop', corruptions=list(corruptions),
                        severities=list(severities), plots=False, corruption_files=files,
                        shard=shard)
    return Runner.from_cfg(cfg)


@pytest.mark.slow  # 7 s or more: left out of make test-fast
def test_a_sweep_reads_the_released_layout_instead_of_synthesising(demo_data, tmp_path):
    data_root = osp.join(demo_data, 'potsdam')
    released = str(tmp_path / 'Potsdam_corrupted')
    _write_released(released, data_root)
    files = dict(dataset=dict(data_prefix=dict(img_path=IMAGES.format(root=released))),
                 geometric=dict(data_prefix=dict(seg_map_path=LABELS.format(root=released))),
                 folders=dict(rotate='rotate_image'), corruptions=['haze', 'rotate'])
    # only the folders that exist are asked for: haze at 3, rotate at 2
    runner = _runner(tmp_path, data_root, 'files', files, corruptions=('haze', ),
                     severities=(3, ))
    runner.test()
    runner = _runner(tmp_path, data_root, 'files_rotate', files, corruptions=('rotate', ),
                     severities=(2, ))
    runner.test()
    synthesised = _runner(tmp_path, data_root, 'synth', None, corruptions=('haze', 'rotate'),
                          severities=(2, 5))
    synthesised.test()
    haze, rotate = condition_records(str(tmp_path / 'files')), condition_records(str(tmp_path / 'files_rotate'))
    synth = condition_records(str(tmp_path / 'synth'))
    # the files were read: haze@3 holds haze at 5, and equals the synthesised haze@5
    assert haze['haze@3']['source'] == 'files' and 'source' not in synth['haze@5']
    assert haze['haze@3']['metrics'] == synth['haze@5']['metrics']
    assert haze['clean']['metrics'] == synth['clean']['metrics']
    assert haze['haze@3']['fingerprint']['data']['file_set']['samples'] == 3
    # the rotated files with their labels: equal to a plain run on those folders
    alone = _runner(tmp_path, released, 'alone', None, corruptions=('haze', ),
                    severities=(1, ), prefix=dict(img_path='rotate_image/severity_2/val',
                                                  seg_map_path='rotate_image/severity_2/label'))
    alone.test()
    assert rotate['rotate@2']['metrics'] == condition_records(str(tmp_path / 'alone'))['clean']['metrics']
    assert rotate['rotate@2']['metrics'] != synth['clean']['metrics']
    # the report and the provenance say which conditions came from files
    report = (tmp_path / 'files' / 'report.md').read_text()
    assert 'Read from files (corrupted test sets on disk, not synthesised): haze@3' in report
    assert 'synthesised on the fly' in (tmp_path / 'synth' / 'report.md').read_text()
    with open(tmp_path / 'files' / 'results.json') as handle:
        extra = json.load(handle)['provenance']['extra']
    assert extra['read_from_files'] == ['haze@3']
    # a folder read before and synthesised now (or the reverse) is refused, not reused
    with pytest.raises(FingerprintMismatchError, match='the files read for haze@3'):
        _runner(tmp_path, data_root, 'files', None, corruptions=('haze', ),
                severities=(3, )).test()
    # a changed released file is refused too
    first = sorted(glob.glob(osp.join(released, 'haze', 'severity_3', 'val', '*.png')))[0]
    with open(first, 'ab') as handle:
        handle.write(b'\0')
    with pytest.raises(FingerprintMismatchError, match='the files read for haze@3'):
        _runner(tmp_path, data_root, 'files', files, corruptions=('haze', ),
                severities=(3, )).test()


@pytest.mark.slow  # 3 s or more: left out of make test-fast
def test_shards_of_a_run_reading_files_merge_to_its_numbers(demo_data, tmp_path):
    """A run reading haze from files in two shards, merged: the records and numbers of the
    run in one piece (each file-read record's fingerprint adds its own file set to the
    run's, which the merge must tell apart from a record of other inputs)."""
    from reobench_mm.robustness.shards import merge_sweeps
    data_root = osp.join(demo_data, 'potsdam')
    released = str(tmp_path / 'Potsdam_corrupted')
    _write_released(released, data_root)
    files = dict(dataset=dict(data_prefix=dict(img_path=IMAGES.format(root=released))),
                 corruptions=['haze'])
    options = dict(files=files, corruptions=('haze', 'gaussian_noise'), severities=(3, ))
    _runner(tmp_path, data_root, 'whole', **options).test()
    for i in range(2):
        _runner(tmp_path, data_root, f'shard{i}', shard=f'{i}/2', **options).test()
    merged = merge_sweeps([str(tmp_path / 'shard0'), str(tmp_path / 'shard1')],
                          str(tmp_path / 'merged'), plots=False)
    whole = condition_records(str(tmp_path / 'whole'))
    assert whole['haze@3']['source'] == 'files'
    for key, record in whole.items():
        shard = condition_records(str(tmp_path / f'shard{int(key == "haze@3")}'))
        assert shard[key]['metrics'] == record['metrics'], key
    with open(merged.files['results.json']) as handle:
        got = json.load(handle)['numbers']
    with open(tmp_path / 'whole' / 'results.json') as handle:
        assert got == json.load(handle)['numbers']


def test_released_files_that_cannot_be_read_are_refused_before_the_run(demo_data, tmp_path):
    """A released image of another size than its label map: one error naming both files
    and sizes before the first condition (the evaluator's IndexError, naming neither,
    at the end of the condition otherwise)."""
    data_root = osp.join(demo_data, 'potsdam')
    released = str(tmp_path / 'Potsdam_corrupted')
    _write_released(released, data_root)
    images = sorted(glob.glob(osp.join(released, 'rotate_image', 'severity_2', 'val', '*')))
    small = cv2.imread(images[0])[:64, :64]
    cv2.imwrite(images[0], small)
    label = images[0].replace(osp.join('severity_2', 'val'), osp.join('severity_2', 'label'))
    size = cv2.imread(label, cv2.IMREAD_UNCHANGED).shape
    files = dict(dataset=dict(data_prefix=dict(img_path=IMAGES.format(root=released))),
                 geometric=dict(data_prefix=dict(seg_map_path=LABELS.format(root=released))),
                 folders=dict(rotate='rotate_image'), corruptions=['rotate'])
    with pytest.raises(SweepError, match=rf'the files of rotate@2: 1 of its \d+ image and '
                       rf'label files cannot be decoded: {images[0]} is 64×64 but its label '
                       rf'map {label} is {size[0]}×{size[1]}'):
        _runner(tmp_path, data_root, 'files', files, corruptions=('rotate', ),
                severities=(2, )).test()
    assert condition_records(str(tmp_path / 'files')) == {}
