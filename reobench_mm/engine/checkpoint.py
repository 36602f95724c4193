"""Loading MMEngine checkpoints under torch's ``weights_only`` default.

Since torch 2.6, ``torch.load`` unpickles with ``weights_only=True`` unless told
otherwise, and MMEngine 0.10.7 loads local files with the default. Its own
checkpoints then fail to load for testing and resuming: they carry the message
hub (``HistoryBuffer`` objects holding numpy arrays and, pickled as
``getattr(HistoryBuffer, 'mean')`` and the like, its statistics methods) and
numpy scalars.

Rather than switching the safe unpickler off, reobench_mm replaces MMEngine's
local-file loader with one that keeps ``weights_only=True`` and allows exactly the
types MMEngine writes (:data:`MMENGINE_CHECKPOINT_GLOBALS`). Any other object in a
file is refused with an error naming it. For files you trust that hold other
objects, either allow the types with :func:`allow_checkpoint_globals` or set the
environment variable ``REOBENCH_TRUST_CHECKPOINTS=1`` to load them unrestricted.
The reader itself (:func:`load_local_checkpoint`) lives in :mod:`reobench_mm.fileio`,
below the models that read pretrained weights with it; this module installs it in
MMEngine and exports it with the rest of the checkpoint API.

On top of that loader, one strict checker is shared by the robustness sweep and
``tools/test.py``:

- :func:`read_checkpoint` reads a checkpoint file and turns every way it can be unusable
  (missing, empty, truncated or corrupt, not a checkpoint, holding objects the
  weights-only unpickler refuses) into a :class:`CheckpointError` naming the file;
- :func:`load_checkpoint_strict` loads it into a model with MMEngine's own machinery and
  raises :class:`CheckpointMismatchError` naming the missing, unexpected and mis-shaped
  keys unless every key fits (missing keys only where an explicit allow-list of glob
  patterns says so).
"""
import logging
import os.path as osp
import pickle
import re
import zipfile
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, List, Mapping, Optional, Sequence, Tuple, Union

import torch
from mmengine.logging import print_log
from mmengine.runner.checkpoint import CheckpointLoader

from ..fileio import (MMENGINE_CHECKPOINT_GLOBALS, TRUST_ENV_VAR, allow_checkpoint_globals,
                      load_local_checkpoint)

__all__ = [
    'MMENGINE_CHECKPOINT_GLOBALS', 'allow_checkpoint_globals', 'load_local_checkpoint',
    'TRUST_ENV_VAR', 'CheckpointError', 'CheckpointMismatchError', 'KeyMismatch',
    'read_checkpoint', 'load_checkpoint_strict', 'checkpoint_state_dict'
]


def load_from_local_weights_only(filename: str, map_location: Optional[Any] = None) -> Any:
    """MMEngine ``CheckpointLoader`` scheme for local paths (logged as
    ``local_weights_only``)."""
    return load_local_checkpoint(filename, map_location)


# Local paths have the empty prefix in MMEngine's CheckpointLoader; this replaces its
# loader for Runner.load_checkpoint, Runner.resume and init_cfg=dict(type='Pretrained').
CheckpointLoader.register_scheme(prefixes='', loader=load_from_local_weights_only, force=True)


# ----------------------------------------------------------------------------- strict checks

class CheckpointError(ValueError):
    """A checkpoint file that cannot be used: empty, truncated or corrupt, not a
    checkpoint, or holding objects that the weights-only unpickler refuses. The message
    names the file and what is wrong with it."""


