"""The strict checkpoint checker (reobench_mm.engine.checkpoint): unusable files are
refused with an error naming the file and what is wrong, weights that do not fit with
the keys that do not; a sweep refuses such checkpoints and leaves its work dir as it
found it."""
import importlib.util
import logging
import os
import os.path as osp
import pickle
import re

import pytest
import torch
from torch import nn

import reobench_mm  # noqa: F401  (registration)
from helpers import DET_DEMO_CONFIG, PROJECT_ROOT, SEG_DEMO_CONFIG
from reobench_mm.robustness import sweep as sweep_api
from reobench_mm.errors import SweepError
from reobench_mm.robustness.sweep import run_sweep
from reobench_mm.engine.checkpoint import (CheckpointError, CheckpointMismatchError,
                                           load_checkpoint_strict, read_checkpoint)
from sweep_helpers import listing, sweep_options, untrained_checkpoint

SWEEP_TOOL = osp.join(PROJECT_ROOT, 'tools', 'robustness_test.py')


class _RunsCode:
    """Unpickled unrestricted, this would run a shell command that creates a file."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f'touch {self.marker}', ))


def _unusable_file(folder, kind, marker):
    """A checkpoint file of one unusable kind, and the message it must be refused with."""
    path = folder / f'{kind}.pth'
    good = folder / 'good.pth'
    torch.save({'state_dict': {'w': torch.zeros(64, 64)}, 'meta': {}}, good)
    if kind == 'empty':
        path.write_bytes(b'')
        message = r"the checkpoint '.*empty\.pth' is empty \(0 bytes\)"
    elif kind == 'truncated':
        data = good.read_bytes()
        path.write_bytes(data[:len(data) // 2])
        message = r"the checkpoint '.*truncated\.pth' is truncated or corrupt"
    elif kind == 'text':
        path.write_text('model weights: see the release page\n')
        message = r"'.*text\.pth' is not a checkpoint: torch\.save writes a zip archive"
    elif kind == 'malicious':
        torch.save({'state_dict': {}, 'payload': _RunsCode(marker)}, path)
        message = (r'checkpoint .*malicious\.pth holds objects that the weights-only unpickler '
                   r'does not allow \(.*posix\.system')
    elif kind == 'malicious_pickle':  # a plain pickle, not written by torch.save
        with open(path, 'wb') as handle:
            pickle.dump({'state_dict': {}, 'payload': _RunsCode(marker)}, handle)
        message = r'malicious_pickle\.pth holds objects that the weights-only unpickler'
    elif kind == 'tensor':
        torch.save(torch.zeros(3), path)
        message = r"'.*tensor\.pth' is not a checkpoint: it holds a Tensor"
    else:
        raise ValueError(kind)
    return str(path), message


UNUSABLE = ['empty', 'truncated', 'text', 'malicious', 'malicious_pickle', 'tensor']


@pytest.mark.parametrize('kind', UNUSABLE)
def test_unusable_files_are_refused_naming_the_file(kind, tmp_path):
    marker = tmp_path / 'code_ran'
    path, message = _unusable_file(tmp_path, kind, marker)
    with pytest.raises(CheckpointError, match=message) as info:
        read_checkpoint(path)
    assert not isinstance(info.value, CheckpointMismatchError)
    assert not marker.exists(), 'the pickled code ran'
    with pytest.raises(FileNotFoundError, match=r"checkpoint '.*nope\.pth' does not exist"):
        read_checkpoint(str(tmp_path / 'nope.pth'))


class _Tiny(nn.Module):

    def __init__(self, classes=2):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.head = nn.Linear(4, classes)


def _weights(**changes):
    torch.manual_seed(1)
    state = dict(_Tiny().state_dict())
    for key, value in changes.items():
        if value is None:
            state.pop(key)
        else:
            state[key] = value
    return state


def _save(path, state):
    torch.save({'state_dict': state, 'meta': {'iter': 3}}, path)
    return str(path)


def test_fitting_weights_load_into_the_model_or_its_wrapper(tmp_path):
    state = _weights()
    path = _save(tmp_path / 'fits.pth', state)
    model = _Tiny()
    checkpoint = load_checkpoint_strict(model, path, config='tiny.py')
    assert checkpoint['meta'] == {'iter': 3}
    for key, value in model.state_dict().items():
        torch.testing.assert_close(value, state[key])
    # a DataParallel checkpoint ('module.' keys) into a wrapped model, MMEngine's way
    wrapped_path = _save(tmp_path / 'wrapped.pth', {f'module.{k}': v for k, v in state.items()})
    wrapped = nn.DataParallel(_Tiny())
    load_checkpoint_strict(wrapped, wrapped_path)
    torch.testing.assert_close(wrapped.module.head.weight, state['head.weight'])
    # BatchNorm's num_batches_tracked may be absent, as MMEngine allows
    load_checkpoint_strict(_Tiny(), _save(tmp_path / 'old_bn.pth',
                                          _weights(**{'bn.num_batches_tracked': None})))


def test_weights_that_do_not_fit_are_refused_naming_the_keys(tmp_path):
    path = _save(tmp_path / 'other.pth', _weights(**{
        'head.weight': None, 'head.bias': None, 'extra.weight': torch.zeros(2),
        'conv.weight': torch.zeros(4, 3, 5, 5)}))
    with pytest.raises(CheckpointMismatchError) as info:
        load_checkpoint_strict(_Tiny(), path, config='configs/tiny.py')
    assert str(info.value) == (
        f"the checkpoint {path!r} does not fit the model _Tiny of 'configs/tiny.py': "
        'unexpected keys (1): extra.weight; missing keys (2): head.weight, head.bias; '
        'mis-shaped keys (1): conv.weight (checkpoint [4, 3, 5, 5], model [4, 3, 3, 3])')
    mismatch = info.value.mismatch
    assert mismatch.missing == ('head.weight', 'head.bias') and not mismatch.fits
    assert mismatch.unexpected == ('extra.weight', )
    assert mismatch.mis_shaped == (('conv.weight', (4, 3, 5, 5), (4, 3, 3, 3)), )

    # many keys: the first five and a count
    empty = _save(tmp_path / 'empty_state.pth', {'other.weight': torch.zeros(1)})
    with pytest.raises(CheckpointMismatchError,
                       match=r'missing keys \(8\): conv\.weight, conv\.bias, bn\.weight, '
                       r'bn\.bias, bn\.running_mean and 3 more'):
        load_checkpoint_strict(_Tiny(), empty)
    with pytest.raises(CheckpointError, match='holds no weights'):
        load_checkpoint_strict(_Tiny(), 'meta.pth', checkpoint={'meta': {'iter': 1}})


def test_missing_keys_only_by_an_explicit_allow_list(tmp_path):
    path = _save(tmp_path / 'no_head.pth', _weights(**{'head.weight': None, 'head.bias': None}))
    model = _Tiny()
    own_head = model.head.weight.detach().clone()
    load_checkpoint_strict(model, path, allowed_missing=['head.*'])
    torch.testing.assert_close(model.head.weight, own_head)  # keeps its own values
    torch.testing.assert_close(model.conv.weight, _weights()['conv.weight'])
    with pytest.raises(CheckpointMismatchError, match=r'missing keys \(1\): head\.bias'):
        load_checkpoint_strict(_Tiny(), path, allowed_missing=['head.weight'])
    with pytest.raises(TypeError, match='sequence of glob patterns'):
        load_checkpoint_strict(_Tiny(), path, allowed_missing='head.*')


def test_a_non_strict_load_warns_with_the_same_description(tmp_path):
    path = _save(tmp_path / 'partial.pth', _weights(**{'head.weight': torch.zeros(3, 4),
                                                       'head.bias': None}))
    records = []
    logger = logging.getLogger('test_checkpoint_loading.non_strict')
    logger.addHandler(type('Collect', (logging.Handler, ), {'emit': lambda self, r:
                                                           records.append(r)})())
    model = _Tiny()
    load_checkpoint_strict(model, path, strict=False, logger=logger)
    (record, ) = records
    assert record.levelno == logging.WARNING
    assert record.getMessage().startswith(
        f'the checkpoint {path!r} does not fit the model _Tiny: missing keys (1): head.bias; '
        'mis-shaped keys (1): head.weight (checkpoint [3, 4], model [2, 4]) (loaded '
        'non-strictly')
    torch.testing.assert_close(model.conv.weight, _weights()['conv.weight'])


# ----------------------------------------------------------------------------- the sweep

@pytest.fixture(scope='module')
def detector_checkpoint(tmp_path_factory):
    """A checkpoint of the other task's model (the tiny Oriented R-CNN)."""
    return untrained_checkpoint(DET_DEMO_CONFIG,
                                str(tmp_path_factory.mktemp('foreign') / 'detector.pth'))


