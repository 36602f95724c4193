"""Fractal Perlin (gradient) noise, vectorised over the whole image.

Written here rather than taken from a package: the usual Python Perlin packages
evaluate one point per call (a per-pixel Python loop, seconds per image), while
this builds each octave from a few small arrays and one sparse matrix product.
"""
from typing import TYPE_CHECKING, Optional, Tuple

import numpy as np

from . import base as _base

if TYPE_CHECKING:  # imported where the field is built: the engine's import stays light
    import scipy.sparse

__all__ = ['perlin', 'fractal_perlin', 'fractal_perlin_field', 'NoiseField', 'perlin_per_pixel']


def _fade(t: np.ndarray) -> np.ndarray:
    return t * t * t * (t * (t * 6.0 - 15.0) + 10.0)


def _lattice_cells(size: int, period: float) -> int:
    """Lattice points needed along an axis of ``size`` pixels (pixel centres at
    ``(i + 0.5) / period`` in lattice units, and the point after the last cell)."""
    return int(np.floor((size - 0.5) / period)) + 2


def _lattice(height: int, width: int, period: float, rng: np.random.Generator):
    """Pixel-centre coordinates in lattice units and one unit gradient per lattice
    point the image needs (drawn from ``rng``: a classic Perlin field at a random
    offset)."""
    if period <= 0:
        raise ValueError(f'period must be > 0, got {period}')
    ys = (np.arange(height, dtype=np.float64) + 0.5) / period
    xs = (np.arange(width, dtype=np.float64) + 0.5) / period
    cells_y, cells_x = int(np.floor(ys[-1])) + 2, int(np.floor(xs[-1])) + 2
    angles = rng.uniform(0.0, 2.0 * np.pi, size=(cells_y, cells_x))
    return ys, xs, np.cos(angles), np.sin(angles)