@dataclass(frozen=True)
class KeyMismatch:
    """How a state dict differs from a model, as MMEngine's loader found it.

    Attributes:
        missing: model keys without a value in the checkpoint (not allowed).
        unexpected: checkpoint keys the model does not have.
        mis_shaped: ``(key, checkpoint shape, model shape)`` of keys whose shapes differ.
        allowed_missing: missing keys that the ``allowed_missing`` patterns cover.
    """
    missing: Tuple[str, ...] = ()
    unexpected: Tuple[str, ...] = ()
    mis_shaped: Tuple[Tuple[str, Tuple[int, ...], Tuple[int, ...]], ...] = ()
    allowed_missing: Tuple[str, ...] = ()

    @property
    def fits(self) -> bool:
        """Whether every key fits (allowed missing keys aside)."""
        return not (self.missing or self.unexpected or self.mis_shaped)

    def describe(self, shown: int = 5) -> str:
        """``unexpected keys (n): a, b, ...; missing keys (n): ...; mis-shaped keys (n):
        key (checkpoint [..], model [..])``: the first ``shown`` keys of each kind that
        occurs, and how many there are."""

        def listing(items: Sequence[str]) -> str:
            text = ', '.join(items[:shown])
            return text + (f' and {len(items) - shown} more' if len(items) > shown else '')

        parts = []
        if self.unexpected:
            parts.append(f'unexpected keys ({len(self.unexpected)}): '
                         f'{listing(self.unexpected)}')
        if self.missing:
            parts.append(f'missing keys ({len(self.missing)}): {listing(self.missing)}')
        if self.mis_shaped:
            parts.append(f'mis-shaped keys ({len(self.mis_shaped)}): ' + listing([
                f'{key} (checkpoint {list(ckpt)}, model {list(model)})'
                for key, ckpt, model in self.mis_shaped]))
        return '; '.join(parts) if parts else 'every key fits'


class CheckpointMismatchError(CheckpointError):
    """A checkpoint whose weights do not fit the model (missing, unexpected or mis-shaped
    keys); ``mismatch`` holds the :class:`KeyMismatch`."""

    def __init__(self, message: str, mismatch: Optional[KeyMismatch] = None) -> None:
        super().__init__(message)
        self.mismatch = mismatch


#: The key revision MMEngine's loaders apply (a ``DataParallel`` prefix is stripped).
REVISE_KEYS = ((r'^module\.', ''), )
_ZIP_MAGIC = b'PK'
_PICKLE_PROTOCOL_OPCODE = b'\x80'
_SILENT = logging.getLogger('reobench_mm.checkpoint.silent')
_SILENT.addHandler(logging.NullHandler())
_SILENT.propagate = False


def _one_line(error: BaseException, limit: int = 300) -> str:
    text = ' '.join(str(error).split()) or type(error).__name__
    return text if len(text) <= limit else text[:limit] + ' ...'


def read_checkpoint(filename: str,
                    map_location: Union[str, torch.device, None] = 'cpu') -> dict:
    """Read a checkpoint file (or URL) into a dict, refusing every unusable file clearly.

    Local files are read with the weights-only loader of this module (MMEngine's types
    allowed, nothing else is ever unpickled, see :func:`load_local_checkpoint`); URLs and
    other schemes go through MMEngine's ``CheckpointLoader``.

    Args:
        filename: path of the checkpoint, or a URL MMEngine's ``CheckpointLoader`` reads.
        map_location: as for ``torch.load`` (default: the CPU).

    Returns:
        The checkpoint: a dict (MMEngine's ``{'meta', 'state_dict', ...}``, or a bare
        state dict).

    Raises:
        FileNotFoundError: a local ``filename`` does not exist.
        CheckpointError: the file is empty (0 bytes), truncated or corrupt, not a
            checkpoint (neither the zip archive ``torch.save`` writes nor a legacy torch
            pickle, or one holding something other than a dict), or it holds objects the
            weights-only unpickler refuses (code execution, unknown classes). The message
            names the file.
    """
    if CheckpointLoader._get_checkpoint_loader(filename) is not load_from_local_weights_only:
        try:
            checkpoint = CheckpointLoader.load_checkpoint(filename, map_location)
        except FileNotFoundError:
            raise
        except Exception as error:  # a remote backend: any failure is an unusable file
            raise CheckpointError(f'cannot read the checkpoint {filename!r}: '
                                  f'{type(error).__name__}: {_one_line(error)}') from error
        return _check_is_checkpoint(checkpoint, filename)
    path = osp.expanduser(filename)
    if not osp.isfile(path):
        raise FileNotFoundError(f'checkpoint {filename!r} does not exist')
    size = osp.getsize(path)
    if size == 0:
        raise CheckpointError(f'the checkpoint {filename!r} is empty (0 bytes): an '
                              'interrupted download or copy? Fetch or save it again')
    with open(path, 'rb') as handle:
        head = handle.read(8)
    if head.startswith(_ZIP_MAGIC):
        if not zipfile.is_zipfile(path):
            raise CheckpointError(
                f'the checkpoint {filename!r} is truncated or corrupt: it starts as the zip '
                f'archive torch.save writes but has no end-of-archive record ({size} bytes; '
                'was a download or copy cut short?)')
    elif not head.startswith(_PICKLE_PROTOCOL_OPCODE):
        raise CheckpointError(
            f'{filename!r} is not a checkpoint: torch.save writes a zip archive (before '
            f'torch 1.6 a pickle), and this file starts with {head!r}')
    try:
        checkpoint = load_local_checkpoint(path, map_location)
    except pickle.UnpicklingError as error:  # objects outside the allow-list
        raise CheckpointError(_one_line(error, limit=1000)) from error
    except (RuntimeError, OSError, EOFError, KeyError, ValueError, IndexError, TypeError,
            AttributeError, zipfile.BadZipFile) as error:
        raise CheckpointError(
            f'cannot read the checkpoint {filename!r} ({size} bytes; truncated or '
            f'corrupt?): {type(error).__name__}: {_one_line(error)}') from error
    return _check_is_checkpoint(checkpoint, filename)


