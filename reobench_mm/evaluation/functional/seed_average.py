"""A condition evaluated with several corruption seeds: its numbers as the mean over the
seeds, on any image resample, with or without resampling the seeds too.

A random corruption (noise, clouds, stripes, shifts) draws other pixels with another
seed, so one condition evaluated with seeds ``s_1..s_S`` has ``S`` sets of per-image
statistics of the same images
(:class:`~reobench_mm.evaluation.functional.condition_stats.ImageStats`).
Its number is the mean of the ``S`` per-seed metrics (each computed over all images, as
the metric computes it), and on an image resample the mean of the ``S`` metrics on that
resample. With ``draws`` (``(B, S)`` seed indices, one draw with replacement per
resample: :func:`~reobench_mm.evaluation.functional.bootstrap.resample_draws`) resample
``b`` averages the seeds ``draws[b]`` instead: the two-stage bootstrap that resamples
both the images and the corruption's draws, whose spread includes the seed-to-seed
variation of the number.

:class:`SeedAverage` wraps the statistics of one metric (the task metric, or the
calibration metrics of one prefix) and answers ``values(weights)`` and ``concat`` as the
statistics it wraps do, so every number computed from statistics (the summary's
intervals, the paired comparison of two models) works on it unchanged;
:func:`average_over_seeds` wraps a condition's whole :class:`ImageStats`.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Tuple, Union

import numpy as np

from .condition_stats import ImageStats

__all__ = ['SeedAverage', 'average_over_seeds']

Values = Union[np.ndarray, Dict[str, np.ndarray]]


class SeedAverage:
    """The mean over corruption seeds of one metric's statistics (see the module
    docstring).

    Args:
        members: the statistics of each seed (same images, same kind), seed order.
        draws: None (every resample averages all seeds), or ``(B, S)`` indices into
            ``members``: resample ``b`` averages ``members[draws[b, j]]`` over ``j``.

    Raises:
        ValueError: no members, members of different image counts, or draws of another
            shape or range.
    """

    def __init__(self, members: Sequence[Any], draws: Optional[np.ndarray] = None) -> None:
        members = tuple(members)
        if not members:
            raise ValueError('a seed average needs the statistics of at least one seed')
        sizes = sorted({m.num_images for m in members})
        if len(sizes) != 1:
            raise ValueError(f'the seeds of a condition were evaluated on different '
                             f'numbers of images ({sizes})')
        if draws is not None:
            draws = np.asarray(draws)
            if draws.ndim != 2 or draws.shape[1] != len(members) or \
                    not np.issubdtype(draws.dtype, np.integer) or \
                    (draws.size and (draws.min() < 0 or draws.max() >= len(members))):
                raise ValueError(f'draws must be (resamples, {len(members)}) indices of '
                                 f'the seeds, got shape {draws.shape}')
        self.members = members
        self.draws = draws

    @property
    def num_images(self) -> int:
        return self.members[0].num_images

    @property
    def num_seeds(self) -> int:
        return len(self.members)

    @property
    def kind(self) -> str:
        """The members' kind (``'segmentation'``, ``'detection'``; calibration has none)."""
        return self.members[0].kind

    @property
    def names(self) -> Tuple[str, ...]:
        """The names of the calibration metrics :meth:`values` gives."""
        return self.members[0].names

    def _combine(self, rows: Sequence[np.ndarray]) -> np.ndarray:
        stacked = np.stack([np.asarray(r, dtype=np.float64) for r in rows], axis=1)  # (B, S)
        if self.draws is None:
            return stacked.mean(axis=1)
        if stacked.shape[0] != self.draws.shape[0]:
            raise ValueError(f'{stacked.shape[0]} image resamples but seed draws for '
                             f'{self.draws.shape[0]}')
        return np.take_along_axis(stacked, self.draws, axis=1).mean(axis=1)

    def values(self, weights: Optional[np.ndarray] = None) -> Values:
        """As the members' ``values``: ``(B,)`` (the task metric) or name -> ``(B,)``
        (calibration), the mean over the seeds (or over each resample's drawn seeds)."""
        rows = [m.values(weights) for m in self.members]
        if isinstance(rows[0], dict):
            return {k: self._combine([r[k] for r in rows]) for k in rows[0]}
        return self._combine(rows)

    def concat(self, other: 'SeedAverage') -> 'SeedAverage':
        """These images followed by ``other``'s, seed by seed (the same seeds)."""
        if not isinstance(other, SeedAverage) or other.num_seeds != self.num_seeds:
            raise ValueError('only the statistics of the same corruption seeds can be '
                             'joined')
        return SeedAverage([a.concat(b) for a, b in zip(self.members, other.members)])


def average_over_seeds(stats: Sequence[ImageStats],
                       draws: Optional[np.ndarray] = None) -> ImageStats:
    """One condition's statistics over its seeds (seed order) as one :class:`ImageStats`
    whose task and calibration statistics are :class:`SeedAverage` (the calibration
    prefixes every seed has). One seed without ``draws`` is returned as it is.

    Raises:
        ValueError: the seeds were evaluated on other images (the first difference
            named), or bad draws.
    """
    stats = list(stats)
    if not stats:
        raise ValueError('a seed average needs the statistics of at least one seed')
    first = stats[0]
    for index, other in enumerate(stats[1:], 1):
        if other.image_ids != first.image_ids:
            only = sorted(set(other.image_ids) ^ set(first.image_ids))[:3]
            raise ValueError(f'seed {index} of a condition was evaluated on other images '
                             f'than seed 0 ({only or "another order"})')
    if len(stats) == 1 and draws is None:
        return first
    prefixes: Tuple[str, ...] = tuple(p for p in first.calibration
                                      if all(p in s.calibration for s in stats))
    return ImageStats(first.image_ids, SeedAverage([s.task for s in stats], draws),
                      {p: SeedAverage([s.calibration[p] for s in stats], draws)
                       for p in prefixes})
