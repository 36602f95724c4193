"""Silent wrong numbers and lost data, each reproduced and refused or corrected:

- a checkpoint trained on the same classes in another order is refused when a test loop
  loads it (this package's tools, the sweep, the toolboxes' own ``tools/test.py``);
- the label a geometric corruption pads moved label maps with is the one the evaluator
  ignores (``ignore_index=5``: REOBench's Potsdam setting), for the corruption step, the
  calibration metrics and the temperature fit; a written step that pads with another
  label is refused;
- an edited ``temperature.json`` (T = 5, 0, -1) is never used: it is fitted again;
- a YAML config with a tag that runs code is refused by the tools;
- the lock file and the condition records of a work dir are never written through a
  symbolic link;
- a failed write (a full disk) names its file.
"""
import errno
import json
import os
import os.path as osp
import subprocess
import sys

import pytest
import torch
from mmengine.config import Config
from mmengine.runner import Runner

import reobench_mm  # noqa: F401  (registration)
from helpers import PROJECT_ROOT, SEG_DEMO_CONFIG
from reobench_mm.engine.checkpoint import CheckpointError, check_checkpoint_classes
from reobench_mm.engine.workdir import LOCK_FILE, WorkDirLock
from reobench_mm.errors import SweepError
from reobench_mm.evaluation.evaluator_cfg import label_ignore_index
from reobench_mm.fileio import atomic_write_text
from reobench_mm.robustness.sweep import RobustnessSweep
from reobench_mm.robustness.temperature import TEMPERATURE_FILE
from reobench_mm.transforms.placement import place_condition
from reobench_corruptions.condition import Condition
from reobench_mm.utils.config import read_config
from sweep_helpers import sweep_options, untrained_checkpoint

CLASSES = ('impervious_surface', 'building', 'low_vegetation', 'tree', 'car', 'clutter')


def _checkpoint_with_classes(path, classes):
    untrained_checkpoint(SEG_DEMO_CONFIG, path)
    checkpoint = torch.load(path, weights_only=False)
    checkpoint['meta'] = dict(dataset_meta=dict(classes=tuple(classes)))
    torch.save(checkpoint, path)
    return path


# ----------------------------------------------------------------------------- classes

def test_checkpoint_classes_are_checked():
    meta = dict(classes=CLASSES)
    ok = {'meta': {'dataset_meta': {'classes': list(CLASSES)}}}
    check_checkpoint_classes(ok, meta, 'ok.pth')
    check_checkpoint_classes({'meta': {}}, meta, 'old.pth')  # nothing recorded: unchecked
    swapped = {'meta': {'dataset_meta': {'classes': CLASSES[::-1]}}}
    with pytest.raises(CheckpointError, match=r"'swapped.pth' was trained on the classes "
                       r".*same classes in another order"):
        check_checkpoint_classes(swapped, meta, 'swapped.pth')
    fewer = {'meta': {'dataset_meta': {'classes': CLASSES[:5]}}}
    with pytest.raises(CheckpointError, match='5 classes against 6'):
        check_checkpoint_classes(fewer, meta)


@pytest.mark.slow
def test_sweep_and_test_tool_refuse_a_checkpoint_of_other_classes(demo_data, tmp_path):
    checkpoint = _checkpoint_with_classes(str(tmp_path / 'swapped.pth'), CLASSES[::-1])
    options, arguments = sweep_options(osp.join(demo_data, 'potsdam'))
    sweep = RobustnessSweep(SEG_DEMO_CONFIG, checkpoint, work_dir=str(tmp_path / 'sweep'),
                            cfg_options=options, corruptions=['cloud'], severities=[1])
    with pytest.raises(CheckpointError, match='same classes in another order'):
        sweep.run()
    assert not osp.exists(tmp_path / 'sweep' / 'conditions' / 'clean.json')
    result = subprocess.run(
        [sys.executable, osp.join(PROJECT_ROOT, 'tools', 'test.py'), SEG_DEMO_CONFIG,
         checkpoint, '--work-dir', str(tmp_path / 'test'), '--cfg-options', *arguments],
        capture_output=True, text=True, cwd=PROJECT_ROOT)
    assert result.returncode == 2, result.stderr[-2000:]
    assert 'same classes in another order' in result.stderr.splitlines()[-1]


