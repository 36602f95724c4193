"""Statistics of how far features move: CKA, token-wise cosine, participation ratio.

Everything here works on plain arrays (``numpy.ndarray`` or ``torch.Tensor``; computed
in float64 with torch) and knows nothing about models or datasets:

- :func:`hsic_unbiased`: the unbiased HSIC estimator of Song et al. (2012) on two
  ``n×n`` Gram matrices, and :func:`linear_cka`, linear CKA built on it;
- :class:`StreamingCKA`: minibatch CKA (Nguyen, Raghu & Kornblith, 2021): the mean of
  per-minibatch unbiased HSICs, ``CKA = mean HSIC(X,Y) / sqrt(mean HSIC(X,X) · mean
  HSIC(Y,Y))``, from three running sums;
- :class:`StreamingCosine`: mean per-sample cosine similarity between paired tokens;
- :class:`StreamingParticipationRatio`: ``PR = (Σλ)² / Σλ²`` of the feature covariance
  from running sums of ``x`` and ``xxᵀ``;
- :class:`DriftAccumulator`: the four statistics for one layer, fed with paired clean
  and corrupted token sets, grouping a fixed number of samples per CKA minibatch.

Every accumulator can be merged with another of its kind (:meth:`merge` adds the running
sums) and reports its result as a JSON-serialisable dict (undefined values are ``None``).
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Tuple, Union

import numpy as np
import torch

from ...fileio import finite_or_none

__all__ = [
    'hsic_unbiased', 'linear_cka', 'linear_hsic_terms', 'token_cosine_similarity',
    'StreamingCKA', 'StreamingCosine', 'StreamingParticipationRatio', 'DriftAccumulator'
]

ArrayLike = Union[np.ndarray, torch.Tensor]
MIN_HSIC_SAMPLES = 4


def _as_float64(array: ArrayLike, name: str) -> torch.Tensor:
    if isinstance(array, torch.Tensor):
        return array.detach().to(device='cpu', dtype=torch.float64)
    try:
        return torch.as_tensor(np.asarray(array, dtype=np.float64))
    except (TypeError, ValueError) as error:
        raise ValueError(f'{name} must be a numeric array, got {type(array).__name__}') from error


def _is_positive_int(value) -> bool:
    return (isinstance(value, (int, np.integer)) and not isinstance(value, bool)
            and value >= 1)


# ----------------------------------------------------------------------------- HSIC / CKA
def _hsic_unbiased_t(gram_x: torch.Tensor, gram_y: torch.Tensor) -> float:
    """The estimator on float64 Gram matrices (already checked). O(n²)."""
    n = gram_x.shape[0]
    k = gram_x.clone()
    l = gram_y.clone()  # noqa: E741
    k.fill_diagonal_(0)
    l.fill_diagonal_(0)
    trace_kl = float((k * l.T).sum())  # tr(K̃ L̃)
    k_col_sums, l_row_sums = k.sum(0), l.sum(1)  # 1ᵀK̃ and L̃1
    sum_k, sum_l = float(k_col_sums.sum()), float(l_row_sums.sum())
    ones_k_l_ones = float(k_col_sums @ l_row_sums)  # 1ᵀ K̃ L̃ 1
    value = (trace_kl + sum_k * sum_l / ((n - 1) * (n - 2))
             - 2.0 * ones_k_l_ones / (n - 2))
    return value / (n * (n - 3))


def hsic_unbiased(K: ArrayLike, L: ArrayLike) -> float:  # noqa: N803 (Gram matrices)
    """Unbiased HSIC estimator (Song et al., 2012, Eq. 5) of two Gram matrices.

    ``HSIC₁ = [tr(K̃L̃) + 1ᵀK̃1·1ᵀL̃1 / ((n−1)(n−2)) − 2/(n−2)·1ᵀK̃L̃1] / (n(n−3))``,
    with ``K̃``, ``L̃`` the Gram matrices with their diagonals set to zero.

    Args:
        K, L: ``n×n`` Gram matrices of the same ``n`` (≥ 4), numpy or torch.

    Returns:
        float: the estimate (can be negative: it is unbiased, not non-negative).
    """
    gram_x, gram_y = _as_float64(K, 'K'), _as_float64(L, 'L')
    for name, gram in (('K', gram_x), ('L', gram_y)):
        if gram.ndim != 2 or gram.shape[0] != gram.shape[1]:
            raise ValueError(f'{name} must be a square n×n Gram matrix, got shape '
                             f'{tuple(gram.shape)}')
    if gram_x.shape != gram_y.shape:
        raise ValueError(f'K and L must have the same shape, got {tuple(gram_x.shape)} and '
                         f'{tuple(gram_y.shape)}')
    if gram_x.shape[0] < MIN_HSIC_SAMPLES:
        raise ValueError(f'the unbiased HSIC needs n >= {MIN_HSIC_SAMPLES} samples, got '
                         f'n={gram_x.shape[0]}')
    return _hsic_unbiased_t(gram_x, gram_y)


def _check_features(X: ArrayLike, Y: ArrayLike) -> Tuple[torch.Tensor, torch.Tensor]:  # noqa: N803
    x, y = _as_float64(X, 'X'), _as_float64(Y, 'Y')
    if x.ndim != 2 or y.ndim != 2:
        raise ValueError(f'X and Y must be n×d feature matrices, got shapes '
                         f'{tuple(x.shape)} and {tuple(y.shape)}')
    if x.shape[0] != y.shape[0]:
        raise ValueError(f'X and Y must have the same number of rows (samples), got '
                         f'{x.shape[0]} and {y.shape[0]}')
    if x.shape[0] < MIN_HSIC_SAMPLES:
        raise ValueError(f'the unbiased HSIC needs n >= {MIN_HSIC_SAMPLES} samples, got '
                         f'n={x.shape[0]}')
    return x, y


def linear_hsic_terms(X: ArrayLike, Y: ArrayLike) -> Tuple[float, float, float]:  # noqa: N803
    """``(HSIC(X,Y), HSIC(X,X), HSIC(Y,Y))`` with linear kernels, unbiased estimator.

    The features are centred first (the estimator is invariant to translating the
    features; centring only improves the floating-point accuracy).

    Args:
        X: ``n×d1`` features. Y: ``n×d2`` features of the same ``n`` (≥ 4) samples.
    """
    x, y = _check_features(X, Y)
    x = x - x.mean(0, keepdim=True)
    y = y - y.mean(0, keepdim=True)
    gram_x, gram_y = x @ x.T, y @ y.T
    return (_hsic_unbiased_t(gram_x, gram_y), _hsic_unbiased_t(gram_x, gram_x),
            _hsic_unbiased_t(gram_y, gram_y))


def _cka_from_terms(hsic_xy: float, hsic_xx: float, hsic_yy: float) -> float:
    denominator = hsic_xx * hsic_yy
    if not denominator > 0:
        return float('nan')
    return hsic_xy / math.sqrt(denominator)


def linear_cka(X: ArrayLike, Y: ArrayLike) -> float:  # noqa: N803
    """Linear CKA of two feature matrices with the unbiased HSIC estimator.

    ``CKA = HSIC(X,Y) / sqrt(HSIC(X,X)·HSIC(Y,Y))``; 1 for identical features, invariant
    to orthogonal transforms and isotropic scaling of either side. NaN when a side has
    no variance (``HSIC(X,X) <= 0``).

    Args:
        X: ``n×d1`` features. Y: ``n×d2`` features of the same ``n`` (≥ 4) samples.
    """
    return _cka_from_terms(*linear_hsic_terms(X, Y))


# ----------------------------------------------------------------------------- streaming CKA
class StreamingCKA:
    """Minibatch linear CKA (Nguyen, Raghu & Kornblith, 2021).

    Each :meth:`update` adds one minibatch of paired features; only the sums of the
    three unbiased HSICs and the number of minibatches are kept, so memory does not
    grow with the data. :meth:`compute` returns ``mean HSIC(X,Y) / sqrt(mean HSIC(X,X) ·
    mean HSIC(Y,Y))`` (the means share the minibatch count, which cancels).
    """

    def __init__(self) -> None:
        self.hsic_xy_sum = 0.0
        self.hsic_xx_sum = 0.0
        self.hsic_yy_sum = 0.0
        self.num_minibatches = 0
        self.num_samples = 0

    def update(self, X: ArrayLike, Y: ArrayLike) -> 'StreamingCKA':  # noqa: N803
        """Add one minibatch: ``X`` ``n×d1`` and ``Y`` ``n×d2`` paired rows, ``n >= 4``."""
        hsic_xy, hsic_xx, hsic_yy = linear_hsic_terms(X, Y)
        self.hsic_xy_sum += hsic_xy
        self.hsic_xx_sum += hsic_xx
        self.hsic_yy_sum += hsic_yy
        self.num_minibatches += 1
        self.num_samples += int(np.shape(X)[0])
        return self

    def merge(self, other: 'StreamingCKA') -> 'StreamingCKA':
        """Add ``other``'s sums to this one (in place; returns ``self``)."""
        if not isinstance(other, StreamingCKA):
            raise ValueError(f'can only merge a StreamingCKA, got {type(other).__name__}')
        self.hsic_xy_sum += other.hsic_xy_sum
        self.hsic_xx_sum += other.hsic_xx_sum
        self.hsic_yy_sum += other.hsic_yy_sum
        self.num_minibatches += other.num_minibatches
        self.num_samples += other.num_samples
        return self

    def compute(self) -> float:
        """The minibatch CKA; NaN before any update or when a side has no variance."""
        if self.num_minibatches == 0:
            return float('nan')
        return _cka_from_terms(self.hsic_xy_sum, self.hsic_xx_sum, self.hsic_yy_sum)

    def result(self) -> Dict[str, Optional[float]]:
        """``{'cka', 'hsic_xy', 'hsic_xx', 'hsic_yy', 'num_minibatches', 'num_samples'}``
        (the HSICs are means over minibatches; undefined values are ``None``)."""
        means = {}
        for key, total in (('hsic_xy', self.hsic_xy_sum), ('hsic_xx', self.hsic_xx_sum),
                           ('hsic_yy', self.hsic_yy_sum)):
            means[key] = (finite_or_none(total / self.num_minibatches)
                          if self.num_minibatches else None)
        return dict(cka=finite_or_none(self.compute()), **means,
                    num_minibatches=self.num_minibatches, num_samples=self.num_samples)


