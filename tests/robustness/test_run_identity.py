"""A run's identity and outputs (reobench_mm.robustness.run_identity.RunIdentity,
reobench_mm.robustness.run_outputs.RunOutputs), on the test loop the runner builds from
the demo segmentation config: the source decides the fingerprint and the provenance, the
checkpoint is checked once, a shard writes its manifest with the run's fingerprint."""
import json
import os.path as osp

import pytest
import torch
from mmengine.runner import Runner

from reobench_mm.engine.checkpoint import CheckpointMismatchError
from reobench_mm.fileio import file_sha256
from reobench_mm.robustness.fingerprint import differing_parts
from reobench_mm.robustness.run_identity import RunIdentity
from reobench_mm.robustness.run_outputs import RunOutputs
from helpers import SEG_DEMO_CONFIG
from sweep_helpers import robustness_cfg


def _loop(demo_data, checkpoint, work_dir, **options):
    cfg = robustness_cfg(SEG_DEMO_CONFIG, osp.join(demo_data, 'potsdam'), work_dir,
                         checkpoint, corruptions=['haze', 'cloud'], severities=[1], **options)
    return Runner.from_cfg(cfg).test_loop


def test_the_source_decides_the_fingerprint_and_the_provenance(demo_data,
                                                               untrained_seg_checkpoint,
                                                               tmp_path):
    loop = _loop(demo_data, untrained_seg_checkpoint, str(tmp_path / 'run'))
    identity = loop.identity
    assert isinstance(identity, RunIdentity) and isinstance(loop.outputs, RunOutputs)
    assert identity.checkpoint == untrained_seg_checkpoint  # the runner's load_from
    first = identity.fingerprint
    assert identity.fingerprint is first  # computed once
    assert first['checkpoint_sha256'] == file_sha256(untrained_seg_checkpoint)
    loop.set_source(config=SEG_DEMO_CONFIG, checkpoint=untrained_seg_checkpoint,
                    cfg_options={'model.decode_head.dropout_ratio': 0.2},
                    checkpoint_loaded=True)
    second = identity.fingerprint
    assert [part for part, _ in differing_parts(first, second)] == ['options']
    assert second['cfg_options'] == {'model.decode_head.dropout_ratio': 0.2}
    provenance = identity.provenance(str(tmp_path / 'run'))
    assert provenance['config'] == SEG_DEMO_CONFIG
    assert provenance['checkpoint_sha256'] == first['checkpoint_sha256']
    extra = provenance['extra']
    assert extra['cfg_options'] == {'model.decode_head.dropout_ratio': 0.2}
    assert extra['fingerprint'] == json.loads(json.dumps(second))
    assert extra['evaluated_images'] == len(loop.dataloader.dataset)


def test_a_checkpoint_that_does_not_fit_is_refused_once_unless_a_driver_loaded_it(
        demo_data, untrained_seg_checkpoint, tmp_path):
    bad = str(tmp_path / 'bad.pth')
    state = torch.load(untrained_seg_checkpoint, map_location='cpu', weights_only=False)
    name = next(iter(state['state_dict']))
    state['state_dict'][name] = torch.zeros(3)
    torch.save(state, bad)
    loop = _loop(demo_data, bad, str(tmp_path / 'run'))
    with pytest.raises(CheckpointMismatchError,
                       match=r'mis-shaped keys.*strict_checkpoint=False evaluates it anyway'):
        loop.identity.check_checkpoint()
    loop.set_source(checkpoint=bad, checkpoint_loaded=True)
    loop.identity.check_checkpoint()  # the driver loaded it: not loaded again
    lenient = _loop(demo_data, bad, str(tmp_path / 'lenient'), strict_checkpoint=False)
    lenient.identity.check_checkpoint()


def test_a_shard_writes_its_manifest_with_the_runs_fingerprint(demo_data,
                                                               untrained_seg_checkpoint,
                                                               tmp_path):
    loop = _loop(demo_data, untrained_seg_checkpoint, str(tmp_path / 'run'), shard='1/2')
    path = loop.outputs.write_manifest(loop.options.conditions)
    assert osp.basename(path) == 'shard_1-of-2.json'
    with open(path, encoding='utf-8') as handle:
        manifest = json.load(handle)
    assert manifest['num_conditions'] == 3 == len(loop.options.all_conditions)
    assert sorted(manifest['conditions']) == ['haze@1']  # every 2nd from the 2nd
    assert manifest['fingerprint'] == json.loads(json.dumps(loop.identity.fingerprint))


@pytest.mark.parametrize('source', [
    'reobench_mm/attacks/functional.py', 'reobench_mm/robustness/attack_run.py',
    'reobench_mm/robustness/device_corruption.py', 'reobench_mm/robustness/fan_out.py',
    'reobench_mm/robustness/condition_evaluation.py',
    'reobench_mm/robustness/conditions/attacks.py', 'reobench_mm/engine/precision.py',
    'reobench_corruptions/base.py', 'reobench_mm/transforms/corruption.py'])
def test_a_one_character_change_in_code_that_computes_numbers_changes_the_fingerprint(
        source, tmp_path, monkeypatch):
    """The code part of a record's fingerprint covers every module on the evaluation path
    (an edited attack once reused the records of the code before it): a copy of the
    sources with one character changed in ``source`` gets another code digest."""
    import shutil

    from reobench_mm.robustness import fingerprint
    root = tmp_path / 'src'
    for package in ('reobench_mm', 'reobench_corruptions'):
        shutil.copytree(osp.join(fingerprint.SOURCE_ROOT, package), root / package,
                        ignore=shutil.ignore_patterns('__pycache__'))
    monkeypatch.setattr(fingerprint, 'SOURCE_ROOT', str(root))
    digest = fingerprint._code_fingerprint.__wrapped__
    before = digest()['code_sha256']
    edited = root / source
    edited.write_text(edited.read_text(encoding='utf-8') + '#', encoding='utf-8')
    assert digest()['code_sha256'] != before, f'{source} is not in the code fingerprint'
    # a module added to the evaluation path is covered by being imported there
    (root / 'reobench_mm/attacks/extra_step.py').write_text('STEP = 1\n')
    assert not any(p.endswith('extra_step.py') for p in fingerprint.code_sources(str(root)))
    functional = root / 'reobench_mm/attacks/functional.py'
    functional.write_text(functional.read_text(encoding='utf-8') +
                          '\n\ndef _late():\n    from .extra_step import STEP\n    return STEP\n')
    assert any(p.endswith('attacks/extra_step.py') for p in fingerprint.code_sources(str(root)))
    # and the report's modules are not: rewording a report keeps the records
    report = root / 'reobench_mm/analysis/report.py'
    changed = digest()['code_sha256']
    report.write_text(report.read_text(encoding='utf-8') + '#', encoding='utf-8')
    assert digest()['code_sha256'] == changed
