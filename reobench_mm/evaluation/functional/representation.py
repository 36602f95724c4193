"""Statistics of how far features move: CKA, cosine, participation ratio, noise floor.

Everything here works on plain arrays (``numpy.ndarray`` or ``torch.Tensor``; computed
in float64 with torch) and knows nothing about models or datasets:

- :func:`hsic_unbiased`: the unbiased HSIC estimator of Song et al. (2012) on two
  ``n×n`` Gram matrices, and :func:`linear_cka`, linear CKA built on it;
- :func:`split_half_cka`: the noise floor of linear CKA, the CKA between two random
  halves of the rows of one representation (rows paired in drawn order, so the paired
  rows describe different inputs); :func:`split_half_cosine`, the same floor of the
  per-sample cosine (the mean cosine of the paired rows of the same two halves);
- :class:`StreamingCKA`: minibatch CKA (Nguyen, Raghu & Kornblith, 2021): the mean of
  per-minibatch unbiased HSICs, ``CKA = mean HSIC(X,Y) / sqrt(mean HSIC(X,X) · mean
  HSIC(Y,Y))``, from three running sums;
- :func:`row_cosine_similarity`, :func:`token_cosine_similarity`,
  :class:`StreamingCosine`: cosine similarity of paired vectors (per sample, or per
  token averaged over a sample's tokens);
- :func:`participation_ratio`, :class:`StreamingParticipationRatio`: ``PR = (Σλ)² /
  Σλ²`` of the eigenvalues of either the raw second-moment matrix ``XᵀX`` (the
  squared singular values of the activation matrix itself, ``'raw'``) or the centred
  covariance (``'centred'``); see :data:`PR_CONVENTIONS`;

The accumulators of one layer's statistics over a run are in
:mod:`~reobench_mm.evaluation.functional.drift_accumulators`. Every streaming class here
can be merged with another of its kind (:meth:`merge` adds the running sums) and reports
its result as a JSON-serialisable dict (undefined values are ``None``).
"""
from __future__ import annotations

import math
from typing import Dict, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from ...fileio import finite_or_none

__all__ = [
    'hsic_unbiased', 'linear_cka', 'linear_hsic_terms', 'split_half_indices', 'split_half_cka',
    'split_half_cosine',
    'row_cosine_similarity', 'token_cosine_similarity', 'participation_ratio', 'StreamingCKA',
    'StreamingCosine', 'StreamingParticipationRatio', 'PR_CONVENTIONS', 'MIN_HSIC_SAMPLES', 'MIN_SPLIT_HALF_SAMPLES'
]

ArrayLike = Union[np.ndarray, torch.Tensor]
SeedLike = Union[int, Sequence[int]]
#: Rows the unbiased HSIC needs.
MIN_HSIC_SAMPLES = 4
#: Rows the split-half floor needs (two halves of at least :data:`MIN_HSIC_SAMPLES`).
MIN_SPLIT_HALF_SAMPLES = 2 * MIN_HSIC_SAMPLES
#: Participation-ratio conventions: ``'raw'``, the eigenvalues of the raw second-moment
#: matrix ``XᵀX`` of the activation matrix ``X`` as it is (its squared singular values;
#: the calibration study's wording, the default), and ``'centred'``, the eigenvalues of
#: the covariance of ``X`` (each feature's mean removed first). A shared mean direction
#: (non-negative ReLU features, a large common offset) dominates the raw matrix, so
#: ``'raw'`` is usually much lower than ``'centred'`` on the same features.
PR_CONVENTIONS = ('raw', 'centred')


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


def _check_pr_convention(convention: str) -> str:
    if convention not in PR_CONVENTIONS:
        raise ValueError(f'the participation-ratio convention must be one of '
                         f'{list(PR_CONVENTIONS)}, got {convention!r}')
    return convention


def _check_seed(seed: SeedLike) -> SeedLike:
    values = [seed] if isinstance(seed, (int, np.integer)) else seed
    try:
        ok = len(values) > 0 and all(
            isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 0
            for v in values)
    except TypeError:
        ok = False
    if isinstance(seed, bool) or not ok:
        raise ValueError(f'seed must be an integer >= 0 or a non-empty sequence of them, '
                         f'got {seed!r}')
    return seed


def _check_floor_seed(seed: int) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f'floor_seed must be an integer >= 0, got {seed!r}')
    return int(seed)


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


