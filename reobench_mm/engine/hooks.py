"""Runner hooks."""
from typing import Optional, Sequence

from mmengine.hooks import Hook
from mmengine.utils import ProgressBar

from ..registry import HOOKS


@HOOKS.register_module()
class ProgressBarHook(Hook):
    """Show a terminal progress bar over training iterations and test/val batches.

    MMEngine's logger prints a line every ``log_interval`` iterations; this hook adds
    a live bar with throughput and ETA, which is what a user watching a demo or a
    sweep on a CPU wants. Only rank 0 draws.

    Args:
        phases (Sequence[str]): Which loops get a bar, any of ``'train'``, ``'val'``,
            ``'test'``. Defaults to all three.
        bar_width (int): Width of the bar in characters. Defaults to 40.
    """

    priority = 'VERY_LOW'
    _valid_phases = ('train', 'val', 'test')

    def __init__(self, phases: Sequence[str] = ('train', 'val', 'test'),
                 bar_width: int = 40) -> None:
        unknown = set(phases) - set(self._valid_phases)
        if unknown:
            raise ValueError(f'unknown phases {sorted(unknown)}; valid: {self._valid_phases}')
        if bar_width < 1:
            raise ValueError(f'bar_width must be >= 1, got {bar_width}')
        self.phases = tuple(phases)
        self.bar_width = bar_width
        self._bar: Optional[ProgressBar] = None
        self._train_bar: Optional[ProgressBar] = None  # parked during validation

    def _start(self, runner, phase: str, total: int) -> None:
        if phase in self.phases and runner.rank == 0 and total > 0:
            self._bar = ProgressBar(total, bar_width=self.bar_width)
        else:
            self._bar = None

    def _step(self) -> None:
        if self._bar is not None:
            self._bar.update()

    def _finish(self) -> None:
        if self._bar is not None:
            self._bar.file.write('\n')
            self._bar.file.flush()
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
