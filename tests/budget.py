"""The suite's budget, enforced: a pytest plugin (loaded by ``tests/conftest.py``).

The suite must fit its machine (``make test`` within 15 minutes on 2 cores), and what costs
time there is training demo models and starting interpreters, not checks. So:

- every Python interpreter or shell script a test starts with ``subprocess.Popen``
  (``subprocess.run`` and friends go through it) or with multiprocessing's ``spawn``
  start method needs the test to be marked ``slow``; a
  test that starts one without it fails, naming the command (other programs, such as the
  ``gcc --version`` of MMEngine's environment report, are only counted);
- every training (MMEngine's ``Runner.train`` in the test's process, or a ``train.py`` in
  a subprocess) must come from the trained-model cache (``tests/model_cache.py``) or from
  a test marked ``trains(reason)`` (a training test, a resume test); anything else fails;
- ``trains`` implies ``slow``, and so does asking for the cache's fixtures (the first user
  of a model trains it), so ``-m "not slow"`` (``make test-fast``) trains nothing and
  starts no interpreter;
- each training and each subprocess is written to a ledger (one JSON line each, from
  every xdist worker), summed up at the end of the run: the numbers the suite's budget is
  quoted in. ``REOBENCH_TEST_LEDGER=path`` keeps the ledger at ``path``;
  ``REOBENCH_TEST_BUDGET=count`` only counts, enforcing nothing (to measure another
  checkout's suite with ``-p budget``).

Only the standard library and MMEngine's ``Runner`` (patched in place) are used.
"""
import json
import os
import os.path as osp
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from typing import Dict, Iterator, List, Optional, Sequence

import pytest

LEDGER_ENV = 'REOBENCH_TEST_LEDGER'
ENFORCE = os.environ.get('REOBENCH_TEST_BUDGET', 'enforce') != 'count'
# Fixtures whose users may train a model (the first to ask for a model trains it): the
# tests that request them, directly or through another fixture, are marked slow.
CACHE_FIXTURES = ('trained_models',)


class BudgetError(AssertionError):
    """A test broke the suite's budget rules (see the module docstring)."""


_current: Dict[str, object] = {'item': None}
_cache_training = {'depth': 0}


def current_item() -> Optional[pytest.Item]:
    return _current['item']  # type: ignore[return-value]


@contextmanager
def cache_training() -> Iterator[None]:
    """Marks the trainings inside as the trained-model cache's own."""
    _cache_training['depth'] += 1
    try:
        yield
    finally:
        _cache_training['depth'] -= 1


def record(event: str, **detail) -> None:
    """Append one event to the run's ledger (a no-op outside a configured run)."""
    path = os.environ.get(LEDGER_ENV)
    if not path:
        return
    item = current_item()
    entry = dict(event=event, test=item.nodeid if item is not None else None,
                 worker=os.environ.get('PYTEST_XDIST_WORKER', 'main'), **detail)
    # one write of one line in append mode: lines of concurrent workers do not interleave
    with open(path, 'a', encoding='utf-8') as handle:
        handle.write(json.dumps(entry, sort_keys=True) + '\n')


def read_ledger(path: str) -> List[dict]:
    if not osp.isfile(path):
        return []
    with open(path, encoding='utf-8') as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _argv(args) -> List[str]:
    if isinstance(args, (str, bytes, os.PathLike)):
        import shlex
        return shlex.split(os.fsdecode(args))
    return [os.fsdecode(a) if isinstance(a, (bytes, os.PathLike)) else str(a) for a in args]


def classify(argv: Sequence[str]) -> Dict[str, object]:
    """What a subprocess command starts: ``kind`` ('python', 'shell' or 'other') and
    ``trains`` (it runs a ``train.py``)."""
    program = osp.basename(argv[0]) if argv else ''
    script = None
    if argv and (argv[0] == sys.executable or program.startswith('python')):
        kind = 'python'
        for arg in argv[1:]:  # the script: the first argument that is not an option
            if arg in ('-c', '-m'):
                break
            if not arg.startswith('-'):
                script = arg
                break
    elif program in ('bash', 'sh') or program.endswith('.sh'):
        kind = 'shell'
        script = argv[0] if program.endswith('.sh') else next(
            (a for a in argv[1:] if not a.startswith('-')), None)
    else:
        kind = 'other'
    name = osp.basename(script) if script else ''
    trains = name == 'train.py' or name.endswith('_train.sh')
    return dict(kind=kind, trains=trains)


def check_subprocess(item: pytest.Item, argv: Sequence[str]) -> None:
    """Raise :class:`BudgetError` where ``item`` may not start ``argv``."""
    what = classify(argv)
    if what['kind'] == 'other':  # not an interpreter (MMEngine's environment report runs gcc)
        return
    command = ' '.join(argv)[:200]
    if item.get_closest_marker('slow') is None:
        raise BudgetError(
            f'{item.nodeid} starts a subprocess ({command}) but is not marked slow: mark it '
            '@pytest.mark.slow, or call the tool in process (helpers.call_tool)')
    if what['trains'] and item.get_closest_marker('trains') is None:
        raise BudgetError(
            f'{item.nodeid} trains a model in a subprocess ({command}) outside the trained-'
            'model cache: use the trained_models fixture, or mark the test '
            '@pytest.mark.trains(reason) when training is what it checks')


