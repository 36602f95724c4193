"""The fixtures the robustness tests share: the demo UperNet's checkpoints, trained (from
the suite's cache) and freshly initialised (written once per run for every worker).

Both are read only: a test that needs to change a checkpoint copies it into its
``tmp_path`` first (the freshly initialised one is checked unchanged at the end of the
run, as the cache checks its trained models)."""
import os
import os.path as osp

import pytest
from filelock import FileLock

from helpers import SEG_DEMO_CONFIG
from sweep_helpers import untrained_checkpoint


@pytest.fixture(scope='session')
def trained_seg_checkpoint(seg_model_200) -> str:
    """The demo UperNet trained 200 iterations (a model whose numbers mean something:
    attacks, precision, device corruption)."""
    return seg_model_200.checkpoint


@pytest.fixture(scope='session')
def untrained_seg_checkpoint(run_root) -> str:
    """The demo UperNet as initialised with seed 0 (``untrained_checkpoint``), written
    once per run: tests of the loops' bookkeeping, where any model will do."""
    path = osp.join(run_root, 'untrained_models', 'upernet_demo_seed0.pth')
    os.makedirs(osp.dirname(path), exist_ok=True)
    with FileLock(path + '.lock'):
        if not osp.isfile(path):
            untrained_checkpoint(SEG_DEMO_CONFIG, path + '.tmp')
            os.replace(path + '.tmp', path)
    written = os.stat(path)
    yield path
    now = os.stat(path)
    assert (now.st_size, now.st_mtime_ns) == (written.st_size, written.st_mtime_ns), (
        f'a test changed the shared checkpoint {path}: copy it into tmp_path first')
