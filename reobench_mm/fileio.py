"""Small file helpers shared by the tools: atomic writes and file hashes.

Results are written so that a reader never sees a partial file and an interrupted run
leaves the previous file (or none): a temporary file in the same folder, flushed and
synced, then ``os.replace``.

Permissions follow what a plain ``open(path, 'w')`` gives: a new file gets
``0o666 & ~umask`` (``0o644`` under the usual umask ``022``, ``0o640`` under ``027``), and
an existing regular file that is replaced keeps its permission bits, so that a results
file made readable (or private) by hand stays so when a sweep rewrites it. The temporary
file itself is private (``0o600``, from :func:`tempfile.mkstemp`) until it has its final
mode, just before it replaces ``path``.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import os.path as osp
import stat
import tempfile
import threading
from contextlib import contextmanager
from typing import Any, Iterator, Optional

__all__ = ['atomic_open', 'atomic_write_text', 'atomic_write_bytes', 'dump_json_atomic',
           'file_sha256', 'finite_or_none', 'current_umask', 'new_file_mode']

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
    except BaseException:
        if osp.exists(tmp):
            os.remove(tmp)
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


def finite_or_none(value: Any) -> Optional[float]:
    """``float(value)``, or None for None, NaN and infinities (strict JSON has no
    NaN)."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None
