"""Progress reporting that suits both terminals and log files.

On a terminal, :class:`Progress` redraws one live bar in place (``\\r``), in the layout
of MMEngine's ``ProgressBar``::

    [>>>>>>>>>>>>                            ] 90/300, 29.8 it/s, elapsed: 3s, ETA:     7s

Anywhere else (CI logs, ``nohup``, a redirected stdout) carriage returns pile every
update onto a single line, so it prints plain, newline-terminated lines instead: one
each time another ``step_percent`` of the total is done, one whenever ``interval``
seconds have passed since the last line while work goes on, and a final one::

    train: 90/300 (30%), 29.8 it/s, elapsed 0:00:03, ETA 0:00:07
    train: 300/300 (100%), 30.1 it/s, elapsed 0:00:10, done

Without a known total the lines show the count, the rate and the elapsed time, at most
every ``interval`` seconds and once at the end.

Usage::

    with Progress(len(items), desc='conditions') as progress:
        for item in items:
            work(item)
            progress.update()
"""
from __future__ import annotations

import math
import shutil
import sys
import time
from typing import Callable, Optional, TextIO

__all__ = ['Progress', 'check_progress_options', 'format_duration', 'stream_is_tty']


def stream_is_tty(stream: TextIO) -> bool:
    """Whether ``stream`` is an interactive terminal (False when it cannot tell, e.g.
    closed or without ``isatty``)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def check_progress_options(bar_width: int = 40, step_percent: float = 10.0,
                           interval: float = 60.0) -> None:
    """Raise ``ValueError`` for display options :class:`Progress` does not accept."""
    if bar_width < 1:
        raise ValueError(f'bar_width must be >= 1, got {bar_width}')
    if not 0 < step_percent <= 100:
        raise ValueError(f'step_percent must be in (0, 100], got {step_percent}')
    if not interval > 0:
        raise ValueError(f'interval must be > 0 seconds, got {interval}')


def format_duration(seconds: float) -> str:
    """``H:MM:SS`` of a non-negative duration (rounded to whole seconds)."""
    total = int(round(max(0.0, seconds)))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return f'{hours}:{minutes:02d}:{secs:02d}'


class Progress:
    """Progress over ``total`` steps, drawn as a live bar on a terminal and as periodic
    log lines elsewhere.

    Args:
        total (int, optional): Number of steps; ``None`` or ``0`` when unknown.
        stream (TextIO, optional): Where to write; ``sys.stdout`` (as it is when the
            object is created) by default.
        desc (str): Label at the start of each log line (e.g. ``'train'``). Empty: none.
        unit (str): Name of one step in the rate (``'it'`` -> ``it/s``).
        bar_width (int): Width of the terminal bar in characters (narrowed to fit the
            terminal).
        step_percent (float): On a non-terminal, print a line each time another this
            many percent of ``total`` is done (in ``(0, 100]``).
        interval (float): On a non-terminal, also print a line when this many seconds
            have passed since the last one and work has progressed (``> 0``); without a
            known total it is the only periodic trigger.
        tty (bool, optional): Force the terminal (True) or log-line (False) style;
            default: ``stream.isatty()``.
        clock (Callable[[], float]): Monotonic time source in seconds (for tests).

    Attributes:
        completed (int): Steps done so far.
        is_tty (bool): Whether the live-bar style is used.
    """

    def __init__(self, total: Optional[int] = None, *, stream: Optional[TextIO] = None,
                 desc: str = '', unit: str = 'it', bar_width: int = 40,
                 step_percent: float = 10.0, interval: float = 60.0,
                 tty: Optional[bool] = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if total is not None and total < 0:
            raise ValueError(f'total must be >= 0 or None, got {total}')
        check_progress_options(bar_width, step_percent, interval)
        self.total = int(total) if total else 0
        self.stream = sys.stdout if stream is None else stream
        self.desc = desc
        self.unit = unit
        self.bar_width = bar_width
        self.step_percent = float(step_percent)
        self.interval = float(interval)
        self.is_tty = stream_is_tty(self.stream) if tty is None else bool(tty)
        self._clock = clock
        self._start = clock()
        self.completed = 0
        self.closed = False
        self._last_line_time = self._start
        self._last_line_completed = 0
        self._next_step = 1  # index of the next step_percent milestone to report
        self._line_open = False  # a live bar is drawn and not followed by a newline
        self._drawn_length = 0
        self._drawn_completed = -1
        self._final_logged = False
        if self.is_tty:
            self._draw()

    # ------------------------------------------------------------------ public API
    @property
    def elapsed(self) -> float:
        """Seconds since the progress started."""
        return max(0.0, self._clock() - self._start)

    def update(self, n: int = 1) -> None:
        """Record ``n`` more finished steps and redraw or log as due."""
        if n < 0:
            raise ValueError(f'n must be >= 0, got {n}')
        self.completed += n
        if self.closed:  # counted, but the final output is already written
            return
        if self.is_tty:
            self._draw()
            return
        now = self._clock()
        due = now - self._last_line_time >= self.interval
        if self.total:
            # milestones passed by this update (several at once are reported once)
            reached = math.floor(100.0 * self.completed / self.total / self.step_percent
                                 + 1e-9)
            if reached >= self._next_step:
                self._next_step = reached + 1
                due = True
            if self.completed >= self.total and not self._final_logged:
                self._log_line(now, final=True)
                return
        if due and self.completed > self._last_line_completed:
            self._log_line(now)

    def break_line(self) -> None:
        """End the live bar's line on a terminal, so that other output (a nested
        progress, a message) starts on a line of its own; the bar is redrawn on the
        next update. Nothing to do for log lines, which always end with a newline."""
        if self.is_tty and self._line_open:
            self._write('\n')
            self._line_open = False
            self._drawn_length = 0

    def close(self) -> None:
        """Finish: the terminal bar is drawn a last time and ended with a newline; in
        log-line style the final line is printed (unless reaching the total printed it
        already). Calling it again does nothing."""
        if self.closed:
            return
        self.closed = True
        if self.is_tty:
            if self._line_open or self.completed != self._drawn_completed:
                self._draw()
            self.break_line()
        elif not self._final_logged or self.completed > self._last_line_completed:
            self._log_line(self._clock(), final=True)

    def __enter__(self) -> 'Progress':
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # ------------------------------------------------------------------ rendering
    def _rate(self, elapsed: float) -> float:
        if not self.completed:
            return 0.0
        return self.completed / elapsed if elapsed > 0 else float('inf')

    def _rate_text(self, rate: float) -> str:
        """``12.3 it/s``; below one step a second ``4.5 s/it``."""
        if 0 < rate < 1:
            return f'{1 / rate:.1f} s/{self.unit}'
        return f'{rate:.1f} {self.unit}/s' if math.isfinite(rate) else f'- {self.unit}/s'

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()

    def _draw(self) -> None:
        elapsed = self.elapsed
        rate = self._rate(elapsed)
        if self.total:
            fraction = min(1.0, self.completed / self.total)
            eta = int(elapsed * (1 - fraction) / fraction + 0.5) if fraction > 0 else 0
            message = (f'] {self.completed}/{self.total}, {self._rate_text(rate)}, '
                       f'elapsed: {int(elapsed + 0.5)}s, ETA: {eta:5}s')
            columns = shutil.get_terminal_size().columns
            width = max(2, min(self.bar_width, columns - len(message) - 2,
                               int(columns * 0.6)))
            marks = int(width * fraction)
            text = '[' + '>' * marks + ' ' * (width - marks) + message
        else:
            text = (f'completed: {self.completed}, elapsed: {int(elapsed + 0.5)}s, '
                    f'{self._rate_text(rate)}')
        # blank out what a longer previous drawing left at the end of the line
        padding = ' ' * max(0, self._drawn_length - len(text))
        self._write('\r' + text + padding)
        self._drawn_length = len(text)
        self._drawn_completed = self.completed
        self._line_open = True

    def _log_line(self, now: float, final: bool = False) -> None:
        elapsed = max(0.0, now - self._start)
        rate = self._rate(elapsed)
        rate_text = self._rate_text(rate)
        parts = []
        if self.total:
            percent = 100.0 * self.completed / self.total
            parts.append(f'{self.completed}/{self.total} ({percent:.0f}%)')
        else:
            parts.append(f'{self.completed} {self.unit}')
        parts += [rate_text, f'elapsed {format_duration(elapsed)}']
        if final:
            parts.append('done' if not self.total or self.completed >= self.total
                         else 'stopped')
        elif self.total and self.completed:
            remaining = elapsed * (self.total - self.completed) / self.completed
            parts.append(f'ETA {format_duration(remaining)}')
        prefix = f'{self.desc}: ' if self.desc else ''
        self._write(prefix + ', '.join(parts) + '\n')
        self._last_line_time = now
        self._last_line_completed = self.completed
        self._final_logged = self._final_logged or final