# ----------------------------------------------------------------------------- noise floor
def split_half_indices(num_rows: int, seed: SeedLike) -> Tuple[np.ndarray, np.ndarray]:
    """Two disjoint random halves of ``range(num_rows)``, seeded.

    ``perm = np.random.default_rng(seed).permutation(num_rows)``; the halves are
    ``perm[:h]`` and ``perm[h:2h]`` with ``h = num_rows // 2`` (an odd row out is left
    out). Row ``i`` of the first half is paired with row ``i`` of the second.

    Args:
        num_rows: number of rows (``>= 2``).
        seed: an integer ``>= 0`` or a sequence of them (``numpy``'s seed sequence).

    Returns:
        ``(first, second)``: two ``int64`` arrays of ``num_rows // 2`` row indices.
    """
    if not _is_positive_int(num_rows) or num_rows < 2:
        raise ValueError(f'num_rows must be an integer >= 2, got {num_rows!r}')
    permutation = np.random.default_rng(_check_seed(seed)).permutation(int(num_rows))
    half = int(num_rows) // 2
    return permutation[:half], permutation[half:2 * half]


def split_half_cka(X: ArrayLike, seed: SeedLike = 0) -> float:  # noqa: N803
    """The split-half noise floor of linear CKA on one representation.

    The rows of ``X`` (samples) are split into two random halves
    (:func:`split_half_indices`) and :func:`linear_cka` compares them, row ``i`` of one
    half with row ``i`` of the other: two samples of the same representation that share
    nothing but their distribution. A clean-vs-corrupted CKA at this level means the
    corruption left no more per-sample correspondence than two unrelated draws of clean
    data. With the unbiased HSIC the expected floor is close to 0; its spread shrinks
    with the number of rows.

    Args:
        X: ``n×d`` representation, ``n >= 8`` (each half needs 4 rows).
        seed: seed of the split (integer ``>= 0`` or a sequence of them).

    Returns:
        float: the CKA of the two halves (NaN when a half has no variance).
    """
    x = _as_float64(X, 'X')
    if x.ndim != 2:
        raise ValueError(f'X must be an n×d feature matrix, got shape {tuple(x.shape)}')
    if x.shape[0] < MIN_SPLIT_HALF_SAMPLES:
        raise ValueError(f'the split-half floor needs n >= {MIN_SPLIT_HALF_SAMPLES} rows (two '
                         f'halves of {MIN_HSIC_SAMPLES} for the unbiased HSIC), got '
                         f'n={x.shape[0]}')
    first, second = split_half_indices(x.shape[0], seed)
    return linear_cka(x[torch.from_numpy(first)], x[torch.from_numpy(second)])


def split_half_cosine(X: ArrayLike, seed: SeedLike = 0) -> float:  # noqa: N803
    """The split-half noise floor of the per-sample cosine, beside :func:`split_half_cka`.

    The same two random halves of the rows (:func:`split_half_indices` with the same
    ``seed``): the mean over ``i`` of ``cos(first[i], second[i])``, the cosine of two
    unrelated samples of the same representation. Unlike the CKA floor it is not near 0:
    features that share a mean direction (non-negative ReLU features) give unrelated
    samples a high cosine, so a clean-vs-corrupted cosine means little until it is
    compared with this floor.

    Args:
        X: ``n×d`` representation, ``n >= 2``.
        seed: seed of the split (integer ``>= 0`` or a sequence of them).

    Returns:
        float: the mean cosine of the paired rows (two zero rows count 1, one zero row 0).
    """
    x = _as_float64(X, 'X')
    if x.ndim != 2 or x.shape[0] < 2:
        raise ValueError(f'X must be an n×d feature matrix with n >= 2 rows, got shape '
                         f'{tuple(x.shape)}')
    first, second = split_half_indices(x.shape[0], seed)
    return float(_cosine_last_axis(x[torch.from_numpy(first)],
                                   x[torch.from_numpy(second)]).mean())


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


