"""MMEngine checkpoints load under torch's weights_only default; nothing else does."""
import argparse
import os
import pickle

import numpy as np
import pytest
import torch
from mmengine.logging import HistoryBuffer, MessageHub
from mmengine.runner.checkpoint import _load_checkpoint

from reobench_mm import fileio as compat


@pytest.fixture
def mmengine_style_checkpoint(tmp_path):
    """A checkpoint holding what MMEngine's Runner.save_checkpoint writes."""
    hub = MessageHub(f'compat-test-{id(tmp_path)}')
    for step, loss in enumerate([1.5, 1.25, 1.0]):
        hub.update_scalar('train/loss', loss)
        hub.update_scalar('train/lr', np.float64(1e-3 / (step + 1)))
    hub.update_info('eta', np.float64(12.5))
    ckpt = dict(
        meta=dict(epoch=0, iter=3, seed=np.int64(7), dataset_meta=dict(classes=('a', 'b'))),
        state_dict={'w': torch.arange(4.0)},
        message_hub=hub.state_dict(),
        optimizer={'state': {}, 'param_groups': [{'lr': 1e-3}]},
    )
    path = tmp_path / 'iter_3.pth'
    torch.save(ckpt, path)
    return path


@pytest.fixture(autouse=True)
def _restore_extra_globals(monkeypatch):
    monkeypatch.setattr(compat, '_extra_globals', [])
    monkeypatch.delenv(compat.TRUST_ENV_VAR, raising=False)


def test_torch_default_refuses_mmengine_checkpoints(mmengine_style_checkpoint):
    """The problem being fixed: plain torch.load on this torch version refuses them."""
    with pytest.raises(pickle.UnpicklingError):
        torch.load(mmengine_style_checkpoint)


def test_mmengine_loader_reads_them_weights_only(mmengine_style_checkpoint):
    ckpt = _load_checkpoint(str(mmengine_style_checkpoint), map_location='cpu')
    buffer = ckpt['message_hub']['log_scalars']['train/loss']
    assert isinstance(buffer, HistoryBuffer)
    np.testing.assert_allclose(buffer.data[0], [1.5, 1.25, 1.0])
    assert buffer.mean() == pytest.approx(1.25)
    assert ckpt['meta']['seed'] == 7
    assert ckpt['message_hub']['runtime_info']['eta'] == 12.5
    torch.testing.assert_close(ckpt['state_dict']['w'], torch.arange(4.0))


class _RunsCode:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f'touch {self.marker}', ))


class _ReachesAttribute:
    def __reduce__(self):
        return (getattr, (HistoryBuffer, 'update'))


def test_code_execution_is_refused(tmp_path):
    marker = tmp_path / 'pwned'
    path = tmp_path / 'evil.pth'
    torch.save({'x': _RunsCode(marker)}, path)
    with pytest.raises(pickle.UnpicklingError, match='system'):
        _load_checkpoint(str(path))
    assert not marker.exists()


def test_getattr_is_limited_to_history_buffer_statistics(tmp_path):
    path = tmp_path / 'attr.pth'
    torch.save({'x': _ReachesAttribute()}, path)
    with pytest.raises(pickle.UnpicklingError, match="refusing getattr.*'update'"):
        _load_checkpoint(str(path))


def test_unknown_types_name_the_type_and_the_ways_out(tmp_path):
    path = tmp_path / 'ns.pth'
    torch.save({'args': argparse.Namespace(lr=0.1)}, path)
    with pytest.raises(pickle.UnpicklingError) as info:
        _load_checkpoint(str(path))
    message = str(info.value)
    assert 'argparse.Namespace' in message and compat.TRUST_ENV_VAR in message
    assert 'allow_checkpoint_globals' in message

    compat.allow_checkpoint_globals([argparse.Namespace])
    assert _load_checkpoint(str(path))['args'].lr == 0.1


def test_trusted_files_load_unrestricted_on_request(tmp_path, monkeypatch):
    path = tmp_path / 'ns.pth'
    torch.save({'args': argparse.Namespace(lr=0.2)}, path)
    monkeypatch.setenv(compat.TRUST_ENV_VAR, '1')
    assert _load_checkpoint(str(path))['args'].lr == 0.2


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match='does not exist'):
        compat.load_local_checkpoint(str(tmp_path / 'nope.pth'))
