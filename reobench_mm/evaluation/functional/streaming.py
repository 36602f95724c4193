"""Per-process sums of per-sample statistics that give the numbers of one process.

MMEngine's ``DefaultSampler`` pads the test set to a multiple of the process count by
repeating its first samples, and rank ``r`` takes the positions ``r, r + w, r + 2w, ...``
of the padded list (``w`` processes). Metrics that keep per-sample results drop the
repeats when MMEngine gathers and trims them; a metric that only keeps a sum per process
(memory independent of the test set) cannot. The repeats are at padded positions
``>= dataset size``, and each rank gets at most one of them, as its last sample, so
:class:`RankSum` keeps each process's last sample apart until the dataset size is known
(:meth:`RankSum.total`); the statistics stay O(one sample's), not O(samples).

Metrics give :func:`sum_rank_totals` the dataset size through
:class:`~reobench_mm.evaluation.metrics.base.DatasetSizeMixin`.
"""
from __future__ import annotations

from typing import Any, Callable, Generic, List, Optional, Sequence, TypeVar

__all__ = ['RankSum', 'sum_rank_totals', 'gather_rank_samples']

Stats = TypeVar('Stats')


class RankSum(Generic[Stats]):
    """The running sum of one process's per-sample statistics, its last sample apart.

    Args:
        rank, world_size: this process and the number of processes (MMEngine's
            ``get_dist_info()`` when omitted).

    ``merge(a, b)`` (given to :meth:`add` and :meth:`total`) returns the sum of two
    statistics and may modify ``a``.
    """

    def __init__(self, rank: Optional[int] = None, world_size: Optional[int] = None) -> None:
        if rank is None or world_size is None:
            from mmengine.dist import get_dist_info
            rank, world_size = get_dist_info()
        if not 0 <= rank < world_size:
            raise ValueError(f'rank must be in [0, world_size), got {rank} of {world_size}')
        self.rank, self.world_size = rank, world_size
        self.count = 0
        self.head: Optional[Stats] = None  # every sample but the last
        self.last: Optional[Stats] = None
        #: what :meth:`add` was given to keep of each sample (small per-sample terms)
        self.kept: List[Any] = []

    def add(self, sample: Stats, merge: Callable[[Stats, Stats], Stats],
            keep: Any = None) -> None:
        """Add the statistics of the next sample this process evaluated; ``keep`` (if
        given) is kept for this sample alone (:func:`gather_rank_samples`)."""
        if self.last is not None:
            self.head = self.last if self.head is None else merge(self.head, self.last)
        self.last = sample
        self.count += 1
        if keep is not None:
            self.kept.append(keep)

    def last_is_padding(self, dataset_size: int) -> bool:
        """Whether the last sample was at a padded position of ``DefaultSampler``."""
        return self.count > 0 and \
            self.rank + (self.count - 1) * self.world_size >= dataset_size

    def total(self, dataset_size: Optional[int],
              merge: Callable[[Stats, Stats], Stats]) -> Optional[Stats]:
        """The sum over this process's samples without the sampler's repeat (all
        samples when ``dataset_size`` is None); None when there are none."""
        if self.last is None:
            return self.head
        if dataset_size is not None and self.last_is_padding(dataset_size):
            return self.head
        return self.last if self.head is None else merge(self.head, self.last)


def sum_rank_totals(parts: Sequence[Any], dataset_size: Optional[int],
                    merge: Callable[[Any, Any], Any]) -> Any:
    """The sum of :meth:`RankSum.total` over the parts gathered from every process
    (None when no process saw a sample)."""
    total = None
    for part in parts:
        value = part.total(dataset_size, merge)
        if value is None:
            continue
        total = value if total is None else merge(total, value)
    return total


def gather_rank_samples(parts: Sequence[Any], dataset_size: Optional[int]) -> List[Any]:
    """What every process kept of each sample (:meth:`RankSum.add` ``keep``), in dataset
    order, the sampler's repeats left out: rank ``r``'s ``k``-th sample is at position
    ``r + k * world_size``.

    Raises:
        ValueError: a process kept some samples but not all, or two give one position.
    """
    placed = {}
    for part in parts:
        if not part.kept:
            continue
        if len(part.kept) != part.count:
            raise ValueError(f'rank {part.rank} kept {len(part.kept)} of its '
                             f'{part.count} samples')
        for k, kept in enumerate(part.kept):
            position = part.rank + k * part.world_size
            if dataset_size is not None and position >= dataset_size:
                continue
            if position in placed:
                raise ValueError(f'two processes gave dataset position {position}')
            placed[position] = kept
    return [placed[p] for p in sorted(placed)]