def _cosine_last_axis(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Cosine of paired vectors along the last axis; two zero vectors 1, one zero 0."""
    dot = (a * b).sum(-1)
    norms = a.norm(dim=-1) * b.norm(dim=-1)
    both_zero = (a.abs().amax(-1) == 0) & (b.abs().amax(-1) == 0)
    cosine = torch.where(norms > 0, dot / norms.clamp_min(torch.finfo(torch.float64).tiny),
                         torch.zeros_like(dot))
    return torch.where(both_zero, torch.ones_like(cosine), cosine)


def _check_paired_rows(clean: ArrayLike,
                       corrupted: ArrayLike) -> Tuple[torch.Tensor, torch.Tensor]:
    a, b = _as_float64(clean, 'clean'), _as_float64(corrupted, 'corrupted')
    if a.ndim == 1 and b.ndim == 1:
        a, b = a[None], b[None]
    if a.ndim != 2 or b.ndim != 2 or a.shape != b.shape:
        raise ValueError('clean and corrupted must be paired per-sample representations of '
                         f'the same shape, N×D (or D for one sample), got {tuple(a.shape)} '
                         f'and {tuple(b.shape)}')
    if a.shape[0] == 0 or a.shape[1] == 0:
        raise ValueError(f'representations must have at least one sample and one feature, '
                         f'got shape {tuple(a.shape)}')
    return a, b


def row_cosine_similarity(clean: ArrayLike, corrupted: ArrayLike) -> np.ndarray:
    """Per-sample cosine similarity of paired representations.

    For each sample ``i``: ``cos(clean[i], corrupted[i]) = <x_i, y_i> / (‖x_i‖·‖y_i‖)``.
    Two zero vectors count as identical (cosine 1), one zero vector as 0.

    Args:
        clean, corrupted: ``N×D`` paired representations (``D`` is one sample).

    Returns:
        ``np.ndarray`` of ``N`` cosines (float64).
    """
    a, b = _check_paired_rows(clean, corrupted)
    return _cosine_last_axis(a, b).numpy()


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
    return _cosine_last_axis(a, b).mean(1).numpy()


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
def _participation_ratio_of(matrix: torch.Tensor) -> float:
    """``tr(M)² / ‖M‖_F²`` of a symmetric PSD matrix: ``(Σλ)² / Σλ²`` of its eigenvalues
    without an eigendecomposition; NaN when ``M`` is zero."""
    frobenius_sq = float((matrix * matrix).sum())
    if not frobenius_sq > 0:
        return float('nan')
    return float(torch.trace(matrix)) ** 2 / frobenius_sq


def participation_ratio(X: ArrayLike, convention: str = 'raw') -> float:  # noqa: N803
    """Participation ratio ``(Σλ)² / Σλ²`` of a representation, in one of two conventions.

    - ``'raw'`` (default): ``λ`` are the eigenvalues of ``XᵀX``, i.e. the squared singular
      values of the activation matrix ``X`` as it is;
    - ``'centred'``: ``λ`` are the eigenvalues of the covariance of ``X`` (each column's
      mean removed).

    PR lies between 1 (one direction) and ``min(n, d)`` (all directions equal); both
    conventions are invariant to scaling ``X``. See :data:`PR_CONVENTIONS`.

    Args:
        X: ``n×d`` features (``...×d`` is flattened to rows); ``n >= 2`` for ``'centred'``.
        convention: ``'raw'`` or ``'centred'``.

    Returns:
        float: the participation ratio (NaN when the matrix is zero).
    """
    return StreamingParticipationRatio(convention=convention).update(X).compute()


class StreamingParticipationRatio:
    """Participation ratio ``(Σλ)² / Σλ²`` from running sums.

    Keeps the count, ``Σx`` (``d``) and ``Σxxᵀ`` (``d×d``), float64. With
    ``convention='raw'`` the matrix is ``Σxxᵀ = XᵀX`` (the eigenvalues are the squared
    singular values of the activation matrix); with ``'centred'`` it is the covariance
    ``(Σxxᵀ − n·μμᵀ) / (n − 1)``. ``PR = tr(M)² / ‖M‖_F²`` (the same as from the
    eigenvalues, without an eigendecomposition), between 1 (one direction) and ``d``
    (isotropic). See :data:`PR_CONVENTIONS`.

    Args:
        dim: feature dimension ``d`` (taken from the first update when None).
        convention: ``'raw'`` (default, the calibration study's wording) or ``'centred'``.
    """

    def __init__(self, dim: Optional[int] = None, convention: str = 'raw') -> None:
        self.convention = _check_pr_convention(convention)
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
        if other.convention != self.convention:
            raise ValueError(f'cannot merge a {other.convention!r} participation ratio into '
                             f'a {self.convention!r} one')
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

    def second_moment(self) -> np.ndarray:
        """The raw ``d×d`` second-moment matrix ``XᵀX`` (needs at least 1 row)."""
        if self.count < 1:
            raise ValueError('the second-moment matrix needs at least 1 row, got 0')
        return self.sum_xxt.numpy().copy()

    def compute(self) -> float:
        """The participation ratio; NaN without enough rows (1 raw, 2 centred) or with a
        zero matrix."""
        if self.convention == 'centred':
            if self.count < 2:
                return float('nan')
            return _participation_ratio_of(torch.from_numpy(self.covariance()))
        if self.count < 1:
            return float('nan')
        return _participation_ratio_of(self.sum_xxt)

    def result(self) -> Dict[str, Optional[float]]:
        """``{'participation_ratio', 'convention', 'dim', 'num_samples'}``."""
        return dict(participation_ratio=finite_or_none(self.compute()),
                    convention=self.convention, dim=self.dim, num_samples=self.count)
