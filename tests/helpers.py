"""Helpers shared by the test modules: the project's paths and demo configs, running tools
in process or as subprocesses. The fixtures live in ``conftest.py`` files."""
import contextlib
import inspect
import io
import os
import os.path as osp
import runpy
import socket
import subprocess
import sys
from typing import NamedTuple

import pytest
from mmengine.config import Config

from reobench_mm.engine import rescale_iter_schedule

PROJECT_ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
REAL_SAMPLES = osp.join(osp.dirname(PROJECT_ROOT), 'shared', 'data', 'real_samples')
SEG_DEMO_CONFIG = osp.join(PROJECT_ROOT, 'configs', 'demo',
                           'upernet_r18-tiny_1xb4-600i_demo-potsdam-128x128.py')
DET_DEMO_CONFIG = osp.join(PROJECT_ROOT, 'configs', 'demo',
                           'oriented-rcnn-le90_r18-tiny_fpn_1xb2-600i_demo-dior-256x256.py')


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


def run_tools_together(*commands, meanwhile=None):
    """Run Python tools concurrently (their start-up is mostly single-threaded imports);
    each must succeed. Returns their combined stdout/stderr texts. ``meanwhile()``, when
    given, runs in this process while they run (this package's own tools called in
    process beside the stock tools a test starts)."""
    processes = [subprocess.Popen([sys.executable, *command], cwd=PROJECT_ROOT,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for command in commands]
    try:
        if meanwhile is not None:
            meanwhile()
    except BaseException:
        for process in processes:
            process.kill()
            process.communicate()
        raise
    outputs = [process.communicate()[0] for process in processes]
    for process, output in zip(processes, outputs):
        assert process.returncode == 0, output[-5000:]
    return outputs


@contextlib.contextmanager
def _as_main(cwd: str):
    """Run a tool's main in this process from ``cwd``: the working directory and
    ``sys.argv`` (which the body may set) are put back afterwards."""
    before, before_argv = os.getcwd(), sys.argv
    os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(before)
        sys.argv = before_argv


def stock_tool_here(path: str, argv, cwd: str = PROJECT_ROOT) -> str:
    """A toolbox's own tool (e.g. mmrotate's ``tools/test.py``) run as its ``__main__`` in
    this process; returns what it printed and logged. For the reference side of a
    comparison (a plain stock run whose number the tested side must equal): the side under
    test still runs in a process of its own, as users run it. Each call saves an
    interpreter start (about 7 s of imports)."""
    out = io.StringIO()
    with _as_main(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        sys.argv = [path, *(str(a) for a in argv)]
        runpy.run_path(path, run_name='__main__')
    return out.getvalue()


def training_options(data_root: str, iters: int) -> dict:
    """The settings the suite trains a config with (``--cfg-options`` of ``tools/train.py``,
    or merged into a config): the config's schedule cut at ``iters`` (not rescaled),
    batch 2, no validation, no data-loader workers, on ``data_root``."""
    return {'train_cfg.max_iters': iters, 'train_dataloader.batch_size': 2,
            'val_cfg': None, 'val_dataloader': None, 'val_evaluator': None,
            'log_level': 'WARNING', 'train_dataloader.dataset.data_root': data_root,
            'train_dataloader.num_workers': 0, 'train_dataloader.persistent_workers': False}


def train_checkpoint(config: str, data_root: str, work_dir: str, iters: int) -> str:
    """Train a config with :func:`training_options` through ``tools/train.py`` in a
    subprocess; returns the checkpoint path."""
    options = [f'{k}={v}' for k, v in training_options(data_root, iters).items()]
    run_tools_together([osp.join(PROJECT_ROOT, 'tools', 'train.py'), config, '--work-dir',
                        work_dir, '--cfg-options', *options])
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


def call_tool(relative_path: str, argv, cwd: str = PROJECT_ROOT) -> int:
    """Run ``tools/<relative_path>`` as its ``__main__`` block does (``run_tool(main)``:
    the tools' error convention), in this process, from ``cwd``; returns the exit status.
    For the tests whose subject is not the process boundary: they read the output with
    ``capsys`` (or :func:`tool_result`) and save an interpreter start (about 10 s of
    imports each)."""
    from reobench_cli import run_tool
    module = load_tool(relative_path)
    argv = [str(a) for a in argv]
    with _as_main(cwd):
        try:
            if inspect.signature(module.main).parameters:
                return run_tool(module.main, argv)
            sys.argv = [osp.join(PROJECT_ROOT, 'tools', relative_path), *argv]
            return run_tool(module.main)
        except SystemExit as exit_info:  # argparse's --help and refusals
            code = exit_info.code
            return code if isinstance(code, int) else (0 if code is None else 1)


def call_tool_command(command) -> None:
    """A command of :func:`run_tools_together` for one of this package's tools
    (``[tools/<path>, *argv]``, absolute or relative to the project) run with
    :func:`call_tool` in this process instead; it must succeed."""
    path = osp.join(PROJECT_ROOT, command[0])  # an absolute path stays as it is
    relative = osp.relpath(path, osp.join(PROJECT_ROOT, 'tools'))
    assert not relative.startswith('..'), f'{command[0]} is not one of the tools'
    assert call_tool(relative, command[1:]) == 0, command


class ToolResult(NamedTuple):
    """What a tool run in process gave: as ``subprocess.run``'s result reads."""
    returncode: int
    stdout: str
    stderr: str


def tool_result(relative_path: str, argv, cwd: str = PROJECT_ROOT) -> ToolResult:
    """:func:`call_tool` with what it prints to ``sys.stdout`` and ``sys.stderr``
    captured, as a :class:`ToolResult`."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = call_tool(relative_path, argv, cwd=cwd)
    return ToolResult(code, out.getvalue(), err.getvalue())


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
