"""The error convention of the package's command-line tools.

Every tool under ``tools/`` runs its ``main`` through :func:`run_tool`: a bad input or a
refused run (a wrong argument or option, a file that cannot be read or used, a checkpoint
that does not fit, a config the package refuses, a work dir in use) ends the process with
one line on stderr, ``error: <what was wrong and what is valid>``, and exit status 2 —
no traceback. A traceback is printed instead when the environment variable
:data:`DEBUG_ENV_VAR` (``REOBENCH_DEBUG=1``) is set, and for errors of other kinds (a bug,
not a bad input), which keep Python's own report (exit status 1).

Bad command-line arguments follow the same convention (:class:`ToolArgumentParser`:
``error: <argparse's message> (see <tool> --help)``, exit status 2).

What counts as a bad input (:data:`INPUT_ERRORS`): ``ValueError`` (the package's own
refusals, :class:`~reobench_mm.errors.SweepError` and
:class:`~reobench_mm.engine.checkpoint.CheckpointError` among them), ``OSError`` (files
and folders), ``KeyError`` (a missing key or registry entry), ``TypeError`` (a value of
the wrong type), ``RuntimeError`` (refused placements and data the pipeline cannot
process), ``EOFError`` and ``pickle.UnpicklingError`` (unusable files).
"""
from __future__ import annotations

import argparse
import logging
import os
import pickle
import sys
from typing import Callable, Iterable, NoReturn, Optional, Sequence

__all__ = ['DEBUG_ENV_VAR', 'INPUT_ERRORS', 'EXIT_INPUT_ERROR', 'error_line', 'run_tool',
           'print_written',
           'ToolArgumentParser', 'log_file_error']

#: Environment variable: ``1`` shows the traceback of a refused run.
DEBUG_ENV_VAR = 'REOBENCH_DEBUG'
#: Exit status of a bad input or refused run (argparse's own for bad arguments).
EXIT_INPUT_ERROR = 2
#: The exception types that mean a bad input or a refused run.
INPUT_ERRORS = (ValueError, OSError, KeyError, TypeError, RuntimeError, EOFError,
                pickle.UnpicklingError)


def error_line(error: BaseException) -> str:
    """The one line printed for a refused run: ``error: ...`` (the file of an ``OSError``
    named; line breaks of the message folded)."""
    if isinstance(error, OSError) and error.strerror:
        where = f'{error.filename}: ' if error.filename else ''
        text = f'{where}{error.strerror}'
    elif isinstance(error, KeyError) and len(error.args) == 1:
        text = str(error.args[0])  # not the repr KeyError gives its message
    else:
        text = str(error) or type(error).__name__
    if 'Original Traceback' in text:  # re-raised from a data-loader worker: its message
        last = [line for line in text.splitlines() if line.strip()][-1]
        text = 'in a data-loader worker: ' + last.split(': ', 1)[-1]
    return f'error: {" ".join(text.split())}'


def _debug() -> bool:
    return os.environ.get(DEBUG_ENV_VAR, '').strip() not in ('', '0')


_HANDLE_ERROR = logging.Handler.handleError


def log_file_error(handler: logging.Handler, record: logging.LogRecord) -> None:
    """``handleError`` for a log file: a write that fails with an ``OSError`` (a full
    disk, a lost mount) is one warning line naming the file, after which the handler
    writes nothing more (the console keeps logging); Python's own prints a "--- Logging
    error ---" traceback for every record, naming no file. Other errors (a bad format
    string) are reported as Python reports them."""
    error = sys.exc_info()[1]
    if not isinstance(error, OSError):
        _HANDLE_ERROR(handler, record)
        return
    handler.emit = lambda record: None  # type: ignore[method-assign]
    stream = getattr(handler, 'stream', None)
    try:
        if stream is not None:
            stream.close()
    except OSError:
        pass
    # a stream that takes and drops what is still written to it directly (MMEngine writes
    # the model's initialisation table into its log file's stream): not None, which fails
    handler.stream = open(os.devnull, 'w', encoding='utf-8')  # type: ignore[attr-defined]
    name = getattr(handler, 'baseFilename', None) or 'the log file'
    print(f'warning: cannot write the log file {name}: {error.strerror or error}; logging '
          'to the console only from here', file=sys.stderr)


def print_written(paths: Iterable[str], warnings: Iterable[str] = ()) -> None:
    """The end of an analysis tool's run: each distinct warning once on stderr
    (``warning: ...``), then the files it wrote, one per line, after ``Written:``."""
    for message in dict.fromkeys(str(w) for w in warnings):
        print(f'warning: {message}', file=sys.stderr)
    print('\nWritten:')
    for path in paths:
        print(f'  {path}')


def run_tool(main: Callable[..., Optional[int]], argv: Optional[Sequence[str]] = None) -> int:
    """Run a tool's ``main(argv)`` under the error convention (module docstring); returns
    the exit status (``main``'s, 0 when it returns None, or
    :data:`EXIT_INPUT_ERROR`). The process's log files fail with one warning line
    (:func:`log_file_error`)."""
    logging.FileHandler.handleError = log_file_error  # type: ignore[method-assign]
    try:
        status = main(argv) if argv is not None else main()
    except INPUT_ERRORS as error:
        if _debug():
            raise
        print(error_line(error), file=sys.stderr)
        return EXIT_INPUT_ERROR
    return 0 if status is None else int(status)


class ToolArgumentParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose refusal of an argument is one line, ``error:
    <message> (see <tool> --help)``, and exit status 2, as every other refused input of
    the tools."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_INPUT_ERROR, f'error: {" ".join(message.split())} '
                  f'(see {self.prog} --help)\n')