@pytest.mark.slow
def test_toolbox_test_tool_refuses_a_checkpoint_of_other_classes(demo_data, tmp_path):
    """MMSegmentation's own tools/test.py on a config whose test loop is the package's
    (``CorruptionTestLoop``): the loop's hook refuses the checkpoint when MMEngine loads
    it, before any number is computed."""
    import mmseg
    tool = osp.join(osp.dirname(mmseg.__file__), '.mim', 'tools', 'test.py')
    if not osp.isfile(tool):
        pytest.skip(f'mmseg was installed without {tool}')
    checkpoint = _checkpoint_with_classes(str(tmp_path / 'swapped.pth'), CLASSES[::-1])
    _, arguments = sweep_options(osp.join(demo_data, 'potsdam'))
    result = subprocess.run([sys.executable, tool, SEG_DEMO_CONFIG, checkpoint, '--work-dir',
                             str(tmp_path / 'mmseg'), '--cfg-options', *arguments],
                            capture_output=True, text=True, cwd=PROJECT_ROOT)
    assert result.returncode != 0
    assert 'same classes in another order' in result.stderr, result.stderr[-3000:]
    assert 'mIoU' not in result.stdout


# ----------------------------------------------------------------------------- ignore index

def _seg_cfg(data_root, work_dir, ignore_index=5, **test_cfg):
    cfg = Config.fromfile(SEG_DEMO_CONFIG)
    cfg.work_dir = work_dir
    cfg.merge_from_dict(sweep_options(data_root)[0])
    cfg.test_evaluator = dict(type='IoUMetric', iou_metrics=['mIoU'], ignore_index=ignore_index)
    cfg.test_cfg = test_cfg
    # REOBench's ignored label 5 on the demo set, whose label rules name 255 (a pairing the
    # robustness loops refuse, tests/datasets/test_label_rules.py): here it states none
    cfg.test_dataloader.dataset.pop('metainfo', None)
    return cfg


def test_evaluator_ignore_index_is_read():
    assert label_ignore_index(dict(type='IoUMetric')) == 255
    assert label_ignore_index([dict(type='mmseg.IoUMetric', ignore_index=5),
                               dict(type='SegCalibrationMetric', ignore_index=5)]) == 5
    assert label_ignore_index(dict(type='DOTAMetric')) is None
    with pytest.raises(ValueError, match='ignores different labels'):
        label_ignore_index([dict(type='IoUMetric', ignore_index=5),
                            dict(type='SegCalibrationMetric')])


def test_placed_step_pads_with_the_evaluator_label():
    pipeline = [dict(type='LoadImageFromFile'), dict(type='LoadAnnotations'),
                dict(type='PackSegInputs')]
    loader = dict(dataset=dict(type='BaseSegDataset', pipeline=pipeline))
    place_condition(loader, Condition('scale', 5), 'mmseg', ignore_index=5)
    (step, ) = [s for s in pipeline if s['type'] == 'ApplyCorruption']
    assert step['ignore_index'] == 5
    written = dict(dataset=dict(type='BaseSegDataset', pipeline=[
        dict(type='LoadImageFromFile'), dict(type='LoadAnnotations'),
        dict(type='ApplyCorruption', corruption='scale', severity=5),
        dict(type='PackSegInputs')]))
    with pytest.raises(ValueError, match=r'pads moved label maps with ignore_index=255, but '
                       r'the test evaluator ignores label 5'):
        place_condition(written, Condition('scale', 5), 'mmseg', ignore_index=5)


