"""The suite's trained-model cache: each (config, data, iterations, seed) is trained once
per test run, whatever the number of tests and xdist workers that use it.

A model lives in its own folder under the run's shared temporary root (the parent of the
xdist workers' folders), is trained in the process of the first test that asks for it,
under a file lock (``filelock``, which torch already installs) so that the other workers
wait for it instead of training it again, and is finished by a ``done`` file written
last. Its users read it: a manifest of every file's size and modification time is taken
after training and checked each time the model is handed out and at the end of the run,
so a test that writes into the cache fails (the suite runs as root in CI, where file
modes would not stop it).

Training runs in process through MMEngine's ``Runner`` with the settings
``helpers.train_checkpoint`` gives ``tools/train.py`` (``helpers.training_options``: the
config's schedule cut at ``iters``, batch 2, no validation, no dataloader workers) and
the given seed.
"""
import hashlib
import json
import os
import os.path as osp
import shutil
from typing import Dict, List, NamedTuple, Set, Tuple

from filelock import FileLock


class TrainedModel(NamedTuple):
    """A trained model of the cache (read only): ``config`` is the training config as the
    Runner dumped it, ``checkpoint`` its last checkpoint, ``data_root`` the data it was
    trained on."""
    config: str
    checkpoint: str
    work_dir: str
    data_root: str
    iters: int


def _manifest(folder: str) -> Dict[str, Tuple[int, int]]:
    found = {}
    for root, _, files in os.walk(folder):
        for name in files:
            path = osp.join(root, name)
            stat = os.stat(path)
            found[osp.relpath(path, folder)] = (stat.st_size, stat.st_mtime_ns)
    return found


class ModelCache:
    """Trained demo models for the suite (see the module docstring)."""

    def __init__(self, root: str):
        self.root = root
        os.makedirs(root, exist_ok=True)
        self._handed_out: Set[str] = set()

    def folder(self, config: str, data_root: str, iters: int, seed: int) -> str:
        key = json.dumps([osp.abspath(config), osp.abspath(data_root), iters, seed])
        digest = hashlib.sha256(key.encode()).hexdigest()[:10]
        stem = osp.splitext(osp.basename(config))[0].split('_')[0]
        return osp.join(self.root, f'{stem}-{iters}i-seed{seed}-{digest}')

    def get(self, config: str, data_root: str, iters: int, seed: int = 0) -> TrainedModel:
        """The model of ``config`` trained on ``data_root`` for ``iters`` iterations with
        ``seed``, trained now if no test of this run has asked for it yet."""
        folder = self.folder(config, data_root, iters, seed)
        done = osp.join(folder, 'done')
        with FileLock(folder + '.lock'):
            if not osp.isfile(done):
                if osp.isdir(folder):  # a training that was interrupted
                    shutil.rmtree(folder)
                self._train(config, data_root, iters, seed, folder)
                trained = _manifest(folder)
                with open(osp.join(folder, 'manifest.json'), 'w', encoding='utf-8') as f:
                    json.dump(trained, f)
                with open(done, 'w', encoding='utf-8') as f:
                    f.write('ok\n')
        self.check(folder)
        dumped = osp.join(folder, osp.basename(config))
        return TrainedModel(config=dumped, checkpoint=osp.join(folder, f'iter_{iters}.pth'),
                            work_dir=folder, data_root=data_root, iters=iters)

    def check(self, folder: str) -> None:
        """Raise where a file of the cached model ``folder`` was added, changed or
        removed since it was trained."""
        with open(osp.join(folder, 'manifest.json'), encoding='utf-8') as f:
            expected = {k: tuple(v) for k, v in json.load(f).items()}
        found = _manifest(folder)
        for name in ('manifest.json', 'done'):
            found.pop(name, None)
        changed = sorted(set(expected) ^ set(found)
                         | {k for k in expected if k in found and found[k] != expected[k]})
        if changed:
            raise AssertionError(
                f'a test wrote into the trained-model cache {folder} ({", ".join(changed)}): '
                'its models are read only; copy what you need to change into tmp_path')
        self._handed_out.add(folder)

    def check_all(self) -> List[str]:
        """The cached folders this process handed out that were modified since."""
        broken = []
        for folder in sorted(self._handed_out):
            try:
                self.check(folder)
            except AssertionError as error:
                broken.append(str(error))
        return broken

    @staticmethod
    def _train(config: str, data_root: str, iters: int, seed: int, work_dir: str) -> None:
        from mmengine.config import Config
        from mmengine.runner import Runner

        from helpers import training_options
        from reobench_mm.engine.workdir import forget_runner_instances
        cfg = Config.fromfile(config)
        cfg.work_dir = work_dir
        cfg.randomness = dict(seed=seed, deterministic=False)
        cfg.experiment_name = osp.basename(work_dir)
        # the dumped config's test set is the training data's too, for its users
        cfg.merge_from_dict({
            **training_options(data_root, iters),
            'test_dataloader.dataset.data_root': data_root,
            'test_dataloader.num_workers': 0, 'test_dataloader.persistent_workers': False})
        import budget  # imported by pytest as the suite's plugin first
        with budget.cache_training():
            runner = Runner.from_cfg(cfg)
            runner.train()
        del runner
        forget_runner_instances(work_dir)
