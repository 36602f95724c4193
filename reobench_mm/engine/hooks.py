"""Runner hooks."""
from typing import Any, Callable, Mapping, Optional, Sequence

from mmengine.hooks import Hook

from ..registry import HOOKS
from .checkpoint import check_checkpoint_classes
from .progress import Progress, check_progress_options


@HOOKS.register_module()
class ProgressBarHook(Hook):
    """Show progress with throughput and ETA over training iterations and test/val
    batches.

    MMEngine's logger prints a line every ``log_interval`` iterations; this hook adds
    a live bar, which is what a user watching a demo or a sweep on a CPU wants. When
    stdout is not a terminal (CI logs, ``nohup``, a file) it prints a short progress line
    at every 10 % of the loop and at least once a minute instead (see
    :class:`~reobench_mm.engine.progress.Progress`). Only rank 0 reports.

    Args:
        phases (Sequence[str]): Which loops get a bar, any of ``'train'``, ``'val'``,
            ``'test'``. Defaults to all three.
        bar_width (int): Width of the bar in characters. Defaults to 40.
        step_percent (float): Off a terminal, print a line each time this many percent
            of a loop is done. Defaults to 10.
        interval (float): Off a terminal, also print a line when this many seconds have
            passed since the last one. Defaults to 60.
    """

    priority = 'VERY_LOW'
    _valid_phases = ('train', 'val', 'test')

    def __init__(self, phases: Sequence[str] = ('train', 'val', 'test'),
                 bar_width: int = 40, step_percent: float = 10.0,
                 interval: float = 60.0) -> None:
        unknown = set(phases) - set(self._valid_phases)
        if unknown:
            raise ValueError(f'unknown phases {sorted(unknown)}; valid: {self._valid_phases}')
        check_progress_options(bar_width, step_percent, interval)
        self.phases = tuple(phases)
        self.bar_width = bar_width
        self.step_percent = step_percent
        self.interval = interval
        self._bar: Optional[Progress] = None
        self._train_bar: Optional[Progress] = None  # parked during validation

    def _start(self, runner, phase: str, total: int) -> None:
        if phase in self.phases and runner.rank == 0 and total > 0:
            self._bar = Progress(total, desc=phase, bar_width=self.bar_width,
                                 step_percent=self.step_percent, interval=self.interval)
        else:
            self._bar = None

    def _step(self) -> None:
        if self._bar is not None:
            self._bar.update()

    def _finish(self) -> None:
        if self._bar is not None:
            self._bar.close()
        self._bar = None

    # train: one bar over all remaining iterations
    def before_train(self, runner) -> None:
        self._start(runner, 'train', runner.max_iters - runner.iter)

    def after_train_iter(self, runner, batch_idx: int, data_batch=None, outputs=None) -> None:
        self._step()

    def after_train(self, runner) -> None:
        self._finish()

    # validation inside training interrupts the train bar; resume it afterwards
    def before_val_epoch(self, runner) -> None:
        self._train_bar, self._bar = self._bar, None
        if self._train_bar is not None:
            self._train_bar.break_line()
        self._start(runner, 'val', len(runner.val_dataloader))

    def after_val_iter(self, runner, batch_idx: int, data_batch=None, outputs=None) -> None:
        self._step()

    def after_val_epoch(self, runner, metrics=None) -> None:
        self._finish()
        self._bar, self._train_bar = self._train_bar, None

    def before_test_epoch(self, runner) -> None:
        self._start(runner, 'test', len(runner.test_dataloader))

    def after_test_iter(self, runner, batch_idx: int, data_batch=None, outputs=None) -> None:
        self._step()

    def after_test_epoch(self, runner, metrics=None) -> None:
        self._finish()


class CheckpointClassesHook(Hook):
    """Refuses a checkpoint trained on other classes than the evaluated dataset has
    (:func:`~reobench_mm.engine.checkpoint.check_checkpoint_classes`), when the runner
    loads it (``after_load_checkpoint``: ``load_from``, the toolboxes' ``tools/test.py``
    and this package's tools). The test loops of the package register it.

    Args:
        dataset_meta: returns the metainfo of the evaluated dataset.
        source: returns the checkpoint's path, for the message (None: unknown).
    """

    priority = 'VERY_HIGH'

    def __init__(self, dataset_meta: Callable[[], Optional[Mapping]],
                 source: Callable[[], Optional[str]] = lambda: None) -> None:
        self.dataset_meta = dataset_meta
        self.source = source

    def after_load_checkpoint(self, runner: Any, checkpoint: dict) -> None:
        check_checkpoint_classes(checkpoint, self.dataset_meta(),
                                 self.source() or 'the checkpoint')