def _check_is_checkpoint(checkpoint: Any, filename: str) -> dict:
    if not isinstance(checkpoint, dict):
        raise CheckpointError(
            f'{filename!r} is not a checkpoint: it holds a {type(checkpoint).__name__}, '
            'expected a dict (MMEngine\'s {"meta", "state_dict", ...} or a state dict)')
    return checkpoint


def checkpoint_state_dict(checkpoint: Mapping[str, Any], filename: str) -> Mapping[str, Any]:
    """The weights of a checkpoint dict: its ``state_dict``, or the dict itself when it
    has none (a bare state dict), as MMEngine reads them.

    Raises:
        CheckpointError: the weights are not a mapping, or a non-empty mapping without
            a single tensor (not a checkpoint of weights).
    """
    state_dict = checkpoint['state_dict'] if 'state_dict' in checkpoint else checkpoint
    if not isinstance(state_dict, Mapping):
        raise CheckpointError(f'{filename!r}: "state_dict" is a {type(state_dict).__name__}, '
                              'expected a mapping of parameter names to tensors')
    if state_dict and not any(isinstance(v, torch.Tensor) for v in state_dict.values()):
        raise CheckpointError(
            f'{filename!r} holds no weights: no tensor among its entries '
            f'{sorted(map(str, state_dict))[:5]}; expected a state dict or '
            '{"state_dict": ...}')
    return state_dict


def _unwrap_model(model: torch.nn.Module) -> torch.nn.Module:
    """The module MMEngine's loaders load into: model wrappers (DDP, MMEngine's) and
    test-time-augmentation models unwrapped."""
    from mmengine.model import BaseTTAModel, is_model_wrapper
    while is_model_wrapper(model) or isinstance(model, BaseTTAModel):
        model = model.module
    return model


def _mis_shaped(model: torch.nn.Module, state_dict: Mapping[str, Any]
                ) -> List[Tuple[str, Tuple[int, ...], Tuple[int, ...]]]:
    """Keys whose tensor shape in ``state_dict`` differs from the model's (what torch's
    ``_load_from_state_dict`` reports as a size mismatch, its 1-element-to-scalar case
    aside)."""
    revised = {}
    for key, value in state_dict.items():
        for pattern, replacement in REVISE_KEYS:
            key = re.sub(pattern, replacement, key)
        revised[key] = value
    found = []
    for key, own in model.state_dict().items():
        theirs = revised.get(key)
        if not isinstance(theirs, torch.Tensor) or \
                isinstance(own, torch.nn.parameter.UninitializedParameter):
            continue
        if own.dim() == 0 and theirs.dim() == 1:  # torch loads the first element
            continue
        if tuple(theirs.shape) != tuple(own.shape):
            found.append((key, tuple(theirs.shape), tuple(own.shape)))
    return found


