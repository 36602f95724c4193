"""The work dir of a robustness sweep: its lock, its condition records and their checks,
and putting it back as it was when a run is refused.

- :class:`WorkDirLock`: one sweep at a time per work dir (``fcntl.flock`` on
  ``<work dir>/.sweep.lock``, which holds the holder's pid, host and start time). The
  kernel drops the lock when its holder exits, however it exits, so a lock left by a
  killed run never blocks the next one.
- Condition records (``conditions/<tag>.json``) are sealed with a SHA-256 over their
  canonical JSON (:func:`seal_record`) and checked before reuse
  (:func:`record_identity_problem`, :func:`record_consistency_problem`): a record that
  is not an object, is of another format or condition, or whose settings, metrics,
  result or digest disagree is evaluated again rather than trusted.
- :class:`WorkDirSnapshot`: what a work dir held before a run, to remove what a
  refused run created (the Runner's log folder, the dumped config, ...);
  :func:`restored_on_failure` does that around any Runner-based run (``tools/test.py``
  uses it too).
"""
from __future__ import annotations

import datetime
import errno
import hashlib
import json
import logging
import os
import os.path as osp
import shutil
import socket
import sys
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

__all__ = [
    'SweepError', 'WorkDirLockedError', 'LOCK_FILE', 'WorkDirLock', 'CONDITION_FORMAT',
    'record_digest', 'seal_record', 'read_json', 'condition_result_dict',
    'record_identity_problem', 'record_consistency_problem', 'WorkDirSnapshot',
    'close_log_files', 'missing_dirs', 'remove_empty_dirs', 'forget_runner_instances',
    'restored_on_failure'
]

CONDITION_FORMAT = 'reobench_mm.sweep_condition/1'
LOCK_FILE = '.sweep.lock'


class SweepError(ValueError):
    """A bad input of a sweep (names, selection, shard, work dir, stale files)."""


class WorkDirLockedError(SweepError):
    """Another sweep holds the lock of the work dir."""


# ----------------------------------------------------------------------------- the lock

class WorkDirLock:
    """An exclusive, non-blocking lock on a work dir (``fcntl.flock`` of
    ``<work_dir>/.sweep.lock``).

    :meth:`acquire` either takes the lock at once or raises :class:`WorkDirLockedError`
    naming the holder (pid, host, start time, command) without changing anything in the
    work dir. :meth:`release` removes the lock file and then drops the lock. The lock
    belongs to the open file, so the kernel drops it when the holding process ends, also
    when it is killed: a stale lock file never blocks.
    """

    def __init__(self, work_dir: str) -> None:
        self.work_dir = work_dir
        self.path = osp.join(work_dir, LOCK_FILE)
        self._fd: Optional[int] = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def holder(self) -> Dict[str, Any]:
        """What the lock file says about its holder (empty when unreadable)."""
        try:
            with open(self.path, encoding='utf-8') as handle:
                data = json.load(handle)
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def acquire(self) -> None:
        """Take the lock, or raise :class:`WorkDirLockedError` (nothing written)."""
        import fcntl
        if self._fd is not None:
            return
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as error:
                os.close(fd)
                if error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
                holder = self.holder()
                who = ', '.join(f'{k} {holder[k]}' for k in ('pid', 'host', 'started')
                                if holder.get(k) is not None) or 'holder unknown'
                command = holder.get('command')
                raise WorkDirLockedError(
                    f'the work dir {self.work_dir!r} is in use by another sweep ({who}'
                    + (f', command {command!r}' if command else '') + '); wait for it to '
                    'finish, or use another --work-dir') from None
            # the previous holder may have removed the file between our open and lock
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        info = dict(pid=os.getpid(), host=socket.gethostname(),
                    started=datetime.datetime.now().astimezone().isoformat(timespec='seconds'),
                    command=' '.join(sys.argv))
        os.ftruncate(fd, 0)
        os.write(fd, (json.dumps(info) + '\n').encode('utf-8'))
        self._fd = fd

    def release(self) -> None:
        """Remove the lock file and drop the lock (no-op when not held)."""
        if self._fd is None:
            return
        try:
            os.remove(self.path)
        except OSError:
            pass
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> 'WorkDirLock':
        self.acquire()
        return self

    def __exit__(self, *exc_info) -> None:
        self.release()


# ----------------------------------------------------------------------------- records