@pytest.mark.slow
def test_padding_of_a_moved_label_map_is_ignored(demo_data, tmp_path):
    """With ``ignore_index=5`` in the evaluator, ``scale`` severity 5 (which pads the
    shrunk label map) scores the same as with a hand-written step that pads with 5, and
    not as with one that pads with 255 (the padding scored as a class); the robustness
    loop's step and calibration metrics ignore 5 too."""
    data = osp.join(demo_data, 'potsdam')
    checkpoint = untrained_checkpoint(SEG_DEMO_CONFIG, str(tmp_path / 'model.pth'))

    def test(name, **loop):
        cfg = _seg_cfg(data, str(tmp_path / name), **loop)
        cfg.load_from = checkpoint
        return Runner.from_cfg(cfg).test()

    auto = test('auto', type='CorruptionTestLoop', corruption='scale', severity=5)
    cfg = _seg_cfg(data, str(tmp_path / 'written'), type='CorruptionTestLoop')
    cfg.load_from = checkpoint
    pipeline = cfg.test_dataloader.dataset.pipeline
    pipeline.insert(2, dict(type='ApplyCorruption', corruption='scale', severity=5,
                            ignore_index=5))
    written = Runner.from_cfg(cfg).test()
    assert auto['mIoU'] == written['mIoU']
    cfg = _seg_cfg(data, str(tmp_path / 'padded_255'), ignore_index=255,
                   type='CorruptionTestLoop', corruption='scale', severity=5)
    cfg.load_from = checkpoint
    assert Runner.from_cfg(cfg).test()['mIoU'] != auto['mIoU']
    runner = Runner.from_cfg(_seg_cfg(data, str(tmp_path / 'robust'),
                                      type='RobustnessTestLoop', corruptions=['scale'],
                                      severities=[5], calibration=True))
    loop = runner.test_loop
    assert {step.ignore_index for step in loop.switch.steps} == {5}
    assert {m.ignore_index for m in loop.evaluator.metrics} == {5}


# ----------------------------------------------------------------------------- temperature

@pytest.mark.slow
@pytest.mark.parametrize('edited', [5.0, 0.0, -1.0])
def test_an_edited_temperature_is_fitted_again(demo_data, tmp_path, edited):
    data = osp.join(demo_data, 'potsdam')
    checkpoint = untrained_checkpoint(SEG_DEMO_CONFIG, str(tmp_path / 'model.pth'))
    work = str(tmp_path / 'sweep')
    kwargs = dict(work_dir=work, cfg_options=sweep_options(data)[0], corruptions=['cloud'],
                  severities=[1], temperature_scaling=True, temperature_split=1, plots=False)
    RobustnessSweep(SEG_DEMO_CONFIG, checkpoint, **kwargs).run()
    path = osp.join(work, TEMPERATURE_FILE)
    with open(path) as handle:
        record = json.load(handle)
    fitted = record['temperature']
    os.remove(osp.join(work, 'conditions', 'cloud_s1.json'))  # one condition still to do
    record['temperature'] = edited
    with open(path, 'w') as handle:
        json.dump(record, handle)
    RobustnessSweep(SEG_DEMO_CONFIG, checkpoint, **kwargs).run()
    with open(path) as handle:
        again = json.load(handle)
    from reobench_mm.robustness.store import record_digest
    assert again['temperature'] == fitted and again['digest'] == record_digest(again)
    with open(osp.join(work, 'results.json')) as handle:
        shown = json.load(handle)['provenance']['extra']['temperature']['temperature']
    assert shown == fitted


# ----------------------------------------------------------------------------- yaml

def test_yaml_config_that_runs_code_is_refused(tmp_path):
    marker = tmp_path / 'ran'
    evil = tmp_path / 'evil.yaml'
    evil.write_text(f"default_scope: mmseg\nx: !!python/object/apply:os.system ['touch {marker}']\n")
    with pytest.raises(ValueError, match="holds a YAML tag that would run code"):
        read_config(str(evil))
    assert not marker.exists()
    child = tmp_path / 'child.yml'
    child.write_text("_base_: ['evil.yaml']\nother: 1\n")
    with pytest.raises(ValueError, match='evil.yaml'):
        read_config(str(child))
    assert not marker.exists()
    plain = tmp_path / 'plain.yaml'
    plain.write_text('default_scope: mmseg\nvalue: [1, 2]\n')
    assert read_config(str(plain)).value == [1, 2]
    with pytest.raises(ValueError, match='is a folder, not a config file'):
        read_config(str(tmp_path))


