"""Corruption-aware training: RandomCorruption in the real demo training pipelines
(deterministic draws whatever the workers, the batch size or the rerun; one label-moving
code path with ApplyCorruption; the draw distribution; a training step of each robust
demo config), and the held-out protocol of RobustnessTestLoop and the report."""
import copy
import hashlib
import json
import os.path as osp

import mmcv
import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.hooks import Hook
from mmengine.registry import DefaultScope
from mmengine.runner import Runner

import reobench_mm  # noqa: F401  (registration)
from helpers import PROJECT_ROOT, SEG_DEMO_CONFIG
from reobench_mm.analysis.report import make_provenance, write_report
from reobench_mm.analysis.results_file import read_results
from reobench_mm.analysis.results import aggregate
from reobench_corruptions import (corrupt, corrupt_geometric, get_corruption,
                                     list_corruptions)
from reobench_mm.datasets.epoch import EpochIndexSampler
from reobench_mm.registry import DATASETS
from reobench_mm.errors import SweepError
from reobench_mm.robustness.held_out import check_held_out, seen_in_training
from reobench_mm.robustness.switching import robustness_metrics
from reobench_mm.transforms import ApplyCorruption, RandomCorruption, move_boxes
from reobench_mm.transforms.random_corruption import place_random_corruption

SEG_ROBUST = osp.join(PROJECT_ROOT, 'configs', 'demo',
                      'upernet_r18-tiny_1xb4-600i_demo-potsdam-128x128_robust.py')
DET_ROBUST = osp.join(PROJECT_ROOT, 'configs', 'demo',
                      'oriented-rcnn-le90_r18-tiny_fpn_1xb2-600i_demo-dior-256x256_robust.py')
SENSOR = list_corruptions('reobench', 'sensor')
#: what the probe pipelines pack into each sample's metainfo
PROBE_KEYS = ('img_path', 'corruption', 'severity', 'data_epoch')
VERSIONS = {'numpy': '0', 'torch': '0'}
TASKS = {'seg': (SEG_ROBUST, 'potsdam'), 'det': (DET_ROBUST, 'dior')}


def _step_position(pipeline) -> int:
    (position, ) = [i for i, step in enumerate(pipeline) if step['type'] == 'RandomCorruption']
    return position


def _robust_cfg(task: str, demo_data: str, work_dir: str = None,
                placed: bool = True) -> Config:
    """The robust demo config of ``task`` on the demo data, no workers; with ``placed``,
    its training pipeline as ``EpochIndexedDataset`` builds it (the wrapper's corruption
    step put where the placement rules say, so that tests can cut the pipeline there)."""
    path, folder = TASKS[task]
    cfg = Config.fromfile(path)
    if placed:
        dataset = cfg.train_dataloader.dataset
        place_random_corruption(dataset.dataset.pipeline, dataset.pop('corruption'))
    root = osp.join(demo_data, folder)
    options = {'train_dataloader.dataset.dataset.data_root': root, 'log_level': 'WARNING'}
    for split in ('val', 'test'):
        options[f'{split}_dataloader.dataset.data_root'] = root
    for split in ('train', 'val', 'test'):
        options[f'{split}_dataloader.num_workers'] = 0
        options[f'{split}_dataloader.persistent_workers'] = False
    cfg.merge_from_dict(options)
    if work_dir is not None:
        cfg.work_dir = work_dir
    return cfg


def _probe_loader_cfg(cfg: Config, workers: int, batch: int, sampler=None) -> dict:
    """The config's training dataloader with its pipeline cut right after RandomCorruption
    and packed with the draw in the metainfo (the later crop/flip/resize steps draw from
    the workers' global random state, which is not what is tested here)."""
    loader = copy.deepcopy(cfg.train_dataloader.to_dict())
    inner = loader['dataset']['dataset']
    pipeline = inner['pipeline']
    pack = dict(pipeline[-1], meta_keys=PROBE_KEYS)
    inner['pipeline'] = pipeline[:_step_position(pipeline) + 1] + [pack]
    loader.update(num_workers=workers, batch_size=batch, persistent_workers=workers > 0)
    if sampler is not None:
        loader['sampler']['sampler'] = sampler
    return loader


def _record(batches, count: int) -> list:
    """``[(file name, epoch, corruption, severity, sha256 of the packed image)]`` of the
    first ``count`` samples."""
    rows = []
    for batch in batches:
        for image, sample in zip(batch['inputs'], batch['data_samples']):
            meta = sample.metainfo
            rows.append((osp.basename(meta['img_path']), meta['data_epoch'],
                         meta['corruption'], meta['severity'],
                         hashlib.sha256(image.numpy().tobytes()).hexdigest()))
        if len(rows) >= count:
            break
    assert len(rows) >= count
    return rows[:count]


