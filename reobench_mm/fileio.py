"""Small file helpers shared by the tools: atomic writes and file hashes.

Results are written so that a reader never sees a partial file and an interrupted run
leaves the previous file (or none): a temporary file in the same folder, flushed and
synced, then ``os.replace``.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import os.path as osp
import tempfile
from contextlib import contextmanager
from typing import Any, Iterator, Optional

__all__ = ['atomic_open', 'atomic_write_text', 'atomic_write_bytes', 'dump_json_atomic',
           'file_sha256', 'finite_or_none']


@contextmanager
def atomic_open(path: str, mode: str = 'w', encoding: str = None,
                newline: str = None) -> Iterator[Any]:
    """Open a temporary file beside ``path``; on success it replaces ``path``, on error
    it is removed."""
    folder = osp.dirname(osp.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f'.{osp.basename(path)}.', suffix='.tmp', dir=folder)
    try:
        text_options = {} if 'b' in mode else dict(encoding=encoding, newline=newline)
        with os.fdopen(fd, mode, **text_options) as handle:
            yield handle
            handle.flush()
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