# ----------------------------------------------------------------------------- cosine
def _check_paired_tokens(clean: ArrayLike,
                         corrupted: ArrayLike) -> Tuple[torch.Tensor, torch.Tensor]:
    a, b = _as_float64(clean, 'clean'), _as_float64(corrupted, 'corrupted')
    if a.ndim == 2 and b.ndim == 2:
        a, b = a[None], b[None]
    if a.ndim != 3 or b.ndim != 3 or a.shape != b.shape:
        raise ValueError('clean and corrupted must be paired token sets of the same shape, '
                         f'B×N×C (or N×C for one sample), got {tuple(a.shape)} and '
                         f'{tuple(b.shape)}')
    if a.shape[1] == 0 or a.shape[2] == 0:
        raise ValueError(f'token sets must have at least one token and one channel, got '
                         f'shape {tuple(a.shape)}')
    return a, b


def token_cosine_similarity(clean: ArrayLike, corrupted: ArrayLike) -> np.ndarray:
    """Per-sample mean token-wise cosine similarity.

    For each sample ``b`` and token ``t``: ``cos(clean[b,t], corrupted[b,t])``, the cosine
    between the two ``C``-vectors of the same token position; averaged over the sample's
    tokens. Two zero vectors count as identical (cosine 1), one zero vector as 0.

    Args:
        clean, corrupted: ``B×N×C`` paired tokens (``N×C`` is one sample).

    Returns:
        ``np.ndarray`` of ``B`` per-sample means (float64).
    """
    a, b = _check_paired_tokens(clean, corrupted)
    dot = (a * b).sum(-1)
    norms = a.norm(dim=-1) * b.norm(dim=-1)
    both_zero = (a.abs().amax(-1) == 0) & (b.abs().amax(-1) == 0)
    cosine = torch.where(norms > 0, dot / norms.clamp_min(torch.finfo(torch.float64).tiny),
                         torch.zeros_like(dot))
    cosine = torch.where(both_zero, torch.ones_like(cosine), cosine)
    return cosine.mean(1).numpy()