def _octave_factors(height: int, width: int, period: float, rng: np.random.Generator,
                    rows: Optional[np.ndarray] = None
                    ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One octave as ``weights @ rows``: an ``H × 2K`` matrix with 4 non-zeros per row
    (returned as their ``columns`` and ``values``, each ``H × 4``) times ``2K × W`` rows
    (written into ``rows`` when given, a float32 ``2K × W`` buffer).

    For lattice row ``j`` the noise at any pixel of the cell rows ``j`` / ``j + 1`` is
    ``P_j(x) + dy * Q_j(x)`` with ``P_j`` the x-lerp of ``gx * dx`` and ``Q_j`` the
    x-lerp of ``gy``, neither depending on ``y``. Each output row therefore mixes four
    of these row vectors, with weights ``(1 − v)``, ``(1 − v)·fy``, ``v``, ``v·(fy − 1)``
    (``v`` the faded ``fy``).
    """
    ys, xs, grad_x, grad_y = _lattice(height, width, period, rng)
    ix = np.floor(xs).astype(np.int64)
    fx = xs - ix
    u = _fade(fx)
    if rows is None:
        rows = np.empty((2 * len(grad_x), width), np.float32)
    elif rows.shape != (2 * len(grad_x), width):
        raise ValueError(f'rows buffer of shape {rows.shape}; this octave needs '
                         f'{(2 * len(grad_x), width)}')
    # x-lerps of the gathered lattice columns (cells_y × W), a block of lattice rows at
    # a time to bound the float64 temporaries on large images (elementwise: the same
    # values as one pass)
    block = max(1, _base.TILE_ELEMENTS // width)
    for j0 in range(0, len(grad_x), block):
        j1 = min(len(grad_x), j0 + block)
        gx, gy = grad_x[j0:j1], grad_y[j0:j1]
        rows[2 * j0:2 * j1:2] = gx[:, ix] * (fx * (1.0 - u)) + gx[:, ix + 1] * ((fx - 1.0) * u)
        rows[2 * j0 + 1:2 * j1:2] = gy[:, ix] * (1.0 - u) + gy[:, ix + 1] * u  # P_j, Q_j

    iy = np.floor(ys).astype(np.int64)
    fy = ys - iy
    v = _fade(fy)
    columns = np.stack([2 * iy, 2 * iy + 1, 2 * iy + 2, 2 * iy + 3], axis=1)
    values = np.stack([1.0 - v, (1.0 - v) * fy, v, v * (fy - 1.0)], axis=1)
    return columns, values, rows


class NoiseField:
    """A noise image kept as ``weights @ rows`` (a sparse ``H × K`` float32 matrix with
    a few non-zeros per row, and ``K × W`` float32 row vectors): a fraction of the
    image's size, evaluated whole (:meth:`image`) or a band of rows at a time
    (:meth:`rows_between`, the same values as the matching rows of :meth:`image`)."""

    def __init__(self, weights: 'scipy.sparse.csr_matrix', rows: np.ndarray) -> None:
        self.weights, self.rows = weights, rows

    @property
    def shape(self) -> Tuple[int, int]:
        return self.weights.shape[0], self.rows.shape[1]

    def image(self) -> np.ndarray:
        """The whole ``H × W`` field (float32)."""
        return self.weights @ self.rows

    def rows_between(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` of the field (float32)."""
        return self.weights[start:stop] @ self.rows


def _combine(height: int, factors, amplitudes, rows: Optional[np.ndarray] = None
             ) -> NoiseField:
    """``sum_i amplitude_i · weights_i @ rows_i`` as one sparse product (float32);
    ``rows`` is the factors' row vectors already stacked, if they were written so."""
    import scipy.sparse  # here: importing the engine does not import scipy
    offsets = np.cumsum([0] + [r.shape[0] for _, _, r in factors])
    columns = np.concatenate([c + off for (c, _, _), off in zip(factors, offsets)], axis=1)
    values = np.concatenate([a * v for (_, v, _), a in zip(factors, amplitudes)], axis=1)
    weights = scipy.sparse.csr_matrix(
        (values.astype(np.float32).ravel(), columns.ravel(),
         np.arange(0, columns.size + 1, columns.shape[1])),
        shape=(height, offsets[-1]))
    if rows is None:
        rows = np.concatenate([r for _, _, r in factors], axis=0)
    return NoiseField(weights, rows)


def perlin(height: int, width: int, period: float, rng: np.random.Generator) -> np.ndarray:
    """Gradient noise in about [-0.7, 0.7] with one lattice cell per ``period`` pixels
    (float32)."""
    return _combine(height, [_octave_factors(height, width, period, rng)], [1.0]).image()


def fractal_perlin_field(height: int, width: int, base_period: float,
                         rng: np.random.Generator, octaves: int = 6,
                         persistence: float = 0.5, lacunarity: float = 2.0) -> NoiseField:
    """:func:`fractal_perlin` as a :class:`NoiseField` (same draws, same values), for
    callers that evaluate it a band of rows at a time."""
    if octaves < 1:
        raise ValueError(f'octaves must be >= 1, got {octaves}')
    periods = [base_period / lacunarity**octave for octave in range(octaves)]
    for period in periods:
        if period <= 0:
            raise ValueError(f'period must be > 0, got {period}')
    # all octaves' row vectors written straight into one stacked buffer
    counts = [2 * _lattice_cells(height, period) for period in periods]
    stacked = np.empty((sum(counts), width), np.float32)
    starts = np.cumsum([0] + counts)
    factors = [_octave_factors(height, width, period, rng, stacked[start:start + count])
               for period, start, count in zip(periods, starts, counts)]
    return _combine(height, factors, [persistence**octave for octave in range(octaves)],
                    stacked)


def fractal_perlin(height: int, width: int, base_period: float, rng: np.random.Generator,
                   octaves: int = 6, persistence: float = 0.5,
                   lacunarity: float = 2.0) -> np.ndarray:
    """Sum of ``octaves`` Perlin layers: octave ``i`` has period
    ``base_period / lacunarity**i`` and amplitude ``persistence**i`` (float32).

    All octaves go into one sparse product (their weight matrices side by side, their
    row vectors stacked), so the full-size image is written once.
    """
    return fractal_perlin_field(height, width, base_period, rng, octaves, persistence,
                                lacunarity).image()


def perlin_per_pixel(height: int, width: int, period: float,
                     rng: np.random.Generator) -> np.ndarray:
    """The textbook algorithm, one pixel at a time: the reference :func:`perlin` is
    tested and benchmarked against (same draws from ``rng``, so equal results).
    Seconds per 512×512 image; not for production use."""
    ys, xs, grad_x, grad_y = _lattice(height, width, period, rng)
    out = np.zeros((height, width))
    for row, y in enumerate(ys):
        for col, x in enumerate(xs):
            i, j = int(x), int(y)
            fx, fy = x - i, y - j
            dots = [grad_x[j + dj, i + di] * (fx - di) + grad_y[j + dj, i + di] * (fy - dj)
                    for dj in (0, 1) for di in (0, 1)]
            u, v = _fade(fx), _fade(fy)
            top = dots[0] + u * (dots[1] - dots[0])
            bottom = dots[2] + u * (dots[3] - dots[2])
            out[row, col] = top + v * (bottom - top)
    return out