# ----------------------------------------------------------------------------- links

def test_lock_file_is_never_a_link(tmp_path):
    target = tmp_path / 'precious.txt'
    target.write_text('keep me')
    work = tmp_path / 'work'
    work.mkdir()
    os.symlink(target, work / LOCK_FILE)
    with pytest.raises(SweepError, match='is a symbolic link'):
        WorkDirLock(str(work)).acquire()
    assert target.read_text() == 'keep me'


def test_a_linked_record_is_not_reused_nor_written_through(tmp_path):
    from reobench_mm.evaluation.keys import get_task
    from reobench_mm.robustness.plan import SweepPlan
    from reobench_mm.robustness.store import ConditionStore
    target = tmp_path / 'elsewhere.json'
    target.write_text('{"keep": true}')
    (tmp_path / 'conditions').mkdir()
    os.symlink(target, tmp_path / 'conditions' / 'clean.json')
    plan = SweepPlan.create(['cloud'], [1])
    store = ConditionStore(str(tmp_path), plan.condition, get_task('segmentation'), False,
                           lambda condition: {'seed': 0})
    assert 'is a symbolic link' in store.reuse_problem(plan.clean)
    store.write(plan.clean, {'mIoU': 50.0, 'aAcc': 80.0, 'mAcc': 60.0}, 1.0)
    assert not osp.islink(tmp_path / 'conditions' / 'clean.json')
    assert target.read_text() == '{"keep": true}'
    assert store.reuse_problem(plan.clean) is None


def test_a_failed_write_names_its_file(tmp_path, monkeypatch):
    def full(fd):
        raise OSError(errno.ENOSPC, 'No space left on device')

    monkeypatch.setattr(os, 'fsync', full)
    path = str(tmp_path / 'results.json')
    with pytest.raises(OSError) as info:
        atomic_write_text(path, 'x')
    assert info.value.filename == path and info.value.errno == errno.ENOSPC
    assert os.listdir(tmp_path) == []  # no temporary file left behind


@pytest.mark.slow  # 3 s or more: left out of make test-fast
def test_shard_folders_with_glob_characters_are_merged(demo_data, tmp_path):
    """A work dir whose name holds ``[`` and ``]``: its shard manifests are found
    (matched literally, not as a glob pattern)."""
    from reobench_mm.robustness.shards import merge_sweeps
    checkpoint = untrained_checkpoint(SEG_DEMO_CONFIG, str(tmp_path / 'model.pth'))
    options = sweep_options(osp.join(demo_data, 'potsdam'))[0]
    folders = [str(tmp_path / f'shard[{i}]') for i in range(2)]
    for index, folder in enumerate(folders):
        RobustnessSweep(SEG_DEMO_CONFIG, checkpoint, work_dir=folder, cfg_options=options,
                        corruptions=['cloud'], severities=[1], shard=f'{index}/2',
                        plots=False).run()
    report = merge_sweeps(folders, str(tmp_path / 'merged'), plots=False)
    assert [c.key for c in report.summary.conditions] == ['clean', 'cloud@1']


def test_the_single_condition_loop_names_the_loop_of_other_options(demo_data, tmp_path):
    cfg = Config.fromfile(SEG_DEMO_CONFIG)
    cfg.work_dir = str(tmp_path)
    cfg.merge_from_dict(sweep_options(osp.join(demo_data, 'potsdam'))[0])
    cfg.test_cfg = dict(type='CorruptionTestLoop', severites=3)
    with pytest.raises(ValueError, match=r"'severites' is not an option of CorruptionTestLoop "
                       r"\(did you mean 'severity'\?\).*RobustnessTestLoop"):
        Runner.from_cfg(cfg).test_loop