class StreamingCosine:
    """Mean over samples of the per-sample token-wise cosine similarity
    (:func:`token_cosine_similarity`): keeps only the sum of the per-sample means and
    the number of samples."""

    def __init__(self) -> None:
        self.cosine_sum = 0.0
        self.num_samples = 0

    def update(self, clean: ArrayLike, corrupted: ArrayLike) -> 'StreamingCosine':
        """Add ``B×N×C`` paired token sets (``N×C`` is one sample)."""
        per_sample = token_cosine_similarity(clean, corrupted)
        self.cosine_sum += float(per_sample.sum())
        self.num_samples += int(per_sample.size)
        return self

    def merge(self, other: 'StreamingCosine') -> 'StreamingCosine':
        """Add ``other``'s sums to this one (in place; returns ``self``)."""
        if not isinstance(other, StreamingCosine):
            raise ValueError(f'can only merge a StreamingCosine, got {type(other).__name__}')
        self.cosine_sum += other.cosine_sum
        self.num_samples += other.num_samples
        return self

    def compute(self) -> float:
        """The mean cosine; NaN before any update."""
        return self.cosine_sum / self.num_samples if self.num_samples else float('nan')

    def result(self) -> Dict[str, Optional[float]]:
        """``{'cosine', 'num_samples'}``."""
        return dict(cosine=finite_or_none(self.compute()), num_samples=self.num_samples)