def check_training(item: Optional[pytest.Item]) -> str:
    """Who trains now: 'cache', 'test' (a test marked ``trains``) or 'outside a test';
    raise :class:`BudgetError` for a test that may not train."""
    if _cache_training['depth']:
        return 'cache'
    if item is None:
        return 'outside a test'
    if item.get_closest_marker('trains') is None:
        raise BudgetError(
            f'{item.nodeid} trains a model outside the trained-model cache: use the '
            'trained_models fixture (tests/model_cache.py), or mark the test '
            '@pytest.mark.trains(reason) when training is what it checks')
    return 'test'


def _starting(argv: List[str]) -> None:
    """A test is about to start ``argv``: checked (unless only counting) and recorded."""
    item = current_item()
    if item is None:
        return
    if ENFORCE:
        check_subprocess(item, argv)
    record('subprocess', argv=argv[:6], **classify(argv))


_original_popen_init = subprocess.Popen.__init__


def _guarded_popen_init(self, args, *positional, **keywords):
    _starting(_argv(args))
    _original_popen_init(self, args, *positional, **keywords)


_original_spawnv_passfds = None


def _guarded_spawnv_passfds(path, args, passfds):
    """multiprocessing's ``spawn`` start method (a pool of MMRotate's mAP, say) starts
    interpreters without ``subprocess.Popen``: guarded and counted the same way."""
    _starting([os.fsdecode(path), '-c', 'multiprocessing spawn'])
    return _original_spawnv_passfds(path, args, passfds)


def _patch_spawn() -> None:
    global _original_spawnv_passfds
    import multiprocessing.util
    if _original_spawnv_passfds is None:
        _original_spawnv_passfds = multiprocessing.util.spawnv_passfds
    multiprocessing.util.spawnv_passfds = _guarded_spawnv_passfds


def _patch_runner() -> None:
    from mmengine.runner import Runner
    if getattr(Runner.train, '_budget_guard', False):
        return
    original = Runner.train

    def train(self, *args, **kwargs):
        who = check_training(current_item()) if ENFORCE else (
            'cache' if _cache_training['depth'] else 'test')
        record('training', by=who, work_dir=str(getattr(self, 'work_dir', '')))
        return original(self, *args, **kwargs)

    train._budget_guard = True  # type: ignore[attr-defined]
    Runner.train = train


def pytest_configure(config):
    config.addinivalue_line(
        'markers', 'slow: trains a model or starts a subprocess (seconds to minutes); '
        'deselected by make test-fast, run by make test and CI')
    config.addinivalue_line(
        'markers', 'trains(reason): trains a model itself instead of reading the '
        "trained-model cache, because training is what it checks; implies slow")
    config.addinivalue_line(
        'markers', 'long: runs for minutes; scheduled first, so that the xdist workers '
        'finish together instead of one waiting for it at the end')
    if not hasattr(config, 'workerinput'):  # the controller, or a run without xdist
        if not os.environ.get(LEDGER_ENV):
            handle, path = tempfile.mkstemp(prefix='reobench-test-ledger-', suffix='.jsonl')
            os.close(handle)
            os.environ[LEDGER_ENV] = path
            config._budget_ledger_owned = path  # type: ignore[attr-defined]
    subprocess.Popen.__init__ = _guarded_popen_init
    _patch_spawn()
    _patch_runner()


def pytest_unconfigure(config):
    subprocess.Popen.__init__ = _original_popen_init
    if _original_spawnv_passfds is not None:
        import multiprocessing.util
        multiprocessing.util.spawnv_passfds = _original_spawnv_passfds
    owned = getattr(config, '_budget_ledger_owned', None)
    if owned and osp.isfile(owned):
        os.unlink(owned)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """``trains`` and the cache's fixtures imply ``slow`` (before ``-m`` deselects);
    ``long`` tests go first (a stable sort: the rest keep their order, so module fixtures
    are still set up once)."""
    items.sort(key=lambda item: item.get_closest_marker('long') is None)
    for item in items:
        if item.get_closest_marker('slow') is not None:
            continue
        names = getattr(item, 'fixturenames', ())
        if item.get_closest_marker('trains') is not None or any(
                name in names for name in CACHE_FIXTURES):
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _current['item'] = item
    try:
        yield
    finally:
        _current['item'] = None


def summary(entries: List[dict]) -> str:
    trainings = [e for e in entries if e['event'] == 'training']
    processes = [e for e in entries if e['event'] == 'subprocess']
    by: Dict[str, int] = {}
    for entry in trainings:
        by[entry['by']] = by.get(entry['by'], 0) + 1
    sub_trainings = sum(1 for e in processes if e['trains'])
    pythons = sum(1 for e in processes if e['kind'] == 'python')
    shells = sum(1 for e in processes if e['kind'] == 'shell')
    parts = ', '.join(f'{n} by {who}' for who, n in sorted(by.items())) or 'none'
    return (f'suite budget: {len(trainings)} in-process trainings ({parts}), '
            f'{sub_trainings} trainings in subprocesses; {len(processes)} subprocesses '
            f'({pythons} Python interpreters, {shells} shell scripts, '
            f'{len(processes) - pythons - shells} other)')


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if hasattr(config, 'workerinput'):
        return
    path = os.environ.get(LEDGER_ENV)
    if path:
        terminalreporter.write_line(summary(read_ledger(path)))
