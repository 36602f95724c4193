"""Shared fixtures: small synthetic datasets and config helpers."""
import os.path as osp
import socket
import subprocess
import sys

import pytest
from mmengine.config import Config

from reobench_mm.datasets.synthetic import make_demo_data
from reobench_mm.datasets.synthetic_shift import write_shifted_demo_data
from reobench_mm.engine import rescale_iter_schedule

PROJECT_ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
REAL_SAMPLES = osp.join(osp.dirname(PROJECT_ROOT), 'shared', 'data', 'real_samples')
SEG_DEMO_CONFIG = osp.join(PROJECT_ROOT, 'configs', 'demo',
                           'upernet_r18-tiny_1xb4-600i_demo-potsdam-128x128.py')
DET_DEMO_CONFIG = osp.join(PROJECT_ROOT, 'configs', 'demo',
                           'oriented-rcnn-le90_r18-tiny_fpn_1xb2-600i_demo-dior-256x256.py')


def pytest_configure(config):
    config.addinivalue_line('markers', 'slow: end-to-end runs (seconds to minutes); run in CI')


@pytest.fixture(autouse=True)
def _loggers_on_open_streams():
    """Drop the stream handlers of MMEngine's loggers whose streams are closed: a tool
    run in process under ``capsys`` leaves its logger writing to that test's captured
    stream, and a later test that logs (building a model) would print logging errors."""
    import sys
    if 'mmengine.logging' in sys.modules:
        from mmengine.logging import MMLogger
        for logger in list(MMLogger._instance_dict.values()):
            for handler in list(logger.handlers):
                if getattr(getattr(handler, 'stream', None), 'closed', False):
                    logger.removeHandler(handler)
    yield


@pytest.fixture(scope='session')
def demo_data(tmp_path_factory) -> str:
    """A small copy of the demo data: 6 training and 3 test images per dataset, and 3
    test images of each shifted set."""
    root = str(tmp_path_factory.mktemp('demo_data'))
    make_demo_data(root, seed=0, num_train=6, num_test=3, size=256)
    write_shifted_demo_data(root, seed=0, num_test=3, size=256)
    return root


@pytest.fixture
def real_samples() -> str:
    if not osp.isdir(REAL_SAMPLES):
        pytest.skip(f'real samples folder {REAL_SAMPLES} is absent (it lives beside the '
                    'project checkout as ../shared/data/real_samples)')
    return REAL_SAMPLES


def demo_config(path: str, data_root: str, work_dir: str, iters: int) -> Config:
    """A demo config pointed at ``data_root``, trained for ``iters`` in-process."""
    cfg = Config.fromfile(path)
    cfg.work_dir = work_dir
    cfg.log_level = 'WARNING'
    rescale_iter_schedule(cfg, iters)
    options = {'train_dataloader.batch_size': 2}
    for split in ('train', 'val', 'test'):
        options[f'{split}_dataloader.dataset.data_root'] = data_root
        options[f'{split}_dataloader.num_workers'] = 0
        options[f'{split}_dataloader.persistent_workers'] = False
    cfg.merge_from_dict(options)
    return cfg


def run_tools_together(*commands):
    """Run Python tools concurrently (their start-up is mostly single-threaded imports);
    each must succeed. Returns their combined stdout/stderr texts."""
    processes = [subprocess.Popen([sys.executable, *command], cwd=PROJECT_ROOT,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for command in commands]
    outputs = [process.communicate()[0] for process in processes]
    for process, output in zip(processes, outputs):
        assert process.returncode == 0, output[-5000:]
    return outputs


def train_checkpoint(config: str, data_root: str, work_dir: str, iters: int) -> str:
    """Train a demo config for ``iters`` iterations with ``tools/train.py`` in a subprocess
    (no validation, no workers); returns the checkpoint path."""
    run_tools_together([osp.join(PROJECT_ROOT, 'tools', 'train.py'), config, '--work-dir',
                        work_dir, '--cfg-options', f'train_cfg.max_iters={iters}',
                        'train_dataloader.batch_size=2', 'val_cfg=None', 'val_dataloader=None',
                        'val_evaluator=None', 'log_level=WARNING',
                        f'train_dataloader.dataset.data_root={data_root}',
                        'train_dataloader.num_workers=0',
                        'train_dataloader.persistent_workers=False'])
    checkpoint = osp.join(work_dir, f'iter_{iters}.pth')
    assert osp.isfile(checkpoint), checkpoint
    return checkpoint


def load_tool(relative_path: str):
    """A tool under ``tools/`` (e.g. ``'analysis_tools/robustness_table.py'``) as a module,
    to call its ``main`` in the test's process."""
    import importlib.util
    name = osp.splitext(osp.basename(relative_path))[0]
    spec = importlib.util.spec_from_file_location(
        name, osp.join(PROJECT_ROOT, 'tools', relative_path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def toolbox_file(package: str, *parts: str) -> str:
    """A file shipped in an installed toolbox (``mmseg/.mim/tools/test.py``...); the test is
    skipped when the package was installed without its ``.mim`` files."""
    module = __import__(package)
    path = osp.join(osp.dirname(module.__file__), '.mim', *parts)
    if not osp.isfile(path):
        pytest.skip(f'{package} was installed without its .mim files ({path} is absent)')
    return path


def free_port() -> int:
    """A free TCP port on localhost (for a process group's rendezvous)."""
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]
