"""Shut down a finished Runner's data-loader worker processes at once.

A torch ``DataLoader`` with workers keeps them until its iterator is exhausted or
deleted. An MMEngine Runner holds its loaders in reference cycles (hooks and loops
refer back to the runner), so the iterators of persistent workers
(``persistent_workers=True``, as the toolboxes' configs set) and the never-ending
iterator of ``IterBasedTrainLoop`` are freed by Python's cyclic garbage collector,
at some later allocation. That collector clears weak references before it calls
``__del__``: the finaliser of each worker's index queue stops the queue's feeder
thread first, so the "stop" message that the iterator's ``__del__`` then queues never
reaches the worker, and torch waits out its 5 s join timeout for every worker before it
kills it. Measured: a training Runner of the demo config (train and validation loaders,
2 workers each), deleted and collected, blocked its process for 20 to 30 s; released
here first, for well under one second (``tests/engine/test_dataloader_workers.py``).

:func:`release_dataloader_workers` stops the workers while the queues are intact, the
way torch does when an iterator is exhausted. The package calls it where a Runner of its
own finishes inside a longer process (the demo's trainings, the data-budget driver's
trainings, the end of a sweep); a tool that exits right after its Runner need not (at
interpreter exit torch skips the shutdown).
"""
from typing import Any, Iterator

from ..transforms.placement import stop_live_workers

__all__ = ['release_dataloader_workers']

# The Runner keeps its loops and loaders in these attributes (built objects, or the
# configs they are built from): read directly, because the public properties of the
# same names would build a loop or loader that was never used, only to release it.
_RUNNER_LOOPS = ('_train_loop', '_val_loop', '_test_loop')
_RUNNER_LOADERS = ('_train_dataloader', '_val_dataloader', '_test_dataloader')


def _dataloaders(runner: Any) -> Iterator[Any]:
    from torch.utils.data import DataLoader
    seen = set()
    candidates = [getattr(runner, name, None) for name in _RUNNER_LOADERS]
    candidates += [getattr(getattr(runner, name, None), 'dataloader', None)
                   for name in _RUNNER_LOOPS]
    for loader in candidates:
        if isinstance(loader, DataLoader) and id(loader) not in seen:
            seen.add(id(loader))
            yield loader


def _shut_down(iterator: Any) -> bool:
    shutdown = getattr(iterator, '_shutdown_workers', None)
    if shutdown is None or getattr(iterator, '_shutdown', False):
        return False  # a single-process iterator, or one whose workers were stopped
    shutdown()
    return True


def release_dataloader_workers(runner: Any) -> int:
    """Stop the worker processes of every data loader ``runner`` built (persistent
    workers, and the running iterator of an iteration-based training loop); returns how
    many worker-holding loader iterators were shut down. Call it once the runner is
    done: a loader iterated again starts fresh workers, but the training loop's endless
    iterator is not restarted."""
    iterators = []
    for name in _RUNNER_LOOPS:
        # IterBasedTrainLoop's endless iterator (mmengine's _InfiniteDataloaderIterator)
        endless = getattr(getattr(runner, name, None), 'dataloader_iterator', None)
        iterators.append(getattr(endless, '_iterator', None))
    loaders = list(_dataloaders(runner))
    iterators += [getattr(loader, '_iterator', None) for loader in loaders]
    released, seen = 0, set()
    for iterator in iterators:
        if iterator is not None and id(iterator) not in seen:
            seen.add(id(iterator))
            released += _shut_down(iterator)
    for loader in loaders:
        stop_live_workers(loader)  # forget the stopped iterator of persistent workers
    return released
