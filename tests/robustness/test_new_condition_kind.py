"""A new kind of condition, added from outside the package as docs/development.md walks
through it: "flip", the test set mirrored left to right (images and labels), declared by
an option of its own (``flips=['h']``), registered with one ConditionKind and one
ResultBlock. No package file knows it; the test checks it goes through every path of a
run: the per-condition loop (its number equal to MMSeg's stock test loop on a pipeline
that flips), fan-out, shards and their merge, resume, the report, read-back, the logger
keys and the validation loop."""
import copy
import json
import os
import os.path as osp
from dataclasses import dataclass
from typing import Any, ClassVar, Dict

import pytest
import torch
from mmengine.config import Config
from mmengine.runner import Runner

from reobench_corruptions.condition import Condition
from reobench_mm.analysis.result_blocks import ResultBlock
from reobench_mm.analysis.results_file import read_results
from reobench_mm.errors import SweepError
from reobench_mm.robustness.conditions.kinds import (ConditionKind, register_condition_kind,
                                               unregister_condition_kind)
from reobench_mm.robustness.options import RobustnessOptions
from reobench_mm.robustness.plan import ConditionOnBase
from reobench_mm.robustness.shards import merge_sweeps
from helpers import SEG_DEMO_CONFIG
from sweep_helpers import condition_records, robustness_cfg

pytestmark = pytest.mark.slow  # several runs of the demo model


# ----------------------------------------------------------------------------- the kind
@dataclass(frozen=True, eq=False)
class FlipCondition(ConditionOnBase):
    """The test set mirrored left to right (``flip/<name>``)."""
    name: str
    base: Condition
    prefix: ClassVar[str] = 'flip'

    @property
    def label(self) -> str:
        return self.name

    def own_settings(self) -> Dict[str, Any]:
        return dict(flip=self.name)


def parse_flips(value, protocol):
    del protocol
    if value is None:
        return ()
    if isinstance(value, tuple):
        return value
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SweepError(f'flips must be a list of names, got {value!r}')
    return tuple(value)


class Mirror:
    """The batch transform: images and label maps mirrored; it counts the images."""

    def __init__(self, condition, context):
        self.images = 0

    def apply(self, batch):
        samples = []
        for sample in batch['data_samples']:
            sample = sample.clone()
            sample.gt_sem_seg.data = sample.gt_sem_seg.data.flip(-1)
            samples.append(sample)
        self.images += len(samples)
        return dict(batch, inputs=[x.flip(-1) for x in batch['inputs']],
                    data_samples=samples)

    def record(self, value):
        return dict(images=self.images)


def flip_block(clean, clean_stats, records, stats, metric, intervals):
    return dict(metric=metric, clean=clean['result']['value'],
                flips=[dict(name=c.label, value=r['result']['value'],
                            images=r['flip_run']['images']) for c, r in records.items()])


FLIP_KIND = ConditionKind(
    'flip', FlipCondition, 'flips', 'flips', parse_flips,
    lambda entries, clean: [FlipCondition(n, clean) for n in entries],
    lambda entries: list(entries) or None, flip_block, batches=Mirror)
FLIP_BLOCK = ResultBlock(
    'flips', 'flip',
    lambda block: {f"flip/{f['name']}/{block['metric']}": f['value'] for f in block['flips']},
    lambda block, plots: ['## Mirrored test set', ''] + [
        f"- {f['name']}: {block['metric']} {f['value']:.2f} ({f['images']} images)"
        for f in block['flips']] + [''])


@pytest.fixture
def flip_kind():
    register_condition_kind(FLIP_KIND, FLIP_BLOCK)
    try:
        yield FLIP_KIND
    finally:
        unregister_condition_kind('flip')


# ----------------------------------------------------------------------------- runs
def _cfg(demo_data, checkpoint, work_dir, **options):
    return robustness_cfg(SEG_DEMO_CONFIG, osp.join(demo_data, 'potsdam'), work_dir,
                          checkpoint, corruptions=['haze', 'gaussian_noise'],
                          severities=[2], flips=['h'], **options)


def _stock_flipped(demo_data, checkpoint, work_dir):
    """MMSeg's own TestLoop on a test pipeline that mirrors every image and label map
    (the flip kept out of the metainfo, so that the model does not flip back)."""
    cfg = Config.fromfile(SEG_DEMO_CONFIG)
    cfg.work_dir, cfg.log_level, cfg.custom_hooks = work_dir, 'WARNING', []
    loader = cfg.test_dataloader
    loader.dataset.data_root = osp.join(demo_data, 'potsdam')
    loader.num_workers, loader.persistent_workers = 0, False
    pipeline = loader.dataset.pipeline
    pack = copy.deepcopy(pipeline[-1])
    pack['meta_keys'] = tuple(k for k in pack['meta_keys'] if not k.startswith('flip'))
    loader.dataset.pipeline = pipeline[:-1] + [
        dict(type='RandomFlip', prob=1.0, direction='horizontal'), pack]
    cfg.test_cfg = dict(type='TestLoop')
    cfg.load_from = checkpoint
    return Runner.from_cfg(cfg).test()['mIoU']


