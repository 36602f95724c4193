"""The work dir of a robustness sweep: its lock, its condition records and their checks,
the shard manifests and their merging, and putting the work dir back as it was when a run
is refused.

- :class:`WorkDirLock`: one sweep at a time per work dir (``fcntl.flock`` on
  ``<work dir>/.sweep.lock``, which holds the holder's pid, host and start time). The
  kernel drops the lock when its holder exits, however it exits, so a lock left by a
  killed run never blocks the next one.
- Condition records (``conditions/<tag>.json``) are sealed with a SHA-256 over their
  canonical JSON (:func:`seal_record`, :func:`write_record`) and checked before reuse
  (:func:`condition_record_problem`: :func:`record_identity_problem`,
  :func:`record_consistency_problem`): a record that is not an object, is of another
  format or condition, or whose settings, metrics, result or digest disagree is
  evaluated again rather than trusted.
- Shard manifests (``shard_<i>-of-<n>.json``, :func:`write_shard_manifest`) list the
  condition files of one shard; :func:`merge_sweeps` checks and merges the shards and
  writes the report.
- :class:`WorkDirSnapshot`: what a work dir held before a run, to remove what a
  refused run created (the Runner's log folder, the dumped config, ...);
  :func:`restored_on_failure` does that around any Runner-based run (``tools/test.py``
  uses it too). :func:`check_writable` probes a folder before a run writes into it;
  :func:`write_error` turns a failed write into a one-line :class:`SweepError`.
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
import tempfile
from contextlib import contextmanager
from glob import glob
from typing import (Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence,
                    Tuple)

from ..analysis.report import Report, write_report
from ..analysis.results import (ConditionResult, condition_result_from_metrics, merge_results,
                                results_to_jsonable)
from ..corruptions.condition import CLEAN, Condition
from ..fileio import dump_json_atomic, json_round_trip
from .fingerprint import differing_parts

__all__ = [
    'SweepError', 'WorkDirLockedError', 'FingerprintMismatchError', 'LOCK_FILE', 'WorkDirLock',
    'ConditionStore', 'condition_record_name', 'CONDITION_FORMAT',
    'CONDITIONS_DIR', 'SHARD_FORMAT', 'record_digest', 'seal_record', 'read_json',
    'condition_result_dict', 'record_identity_problem', 'record_consistency_problem',
    'condition_record_problem', 'write_record', 'calibration_details', 'shard_manifest_path',
    'write_shard_manifest', 'merge_sweeps', 'WorkDirSnapshot', 'close_log_files',
    'missing_dirs', 'remove_empty_dirs', 'forget_runner_instances', 'restored_on_failure',
    'wait_for_fresh_log_folder',
    'check_writable', 'write_error'
]

CONDITION_FORMAT = 'reobench_mm.sweep_condition/1'
SHARD_FORMAT = 'reobench_mm.sweep_shard/1'
#: Folder of the condition records under the work dir.
CONDITIONS_DIR = 'conditions'
LOCK_FILE = '.sweep.lock'


class SweepError(ValueError):
    """A bad input of a sweep (names, selection, shard, work dir, stale files)."""


class WorkDirLockedError(SweepError):
    """Another sweep holds the lock of the work dir."""


class FingerprintMismatchError(SweepError):
    """A finished condition (or shard) was written for other inputs; ``parts`` lists
    the parts of the fingerprint that differ (``config``, ``checkpoint``, ``data``,
    ``code``, ``options``)."""

    def __init__(self, message: str, parts: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.parts = list(parts)


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
    (:func:`~reobench_mm.analysis.results.condition_result_from_metrics`, NaN as
    ``null``)."""
    result = condition_result_from_metrics(metrics, metric_task)
    return results_to_jsonable({CLEAN: result})[CLEAN.key]


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


def condition_record_problem(path: str, condition_key: str, expected: Mapping[str, Any],
                             metric_task: str, calibration: Optional[bool] = None,
                             check_fingerprint: Optional[Callable[[Any, str], None]] = None
                             ) -> Optional[str]:
    """Why the condition record at ``path`` cannot be reused (None when it can): missing,
    unreadable, not a record of ``condition_key`` (:func:`record_identity_problem`) or
    inconsistent (:func:`record_consistency_problem`); the message starts with ``path``.

    ``check_fingerprint(fingerprint, path)`` is called with the fingerprint of a record of
    the right identity, before its consistency is checked; it raises when the record was
    written for other inputs.
    """
    if not osp.isfile(path):
        return f'{path} does not exist'
    record, problem = read_json(path)
    if problem is None:
        problem = record_identity_problem(record, condition_key)
    if problem is None:
        if check_fingerprint is not None:
            check_fingerprint(record['fingerprint'], path)
        problem = record_consistency_problem(record, expected, metric_task, calibration)
    return None if problem is None else f'{path} {problem}'