def record_digest(record: Mapping[str, Any]) -> str:
    """SHA-256 of a record's canonical JSON (sorted keys), its ``digest`` field left out."""
    body = {k: v for k, v in record.items() if k != 'digest'}
    text = json.dumps(body, sort_keys=True, separators=(',', ':'), ensure_ascii=False)
    return hashlib.sha256(text.encode('utf-8')).hexdigest()


def seal_record(record: Dict[str, Any]) -> Dict[str, Any]:
    """Add ``digest`` (:func:`record_digest`) to a record (in place; returned)."""
    record['digest'] = record_digest(record)
    return record


def read_json(path: str) -> Tuple[Any, Optional[str]]:
    """``(data, None)``, or ``(None, reason)`` when the file cannot be read or parsed."""
    try:
        with open(path, encoding='utf-8') as handle:
            return json.load(handle), None
    except OSError as error:
        return None, f'cannot be read ({error.strerror or error})'
    except ValueError as error:  # includes UnicodeDecodeError
        return None, f'is not valid JSON ({error})'


def condition_result_dict(metrics: Mapping[str, Any], metric_task: str) -> Dict[str, Any]:
    """The JSON form of the condition result the metrics give
    (:func:`~reobench_mm.evaluation.condition_result_from_metrics`, NaN as ``null``)."""
    from ..evaluation import condition_result_from_metrics, results_to_jsonable
    result = condition_result_from_metrics(metrics, metric_task)
    return results_to_jsonable({('clean', 0): result})['clean']


