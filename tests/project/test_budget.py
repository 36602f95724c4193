"""The suite's budget guards (``tests/budget.py``): a test that trains a model outside the
trained-model cache, or starts a subprocess without the ``slow`` mark, fails; the cache's
users and ``trains`` tests are slow; the ledger counts what a run trained and started."""
import os
import os.path as osp
import sys

import pytest

import budget
from helpers import PROJECT_ROOT

INNER_TESTS = '''
import subprocess
import sys

import pytest
from mmengine.runner import Runner


def test_starts_python_unmarked():
    subprocess.run([sys.executable, '-c', 'pass'], check=True)


@pytest.mark.slow
def test_starts_python_marked_slow():
    subprocess.run([sys.executable, '-c', 'pass'], check=True)


@pytest.mark.slow
def test_trains_in_a_subprocess_unmarked():
    subprocess.run([sys.executable, 'tools/train.py', 'config.py'])


def test_trains_in_process_unmarked():
    Runner.train(None)


@pytest.mark.trains('training is what it checks')
def test_trains_in_process_marked():
    with pytest.raises(AttributeError):  # past the guard: MMEngine's own train
        Runner.train(None)


def test_uses_the_cache(trained_models):
    pass


def test_plain():
    pass
'''

INNER_CONFTEST = '''
import pytest

@pytest.fixture
def trained_models():
    return None
'''


@pytest.mark.parametrize('argv, kind, trains', [
    ([sys.executable, '-c', 'pass'], 'python', False),
    (['python3', 'tools/train.py', 'a.py'], 'python', True),
    (['python3', '-u', 'tools/train.py', 'a.py'], 'python', True),
    ([sys.executable, '-c', 'import runpy', 'tools/train.py', '--help'], 'python', False),
    ([sys.executable, 'tools/test.py', 'a.py', 'train.py'], 'python', False),
    (['bash', 'tools/install.sh'], 'shell', False),
    (['tools/dist_train.sh', 'a.py', '2'], 'shell', True),
    (['git', 'status'], 'other', False),
])
def test_commands_are_classified(argv, kind, trains):
    assert budget.classify(argv) == dict(kind=kind, trains=trains)


def test_the_summary_counts_every_event():
    entries = [dict(event='training', by='cache'), dict(event='training', by='cache'),
               dict(event='training', by='test'),
               dict(event='subprocess', kind='python', trains=True),
               dict(event='subprocess', kind='shell', trains=False),
               dict(event='subprocess', kind='python', trains=False)]
    assert budget.summary(entries) == (
        'suite budget: 3 in-process trainings (2 by cache, 1 by test), 1 trainings in '
        'subprocesses; 3 subprocesses (2 Python interpreters, 1 shell scripts, 0 other)')


@pytest.mark.slow
def test_the_guards_fail_unmarked_trainings_and_subprocesses(pytester, monkeypatch, tmp_path):
    pytester.makepyfile(test_inner=INNER_TESTS)
    pytester.makeconftest(INNER_CONFTEST)
    ledger = tmp_path / 'ledger.jsonl'
    monkeypatch.setenv(budget.LEDGER_ENV, str(ledger))
    monkeypatch.setenv('PYTHONPATH', os.pathsep.join(
        [osp.join(PROJECT_ROOT, 'tests'), os.environ.get('PYTHONPATH', '')]))
    result = pytester.runpytest_subprocess('-p', 'budget', '-p', 'no:cacheprovider', '-rA')
    outcomes = result.parseoutcomes()
    assert outcomes.get('failed') == 3 and outcomes.get('passed') == 4, result.stdout.str()
    output = result.stdout.str()
    for name in ('test_starts_python_unmarked', 'test_trains_in_a_subprocess_unmarked',
                 'test_trains_in_process_unmarked'):
        assert f'FAILED test_inner.py::{name}' in output
    assert 'is not marked slow' in output
    assert 'trains a model in a subprocess' in output
    assert 'trains a model outside the trained-model cache' in output
    entries = [e for e in budget.read_ledger(str(ledger))
               if (e['test'] or '').startswith('test_inner.py')]
    assert [e['test'].split('::')[-1] for e in entries] == [
        'test_starts_python_marked_slow', 'test_trains_in_process_marked']
    assert 'suite budget: 1 in-process trainings (1 by test)' in output

    # the cache's users and the trains tests are slow: the fast suite leaves them out
    fast = pytester.runpytest_subprocess('-p', 'budget', '-p', 'no:cacheprovider',
                                         '-m', 'not slow', '--collect-only', '-q')
    collected = fast.stdout.str()
    assert 'test_uses_the_cache' not in collected
    assert 'test_trains_in_process_marked' not in collected
    assert 'test_plain' in collected and 'test_trains_in_process_unmarked' in collected
