"""release_dataloader_workers: a finished Runner's worker processes stop at once, instead
of when the garbage collector frees the Runner (which costs 5 s of waiting per worker)."""
import gc
import os.path as osp
import time

from mmengine.config import Config
from mmengine.runner import Runner

from helpers import SEG_DEMO_CONFIG
from reobench_mm.engine import release_dataloader_workers
from reobench_mm.engine.workdir import forget_runner_instances


def _runner_with_live_workers(data_root: str, work_dir: str) -> Runner:
    """The demo segmentation Runner (its own loaders: 2 workers each, the validation
    loader's persistent) with the training loop's endless iterator started and the
    validation loader iterated once, as after a training with validation."""
    cfg = Config.fromfile(SEG_DEMO_CONFIG)
    cfg.work_dir = work_dir
    cfg.log_level = 'WARNING'
    for split in ('train', 'val', 'test'):
        cfg[f'{split}_dataloader'].dataset.data_root = data_root
    runner = Runner.from_cfg(cfg)
    assert runner.train_loop.dataloader.num_workers == 2  # builds the endless iterator
    for _ in runner.val_loop.dataloader:
        pass
    assert runner.val_loop.dataloader.persistent_workers
    return runner


def _workers(runner: Runner) -> list:
    iterators = [runner.train_loop.dataloader_iterator._iterator,
                 runner.val_loop.dataloader._iterator]
    return [worker for iterator in iterators for worker in iterator._workers]


def test_a_finished_runner_stops_its_workers_at_once(demo_data, tmp_path):
    runner = _runner_with_live_workers(osp.join(demo_data, 'potsdam'), str(tmp_path))
    workers = _workers(runner)
    assert len(workers) == 4 and all(w.is_alive() for w in workers)
    start = time.perf_counter()
    assert release_dataloader_workers(runner) == 2
    assert time.perf_counter() - start < 3  # not torch's 5 s join timeout per worker
    assert not any(w.is_alive() for w in workers)
    assert runner.val_loop.dataloader._iterator is None  # a later pass starts afresh
    assert release_dataloader_workers(runner) == 0  # nothing left: a second call is a no-op
    # the loader still works: fresh workers, and the same number of batches
    assert sum(1 for _ in runner.val_loop.dataloader) == len(runner.val_loop.dataloader)
    release_dataloader_workers(runner)
    del runner
    start = time.perf_counter()
    gc.collect()
    assert time.perf_counter() - start < 3
    forget_runner_instances(str(tmp_path))


def test_a_runner_without_workers_is_left_alone(demo_data, tmp_path):
    cfg = Config.fromfile(SEG_DEMO_CONFIG)
    cfg.work_dir = str(tmp_path)
    cfg.log_level = 'WARNING'
    cfg.test_dataloader.dataset.data_root = osp.join(demo_data, 'potsdam')
    cfg.test_dataloader.num_workers = 0
    cfg.test_dataloader.persistent_workers = False
    runner = Runner.from_cfg(cfg)
    for _ in runner.test_loop.dataloader:
        pass
    assert release_dataloader_workers(runner) == 0  # nothing built has workers
    assert runner._train_loop is not None and not hasattr(runner._train_loop, 'run')  # unbuilt
    forget_runner_instances(str(tmp_path))