def test_the_kind_is_refused_until_registered_and_checked_when_it_is(flip_kind):
    options = RobustnessOptions.create(dict(flips=['h', 'v'], corruptions=['haze'],
                                            severities=[1]))
    assert [c.key for c in options.all_conditions] == ['clean', 'haze@1', 'flip/h', 'flip/v']
    assert options.to_dict()['flips'] == ['h', 'v']
    with pytest.raises(SweepError, match='flips must be a list of names'):
        RobustnessOptions.create(dict(flips='h'))
    with pytest.raises(SweepError, match='condition kind .flop.: its option is kind .flip.'):
        register_condition_kind(
            ConditionKind('flop', type('Flop', (FlipCondition, ), {'prefix': 'flop'}),
                          'flips', 'flops', parse_flips, FLIP_KIND.conditions,
                          FLIP_KIND.to_dict, flip_block),
            ResultBlock('flops', 'flop', FLIP_BLOCK.metric_keys, FLIP_BLOCK.report_lines))
    unregister_condition_kind('flip')
    try:
        with pytest.raises(SweepError, match="'flips' is not an option of RobustnessTestLoop"):
            RobustnessOptions.create(dict(flips=['h']))
    finally:
        register_condition_kind(FLIP_KIND, FLIP_BLOCK)


def test_a_new_kind_goes_through_every_path_of_a_run(flip_kind, demo_data, seg_model,
                                                     tmp_path):
    checkpoint = seg_model.checkpoint
    expected = _stock_flipped(demo_data, checkpoint, str(tmp_path / 'stock'))

    # the per-condition loop: the stock loop's number on the mirrored test set
    one = str(tmp_path / 'one')
    runner = Runner.from_cfg(_cfg(demo_data, checkpoint, one))
    metrics = runner.test()
    assert metrics['flip/h/mIoU'] == pytest.approx(expected, abs=1e-9)
    assert expected != metrics['mIoU']  # the trained model sees the mirror: it counts
    records = condition_records(one)
    assert sorted(records) == ['clean', 'flip/h', 'gaussian_noise@2', 'haze@2']
    images = len(runner.test_loop.dataloader.dataset)
    assert records['flip/h']['flip_run'] == dict(images=images)
    assert records['flip/h']['flip'] == 'h'  # its settings in its record

    # the report, read back
    results = read_results(osp.join(one, 'results.json'))
    block = results.summary.blocks['flips']
    assert block['flips'] == [dict(name='h', value=metrics['flip/h/mIoU'], images=images)]
    with open(osp.join(one, 'report.md'), encoding='utf-8') as handle:
        report = handle.read()
    assert '## Mirrored test set' in report and f'({images} images)' in report

    # fan-out: the same records
    fan = str(tmp_path / 'fan')
    assert Runner.from_cfg(_cfg(demo_data, checkpoint, fan, fan_out=3)).test() == metrics
    assert _numbers(condition_records(fan)) == _numbers(records)

    # resume: a lost record is evaluated again, the others reused
    os.unlink(osp.join(one, 'conditions', 'flip-h.json'))
    runner = Runner.from_cfg(_cfg(demo_data, checkpoint, one))
    assert runner.test() == metrics
    assert [c.key for c in runner.test_loop.outcome.evaluated] == ['flip/h']

    # shards, merged: the run in one piece
    for index in (0, 1):
        Runner.from_cfg(_cfg(demo_data, checkpoint, str(tmp_path / f'shard{index}'),
                             shard=f'{index}/2')).test()
    merged = str(tmp_path / 'merged')
    merge_sweeps([str(tmp_path / 'shard0'), str(tmp_path / 'shard1')], merged, plots=False)
    with open(osp.join(merged, 'results.json'), encoding='utf-8') as handle:
        numbers = json.load(handle)['numbers']
    assert numbers['flips'] == block

    # the validation loop: the same key and number
    cfg = _cfg(demo_data, checkpoint, str(tmp_path / 'val'))
    cfg.val_cfg = dict(type='RobustnessValLoop', corruptions=['haze'], severities=[2],
                       flips=['h'])
    cfg.val_dataloader = cfg.test_dataloader
    runner = Runner.from_cfg(cfg)
    runner.load_checkpoint(checkpoint)
    validated = runner.val_loop.run()
    assert validated['flip/h/mIoU'] == metrics['flip/h/mIoU']


def _numbers(records):
    return {k: (r['result']['value'], r.get('flip_run')) for k, r in records.items()}
