"""The blocks a run's results hold beside the corruption table: one per kind of condition
that is not a corruption of the run's own test set, in one table.

A robustness run's corruption conditions make its table (clean, each corruption at each
severity, Avg, ΔTP; :func:`~reobench_mm.analysis.results.aggregate`). The other kinds of
condition are reported in a block of their own, each with the same five parts, listed
once in :data:`RESULT_BLOCKS`:

- its name: the field of ``results.json``'s ``numbers`` and the key of
  :attr:`RobustnessSummary.blocks <reobench_mm.analysis.results.RobustnessSummary.blocks>`
  (``'shifts'``, ``'attacks'``);
- the key prefix of its conditions (:data:`~reobench_mm.evaluation.keys.SHIFT_PREFIX`,
  :data:`~reobench_mm.evaluation.keys.ATTACK_PREFIX`);
- its logger keys (what the robustness loops return for ``LoggerHook`` and
  ``CheckpointHook(save_best=...)``);
- its report section;
- its plot, where it has one.

:func:`~reobench_mm.analysis.report.write_report` writes each block given, ``read_results``
reads each back, and the loops return each one's logger keys, by going over the table: a
new kind of block is a new row here, not a new path through those functions.

Nothing here imports MMEngine or a toolbox.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ..evaluation.keys import ATTACK_PREFIX, SHIFT_PREFIX
from .attack_table import (ATTACK_CURVES_PLOT, attack_console_lines, attack_lines,
                           attack_metric_keys, plot_attack_curves)
from .shift_table import shift_console_lines, shift_lines, shift_metric_keys

__all__ = ['ResultBlock', 'RESULT_BLOCKS', 'result_block_names', 'get_result_block',
           'check_blocks', 'block_metric_keys', 'register_result_block',
           'unregister_result_block', 'block_console_lines']

Block = Mapping[str, Any]

#: The other fields of ``results.json``'s ``numbers`` (a block may not take their names).
RESERVED_NUMBERS = ('task', 'metric', 'protocol', 'clean', 'avg', 'delta_tp', 'mpc', 'rpc',
                    'per_corruption', 'per_category', 'included', 'per_class', 'extra',
                    'conditions', 'training', 'intervals', 'corruption_seeds')


@dataclass(frozen=True)
class ResultBlock:
    """One kind of block (see the module docstring).

    Attributes:
        name: the field of ``results.json``'s ``numbers`` and of ``summary.blocks``.
        prefix: the key prefix of the conditions whose numbers it holds.
        metric_keys: ``block -> {logger key: value}``.
        report_lines: ``(block, plot files written) -> the lines of its report section``.
        plot_file: the file name of its plot (None: it has none).
        plot: ``(block, path) -> the path written, or None`` (with :attr:`plot_file`).
        console_lines: ``block -> lines`` the tools print after the paper table (None:
            none).
    """
    name: str
    prefix: str
    metric_keys: Callable[[Block], Dict[str, float]]
    report_lines: Callable[[Block, Sequence[str]], List[str]]
    plot_file: Optional[str] = None
    plot: Optional[Callable[[Block, str], Optional[str]]] = None
    console_lines: Optional[Callable[[Block], List[str]]] = None


def _shift_report(block: Block, plots: Sequence[str]) -> List[str]:
    del plots  # no plot of its own
    return shift_lines(block)


def _attack_report(block: Block, plots: Sequence[str]) -> List[str]:
    return attack_lines(block, ATTACK_CURVES_PLOT if ATTACK_CURVES_PLOT in plots else None)


#: Every kind of block, in the order ``results.json`` and the report hold them (the
#: built-in ones; a registered kind of condition adds its own at the end:
#: :func:`register_result_block`).
RESULT_BLOCKS: List[ResultBlock] = [
    ResultBlock('shifts', SHIFT_PREFIX, shift_metric_keys, _shift_report,
                console_lines=shift_console_lines),
    ResultBlock('attacks', ATTACK_PREFIX, attack_metric_keys, _attack_report,
                ATTACK_CURVES_PLOT, plot_attack_curves, attack_console_lines),
]
_BUILT_IN = tuple(b.name for b in RESULT_BLOCKS)


def result_block_names() -> Tuple[str, ...]:
    """The names of the blocks, in the table's order."""
    return tuple(b.name for b in RESULT_BLOCKS)


def register_result_block(block: ResultBlock) -> None:
    """Add a block at the end of the table (with its kind of condition:
    :func:`~reobench_mm.robustness.conditions.register_condition_kind`).

    Raises:
        ValueError: a block of that name or key prefix exists, or the name is one of the
            other fields of ``results.json``'s ``numbers``.
    """
    for other in RESULT_BLOCKS:
        if block.name == other.name or block.prefix == other.prefix:
            raise ValueError(f'result block {block.name!r}: a block of that name or key '
                             f'prefix exists ({other.name!r}, {other.prefix!r})')
    if block.name in RESERVED_NUMBERS:
        raise ValueError(f'result block {block.name!r}: results.json\'s numbers have a '
                         'field of that name')
    RESULT_BLOCKS.append(block)


def unregister_result_block(name: str) -> None:
    """Remove a registered block (the built-in ones stay).

    Raises:
        ValueError: a built-in block, or no block of that name.
    """
    if name in _BUILT_IN:
        raise ValueError(f'result block {name!r} is built in')
    RESULT_BLOCKS.remove(get_result_block(name))


def get_result_block(name: str) -> ResultBlock:
    """The block called ``name``.

    Raises:
        ValueError: no such block (the valid names are listed).
    """
    for block in RESULT_BLOCKS:
        if block.name == name:
            return block
    raise ValueError(f'no result block {name!r}; the blocks are {list(result_block_names())}')


def check_blocks(blocks: Optional[Mapping[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """``blocks`` (``{name: block}``; None or empty blocks: none) as a dict in the table's
    order, each block a dict.

    Raises:
        ValueError: an unknown block name, or a block that is not a mapping.
    """
    given = dict(blocks or {})
    names = result_block_names()
    unknown = [n for n in given if n not in names]
    if unknown:
        raise ValueError(f'unknown result block(s) {unknown}; the blocks are '
                         f'{list(result_block_names())}')
    out = {}
    for name in names:
        block = given.get(name)
        if not block:
            continue
        if not isinstance(block, Mapping):
            raise ValueError(f'the {name} block must be a mapping, got '
                             f'{type(block).__name__}')
        out[name] = dict(block)
    return out


def block_metric_keys(blocks: Mapping[str, Block]) -> Dict[str, float]:
    """The logger keys of every block in ``blocks``, in the table's order."""
    out: Dict[str, float] = {}
    for block in RESULT_BLOCKS:
        if blocks.get(block.name):
            out.update(block.metric_keys(blocks[block.name]))
    return out


def block_console_lines(blocks: Mapping[str, Block]) -> List[str]:
    """What the tools print of every block in ``blocks`` after the paper table (each
    block's ``console_lines``), in the table's order."""
    out: List[str] = []
    for block in RESULT_BLOCKS:
        if blocks.get(block.name) and block.console_lines is not None:
            out.extend(block.console_lines(blocks[block.name]))
    return out