def write_record(path: str, record: Mapping[str, Any]) -> Dict[str, Any]:
    """Write a condition record, as it reads back from JSON and sealed
    (:func:`seal_record`), to ``path`` atomically; returns what was written.

    Raises:
        SweepError: the file cannot be written (:func:`write_error`).
    """
    record = seal_record(json.loads(json.dumps(record)))
    try:
        dump_json_atomic(record, path)
    except OSError as error:
        raise write_error(path, error) from None
    return record


def calibration_details(records: Mapping[Condition, dict]) -> Optional[dict]:
    """``condition -> {prefix: details}`` when every record has calibration details."""
    details = {c: r.get('calibration') for c, r in records.items()}
    if not details or any(not d for d in details.values()):
        return None
    return details


def condition_record_name(condition: Condition) -> str:
    """Where a condition's record lives, relative to the work dir:
    ``conditions/<tag>.json``."""
    return osp.join(CONDITIONS_DIR, f'{condition.tag}.json')


class ConditionStore:
    """The condition records of one output folder (``<work_dir>/conditions/<tag>.json``),
    for one set of inputs: where a condition's record is, whether it can be reused, writing
    one, reading them all, and (rank 0, under the folder's lock) deciding which conditions
    are left to evaluate.

    Args:
        work_dir: the output folder.
        coerce: turns a pair (``('cloud', 3)``), key or condition into a condition of the
            run (``SweepPlan.condition``).
        task: the task name of the records (``'segmentation'``, ``'rotated_detection'``).
        metric_task: the task as ``results.json`` writes it.
        calibration: whether records must carry calibration details.
        fingerprint: returns the fingerprint of the current inputs (called when a record
            is checked or written: the data part may be costly to list).
    """

    def __init__(self, work_dir: str, coerce: Callable[[Any], Condition], task: str,
                 metric_task: str, calibration: bool,
                 fingerprint: Callable[[], Mapping[str, Any]]) -> None:
        self.work_dir = work_dir
        self.conditions_dir = osp.join(work_dir, CONDITIONS_DIR)
        self.coerce, self.task, self.metric_task = coerce, task, metric_task
        self.calibration = calibration
        self.fingerprint = fingerprint

    def condition_file(self, condition: Any) -> str:
        return osp.join(self.work_dir, condition_record_name(self.coerce(condition)))

    def check_fingerprint(self, recorded: Any, path: str) -> None:
        """Raise :class:`FingerprintMismatchError` naming the parts of ``recorded`` that
        differ from the current inputs."""
        differing = differing_parts(recorded, self.fingerprint())
        if differing:
            names = [part for part, _ in differing]
            raise FingerprintMismatchError(
                f'{path} was written for other inputs: the {", ".join(names)} '
                f'differ{"s" if len(names) == 1 else ""} ('
                + '; '.join(f'{part}: {detail}' for part, detail in differing)
                + '); use --force (test_cfg.force=True) to evaluate again, or another '
                'work dir', names)

    def reuse_problem(self, condition: Any) -> Optional[str]:
        """Why the condition's record cannot be reused (None when it can): missing,
        unreadable, malformed or inconsistent.

        Raises:
            FingerprintMismatchError: a well-formed record written for other inputs.
        """
        condition = self.coerce(condition)
        expected = dict(tag=condition.tag, task=self.task, **condition.settings())
        return condition_record_problem(
            self.condition_file(condition), condition.key, expected, self.metric_task,
            self.calibration, check_fingerprint=self.check_fingerprint)

    def write(self, condition: Condition, metrics: Mapping[str, float], seconds: float,
              calibration: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
        """Write the record of a finished condition (sealed, atomically); returns it.

        Raises:
            SweepError: the file cannot be written (:func:`write_error`).
        """
        record = dict(format=CONDITION_FORMAT, condition=condition.key,
                      tag=condition.tag, task=self.task, **condition.settings(),
                      metrics=dict(metrics),
                      result=condition_result_dict(metrics, self.metric_task),
                      seconds=round(seconds, 3), fingerprint=self.fingerprint())
        if self.calibration:
            record['calibration'] = json_round_trip(calibration or {})
        return write_record(self.condition_file(condition), record)

    def load(self, conditions: Sequence[Any]) -> Dict[Condition, dict]:
        """``condition -> record`` of the given conditions.

        Raises:
            SweepError: a record is missing, malformed or inconsistent (named, with why).
        """
        out = {}
        for condition in map(self.coerce, conditions):
            problem = self.reuse_problem(condition)
            if problem is not None:
                raise SweepError(f'condition {condition.key}: {problem}; run the '
                                 'sweep again to evaluate it')
            out[condition] = read_json(self.condition_file(condition))[0]
        return out

    def todo(self, conditions: Sequence[Condition], lock: WorkDirLock,
             force: bool = False) -> Tuple[List[Condition], Dict[str, str]]:
        """Rank 0 takes ``lock`` and decides which ``conditions`` are left (all with
        ``force``), and ``condition key -> reason`` for records not reused; every rank
        gets the decision, or the error that refused the run."""
        from mmengine.dist import broadcast_object_list, get_world_size, is_main_process
        todo, reasons, error = None, {}, None
        if is_main_process():
            try:
                check_writable(self.conditions_dir)
                lock.acquire()
                todo = []
                for condition in conditions:
                    problem = None if force else self.reuse_problem(condition)
                    if force or problem is not None:
                        todo.append(condition)
                    if problem is not None and osp.isfile(self.condition_file(condition)):
                        reasons[condition.key] = problem
            except Exception as caught:  # told to the other ranks, raised below
                error = caught
        if get_world_size() > 1:
            box = [(todo, reasons, None if error is None else str(error))]
            broadcast_object_list(box)
            todo, reasons, message = box[0]
            if error is None and message is not None:
                raise SweepError(f'the main process refused the run: {message}')
        if error is not None:
            raise error
        return todo, reasons


# ----------------------------------------------------------------------------- manifests

def shard_manifest_path(work_dir: str, shard: Tuple[int, int]) -> str:
    """``<work_dir>/shard_<i>-of-<n>.json``."""
    index, count = shard
    return osp.join(work_dir, f'shard_{index}-of-{count}.json')


def write_shard_manifest(work_dir: str, shard: Tuple[int, int], *, task: str,
                         protocol: str, corruptions: Sequence[str],
                         severities: Sequence[int], condition_files: Mapping[str, str],
                         num_conditions: int, fingerprint: Mapping[str, Any],
                         provenance: Mapping[str, Any]) -> str:
    """Write the manifest of one shard (:func:`shard_manifest_path`): what it evaluated
    (``condition_files``: condition key -> record file, relative to ``work_dir``) of how
    many conditions in all, with the sweep's fingerprint and provenance; returns its
    path.

    Raises:
        SweepError: the file cannot be written (:func:`write_error`).
    """
    index, count = shard
    path = shard_manifest_path(work_dir, shard)
    try:
        dump_json_atomic(dict(
            format=SHARD_FORMAT, shard=[index, count], task=task, protocol=protocol,
            corruptions=corruptions, severities=severities, conditions=condition_files,
            num_conditions=num_conditions, fingerprint=fingerprint, provenance=provenance),
            path)
    except OSError as error:
        raise write_error(path, error) from None
    return path


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


def check_writable(folder: str) -> List[str]:
    """Create ``folder`` and write (then remove) a probe file in it; returns the folders
    created (outermost first)."""
    created = missing_dirs(folder)
    try:
        os.makedirs(folder, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix='.write_probe.', dir=folder)
        os.close(fd)
        os.remove(probe)
    except OSError as error:
        remove_empty_dirs(created)
        raise SweepError(f'the work dir {osp.dirname(folder)!r} is not writable: '
                         f'{error}') from None
    return created


def write_error(path: str, error: OSError) -> SweepError:
    """A one-line :class:`SweepError` for a file that could not be written."""
    reason = error.strerror or str(error) or type(error).__name__
    return SweepError(f'cannot write {path}: {reason} (finished conditions are kept; '
                      'rerun to resume)')


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


def wait_for_fresh_log_folder(work_dir: str) -> None:
    """Return once no folder of ``work_dir`` is named after the current second.

    MMEngine names a run's log folder by the second the Runner was built
    (``YYYYmmdd_HHMMSS``). A run built in the same second as the previous one would write
    into that run's folder, and a refused run could then not put the work dir back as it
    was; waiting (at most a second) gives every run a folder of its own.
    """
    import time
    while osp.isdir(osp.join(work_dir, time.strftime('%Y%m%d_%H%M%S'))):
        time.sleep(0.05)


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


# ----------------------------------------------------------------------------- merging

def _read_manifest(path: str) -> Optional[dict]:
    """A shard manifest, None for a file of another format.

    Raises:
        SweepError: unreadable, not JSON, or lacking a field (the file named).
    """
    data, problem = read_json(path)
    if problem is not None:
        raise SweepError(f'shard manifest {path} {problem}')
    if not isinstance(data, dict) or not str(data.get('format', '')).startswith(
            'reobench_mm.sweep_shard/'):
        return None
    if data['format'] != SHARD_FORMAT:
        raise SweepError(f'shard manifest {path} has format {data["format"]!r}, expected '
                         f'{SHARD_FORMAT!r}; run that shard again')
    fields = {'shard': list, 'task': str, 'protocol': str, 'corruptions': list,
              'severities': list, 'conditions': dict, 'num_conditions': int,
              'fingerprint': dict, 'provenance': dict}
    bad = [k for k, kind in fields.items() if not isinstance(data.get(k), kind)]
    if bad or len(data['shard']) != 2 or not all(isinstance(v, int) for v in data['shard']):
        raise SweepError(f'shard manifest {path} is malformed (fields {bad or ["shard"]}); '
                         'run that shard again')
    return data


def merge_sweeps(work_dirs: Sequence[str], out_dir: str, plots: bool = True) -> Report:
    """Merge the outputs of the shards of one sweep (``shard_<i>-of-<n>.json`` and their
    condition files, in one or several work dirs) and write the report into ``out_dir``.

    Every condition file is checked as a resumed sweep checks it (a record of its
    condition, consistent with its metrics and digest, of the manifest's fingerprint).

    Raises:
        SweepError: no manifest, shards of different sweeps, missing shards, a missing,
            malformed or inconsistent file (named, with why), or a report file that
            cannot be written.
    """
    manifests = []
    for work_dir in work_dirs:
        if not osp.isdir(work_dir):
            raise SweepError(f'work dir {work_dir!r} does not exist')
        for path in sorted(glob(osp.join(work_dir, 'shard_*-of-*.json'))):
            data = _read_manifest(path)
            if data is not None:
                manifests.append((work_dir, path, data))
    if not manifests:
        raise SweepError(f'no shard manifest (shard_<i>-of-<n>.json) in {list(work_dirs)}')
    first = manifests[0][2]
    same = ('task', 'protocol', 'corruptions', 'severities', 'num_conditions')
    for _, path, data in manifests[1:]:
        differing = [k for k in same if data.get(k) != first.get(k)]
        differing += [f'fingerprint ({part})' for part, _ in
                      differing_parts(data['fingerprint'], first['fingerprint'])]
        if data['shard'][1] != first['shard'][1]:
            differing.append('shard count')
        if differing:
            raise SweepError(f'{path} belongs to another sweep than {manifests[0][1]} '
                             f'(differs in {differing})')
    count = first['shard'][1]
    present = {data['shard'][0] for _, _, data in manifests}
    missing = sorted(set(range(count)) - present)
    if missing:
        raise SweepError(f'shards {missing} of {count} have no manifest; run them first')
    partials, seen, records = [], set(), {}
    for work_dir, path, data in manifests:
        if data['shard'][0] in seen:
            continue  # the same shard in two work dirs: take the first
        seen.add(data['shard'][0])
        partial = {}
        for key, relative in data['conditions'].items():
            file = osp.join(work_dir, str(relative))
            if not osp.isfile(file):
                raise SweepError(f'{path} lists {file}, which does not exist')
            record, problem = read_json(file)
            if problem is None:
                problem = record_identity_problem(record, key)
            if problem is None and record['fingerprint'] != data['fingerprint']:
                parts = [part for part, _ in differing_parts(record['fingerprint'],
                                                             data['fingerprint'])]
                problem = f'was written for other inputs than its shard (differs in {parts})'
            if problem is None:
                problem = record_consistency_problem(record, {}, first['task'])
            if problem is not None:
                raise SweepError(f'{file} {problem}; run shard {data["shard"][0]} again '
                                 '(it evaluates that condition again)')
            partial[key] = ConditionResult.from_dict(record['result'])
            records[Condition.from_key(key, first['protocol'])] = record
        partials.append(partial)
    merged = merge_results(partials, protocol=first['protocol'], task=first['task'])
    if len(merged) != first['num_conditions']:
        raise SweepError(f'the shards hold {len(merged)} conditions, the sweep has '
                         f'{first["num_conditions"]}')
    try:
        return write_report(out_dir, merged, protocol=first['protocol'], task=first['task'],
                            expected_severities=first['severities'],
                            provenance=first['provenance'], plots=plots,
                            calibration_details=calibration_details(records),
                            seen_in_training=(first['provenance'].get('extra') or {}).get(
                                'seen_in_training'))
    except OSError as error:
        raise write_error(error.filename or f'the report in {out_dir}', error) from None
