"""The clean-vs-corrupted statistics of one layer over a run, accumulated batch by batch:

- :class:`SampleDriftAccumulator`: on per-sample representations (one vector per image,
  ``X ∈ R^{N×D}``): full-batch linear CKA over the ``N`` samples, its split-half floors
  (CKA and cosine), per-sample cosine, participation ratios;
- :class:`DriftAccumulator`: the same statistics on paired clean and corrupted token
  sets, grouping a fixed number of samples per CKA minibatch (memory does not grow with
  the data).

Both can be merged with another of their kind (:meth:`merge`) and report their result as
a JSON-serialisable dict (undefined values are ``None``). The statistics themselves are
those of :mod:`~reobench_mm.evaluation.functional.representation`.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np
import torch

from ...fileio import finite_or_none
from .representation import (MIN_HSIC_SAMPLES, MIN_SPLIT_HALF_SAMPLES, ArrayLike,
                             StreamingCKA, StreamingCosine, StreamingParticipationRatio,
                             _check_floor_seed, _check_paired_rows, _check_paired_tokens,
                             _check_pr_convention, _cosine_last_axis, _is_positive_int,
                             linear_cka, participation_ratio, split_half_cka,
                             split_half_cosine, split_half_indices)

__all__ = ['SampleDriftAccumulator', 'DriftAccumulator']


class SampleDriftAccumulator:
    """Clean-vs-corrupted statistics of one layer on per-sample representations.

    Every :meth:`update` adds ``B`` paired rows: one ``D``-vector per sample (image) for
    the clean and for the corrupted input (a layer's tokens pooled per image, say). The
    rows are kept (``N×D`` float64 per side, memory grows with the number of samples),
    and :meth:`result` computes, on the whole ``X, Y ∈ R^{N×D}``:

    - ``cka``: :func:`linear_cka` of ``X`` and ``Y`` (unbiased HSIC, one batch of all
      ``N`` samples; needs ``N >= 4``);
    - ``cka_floor``: :func:`split_half_cka` of ``X`` with ``floor_seed`` (needs
      ``N >= 8``); ``cosine_floor``: :func:`split_half_cosine` of the same halves
      (needs ``N >= 2``);
    - ``cosine``: the mean over samples of ``cos(x_i, y_i)``
      (:func:`row_cosine_similarity`);
    - ``pr_clean``, ``pr_corrupted``: :func:`participation_ratio` of ``X`` and ``Y`` in
      ``pr_convention``.

    The result does not depend on how the samples are batched.

    Args:
        pr_convention: ``'raw'`` (default) or ``'centred'`` (:data:`PR_CONVENTIONS`).
        floor_seed: seed of the split-half floor's split.
    """

    def __init__(self, pr_convention: str = 'raw', floor_seed: int = 0) -> None:
        self.pr_convention = _check_pr_convention(pr_convention)
        self.floor_seed = _check_floor_seed(floor_seed)
        self._clean: List[torch.Tensor] = []
        self._corrupted: List[torch.Tensor] = []

    @property
    def num_samples(self) -> int:
        return sum(rows.shape[0] for rows in self._clean)

    def update(self, clean: ArrayLike, corrupted: ArrayLike) -> 'SampleDriftAccumulator':
        """Add ``B×D`` paired representations (``D`` is one sample)."""
        a, b = _check_paired_rows(clean, corrupted)
        if self._clean and a.shape[1] != self._clean[0].shape[1]:
            raise ValueError(f'representations have {a.shape[1]} features, this accumulator '
                             f'has {self._clean[0].shape[1]}')
        self._clean.append(a)
        self._corrupted.append(b)
        return self

    def merge(self, other: 'SampleDriftAccumulator') -> 'SampleDriftAccumulator':
        """Append ``other``'s samples after this one's (in place; returns ``self``)."""
        if not isinstance(other, SampleDriftAccumulator):
            raise ValueError('can only merge a SampleDriftAccumulator, got '
                             f'{type(other).__name__}')
        if other.pr_convention != self.pr_convention:
            raise ValueError(f'cannot merge a {other.pr_convention!r} accumulator into a '
                             f'{self.pr_convention!r} one')
        for a, b in zip(other._clean, other._corrupted):
            self.update(a, b)
        return self

    def representations(self) -> Tuple[np.ndarray, np.ndarray]:
        """``(X, Y)``: the clean and corrupted ``N×D`` representations (float64)."""
        if not self._clean:
            raise ValueError('no samples were added')
        return torch.cat(self._clean).numpy(), torch.cat(self._corrupted).numpy()

    def result(self) -> Dict[str, Optional[float]]:
        """``{'cka', 'cka_floor', 'cosine', 'cosine_floor', 'pr_clean', 'pr_corrupted',
        'num_samples', 'dim'}`` (JSON-serialisable; undefined values, such as the CKA of
        fewer than 4 samples or the floor of fewer than 8, are ``None``)."""
        n = self.num_samples
        if n == 0:
            return dict(cka=None, cka_floor=None, cosine=None, cosine_floor=None,
                        pr_clean=None, pr_corrupted=None, num_samples=0, dim=None)
        x, y = torch.cat(self._clean), torch.cat(self._corrupted)
        cka = linear_cka(x, y) if n >= MIN_HSIC_SAMPLES else float('nan')
        floor = (split_half_cka(x, self.floor_seed) if n >= MIN_SPLIT_HALF_SAMPLES
                 else float('nan'))
        cosine_floor = split_half_cosine(x, self.floor_seed) if n >= 2 else float('nan')
        return dict(cka=finite_or_none(cka), cka_floor=finite_or_none(floor),
                    cosine=finite_or_none(float(_cosine_last_axis(x, y).mean())),
                    cosine_floor=finite_or_none(cosine_floor),
                    pr_clean=finite_or_none(participation_ratio(x, self.pr_convention)),
                    pr_corrupted=finite_or_none(participation_ratio(y, self.pr_convention)),
                    num_samples=n, dim=int(x.shape[1]))


class DriftAccumulator:
    """Clean-vs-corrupted statistics of one layer, fed with paired token sets.

    Every :meth:`update` takes ``B×N×C`` clean and corrupted tokens of ``B`` samples
    (images). The samples' tokens are grouped into CKA minibatches of
    ``samples_per_minibatch`` consecutive samples (rows = tokens of those samples), so the
    result does not depend on how the caller batches the samples; at most one
    incomplete group is buffered. :meth:`flush` (called by :meth:`result`) adds the last
    incomplete group when it has at least 4 tokens.

    The split-half floor is the minibatch CKA of random halves of each minibatch's clean
    token rows (:func:`split_half_indices` seeded with ``(floor_seed, minibatch
    index)``; minibatches with fewer than 8 tokens are left out of it). Rows of the same
    image can meet in a pair, so at the token level the floor sits slightly above the
    per-sample one. The cosine floor is the mean cosine over every paired row of those
    same halves (all minibatches pooled).

    Args:
        samples_per_minibatch: samples whose tokens form one CKA minibatch.
        pr_convention: ``'raw'`` (default) or ``'centred'`` (:data:`PR_CONVENTIONS`).
        floor_seed: seed of the split-half floor's splits.
    """

    def __init__(self, samples_per_minibatch: int = 8, pr_convention: str = 'raw',
                 floor_seed: int = 0) -> None:
        if not _is_positive_int(samples_per_minibatch):
            raise ValueError('samples_per_minibatch must be a positive integer, got '
                             f'{samples_per_minibatch!r}')
        self.samples_per_minibatch = int(samples_per_minibatch)
        self.floor_seed = _check_floor_seed(floor_seed)
        self.cka = StreamingCKA()
        self.floor = StreamingCKA()
        self.floor_cosine_sum = 0.0
        self.floor_cosine_pairs = 0
        self.cosine = StreamingCosine()
        self.pr_clean = StreamingParticipationRatio(convention=pr_convention)
        self.pr_corrupted = StreamingParticipationRatio(convention=pr_convention)
        self._num_fed = 0
        self._pending_clean: List[torch.Tensor] = []
        self._pending_corrupted: List[torch.Tensor] = []

    @property
    def pr_convention(self) -> str:
        return self.pr_clean.convention

    def update(self, clean: ArrayLike, corrupted: ArrayLike) -> 'DriftAccumulator':
        """Add ``B×N×C`` paired token sets (``N×C`` is one sample)."""
        a, b = _check_paired_tokens(clean, corrupted)
        self.cosine.update(a, b)
        self.pr_clean.update(a)
        self.pr_corrupted.update(b)
        for sample_clean, sample_corrupted in zip(a, b):
            self._pending_clean.append(sample_clean)
            self._pending_corrupted.append(sample_corrupted)
            if len(self._pending_clean) == self.samples_per_minibatch:
                self._feed_pending()
        return self

    def _feed_pending(self) -> None:
        x = torch.cat(self._pending_clean)
        y = torch.cat(self._pending_corrupted)
        self._pending_clean, self._pending_corrupted = [], []
        index = self._num_fed
        self._num_fed += 1
        if x.shape[0] >= MIN_HSIC_SAMPLES:
            self.cka.update(x, y)
        if x.shape[0] >= MIN_SPLIT_HALF_SAMPLES:
            first, second = split_half_indices(x.shape[0], [self.floor_seed, index])
            halves = x[torch.from_numpy(first)], x[torch.from_numpy(second)]
            self.floor.update(*halves)
            self.floor_cosine_sum += float(_cosine_last_axis(*halves).sum())
            self.floor_cosine_pairs += int(first.size)

    def flush(self) -> 'DriftAccumulator':
        """Add the buffered incomplete CKA minibatch (dropped if under 4 tokens)."""
        if self._pending_clean:
            self._feed_pending()
        return self

    def merge(self, other: 'DriftAccumulator') -> 'DriftAccumulator':
        """Add ``other``'s sums to this one (both are flushed first; returns ``self``)."""
        if not isinstance(other, DriftAccumulator):
            raise ValueError(f'can only merge a DriftAccumulator, got {type(other).__name__}')
        self.flush()
        other.flush()
        self.cka.merge(other.cka)
        self.floor.merge(other.floor)
        self.floor_cosine_sum += other.floor_cosine_sum
        self.floor_cosine_pairs += other.floor_cosine_pairs
        self.cosine.merge(other.cosine)
        self.pr_clean.merge(other.pr_clean)
        self.pr_corrupted.merge(other.pr_corrupted)
        self._num_fed += other._num_fed
        return self

    def result(self) -> Dict[str, Optional[float]]:
        """``{'cka', 'cka_floor', 'cosine', 'cosine_floor', 'pr_clean', 'pr_corrupted',
        'num_samples', 'num_tokens', 'num_minibatches', 'dim'}`` (JSON-serialisable;
        undefined values are ``None``)."""
        self.flush()
        cka = self.cka.result()
        pairs = self.floor_cosine_pairs
        return dict(cka=cka['cka'], cka_floor=self.floor.result()['cka'],
                    cosine=self.cosine.result()['cosine'],
                    cosine_floor=finite_or_none(self.floor_cosine_sum / pairs) if pairs
                    else None,
                    pr_clean=self.pr_clean.result()['participation_ratio'],
                    pr_corrupted=self.pr_corrupted.result()['participation_ratio'],
                    num_samples=self.cosine.num_samples, num_tokens=self.pr_clean.count,
                    num_minibatches=cka['num_minibatches'], dim=self.pr_clean.dim)