def _draw_table(rows) -> dict:
    table = {}
    for name, epoch, corruption, severity, digest in rows:
        assert (name, epoch) not in table, f'{name} twice in epoch {epoch}'
        table[name, epoch] = (corruption, severity, digest)
    return table


def _reference_digest(path: str, corruption: str, severity: int, epoch: int) -> str:
    """The packed image the engine gives for this draw (independent of the pipeline):
    the decoded file, corrupted with the key '<file name>|epoch=<e>', as C×H×W."""
    image = mmcv.imread(path)
    if corruption != 'clean':
        options = {'channel_order': 'bgr'} \
            if 'channel_order' in get_corruption(corruption).options else {}
        image = corrupt(image, corruption, severity, seed=0,
                        key=f'{osp.basename(path)}|epoch={epoch}', **options)
    return hashlib.sha256(np.ascontiguousarray(image.transpose(2, 0, 1)).tobytes()).hexdigest()


# ----------------------------------------------------------------------- determinism

@pytest.mark.slow  # 7 s or more: left out of make test-fast
@pytest.mark.parametrize('task', ['seg', 'det'])
def test_draws_do_not_depend_on_workers_batch_size_or_rerun(demo_data, task):
    """The demo robust config's real training dataloader (Runner.build_dataloader,
    EpochIndexSampler over InfiniteSampler, EpochIndexedDataset), 2 passes: the condition
    and the image bytes of every (image, epoch) are the same with 0 or 2 workers, batch
    size 1 or 3 and on a rerun, and equal the engine's output for the documented key;
    the epoch advances after one pass; epochs draw differently; DefaultSampler with
    set_epoch gives the same table."""
    cfg = _robust_cfg(task, demo_data)
    root = cfg.train_dataloader.dataset.dataset.data_root
    tables = []
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        for workers, batch in [(0, 1), (2, 3), (0, 3), (2, 1), (0, 1)]:
            loader = Runner.build_dataloader(_probe_loader_cfg(cfg, workers, batch), seed=0)
            assert isinstance(loader.sampler, EpochIndexSampler) and loader.sampler.infinite
            size = len(loader.dataset)
            rows = _record(iter(loader), 2 * size)
            # one pass of the infinite sampler is epoch 0 (every image once), then epoch 1
            assert [r[1] for r in rows] == [0] * size + [1] * size, rows
            assert sorted(r[0] for r in rows[:size]) == sorted(r[0] for r in rows[size:])
            tables.append(_draw_table(rows))
            del loader
        # the epoch-based sampler: set_epoch before each epoch
        epochs = {}
        default = dict(type='DefaultSampler', shuffle=True)
        for workers, batch in [(2, 3), (0, 1)]:
            loader = Runner.build_dataloader(
                _probe_loader_cfg(cfg, workers, batch, sampler=default), seed=0)
            rows = []
            for epoch in (0, 1):
                loader.sampler.set_epoch(epoch)
                got = _record(list(loader), len(loader.dataset))
                assert {r[1] for r in got} == {epoch}
                rows += got
            epochs[workers, batch] = _draw_table(rows)
    assert len(tables[0]) == 2 * size and size >= 3
    for table in tables[1:] + list(epochs.values()):
        assert table == tables[0]
    table = tables[0]
    names = sorted({name for name, _ in table})
    # epochs differ for some samples; the pool is the config's (sensor), prob 0.5
    assert any(table[n, 0][:2] != table[n, 1][:2] for n in names), table
    drawn = [v[0] for v in table.values()]
    assert set(drawn) <= set(SENSOR) | {'clean'}
    assert 'clean' in drawn and set(drawn) - {'clean'}, drawn
    # the bytes are the engine's for the documented key (clean: the decoded file)
    folder = {'seg': osp.join(root, 'img_dir', 'train'),
              'det': osp.join(root, 'JPEGImages-trainval')}[task]
    for (name, epoch), (corruption, severity, digest) in table.items():
        assert digest == _reference_digest(osp.join(folder, name), corruption, severity,
                                           epoch), (name, epoch, corruption, severity)