# ----------------------------------------------------------------------------- participation ratio
class StreamingParticipationRatio:
    """Participation ratio ``(Σλ)² / Σλ²`` of the feature covariance's eigenvalues.

    Keeps the count, ``Σx`` (``d``) and ``Σxxᵀ`` (``d×d``), float64; the covariance is
    ``(Σxxᵀ − n·μμᵀ) / (n − 1)`` and ``PR = tr(Σ)² / ‖Σ‖_F²`` (the same as from the
    eigenvalues, without an eigendecomposition). PR is between 1 (one direction) and
    ``d`` (isotropic).

    Args:
        dim: feature dimension ``d`` (taken from the first update when None).
    """

    def __init__(self, dim: Optional[int] = None) -> None:
        self.dim = dim
        self.count = 0
        self.sum_x: Optional[torch.Tensor] = None
        self.sum_xxt: Optional[torch.Tensor] = None
        if dim is not None:
            self._allocate(dim)

    def _allocate(self, dim: int) -> None:
        if not _is_positive_int(dim):
            raise ValueError(f'dim must be a positive integer, got {dim!r}')
        self.dim = int(dim)
        self.sum_x = torch.zeros(self.dim, dtype=torch.float64)
        self.sum_xxt = torch.zeros(self.dim, self.dim, dtype=torch.float64)

    def update(self, X: ArrayLike) -> 'StreamingParticipationRatio':  # noqa: N803
        """Add rows of ``X`` (``n×d``; any ``...×d`` is flattened to rows)."""
        x = _as_float64(X, 'X')
        if x.ndim < 2:
            raise ValueError(f'X must be n×d (or ...×d) features, got shape {tuple(x.shape)}')
        x = x.reshape(-1, x.shape[-1])
        if self.sum_x is None:
            self._allocate(x.shape[1])
        if x.shape[1] != self.dim:
            raise ValueError(f'X has {x.shape[1]} features, this accumulator has {self.dim}')
        self.count += x.shape[0]
        self.sum_x += x.sum(0)
        self.sum_xxt += x.T @ x
        return self

    def merge(self, other: 'StreamingParticipationRatio') -> 'StreamingParticipationRatio':
        """Add ``other``'s sums to this one (in place; returns ``self``)."""
        if not isinstance(other, StreamingParticipationRatio):
            raise ValueError('can only merge a StreamingParticipationRatio, got '
                             f'{type(other).__name__}')
        if other.sum_x is None:
            return self
        if self.sum_x is None:
            self._allocate(other.dim)
        if other.dim != self.dim:
            raise ValueError(f'cannot merge accumulators of {self.dim} and {other.dim} features')
        self.count += other.count
        self.sum_x += other.sum_x
        self.sum_xxt += other.sum_xxt
        return self

    def covariance(self) -> np.ndarray:
        """The unbiased ``d×d`` covariance (needs at least 2 rows)."""
        if self.count < 2:
            raise ValueError(f'the covariance needs at least 2 rows, got {self.count}')
        mean = self.sum_x / self.count
        cov = (self.sum_xxt - self.count * torch.outer(mean, mean)) / (self.count - 1)
        return ((cov + cov.T) / 2).numpy()

    def compute(self) -> float:
        """The participation ratio; NaN with fewer than 2 rows or zero variance."""
        if self.count < 2:
            return float('nan')
        cov = torch.from_numpy(self.covariance())
        frobenius_sq = float((cov * cov).sum())
        if not frobenius_sq > 0:
            return float('nan')
        return float(torch.trace(cov)) ** 2 / frobenius_sq

    def result(self) -> Dict[str, Optional[float]]:
        """``{'participation_ratio', 'dim', 'num_samples'}``."""
        return dict(participation_ratio=finite_or_none(self.compute()), dim=self.dim,
                    num_samples=self.count)


