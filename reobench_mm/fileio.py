"""Small file helpers shared by the tools: atomic writes, file hashes, the two forms
of JSON data the package writes (:func:`json_round_trip`, :func:`nan_to_null`) and the
weights-only reader of checkpoint files (:func:`load_local_checkpoint`).

Results are written so that a reader never sees a partial file and an interrupted run
leaves the previous file (or none): a temporary file in the same folder, flushed and
synced, then ``os.replace``.

Permissions follow what a plain ``open(path, 'w')`` gives: a new file gets
``0o666 & ~umask`` (``0o644`` under the usual umask ``022``, ``0o640`` under ``027``), and
an existing regular file that is replaced keeps its permission bits, so that a results
file made readable (or private) by hand stays so when a sweep rewrites it. The temporary
file itself is private (``0o600``, from :func:`tempfile.mkstemp`) until it has its final
mode, just before it replaces ``path``.

Checkpoints are unpickled with ``weights_only=True`` and exactly the types MMEngine
writes allowed (:data:`MMENGINE_CHECKPOINT_GLOBALS`, plus those of
:func:`allow_checkpoint_globals`); :mod:`reobench_mm.engine.checkpoint` installs this
reader as MMEngine's loader of local files and explains why.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import os.path as osp
import pickle
import stat
import tempfile
import threading
import zipfile
from contextlib import contextmanager
from typing import Any, Iterable, Iterator, List, Mapping, Optional, Tuple

import numpy as np
import torch
from mmengine.logging import HistoryBuffer

from .errors import CheckpointError, UnsafeCheckpointError

__all__ = ['plain_float', 'atomic_open', 'atomic_write_text', 'atomic_write_bytes',
           'remove_stale_temporaries', 'dump_json_atomic',
           'file_sha256', 'read_json', 'finite_or_none', 'json_round_trip', 'nan_to_null',
           'current_umask',
           'new_file_mode', 'TRUST_ENV_VAR', 'MMENGINE_CHECKPOINT_GLOBALS',
           'allow_checkpoint_globals', 'load_local_checkpoint', 'check_checkpoint_file']

#: Permission bits a plain ``open(path, 'w')`` requests before the umask is applied.
DEFAULT_FILE_MODE = 0o666

_UMASK_LOCK = threading.Lock()


def _umask_from_proc() -> Optional[int]:
    """The umask from ``/proc/self/status`` (Linux 4.7+), or None where unavailable."""
    try:
        with open('/proc/self/status', encoding='ascii', errors='replace') as handle:
            for line in handle:
                if line.startswith('Umask:'):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return None


def current_umask() -> int:
    """The process umask.

    Read from ``/proc/self/status`` where the kernel reports it, which leaves the umask
    untouched. Elsewhere it is read by setting and restoring it (``os.umask``): a file
    created by another thread in that instant could get the temporary mask ``0o077``
    (stricter, never looser), and the read is serialised between callers of this
    function.
    """
    mask = _umask_from_proc()
    if mask is not None:
        return mask
    with _UMASK_LOCK:
        mask = os.umask(0o077)
        os.umask(mask)
    return mask


def new_file_mode(path: Optional[str] = None) -> int:
    """The permission bits ``open(path, 'w')`` would leave on ``path``: those of the
    existing regular file at ``path`` (``rwx`` bits only), else ``0o666 & ~umask``."""
    if path is not None:
        try:
            info = os.stat(path)
        except OSError:
            info = None
        if info is not None and stat.S_ISREG(info.st_mode):
            return stat.S_IMODE(info.st_mode) & 0o777
    return DEFAULT_FILE_MODE & ~current_umask()


def _set_mode(fd: int, tmp: str, mode: int) -> None:
    if hasattr(os, 'fchmod'):
        os.fchmod(fd, mode)
    else:  # platforms without fchmod (Windows before Python 3.13)
        os.chmod(tmp, mode)


@contextmanager
def atomic_open(path: str, mode: str = 'w', encoding: Optional[str] = None,
                newline: Optional[str] = None) -> Iterator[Any]:
    """Open a temporary file beside ``path``; on success it replaces ``path``, on error
    it is removed.

    The file that replaces ``path`` has the permissions a plain ``open(path, 'w')``
    would give it (see :func:`new_file_mode`): ``0o666 & ~umask`` for a new file, the
    old file's permission bits when one is replaced.

    Args:
        path (str): The file to write; its folder is created when missing.
        mode (str): ``'w'`` (text) or ``'wb'`` (binary), as for :func:`open`.
        encoding (str, optional): Text encoding (text mode only).
        newline (str, optional): Newline translation (text mode only).

    Yields:
        The open temporary file object.
    """
    folder = osp.dirname(osp.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f'.{osp.basename(path)}.', suffix='.tmp', dir=folder)
    try:
        text_options = {} if 'b' in mode else dict(encoding=encoding, newline=newline)
        with os.fdopen(fd, mode, **text_options) as handle:
            yield handle
            handle.flush()
            _set_mode(handle.fileno(), tmp, new_file_mode(path))
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as error:
        if osp.exists(tmp):
            os.remove(tmp)
        if isinstance(error, OSError) and error.filename is None and error.errno:
            # a failed write (a full disk, a quota) names no file by itself: name it
            raise OSError(error.errno, error.strerror or str(error), path) from error
        raise


def atomic_write_text(path: str, text: str) -> str:
    """Write ``text`` (UTF-8, ``\\n`` line ends) to ``path`` atomically."""
    with atomic_open(path, 'w', encoding='utf-8', newline='\n') as handle:
        handle.write(text)
    return path


def atomic_write_bytes(path: str, data: bytes) -> str:
    """Write ``data`` to ``path`` atomically."""
    with atomic_open(path, 'wb') as handle:
        handle.write(data)
    return path


def remove_stale_temporaries(folder: str) -> int:
    """Delete the temporary files an interrupted atomic write (:func:`atomic_open`: a
    killed process) left in ``folder`` — hidden files ``.<name>.<random>.tmp``, nothing
    else — and return how many. Call it only while no other process writes there (a
    run that holds the folder's lock)."""
    if not osp.isdir(folder):
        return 0
    removed = 0
    for name in os.listdir(folder):
        if name.startswith('.') and name.endswith('.tmp') and \
                osp.isfile(osp.join(folder, name)):
            os.remove(osp.join(folder, name))
            removed += 1
    return removed


def dump_json_atomic(obj: Any, path: str) -> None:
    """Write ``obj`` as indented JSON to ``path`` atomically."""
    with atomic_open(path, 'w', encoding='utf-8', newline='\n') as handle:
        json.dump(obj, handle, indent=2)


def file_sha256(path: str, chunk_size: int = 1 << 20) -> str:
    """SHA-256 (hex) of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, 'rb') as handle:
        for chunk in iter(lambda: handle.read(chunk_size), b''):
            digest.update(chunk)
    return digest.hexdigest()


def read_json(path: str) -> Tuple[Any, Optional[str]]:
    """``(data, None)``, or ``(None, reason)`` when the file cannot be read or parsed
    (the reason reads after the file's name: ``'cannot be read (...)'``, ``'is not valid
    JSON (...)'``)."""
    try:
        with open(path, encoding='utf-8') as handle:
            return json.load(handle), None
    except OSError as error:
        return None, f'cannot be read ({error.strerror or error})'
    except ValueError as error:  # includes UnicodeDecodeError
        return None, f'is not valid JSON ({error})'


def plain_float(value: Any) -> float:
    """``value`` as a Python float. A half- or single-precision value (a numpy scalar or
    0-d array, or a one-element tensor) becomes the shortest decimal that reads back as
    the same value in its own precision, so that files and tables show the number the
    metric computed: ``np.float32(58.1)`` gives ``58.1``, not ``58.099998474121094``
    (which is the same float32, printed in double precision)."""
    if hasattr(value, 'detach'):  # a tensor
        value = value.detach().cpu().numpy()
    dtype = getattr(value, 'dtype', None)
    if dtype is not None and dtype in (np.float16, np.float32):
        # numpy's str of a float32 scalar is its shortest round-trip decimal
        return float(str(np.asarray(value, dtype).reshape(())[()]))
    return float(value)


def finite_or_none(value: Any) -> Optional[float]:
    """``float(value)``, or None for None, NaN and infinities (strict JSON has no
    NaN)."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def json_round_trip(obj: Any) -> Any:
    """``obj`` as it reads back from a JSON file: mapping keys sorted and made strings,
    tuples as lists, objects JSON does not know as their ``str``; NaN and infinities stay
    (non-strict JSON). For records and fingerprints that are compared with what a file
    holds."""
    return json.loads(json.dumps(obj, default=str, sort_keys=True))


def nan_to_null(obj: Any) -> Any:
    """``obj`` for strict JSON: NaN and infinities (Python floats) become None,
    recursively; mapping keys become strings (their order kept), tuples lists; every other
    object is left as it is."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Mapping):
        return {str(k): nan_to_null(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [nan_to_null(v) for v in obj]
    return obj


# ----------------------------------------------------------------------------- checkpoints

#: Environment variable: ``1`` loads local checkpoint files unrestricted (files you trust).
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


_ZIP_MAGIC = b'PK'
_PICKLE_PROTOCOL_OPCODE = b'\x80'


def _one_line(error: BaseException, limit: int = 300) -> str:
    text = ' '.join(str(error).split()) or type(error).__name__
    return text if len(text) <= limit else text[:limit] + ' ...'


def check_checkpoint_file(path: str) -> int:
    """Refuse a local file that cannot be a checkpoint before it is unpickled: missing,
    empty, a zip archive without its end record (truncated), or neither the zip archive
    ``torch.save`` writes nor a legacy torch pickle. Returns its size in bytes.

    Raises:
        FileNotFoundError: no such file.
        CheckpointError: the file named, with what is wrong.
    """
    if not osp.isfile(path):
        raise FileNotFoundError(f'checkpoint {path!r} does not exist')
    size = osp.getsize(path)
    if size == 0:
        raise CheckpointError(f'the checkpoint {path!r} is empty (0 bytes): an interrupted '
                              'download or copy? Fetch or save it again')
    with open(path, 'rb') as handle:
        head = handle.read(8)
    if head.startswith(_ZIP_MAGIC):
        if not zipfile.is_zipfile(path):
            raise CheckpointError(
                f'the checkpoint {path!r} is truncated or corrupt: it starts as the zip '
                f'archive torch.save writes but has no end-of-archive record ({size} bytes; '
                'was a download or copy cut short?)')
    elif not head.startswith(_PICKLE_PROTOCOL_OPCODE):
        raise CheckpointError(
            f'{path!r} is not a checkpoint: torch.save writes a zip archive (before torch '
            f'1.6 a pickle), and this file starts with {head!r}')
    return size


def load_local_checkpoint(filename: str, map_location: Optional[Any] = None,
                          extra_globals: Iterable[Any] = ()) -> Any:
    """Load a local checkpoint with ``weights_only=True`` and MMEngine's types allowed
    (plus ``extra_globals`` for this call, in ``add_safe_globals`` form), after
    :func:`check_checkpoint_file`. Every local checkpoint read goes through here:
    MMEngine's ``load_from``, ``resume`` and ``init_cfg=dict(type='Pretrained')``, the
    tools, the converters and the backbones' loaders.

    Raises:
        FileNotFoundError: ``filename`` does not exist.
        CheckpointError: the file is empty, truncated or corrupt, or not a checkpoint
            (named, with what is wrong).
        UnsafeCheckpointError: (a ``CheckpointError`` and a ``pickle.UnpicklingError``)
            the file holds an object outside the allow-list; the message names it and
            says how to allow it.
    """
    filename = osp.expanduser(filename)
    size = check_checkpoint_file(filename)
    trusted = os.environ.get(TRUST_ENV_VAR, '0') == '1'
    allowed = MMENGINE_CHECKPOINT_GLOBALS + _extra_globals + list(extra_globals)
    with torch.serialization.safe_globals(allowed):
        try:
            return torch.load(filename, map_location=map_location, weights_only=not trusted)
        except pickle.UnpicklingError as err:
            if trusted:
                raise CheckpointError(f'cannot read the checkpoint {filename!r}: '
                                      f'{_one_line(err)}') from err
            raise UnsafeCheckpointError(
                f'checkpoint {filename} holds objects that the weights-only unpickler '
                f'does not allow ({_unpickler_reason(err)}). If you trust the file, '
                'allow them with reobench_mm.engine.allow_checkpoint_globals([...]) or set '
                f'{TRUST_ENV_VAR}=1.') from err
        except (RuntimeError, OSError, EOFError, KeyError, ValueError, IndexError, TypeError,
                AttributeError, zipfile.BadZipFile) as error:
            raise CheckpointError(
                f'cannot read the checkpoint {filename!r} ({size} bytes; truncated or '
                f'corrupt?): {type(error).__name__}: {_one_line(error)}') from error


def _unpickler_reason(error: pickle.UnpicklingError) -> str:
    """The line of torch's weights-only refusal that names what was refused (its
    boilerplate about ``weights_only`` and the documentation left out)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    for index, line in enumerate(lines):
        if 'WeightsUnpickler error:' in line:
            rest = line.split('WeightsUnpickler error:', 1)[1].strip()
            return rest or (lines[index + 1] if index + 1 < len(lines) else line)
    boilerplate = ('Weights only load failed', 'Check the documentation', '(1)', '(2)')
    for line in lines:
        if not line.startswith(boilerplate):
            return line
    return ' '.join(str(error).split())