def load_checkpoint_strict(model: torch.nn.Module, filename: str, *,
                           config: Optional[str] = None,
                           allowed_missing: Sequence[str] = (),
                           checkpoint: Optional[dict] = None, strict: bool = True,
                           map_location: Union[str, torch.device, None] = 'cpu',
                           logger: Union[str, logging.Logger, None] = 'current') -> dict:
    """Load a checkpoint into ``model``; every key must fit.

    The weights go in with MMEngine's ``_load_checkpoint_to_model`` (its key revision,
    state-dict metadata and per-module ``_load_from_state_dict``) into the model that
    MMEngine's ``load_checkpoint`` loads into (model wrappers such as
    ``MMDistributedDataParallel`` and TTA models unwrapped). What did not fit is read from
    that load: the missing and unexpected keys it collects (``num_batches_tracked``
    buffers of BatchNorm ignored, as MMEngine does), plus the keys whose shapes differ.

    Args:
        model: the model (or a wrapper of it).
        filename: the checkpoint's path or URL (named in the messages).
        config: the config the model was built from, named in the messages.
        allowed_missing: glob patterns (``fnmatch``, e.g. ``'auxiliary_head.*'``) of model
            keys that may be missing from the checkpoint (they keep the model's own
            values). Unexpected and mis-shaped keys are never allowed.
        checkpoint: the checkpoint dict when already read (:func:`read_checkpoint`, e.g.
            to run the runner's ``after_load_checkpoint`` hooks on it first); read from
            ``filename`` otherwise.
        strict: raise when something does not fit (default). ``strict=False`` loads what
            fits and logs the same description as a warning (for deliberate partial
            loads, e.g. ``tools/test.py`` with its opt-out flag).
        map_location: as for ``torch.load`` when the file is read here.
        logger: where the warning (non-strict) and the note about allowed missing keys go
            (MMEngine's ``print_log`` argument).

    Returns:
        The checkpoint dict (``meta``, ``state_dict``, ...).

    Raises:
        FileNotFoundError, CheckpointError: as :func:`read_checkpoint`.
        CheckpointMismatchError: (``strict``) missing keys not covered by
            ``allowed_missing``, unexpected or mis-shaped keys. One message format:
            ``the checkpoint 'F' does not fit the model M of 'CONFIG': unexpected keys
            (n): ...; missing keys (n): ...; mis-shaped keys (n): key (checkpoint [..],
            model [..])`` (the first five of each, and how many there are).
        TypeError: ``allowed_missing`` is a single string instead of a sequence.
    """
    from mmengine.runner.checkpoint import _load_checkpoint_to_model
    if isinstance(allowed_missing, str):
        raise TypeError('allowed_missing takes a sequence of glob patterns, e.g. '
                        f'["auxiliary_head.*"], not one string ({allowed_missing!r})')
    patterns = tuple(allowed_missing)
    if checkpoint is None:
        checkpoint = read_checkpoint(filename, map_location)
    else:
        _check_is_checkpoint(checkpoint, filename)
    state_dict = checkpoint_state_dict(checkpoint, filename)
    target = _unwrap_model(model)
    found = {}

    def record(module: torch.nn.Module, incompatible: Any) -> None:
        # the model's own post-hook runs once, after all its children have loaded
        found['missing'] = list(incompatible.missing_keys)
        found['unexpected'] = list(incompatible.unexpected_keys)

    handle = target.register_load_state_dict_post_hook(record)
    try:
        _load_checkpoint_to_model(target, checkpoint, strict=False, logger=_SILENT,
                                  revise_keys=[tuple(p) for p in REVISE_KEYS])
    finally:
        handle.remove()
    missing = [k for k in found.get('missing', []) if 'num_batches_tracked' not in k]
    allowed = [k for k in missing if any(fnmatchcase(k, p) for p in patterns)]
    mismatch = KeyMismatch(
        missing=tuple(k for k in missing if k not in set(allowed)),
        unexpected=tuple(found.get('unexpected', [])),
        mis_shaped=tuple(_mis_shaped(target, state_dict)), allowed_missing=tuple(allowed))
    source = f' of {config!r}' if config else ''
    if not mismatch.fits:
        message = (f'the checkpoint {filename!r} does not fit the model '
                   f'{type(target).__name__}{source}: {mismatch.describe()}')
        if strict:
            raise CheckpointMismatchError(message, mismatch)
        print_log(message + ' (loaded non-strictly: the keys listed keep the model\'s own '
                  'values)', logger=logger, level=logging.WARNING)
    if mismatch.allowed_missing:
        print_log(f'{len(allowed)} keys of the model {type(target).__name__}{source} are not '
                  f'in {filename!r} and keep their own values (allowed_missing '
                  f'{list(patterns)}): {", ".join(allowed[:5])}'
                  + (' ...' if len(allowed) > 5 else ''), logger=logger, level=logging.INFO)
    return checkpoint