@pytest.mark.parametrize('world_size', [2, 3])
def test_infinite_sampler_epoch_is_one_pass_per_rank(monkeypatch, world_size):
    """With an infinite sampler each rank's epoch advances after its share of the
    data: ranks together cover the whole data set once per epoch."""
    import mmengine.dataset.sampler as mmengine_sampler

    import reobench_mm.datasets.epoch as epoch_module
    dataset = list(range(6))
    per_rank = {}
    for rank in range(world_size):
        monkeypatch.setattr(mmengine_sampler, 'get_dist_info', lambda r=rank: (r, world_size))
        monkeypatch.setattr(epoch_module, 'get_dist_info', lambda r=rank: (r, world_size))
        sampler = EpochIndexSampler(dataset, dict(type='InfiniteSampler', shuffle=True),
                                    seed=3)
        stream = iter(sampler)
        per_rank[rank] = [next(stream) for _ in range(3 * 6 // world_size)]
    share = 6 // world_size
    for epoch in range(3):
        indices = []
        for rank in range(world_size):
            packed = per_rank[rank][epoch * share:(epoch + 1) * share]
            assert [p // 6 for p in packed] == [epoch] * share, (rank, per_rank[rank])
            indices += [p % 6 for p in packed]
        assert sorted(indices) == list(range(6)), (epoch, per_rank)


def test_infinite_sampler_epochs_are_exact_when_ranks_do_not_divide_the_data(monkeypatch):
    """7 images on 2 ranks: InfiniteSampler's global stream is one permutation after
    another and rank r takes its positions r, r + 2, ...; the first 7 indices of both
    ranks are the first two passes, each (image, epoch) exactly once."""
    import mmengine.dataset.sampler as mmengine_sampler

    import reobench_mm.datasets.epoch as epoch_module
    pairs = []
    for rank in range(2):
        monkeypatch.setattr(mmengine_sampler, 'get_dist_info', lambda r=rank: (r, 2))
        monkeypatch.setattr(epoch_module, 'get_dist_info', lambda r=rank: (r, 2))
        stream = iter(EpochIndexSampler(list(range(7)), dict(type='InfiniteSampler'), seed=0))
        pairs += [(p % 7, p // 7) for p in (next(stream) for _ in range(7))]
    assert sorted(pairs) == [(i, e) for i in range(7) for e in (0, 1)], sorted(pairs)


# ----------------------------------------------------------------------- labels

def _samples(task: str, demo_data: str, count: int = 2) -> list:
    """Training samples of the robust demo config, loaded by its pipeline's steps
    before RandomCorruption (image, label map or rotated boxes)."""
    cfg = _robust_cfg(task, demo_data)
    inner = copy.deepcopy(cfg.train_dataloader.dataset.dataset.to_dict())
    inner['pipeline'] = inner['pipeline'][:_step_position(inner['pipeline'])]
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        dataset = DATASETS.build(inner)
        return [dataset[i] for i in range(count)]


@pytest.mark.parametrize('task', ['seg', 'det'])
@pytest.mark.slow  # 3 s or more: left out of make test-fast
def test_geometric_draws_move_labels_as_apply_corruption_and_the_engine(demo_data, task):
    """For rotate, translate and scale drawn by RandomCorruption, the image, the label
    map and the rotated boxes are those of ApplyCorruption with the same condition and
    draw key, and those of corrupt_geometric + warp_label_map / move_boxes."""
    step = RandomCorruption(corruptions='geometric', prob=1.0, seed=0)
    found = set()
    for sample in _samples(task, demo_data):
        for epoch in range(8):
            results = dict(copy.deepcopy(sample), data_epoch=epoch)
            key = f'{osp.basename(results["img_path"])}|epoch={epoch}'
            condition = step.draw(results)
            out = step(copy.deepcopy(results))
            assert (out['corruption'], out['severity']) == condition.pair
            corruption, severity = condition.pair
            found.add(corruption)
            same = ApplyCorruption(corruption, severity, seed=0)
            same.draw_key = step.draw_key  # the same key, on this instance only
            ref = same(copy.deepcopy(results))
            image, geometry = corrupt_geometric(results['img'], corruption, severity, seed=0,
                                                key=key, border='reflect')
            np.testing.assert_array_equal(out['img'], ref['img'])
            np.testing.assert_array_equal(out['img'], image)
            assert not np.array_equal(out['img'], results['img'])
            if task == 'seg':
                expected = geometry.warp_label_map(results['gt_seg_map'], 255)
                np.testing.assert_array_equal(out['gt_seg_map'], ref['gt_seg_map'])
                np.testing.assert_array_equal(out['gt_seg_map'], expected)
                assert not np.array_equal(expected, results['gt_seg_map'])
            else:
                assert type(results['gt_bboxes']).__name__ == 'RotatedBoxes'
                expected = move_boxes(results['gt_bboxes'], geometry, 'le90')
                assert torch.equal(out['gt_bboxes'].tensor, ref['gt_bboxes'].tensor)
                assert torch.equal(out['gt_bboxes'].tensor, expected.tensor)
                assert not torch.equal(expected.tensor, results['gt_bboxes'].tensor)
                np.testing.assert_array_equal(out['gt_bboxes_labels'],
                                              results['gt_bboxes_labels'])
    assert found == {'rotate', 'scale', 'translate'}, found


# ----------------------------------------------------------------------- draws

def _keyed(i: int, epoch: int = 0) -> dict:
    return dict(img_path=f'/data/tiles/tile_{i}.png', data_epoch=epoch)


def test_draw_distribution_matches_the_options():
    """Over many sample keys: the corrupted fraction is ``prob`` (binomial tolerance),
    each pool member and severity turns up about equally often, nothing else does."""
    pool, severities, prob, n = ['haze', 'gaussian_noise', 'rotate'], [2, 4], 0.3, 6000
    step = RandomCorruption(corruptions=pool, severities=severities, prob=prob, seed=7)
    draws = [step.draw(_keyed(i, i % 3)) for i in range(n)]
    corrupted = [d for d in draws if not d.is_clean]
    sigma = np.sqrt(prob * (1 - prob) / n)
    assert abs(len(corrupted) / n - prob) < 4.5 * sigma
    names = [d.corruption for d in corrupted]
    levels = [d.severity for d in corrupted]
    assert set(names) == set(pool) and set(levels) == set(severities)
    m = len(corrupted)
    for name in pool:
        p = 1 / len(pool)
        assert abs(names.count(name) / m - p) < 4.5 * np.sqrt(p * (1 - p) / m), name
    for level in severities:
        assert abs(levels.count(level) / m - 0.5) < 4.5 * np.sqrt(0.25 / m), level
    assert {d.seed for d in corrupted} == {7} and {d.border for d in corrupted} == {'reflect'}
    # a pure function of (seed, file name, epoch): the folder does not matter, the
    # epoch and the seed do
    again = RandomCorruption(corruptions=pool, severities=severities, prob=prob, seed=7)
    moved = [again.draw(dict(_keyed(i, i % 3), img_path=f'/else/tile_{i}.png'))
             for i in range(200)]
    assert moved == draws[:200]
    later = [step.draw(_keyed(i, i % 3 + 1)) for i in range(200)]
    assert sum(a != b for a, b in zip(later, draws)) > 50
    other = RandomCorruption(corruptions=pool, severities=severities, prob=prob, seed=8)
    assert sum(a != b for a, b in zip([other.draw(_keyed(i, i % 3)) for i in range(200)],
                                      draws)) > 50
    # prob 0 and 1
    assert all(RandomCorruption(prob=0.0).draw(_keyed(i)).is_clean for i in range(50))
    assert not any(RandomCorruption(prob=1.0).draw(_keyed(i)).is_clean for i in range(50))


def test_samples_record_what_they_got():
    image = np.full((32, 32, 3), 120, np.uint8)
    step = RandomCorruption(corruptions=['gaussian_noise'], severities=[3], prob=0.5)
    seen = set()
    for i in range(20):
        out = step(dict(_keyed(i), img=image.copy()))
        seen.add((out['corruption'], out['severity']))
        if out['corruption'] == 'clean':
            assert out['severity'] == 0
            np.testing.assert_array_equal(out['img'], image)
        else:
            assert not np.array_equal(out['img'], image)
    assert seen == {('clean', 0), ('gaussian_noise', 3)}


def test_per_epoch_false_needs_no_wrapper_and_keeps_one_condition():
    image = np.full((16, 16, 3), 90, np.uint8)
    fixed = RandomCorruption(corruptions='sensor', prob=0.8, per_epoch=False)
    for i in range(30):
        plain = dict(img=image.copy(), img_path=f'/d/t{i}.png')
        out = fixed(plain)  # no data_epoch: fine
        assert out['corruption'] in SENSOR + ['clean']
        # an epoch in the sample is ignored: the same condition and bytes every epoch
        for epoch in (1, 4):
            other = fixed(dict(img=image.copy(), img_path=f'/d/t{i}.png', data_epoch=epoch))
            assert (other['corruption'], other['severity']) == \
                (out['corruption'], out['severity'])
            np.testing.assert_array_equal(other['img'], out['img'])
    per_epoch = RandomCorruption(corruptions='sensor', prob=0.8)
    with pytest.raises(RuntimeError, match='EpochIndexedDataset'):
        per_epoch(dict(img=image.copy(), img_path='/d/t0.png'))
    with pytest.raises(RuntimeError, match='neither img_path nor sample_idx'):
        per_epoch(dict(img=image.copy(), data_epoch=0))


@pytest.mark.parametrize('options,error,match', [
    (dict(corruptions=[]), ValueError, 'select no corruption'),
    (dict(severities=[0]), ValueError, r'severity must be an integer in 1\.\.5'),
    (dict(severities=[1, 6]), ValueError, r'severity must be an integer in 1\.\.5'),
    (dict(severities=[]), ValueError, 'severities is empty'),
    (dict(severities=3), ValueError, 'severities must be a list'),
    (dict(prob=1.5), ValueError, r'prob must be a number in \[0, 1\]'),
    (dict(prob=-0.1), ValueError, r'prob must be a number in \[0, 1\]'),
    (dict(prob=True), ValueError, r'prob must be a number in \[0, 1\]'),
    (dict(corruptions=['fog']), KeyError, 'fog'),
    (dict(corruptions=['cloud_shadow']), KeyError, 'cloud_shadow'),  # another protocol's
    (dict(per_epoch=1), ValueError, 'per_epoch must be True or False'),
    (dict(seed=-1), ValueError, 'seed'),
])
def test_bad_options_are_refused(options, error, match):
    with pytest.raises(error, match=match):
        RandomCorruption(**options)


# ----------------------------------------------------------------------- training

class _DrawLog(Hook):
    """Records the draws packed into each training batch."""

    def __init__(self):
        self.draws = []

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        for sample in data_batch['data_samples']:
            meta = sample.metainfo
            self.draws.append((osp.basename(meta['img_path']), meta['data_epoch'],
                               meta['corruption'], meta['severity']))


def _train(task: str, demo_data: str, work_dir: str, iters: int) -> dict:
    """Train the robust demo config of ``task`` for ``iters`` iterations (batch 2, no
    validation), packing each sample's draw into its metainfo; returns the checkpoint,
    the draws of every batch and the losses."""
    cfg = _robust_cfg(task, demo_data, work_dir, placed=False)  # the wrapper places it
    cfg.merge_from_dict({'train_cfg.max_iters': iters, 'train_cfg.val_interval': iters + 1,
                         'train_dataloader.batch_size': 2,
                         'default_hooks.checkpoint.interval': iters})
    cfg.val_cfg = cfg.val_dataloader = cfg.val_evaluator = None
    cfg.custom_hooks = []
    pack = cfg.train_dataloader.dataset.dataset.pipeline[-1]
    pack.meta_keys = PROBE_KEYS + (
        ('ori_shape', 'img_shape', 'scale_factor', 'flip', 'flip_direction')
        if task == 'det' else ('seg_map_path', 'ori_shape', 'img_shape', 'pad_shape',
                               'scale_factor', 'flip', 'flip_direction',
                               'reduce_zero_label'))
    runner = Runner.from_cfg(cfg)
    log = _DrawLog()
    runner.register_hook(log)
    runner.train()
    assert runner.iter == iters
    return dict(checkpoint=osp.join(work_dir, f'iter_{iters}.pth'), draws=log.draws,
                losses=runner.message_hub.get_scalar('train/loss').data[0],
                size=len(runner.train_dataloader.dataset))


@pytest.fixture(scope='module')
def trained_seg(demo_data, tmp_path_factory):
    """The robust demo UperNet trained for 4 iterations of 2 images: a pass over the 6
    images and the start of the next."""
    return _train('seg', demo_data, str(tmp_path_factory.mktemp('robust_seg')), 4)


def _check_training(trained: dict, iters: int) -> None:
    draws, size = trained['draws'], trained['size']
    assert len(draws) == 2 * iters and np.all(np.isfinite(trained['losses']))
    assert len(trained['losses']) == iters
    # the epoch advances after each pass over the data
    assert [d[1] for d in draws] == [i // size for i in range(len(draws))], draws
    for epoch in {d[1] for d in draws}:
        names = [d[0] for d in draws if d[1] == epoch]
        assert len(names) == len(set(names)), draws
    corrupted = [d for d in draws if d[2] != 'clean']
    assert corrupted and all(d[2] in SENSOR and 1 <= d[3] <= 5 for d in corrupted), draws
    assert [d for d in draws if d[2] == 'clean'], draws  # prob 0.5: some stay clean
    # the draws are the transform's for (file name, epoch)
    step = RandomCorruption(corruptions='sensor', severities=[1, 2, 3, 4, 5], prob=0.5,
                            seed=0)
    for name, epoch, corruption, severity in draws:
        assert step.draw(dict(img_path=name, data_epoch=epoch)).pair == (corruption, severity)


@pytest.mark.trains('training on corrupted samples is what it checks')
@pytest.mark.slow
def test_robust_segmentation_recipe_trains_on_corrupted_samples(trained_seg):
    """Runner.from_cfg on the robust UperNet demo config: 4 iterations train (finite
    losses), into the second epoch, and the batches carried samples corrupted by
    RandomCorruption."""
    assert osp.isfile(trained_seg['checkpoint'])
    _check_training(trained_seg, 4)
    assert {d[1] for d in trained_seg['draws']} == {0, 1}


@pytest.mark.trains('training on corrupted samples is what it checks')
@pytest.mark.slow
def test_robust_detection_recipe_trains_on_corrupted_samples(demo_data, tmp_path):
    """The same for the robust Oriented R-CNN demo config (rotated boxes)."""
    trained = _train('det', demo_data, str(tmp_path / 'det'), 2)
    _check_training(trained, 2)


# ----------------------------------------------------------------------- held out

def test_seen_in_training_reads_lists_and_groups():
    robust = Config.fromfile(SEG_ROBUST)
    assert seen_in_training(robust, 'reobench') == SENSOR
    assert seen_in_training(robust, 'reobench', 'auto') == SENSOR
    assert seen_in_training(Config.fromfile(DET_ROBUST), 'reobench') == SENSOR
    assert seen_in_training(Config.fromfile(SEG_DEMO_CONFIG), 'reobench') == []
    assert seen_in_training(robust, 'reobench', None) == []
    assert seen_in_training(robust, 'reobench', ['haze', 'geometric']) == \
        ['haze', 'rotate', 'scale', 'translate']
    assert seen_in_training(robust, 'reobench', 'environmental') == \
        ['brightness_contrast', 'cloud', 'haze']
    # another protocol: only the names it shares with the pool count
    assert seen_in_training(robust, 'geofm_calibration') == ['motion_blur']
    with pytest.raises(SweepError, match='fog'):
        seen_in_training(robust, 'reobench', ['fog'])


def test_check_held_out_refuses_seen_corruptions():
    with pytest.raises(SweepError, match=r'gaussian_noise was in the training pool.*'
                                         r'only the held-out corruptions \(cloud\)'):
        check_held_out(['gaussian_noise', 'cloud'], SENSOR, True)
    with pytest.raises(SweepError, match='gaussian_noise, motion_blur were.*none is left'):
        check_held_out(['gaussian_noise', 'motion_blur'], SENSOR, True)
    check_held_out(['cloud', 'haze', 'rotate'], SENSOR, True)
    check_held_out(['gaussian_noise', 'cloud'], SENSOR, False)
    with pytest.raises(SweepError, match='held_out_only must be True or False'):
        check_held_out(['cloud'], SENSOR, 1)


def _robust_runner(demo_data, work_dir, checkpoint, **loop):
    # as written: the loop reads the pool from the wrapper's corruption step
    cfg = _robust_cfg('seg', demo_data, work_dir, placed=False)
    cfg.custom_hooks = []
    cfg.test_cfg = dict(type='RobustnessTestLoop', severities=[3], plots=False, **loop)
    cfg.load_from = checkpoint
    return Runner.from_cfg(cfg)


@pytest.mark.slow  # 7 s or more: left out of make test-fast
def test_robustness_loop_held_out_only_refuses_seen_corruptions(demo_data, tmp_path):
    """held_out_only on the robust demo config: a seen corruption is refused when the loop
    is built, a held-out selection is accepted; the plain config has nothing seen."""
    with pytest.raises(SweepError, match=r'gaussian_noise was in the training pool.*'
                                         r'held-out corruptions \(cloud\)'):
        _robust_runner(demo_data, str(tmp_path / 'refused'), None,
                       corruptions=['gaussian_noise', 'cloud'], held_out_only=True).test_loop
    loop = _robust_runner(demo_data, str(tmp_path / 'held'), None,
                          corruptions=['cloud', 'haze'], held_out_only=True).test_loop
    assert loop.seen_in_training == SENSOR
    loop = _robust_runner(demo_data, str(tmp_path / 'given'), None, corruptions=['cloud'],
                          held_out_only=True, seen_corruptions=['haze']).test_loop
    assert loop.seen_in_training == ['haze']
    with pytest.raises(SweepError, match='cloud was in the training pool'):
        _robust_runner(demo_data, str(tmp_path / 'given'), None, corruptions=['cloud'],
                       held_out_only=True, seen_corruptions='environmental').test_loop
    loop = _robust_runner(demo_data, str(tmp_path / 'none'), None,
                          corruptions=['gaussian_noise'], held_out_only=True,
                          seen_corruptions=None).test_loop
    assert loop.seen_in_training == []
    plain = Config.fromfile(SEG_DEMO_CONFIG)
    plain.merge_from_dict({'test_dataloader.dataset.data_root': osp.join(demo_data, 'potsdam'),
                           'test_dataloader.num_workers': 0,
                           'test_dataloader.persistent_workers': False,
                           'log_level': 'WARNING', 'work_dir': str(tmp_path / 'plain')})
    plain.test_cfg = dict(type='RobustnessTestLoop', corruptions=['gaussian_noise'],
                          held_out_only=True)
    assert Runner.from_cfg(plain).test_loop.seen_in_training == []


# trained_seg is trained by the first test of this module's worker that asks for it: under
# another xdist distribution, this one
@pytest.mark.trains('it evaluates the model trained on corrupted samples (trained_seg)')
def test_robustness_loop_reports_held_out_scores(demo_data, tmp_path, trained_seg):
    """A real RobustnessTestLoop run of the trained robust model: report.md marks
    gaussian_noise as seen and has the held-out row and section, results.json the
    training block, and the returned held-out scores are numpy's on results.json."""
    run = _robust_runner(demo_data, str(tmp_path / 'both'), trained_seg['checkpoint'],
                         corruptions=['gaussian_noise', 'cloud', 'haze'])
    metrics = run.test()
    folder = tmp_path / 'both'
    report = (folder / 'report.md').read_text()
    numbers = json.loads((folder / 'results.json').read_text())['numbers']
    assert '| gaussian_noise † |' in report
    assert '| cloud |' in report and '| haze |' in report  # held out: not marked
    assert '## Corruptions seen in training' in report
    assert '| held out from training | 2 |' in report
    assert 'Held out (not seen in training, 2): cloud, haze' in report
    training = numbers['training']
    assert training['seen_corruptions'] == SENSOR
    assert training['held_out']['corruptions'] == ['cloud', 'haze']
    held = [numbers['per_corruption'][n]['mean'] for n in ('cloud', 'haze')]
    every = [numbers['per_corruption'][n]['mean'] for n in ('gaussian_noise', 'cloud', 'haze')]
    clean = numbers['clean']
    assert metrics['robust/avg_held_out'] == pytest.approx(np.mean(held), abs=1e-9)
    assert metrics['robust/delta_tp_held_out'] == pytest.approx(clean - np.mean(held),
                                                                abs=1e-9)
    assert metrics['robust/mpc_held_out'] == pytest.approx(np.mean(held), abs=1e-9)
    assert metrics['robust/rpc_held_out'] == pytest.approx(np.mean(held) / clean, abs=1e-9)
    assert metrics['robust/avg'] == pytest.approx(np.mean(every), abs=1e-9)
    assert training['held_out']['avg'] == pytest.approx(np.mean(held), abs=1e-9)
    # the trained model tells the corruptions apart: held out differs from all
    assert abs(np.mean(held) - np.mean(every)) > 1e-3, numbers['per_corruption']
    # the same run again without seen corruptions (the conditions are reused): no
    # held-out scores, nothing marked
    plain = _robust_runner(demo_data, str(folder), trained_seg['checkpoint'],
                           corruptions=['gaussian_noise', 'cloud', 'haze'],
                           seen_corruptions=None)
    unmarked = plain.test()
    assert not any(key.endswith('_held_out') for key in unmarked)
    assert {k: v for k, v in metrics.items() if not k.endswith('_held_out')} == unmarked
    assert 'training' not in json.loads((folder / 'results.json').read_text())['numbers']
    assert '†' not in (folder / 'report.md').read_text()


def _hand_made():
    """clean 80; 2 sensor and 2 environmental corruptions, 1 geometric; haze lacks s2."""
    return {
        ('clean', 0): 80.0,
        ('gaussian_noise', 1): 40.0, ('gaussian_noise', 2): 30.0,
        ('motion_blur', 1): 70.0, ('motion_blur', 2): 64.0,
        ('cloud', 1): 70.0, ('cloud', 2): 60.0,
        ('haze', 1): 75.0,
        ('rotate', 1): 50.0, ('rotate', 2): 44.0,
    }


def _write(folder, seen=None, **kwargs):
    prov = make_provenance(model='M', backbone='B', task='segmentation', config='c.py',
                           checkpoint_sha256='ab' * 32, seed=0, versions=VERSIONS)
    if seen is not None:
        kwargs['seen_in_training'] = seen
    write_report(str(folder), _hand_made(), task='segmentation', provenance=prov,
                 plots=False, **kwargs)
    return (folder / 'results.json').read_bytes(), (folder / 'report.md').read_text()


def test_aggregate_held_out_scores_against_numpy(tmp_path):
    results = _hand_made()
    summary = aggregate(results, task='segmentation', seen_in_training=['sensor'])
    assert summary.seen_in_training == tuple(SENSOR)
    held = summary.held_out
    assert held.corruptions == ('cloud', 'haze', 'rotate')
    means = [np.mean([70.0, 60.0]), 75.0, np.mean([50.0, 44.0])]
    assert held.avg == pytest.approx(np.mean(means))
    assert held.delta_tp == pytest.approx(80.0 - np.mean(means))
    values = [70.0, 60.0, 75.0, 50.0, 44.0]  # every held-out (corruption, severity)
    assert held.mpc == pytest.approx(np.mean(values))
    assert held.rpc == pytest.approx(np.mean(values) / 80.0)
    # the overall scores are unchanged
    plain = aggregate(results, task='segmentation')
    assert (summary.avg, summary.delta_tp, summary.mpc) == (plain.avg, plain.delta_tp,
                                                            plain.mpc)
    assert plain.held_out is None and plain.seen_in_training == ()
    # the held-out corruptions in the summary's (table) order
    mixed = aggregate(results, task='segmentation', seen_in_training=['rotate', 'haze'])
    assert mixed.held_out.corruptions == tuple(
        n for n in mixed.corruptions if n not in ('rotate', 'haze'))
    assert sorted(mixed.held_out.corruptions) == ['cloud', 'gaussian_noise', 'motion_blur']
    assert mixed.held_out.avg == pytest.approx(np.mean([35.0, 67.0, 65.0]))
    assert mixed.held_out.mpc == pytest.approx(np.mean([40, 30, 70, 64, 70, 60]))
    # results.json and report.md
    data, report = _write(tmp_path / 'sensor', ['sensor'])
    training = json.loads(data)['numbers']['training']
    assert training['seen_corruptions'] == SENSOR
    assert training['held_out']['avg'] == pytest.approx(np.mean(means))
    assert training['held_out']['corruptions'] == ['cloud', 'haze', 'rotate']
    reloaded = read_results(str(tmp_path / 'sensor' / 'results.json')).summary
    assert reloaded.seen_in_training == summary.seen_in_training
    assert reloaded.held_out == summary.held_out
    assert '| gaussian_noise † |' in report and '| motion_blur † |' in report
    assert '| cloud |' in report and '| rotate |' in report
    assert 'Seen and evaluated: gaussian_noise, motion_blur.' in report
    # what a robustness loop returns
    returned = robustness_metrics(summary, {'mIoU': 80.0})
    assert returned['robust/avg_held_out'] == pytest.approx(np.mean(means))
    assert returned['robust/delta_tp_held_out'] == pytest.approx(80.0 - np.mean(means))
    assert returned['robust/mpc_held_out'] == pytest.approx(np.mean(values))
    assert returned['robust/rpc_held_out'] == pytest.approx(np.mean(values) / 80.0)
    assert returned['robust/avg'] == pytest.approx(plain.avg)
    assert not any(k.endswith('_held_out') for k in robustness_metrics(plain, {'mIoU': 80.0}))


def test_all_seen_and_nothing_seen(tmp_path):
    everything = aggregate(_hand_made(), task='segmentation', seen_in_training=['all'])
    assert everything.held_out is None and everything.seen_in_training == tuple(
        list_corruptions('reobench'))
    data, report = _write(tmp_path / 'all', ['all'])
    assert json.loads(data)['numbers']['training']['held_out'] is None
    assert 'there is no held-out score' in report
    assert 'held out from training' not in report
    assert not any(k.endswith('_held_out') for k in robustness_metrics(everything, {}))
    # nothing seen: byte-identical to the call without the argument
    without, report_without = _write(tmp_path / 'none')
    for seen in ([], None, ()):
        folder = tmp_path / f'seen_{seen!r}'
        data, text = _write(folder, seen)
        assert data == without and text == report_without
    assert 'training' not in json.loads(without)['numbers']
    assert '†' not in report_without


# ----------------------------------------------------------------------- evaluation

@pytest.mark.parametrize('split,loop', [
    ('test', dict(type='CorruptionTestLoop')),
    ('test', dict(type='CorruptionTestLoop', corruption='haze', severity=2)),
    ('test', dict(type='RobustnessTestLoop', corruptions=['haze'], severities=[1],
                  plots=False)),
    ('val', dict(type='RobustnessValLoop', corruptions=['haze'], severities=[1])),
])
def test_random_corruption_in_an_evaluation_pipeline_is_refused(demo_data, tmp_path, split,
                                                                loop):
    cfg = Config.fromfile(SEG_DEMO_CONFIG)
    cfg.merge_from_dict({f'{split}_dataloader.dataset.data_root':
                         osp.join(demo_data, 'potsdam'),
                         f'{split}_dataloader.num_workers': 0,
                         f'{split}_dataloader.persistent_workers': False,
                         'log_level': 'WARNING', 'work_dir': str(tmp_path)})
    pipeline = cfg[f'{split}_dataloader'].dataset.pipeline
    position = [i for i, s in enumerate(pipeline) if s['type'] == 'LoadAnnotations'][0]
    pipeline.insert(position + 1, dict(type='RandomCorruption', corruptions='sensor',
                                       per_epoch=False))
    cfg[f'{split}_cfg'] = loop
    runner = Runner.from_cfg(cfg)
    with pytest.raises(RuntimeError, match='the evaluation pipeline holds RandomCorruption'):
        runner.test_loop if split == 'test' else runner.val_loop


def test_seen_in_training_finds_random_corruption_inside_wrapper_steps(demo_data):
    cfg = _robust_cfg('seg', demo_data)
    inner = cfg.train_dataloader.dataset.dataset
    position = _step_position(inner.pipeline)
    # one of two pools per sample: the config's sensor one, or haze
    inner.pipeline[position] = dict(
        type='RandomChoice',
        transforms=[[inner.pipeline[position]],
                    [dict(inner.pipeline[position], corruptions=['haze'], prob=1.0)]])
    # a working training pipeline: the wrapped step corrupts samples
    loader = copy.deepcopy(cfg.train_dataloader.to_dict())
    loader.update(num_workers=0, batch_size=6, persistent_workers=False)
    loader['dataset']['dataset']['pipeline'] = inner.pipeline[:position + 1] + [
        dict(inner.pipeline[-1], meta_keys=PROBE_KEYS)]
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        rows = _record(iter(Runner.build_dataloader(loader, seed=0)), 6)
    drawn = {r[2] for r in rows}
    assert drawn - {'clean'} and drawn <= set(SENSOR) | {'haze', 'clean'}, rows
    assert seen_in_training(cfg, 'reobench') == SENSOR + ['haze']