def record_identity_problem(record: Any, condition_key: str) -> Optional[str]:
    """Why ``record`` is not a condition record of this condition (None when it is): not
    a JSON object, another format, another condition."""
    if not isinstance(record, dict):
        kind = 'null' if record is None else type(record).__name__
        return f'holds a JSON {kind}, not a condition record'
    if record.get('format') != CONDITION_FORMAT:
        return f'has format {record.get("format")!r}, expected {CONDITION_FORMAT!r}'
    if record.get('condition') != condition_key:
        return f'is the record of condition {record.get("condition")!r}, not {condition_key!r}'
    if not isinstance(record.get('fingerprint'), dict):
        return 'has no fingerprint object'
    return None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _same_json(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def record_consistency_problem(record: Mapping[str, Any], expected: Mapping[str, Any],
                               metric_task: str,
                               calibration: Optional[bool] = None) -> Optional[str]:
    """Why a condition record (of the right identity) cannot be reused, or None.

    Checked: the ``expected`` fields (tag, task, settings); ``metrics`` is a mapping of
    numbers; ``result`` equals what :func:`condition_result_dict` gives for them; with
    ``calibration`` True the calibration details are there; ``seconds`` is a number; the
    ``digest`` matches the contents.
    """
    for key, value in expected.items():
        if record.get(key) != value:
            return f'has {key} {record.get(key)!r}, expected {value!r}'
    metrics = record.get('metrics')
    if not isinstance(metrics, dict) or not metrics or \
            not all(isinstance(k, str) and _is_number(v) for k, v in metrics.items()):
        return '"metrics" is not a mapping of metric names to numbers'
    try:
        result = condition_result_dict(metrics, metric_task)
    except (KeyError, TypeError, ValueError) as error:
        return f'its metrics give no {metric_task} result ({error})'
    recorded = record.get('result')
    if not _same_json(recorded, result):
        value = recorded.get('value') if isinstance(recorded, dict) else recorded
        return (f'its result (value {value!r}) does not match its metrics (value '
                f'{result["value"]!r})')
    if calibration and not isinstance(record.get('calibration'), dict):
        return 'it has no calibration details'
    if not _is_number(record.get('seconds')):
        return '"seconds" is not a number'
    if record.get('digest') != record_digest(record):
        return ('its digest does not match its contents (edited by hand?)'
                if 'digest' in record else 'it has no digest')
    return None


# ----------------------------------------------------------------------------- refusals

def close_log_files(loggers: Sequence[logging.Logger], folder: str) -> None:
    """Close and detach the file handlers of ``loggers`` that write under ``folder``."""
    folder = osp.abspath(folder) + os.sep
    for logger in loggers:
        for handler in list(getattr(logger, 'handlers', [])):
            name = getattr(handler, 'baseFilename', None)
            if name and osp.abspath(name).startswith(folder):
                handler.close()
                logger.removeHandler(handler)


class WorkDirSnapshot:
    """The top-level entries of a work dir, and the bytes of some files in it, taken
    before a run; :meth:`restore` removes what appeared since and puts back those
    files (for a run that is refused before it evaluated anything)."""

    def __init__(self, work_dir: str, keep: Sequence[str] = ()) -> None:
        self.work_dir = work_dir
        self.entries = set(os.listdir(work_dir)) if osp.isdir(work_dir) else set()
        self.saved: Dict[str, bytes] = {}
        for name in keep:
            path = osp.join(work_dir, name)
            if osp.isfile(path):
                with open(path, 'rb') as handle:
                    self.saved[name] = handle.read()

    def new_entries(self) -> List[str]:
        if not osp.isdir(self.work_dir):
            return []
        return sorted(set(os.listdir(self.work_dir)) - self.entries)

    def restore(self, spare: Sequence[str] = ()) -> None:
        """Remove the entries that appeared (except ``spare``) and put back the saved
        files; errors are ignored (best effort)."""
        for name in self.new_entries():
            if name in spare:
                continue
            path = osp.join(self.work_dir, name)
            if osp.isdir(path) and not osp.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                try:
                    os.remove(path)
                except OSError:
                    pass
        for name, data in self.saved.items():
            path = osp.join(self.work_dir, name)
            try:
                with open(path, 'rb') as handle:
                    same = handle.read() == data
            except OSError:
                same = False
            if not same:
                try:
                    with open(path, 'wb') as handle:
                        handle.write(data)
                except OSError:
                    pass


def missing_dirs(folder: str) -> List[str]:
    """The folders that creating ``folder`` would create (outermost first)."""
    created, parent = [], osp.abspath(folder)
    while not osp.exists(parent):
        created.insert(0, parent)
        parent = osp.dirname(parent)
    return created


def remove_empty_dirs(folders: Sequence[str]) -> None:
    """Remove the folders that are empty, innermost first."""
    for folder in reversed(list(folders)):
        try:
            os.rmdir(folder)
        except OSError:
            pass


def forget_runner_instances(folder: str) -> None:
    """Drop MMEngine's process-wide logger and visualizer instances that write under
    ``folder`` (closing their log files), so that a later Runner of the same process does
    not reuse one whose folder is gone (MMEngine keeps one instance per name)."""
    from mmengine.logging import MMLogger
    from mmengine.visualization import Visualizer
    prefix = osp.abspath(folder) + os.sep

    def under(path: Optional[str]) -> bool:
        return bool(path) and (osp.abspath(path) + os.sep).startswith(prefix)

    for name, logger in list(MMLogger._instance_dict.items()):
        if any(under(getattr(h, 'baseFilename', None)) for h in logger.handlers):
            close_log_files([logger], folder)
            del MMLogger._instance_dict[name]
    classes, found = [Visualizer], []
    while classes:
        cls = classes.pop()
        found.append(cls)
        classes.extend(cls.__subclasses__())
    for cls in found:
        instances = cls.__dict__.get('_instance_dict') or {}
        for name, visualizer in list(instances.items()):
            backends = getattr(visualizer, '_vis_backends', {}) or {}
            if any(under(getattr(b, '_save_dir', None)) for b in backends.values()):
                del instances[name]


@contextmanager
def restored_on_failure(work_dir: str, keep: Sequence[str] = (),
                        outputs: Sequence[str] = ()) -> Iterator[None]:
    """Put ``work_dir`` back as it was if the block raises: what appeared in it is removed
    (MMEngine's log files under it closed, and its logger and visualizer instances
    writing there forgotten, first), the files named in ``keep`` (e.g. a dumped config
    the run overwrote) are restored, and the folders the run created are removed when
    empty. ``outputs`` are other folders the run may create (``--out``, ``--show-dir``):
    those that did not exist before are removed with their contents. For runs refused
    before they produced anything."""
    created = missing_dirs(work_dir)
    new_outputs = [missing_dirs(path) for path in outputs]
    snapshot = WorkDirSnapshot(work_dir, keep=keep)
    try:
        yield
    except BaseException:
        for name in snapshot.new_entries():
            forget_runner_instances(osp.join(work_dir, name))
        for folders in new_outputs:
            if folders:
                forget_runner_instances(folders[0])
                shutil.rmtree(folders[0], ignore_errors=True)
        snapshot.restore()
        remove_empty_dirs(created)
        raise
