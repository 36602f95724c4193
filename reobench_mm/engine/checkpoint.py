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
import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, List, Mapping, Optional, Sequence, Tuple, Union

import torch
from mmengine.logging import print_log
from mmengine.runner.checkpoint import CheckpointLoader

from ..errors import CheckpointError, UnsafeCheckpointError
from ..fileio import (MMENGINE_CHECKPOINT_GLOBALS, TRUST_ENV_VAR, _one_line,
                      allow_checkpoint_globals, load_local_checkpoint)

__all__ = [
    'MMENGINE_CHECKPOINT_GLOBALS', 'allow_checkpoint_globals', 'load_local_checkpoint',
    'TRUST_ENV_VAR', 'CheckpointError', 'UnsafeCheckpointError', 'CheckpointMismatchError',
    'KeyMismatch',
    'read_checkpoint', 'load_checkpoint_strict', 'checkpoint_state_dict',
    'check_checkpoint_classes'
]


def load_from_local_weights_only(filename: str, map_location: Optional[Any] = None) -> Any:
    """MMEngine ``CheckpointLoader`` scheme for local paths (logged as
    ``local_weights_only``)."""
    return load_local_checkpoint(filename, map_location)


# Local paths have the empty prefix in MMEngine's CheckpointLoader; this replaces its
# loader for Runner.load_checkpoint, Runner.resume and init_cfg=dict(type='Pretrained').
CheckpointLoader.register_scheme(prefixes='', loader=load_from_local_weights_only, force=True)


# ----------------------------------------------------------------------------- strict checks

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


def check_checkpoint_classes(checkpoint: Mapping[str, Any], dataset_meta: Optional[Mapping],
                             filename: str = 'the checkpoint') -> None:
    """Refuse a checkpoint trained on other classes than the test set has: MMEngine
    records the training set's ``classes`` in ``meta.dataset_meta``; when both sides name
    their classes they must be the same, in the same order (the model's output channel
    ``i`` is the test set's class ``i``), or every per-class number would be reported
    under another class's name. Nothing is checked when either side names none.

    Raises:
        CheckpointMismatchError: the classes differ (both lists, and what to do).
    """
    meta = checkpoint.get('meta') if isinstance(checkpoint, Mapping) else None
    trained = (meta or {}).get('dataset_meta') if isinstance(meta, Mapping) else None
    trained = trained.get('classes') if isinstance(trained, Mapping) else None
    tested = dataset_meta.get('classes') if isinstance(dataset_meta, Mapping) else None
    if not trained or not tested:
        return
    trained, tested = [str(c) for c in trained], [str(c) for c in tested]
    if trained == tested:
        return
    how = ('the same classes in another order' if sorted(trained) == sorted(tested)
           else f'{len(trained)} classes against {len(tested)}' if len(trained) != len(tested)
           else 'other classes')
    raise CheckpointMismatchError(
        f'{filename!r} was trained on the classes {trained} and the test set has {tested} '
        f'({how}): its output channel i is not the test set\'s class i, so per-class '
        'results would be reported under the wrong names. Evaluate it on a test set of its '
        'classes, in its order (the dataset\'s metainfo=dict(classes=...))')


#: The key revision MMEngine's loaders apply (a ``DataParallel`` prefix is stripped).
REVISE_KEYS = ((r'^module\.', ''), )
_SILENT = logging.getLogger('reobench_mm.checkpoint.silent')
_SILENT.addHandler(logging.NullHandler())
_SILENT.propagate = False


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
    checkpoint = load_local_checkpoint(osp.expanduser(filename), map_location)
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
    # private, and used here only: MMEngine's public loaders hide what did not fit, and
    # this is the one function that loads as they do (key revision, state-dict metadata,
    # per-module loading) while a load post-hook sees the missing and unexpected keys
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
