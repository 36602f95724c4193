"""The errors the package raises when a robustness run is refused.

Every one is a ``ValueError`` whose message says what was wrong and what is valid (or
what to do), so the command-line tools print it as one line and exit with status 2.

- :class:`SweepError`: a bad input or state of a robustness run: a name, a selection,
  an option, a shard, a work dir that cannot be written, a file that cannot be reused.
- :class:`WorkDirLockedError`: another run holds the output folder's lock.
- :class:`FingerprintMismatchError`: a finished condition (or shard, or fitted
  temperature) was written for other inputs; ``parts`` names what differs.
- :class:`CheckpointError`: a checkpoint file that cannot be used (empty, truncated or
  corrupt, not a checkpoint); :class:`UnsafeCheckpointError`, one holding objects the
  weights-only unpickler refuses (also a ``pickle.UnpicklingError``).

They live in the base layer because the work-dir housekeeping of the engine raises them
as well as the robustness loops and drivers.
"""
from __future__ import annotations

import pickle
from typing import Sequence

__all__ = ['SweepError', 'WorkDirLockedError', 'FingerprintMismatchError', 'CheckpointError',
           'UnsafeCheckpointError']


class SweepError(ValueError):
    """A bad input or state of a robustness run (names, selection, options, shard, work
    dir, stale files)."""


class WorkDirLockedError(SweepError):
    """Another run holds the lock of the work dir."""


class FingerprintMismatchError(SweepError):
    """A finished condition (or shard) was written for other inputs; ``parts`` lists
    the parts of the fingerprint that differ (``config``, ``checkpoint``, ``data``,
    ``code``, ``options``)."""

    def __init__(self, message: str, parts: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.parts = list(parts)


class CheckpointError(ValueError):
    """A checkpoint file that cannot be used: empty, truncated or corrupt, not a
    checkpoint, or holding objects that the weights-only unpickler refuses. The message
    names the file and what is wrong with it."""


class UnsafeCheckpointError(CheckpointError, pickle.UnpicklingError):
    """A checkpoint holding objects the weights-only unpickler refuses (code, unknown
    classes); the message names them and how to allow a trusted file."""