# ----------------------------------------------------------------------------- one layer
class DriftAccumulator:
    """Clean-vs-corrupted statistics of one layer, fed with paired token sets.

    Every :meth:`update` takes ``B×N×C`` clean and corrupted tokens of ``B`` samples
    (images). The samples' tokens are grouped into CKA minibatches of
    ``samples_per_minibatch`` consecutive samples (rows = tokens of those samples), so the
    result does not depend on how the caller batches the samples; at most one
    incomplete group is buffered. :meth:`flush` (called by :meth:`result`) adds the last
    incomplete group when it has at least 4 tokens.

    Args:
        samples_per_minibatch: samples whose tokens form one CKA minibatch.
    """

    def __init__(self, samples_per_minibatch: int = 8) -> None:
        if not _is_positive_int(samples_per_minibatch):
            raise ValueError('samples_per_minibatch must be a positive integer, got '
                             f'{samples_per_minibatch!r}')
        self.samples_per_minibatch = int(samples_per_minibatch)
        self.cka = StreamingCKA()
        self.cosine = StreamingCosine()
        self.pr_clean = StreamingParticipationRatio()
        self.pr_corrupted = StreamingParticipationRatio()
        self._pending_clean: List[torch.Tensor] = []
        self._pending_corrupted: List[torch.Tensor] = []

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
        if x.shape[0] >= MIN_HSIC_SAMPLES:
            self.cka.update(x, y)

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
        self.cosine.merge(other.cosine)
        self.pr_clean.merge(other.pr_clean)
        self.pr_corrupted.merge(other.pr_corrupted)
        return self

    def result(self) -> Dict[str, Optional[float]]:
        """``{'cka', 'cosine', 'pr_clean', 'pr_corrupted', 'num_samples', 'num_tokens',
        'num_minibatches', 'dim'}`` (JSON-serialisable; undefined values are ``None``)."""
        self.flush()
        cka = self.cka.result()
        return dict(cka=cka['cka'], cosine=self.cosine.result()['cosine'],
                    pr_clean=self.pr_clean.result()['participation_ratio'],
                    pr_corrupted=self.pr_corrupted.result()['participation_ratio'],
                    num_samples=self.cosine.num_samples, num_tokens=self.pr_clean.count,
                    num_minibatches=cka['num_minibatches'], dim=self.pr_clean.dim)