@pytest.mark.parametrize('kind', UNUSABLE[:4] + ['foreign'])
def test_the_sweep_refuses_unusable_checkpoints_and_leaves_nothing(kind, demo_data, tmp_path,
                                                                   request):
    marker = tmp_path / 'code_ran'
    if kind == 'foreign':
        checkpoint = request.getfixturevalue('detector_checkpoint')
        error, message = sweep_api.CheckpointMismatchError, (
            r"the checkpoint '.*detector\.pth' does not fit the model EncoderDecoder of "
            r"'.*upernet_r18-tiny.*\.py': unexpected keys \(\d+\): .*; missing keys \(\d+\): ")
    else:
        checkpoint, message = _unusable_file(tmp_path, kind, marker)
        error = CheckpointError
    options = sweep_options(osp.join(demo_data, 'potsdam'))[0]
    new_dir = str(tmp_path / 'new_work_dir')
    with pytest.raises(error, match=message) as info:
        run_sweep(SEG_DEMO_CONFIG, checkpoint, corruptions=['haze'], severities=[1],
                  work_dir=new_dir, cfg_options=options)
    assert not osp.exists(new_dir)
    assert not marker.exists(), 'the pickled code ran'
    if kind == 'foreign':  # a SweepError and the checker's error
        assert isinstance(info.value, SweepError)
        assert isinstance(info.value, CheckpointMismatchError)

    # a work dir with earlier contents (and a config dumped by an earlier run) is left
    # exactly as it was
    old_dir = tmp_path / 'old_work_dir'
    (old_dir / 'conditions').mkdir(parents=True)
    (old_dir / 'notes.txt').write_text('earlier run\n')
    (old_dir / osp.basename(SEG_DEMO_CONFIG)).write_text('# dumped by an earlier run\n')
    before = listing(str(old_dir))
    with pytest.raises(error, match=message):
        run_sweep(SEG_DEMO_CONFIG, checkpoint, corruptions=['haze'], severities=[1],
                  work_dir=str(old_dir), cfg_options=options)
    assert listing(str(old_dir)) == before


