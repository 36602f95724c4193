"""The work dir of a run: its lock, and putting it back as it was when a run is refused.

- :class:`WorkDirLock`: one run at a time per work dir (``fcntl.flock`` on
  ``<work dir>/.sweep.lock``, which holds the holder's pid, host and start time). The
  kernel drops the lock when its holder exits, however it exits, so a lock left by a
  killed run never blocks the next one.
- :class:`WorkDirSnapshot`: what a work dir held before a run, to remove what a
  refused run created (the Runner's log folder, the dumped config, ...);
  :func:`restored_on_failure` does that around any Runner-based run (``tools/test.py``
  and the robustness sweep). :func:`forget_runner_instances` drops MMEngine's
  process-wide logger and visualizer instances that write under a removed folder, and
  :func:`wait_for_fresh_log_folder` gives every Runner a log folder of its own.
- :func:`check_writable` probes a folder before a run writes into it;
  :func:`write_error` turns a failed write into a one-line
  :class:`~reobench_mm.errors.SweepError`.
"""
from __future__ import annotations

import datetime
import errno
import json
import logging
import os
import os.path as osp
import shutil
import socket
import sys
import tempfile
import types
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Optional, Sequence

from reobench_cli import log_file_error
from ..errors import SweepError, WorkDirLockedError
from ..fileio import atomic_write_bytes

__all__ = [
    'LOCK_FILE', 'WorkDirLock', 'quiet_log_write_errors', 'WorkDirSnapshot', 'close_log_files',
    'missing_dirs', 'remove_empty_dirs', 'check_writable', 'write_error', 'forget_runner_instances',
    'wait_for_fresh_log_folder', 'restored_on_failure'
]

LOCK_FILE = '.sweep.lock'

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
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW)
            with os.fdopen(fd, encoding='utf-8') as handle:
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
            try:  # never through a symbolic link: the lock file is written below
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
            except OSError as error:
                if error.errno == errno.ELOOP or osp.islink(self.path):
                    raise SweepError(
                        f'{self.path} is a symbolic link (to {os.readlink(self.path)!r}); the '
                        'lock file of a work dir must be its own file: remove the link') \
                        from None
                raise
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



def close_log_files(loggers: Sequence[logging.Logger], folder: str) -> None:
    """Close and detach the file handlers of ``loggers`` that write under ``folder``."""
    folder = osp.abspath(folder) + os.sep
    for logger in loggers:
        for handler in list(getattr(logger, 'handlers', [])):
            name = getattr(handler, 'baseFilename', None)
            if name and osp.abspath(name).startswith(folder):
                handler.close()
                logger.removeHandler(handler)


def quiet_log_write_errors(logger: logging.Logger) -> None:
    """Make each log file of ``logger`` that cannot be written (a full disk, a lost mount)
    one warning line naming it, after which the run logs to the console only
    (:func:`reobench_cli.log_file_error`; the tools set it for the whole process, the
    loops for the runner's logger when MMEngine's runner is used directly)."""
    for handler in getattr(logger, 'handlers', []):
        if isinstance(handler, logging.FileHandler):
            handler.handleError = types.MethodType(log_file_error, handler)  # type: ignore


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
                try:  # atomically: a link planted at the path is replaced, not followed
                    atomic_write_bytes(path, data)
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


