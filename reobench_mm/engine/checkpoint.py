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
"""
import os
import os.path as osp
import pickle
from typing import Any, Iterable, List, Optional

import numpy as np
import torch
from mmengine.logging import HistoryBuffer
from mmengine.runner.checkpoint import CheckpointLoader

__all__ = [
    'MMENGINE_CHECKPOINT_GLOBALS', 'allow_checkpoint_globals', 'load_local_checkpoint',
    'TRUST_ENV_VAR'
]

TRUST_ENV_VAR = 'REOBENCH_TRUST_CHECKPOINTS'


def _numpy_globals() -> List[Any]:
    """Numpy objects that pickled arrays, dtypes and scalars refer to.

    Files written under numpy 1.x name ``numpy.core.multiarray``; under 2.x
    ``numpy._core.multiarray``. Both names are allowed, bound to the live functions.
    """
    multiarray = getattr(np, '_core', None)
    multiarray = multiarray.multiarray if multiarray is not None else np.core.multiarray
    found: List[Any] = [np.ndarray, np.dtype]
    for func in (multiarray._reconstruct, multiarray.scalar):
        for module in ('numpy.core.multiarray', 'numpy._core.multiarray'):
            found.append((func, f'{module}.{func.__name__}'))
    for scalar_type in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                        np.uint32, np.uint64, np.float16, np.float32, np.float64, np.complex64,
                        np.complex128, np.str_):
        found.append(type(np.dtype(scalar_type)))
    return found


def _history_buffer_method(owner: Any, name: str) -> Any:
    """Stands in for ``builtins.getattr`` while unpickling: only the statistics
    methods of ``HistoryBuffer`` may be looked up (a general ``getattr`` would let a
    crafted file reach arbitrary attributes of the allowed classes)."""
    # the built-in statistics, plus any registered with HistoryBuffer.register_statistics
    allowed = {'min', 'max', 'current', 'mean'} | set(HistoryBuffer._statistics_methods)
    if owner is HistoryBuffer and name in allowed:
        return getattr(HistoryBuffer, name)
    raise pickle.UnpicklingError(
        f'refusing getattr({owner!r}, {name!r}) in a checkpoint: only the statistics '
        f'methods of HistoryBuffer ({sorted(allowed)}) are allowed')


MMENGINE_CHECKPOINT_GLOBALS: List[Any] = [
    HistoryBuffer, (_history_buffer_method, 'builtins.getattr')
] + _numpy_globals()
_extra_globals: List[Any] = []


def allow_checkpoint_globals(objects: Iterable[Any]) -> None:
    """Allow more classes/functions in checkpoints loaded from local files.

    Args:
        objects: Classes or functions, or ``(object, 'qualified.name')`` pairs as
            ``torch.serialization.add_safe_globals`` takes them.
    """
    _extra_globals.extend(objects)


def load_local_checkpoint(filename: str, map_location: Optional[Any] = None,
                          extra_globals: Iterable[Any] = ()) -> Any:
    """Load a local checkpoint with ``weights_only=True`` and MMEngine's types allowed
    (plus ``extra_globals`` for this call, in ``add_safe_globals`` form).

    Raises:
        FileNotFoundError: ``filename`` does not exist.
        pickle.UnpicklingError: the file holds an object outside the allow-list; the
            message names it and says how to allow it.
    """
    filename = osp.expanduser(filename)
    if not osp.isfile(filename):
        raise FileNotFoundError(f'checkpoint {filename} can not be found')
    if os.environ.get(TRUST_ENV_VAR, '0') == '1':
        return torch.load(filename, map_location=map_location, weights_only=False)
    allowed = MMENGINE_CHECKPOINT_GLOBALS + _extra_globals + list(extra_globals)
    with torch.serialization.safe_globals(allowed):
        try:
            return torch.load(filename, map_location=map_location, weights_only=True)
        except pickle.UnpicklingError as err:
            lines = [line.strip() for line in str(err).splitlines() if line.strip()]
            marker = [i for i, line in enumerate(lines) if 'WeightsUnpickler error' in line]
            reason = [(lines[marker[0]].split('WeightsUnpickler error:', 1)[1].strip()
                       or lines[min(marker[0] + 1, len(lines) - 1)])] if marker else []
            raise pickle.UnpicklingError(
                f'checkpoint {filename} holds objects that the weights-only unpickler '
                f'does not allow ({reason[0] if reason else err}). If you trust the file, '
                'allow them with reobench_mm.engine.allow_checkpoint_globals([...]) or set '
                f'{TRUST_ENV_VAR}=1.') from err


def load_from_local_weights_only(filename: str, map_location: Optional[Any] = None) -> Any:
    """MMEngine ``CheckpointLoader`` scheme for local paths (logged as
    ``local_weights_only``)."""
    return load_local_checkpoint(filename, map_location)


# Local paths have the empty prefix in MMEngine's CheckpointLoader; this replaces its
# loader for Runner.load_checkpoint, Runner.resume and init_cfg=dict(type='Pretrained').
CheckpointLoader.register_scheme(prefixes='', loader=load_from_local_weights_only, force=True)