def test_the_sweep_tool_reports_an_unusable_checkpoint_in_one_line(demo_data, tmp_path, capsys):
    checkpoint, _ = _unusable_file(tmp_path, 'truncated', tmp_path / 'marker')
    spec = importlib.util.spec_from_file_location('tool_robustness_test', SWEEP_TOOL)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    work_dir = str(tmp_path / 'work')
    code = tool.main([SEG_DEMO_CONFIG, checkpoint, '--corruptions', 'haze', '--severities',
                      '1', '--work-dir', work_dir, '--cfg-options',
                      *sweep_options(osp.join(demo_data, 'potsdam'))[1]])
    assert code == 2
    err = capsys.readouterr().err
    assert 'Traceback' not in err
    (line, ) = [line for line in err.splitlines() if line.startswith('error:')]
    assert line.startswith(f"error: the checkpoint '{checkpoint}' is truncated or corrupt")
    assert not osp.exists(work_dir)


# ----------------------------------------------------------------------------- tools/test.py

TEST_TOOL = osp.join(PROJECT_ROOT, 'tools', 'test.py')


def _test_tool(arguments, monkeypatch):
    spec = importlib.util.spec_from_file_location('tool_test', TEST_TOOL)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    monkeypatch.setattr('sys.argv', ['test.py', *arguments])
    return tool.main()


@pytest.mark.parametrize('kind', ['empty', 'truncated', 'malicious', 'foreign'])
def test_the_test_tool_loads_as_strictly_as_the_sweep(kind, demo_data, tmp_path, request,
                                                      monkeypatch, capsys):
    """A checkpoint of another model (here: of the other task) or an unusable file: exit
    code 2, the checker's message, no metrics file and nothing else written."""
    marker = tmp_path / 'code_ran'
    if kind == 'foreign':
        checkpoint = request.getfixturevalue('detector_checkpoint')
        message = (r"error: the checkpoint '.*detector\.pth' does not fit the model "
                   r"EncoderDecoder of '.*upernet_r18-tiny.*\.py': unexpected keys")
    else:
        checkpoint, message = _unusable_file(tmp_path, kind, marker)
        message = 'error: .*' + message
    work_dir = tmp_path / 'work'
    arguments = [SEG_DEMO_CONFIG, checkpoint, '--work-dir', str(work_dir), '--corruption',
                 'cloud', '--severity', '3', '--cfg-options',
                 *sweep_options(osp.join(demo_data, 'potsdam'))[1]]
    assert _test_tool(arguments, monkeypatch) == 2
    err = capsys.readouterr().err
    assert 'Traceback' not in err
    (line, ) = [line for line in err.splitlines() if line.startswith('error:')]
    assert re.match(message, line), line
    assert not work_dir.exists(), listing(str(work_dir))
    assert not marker.exists(), 'the pickled code ran'
    if kind == 'foreign':
        # the explicit opt-out loads what fits, says what did not, and tests
        code = _test_tool(arguments + ['log_level=INFO', '--partial-checkpoint'],
                          monkeypatch)
        assert code == 0
        assert (work_dir / 'metrics_cloud_s3.json').is_file()
        logs = ''.join(open(osp.join(root, name)).read()
                       for root, _, names in os.walk(work_dir) for name in names
                       if name.endswith('.log'))
        assert 'does not fit the model' in logs and 'loaded non-strictly' in logs
