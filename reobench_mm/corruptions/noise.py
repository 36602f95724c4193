"""Fractal Perlin (gradient) noise, vectorised over the whole image.

Written here rather than taken from a package: the usual Python Perlin packages
evaluate one point per call (a per-pixel Python loop, seconds per image), while
this builds each octave from a few small arrays and one sparse matrix product.
"""
from typing import Tuple

import numpy as np
import scipy.sparse

__all__ = ['perlin', 'fractal_perlin', 'perlin_per_pixel']


def _fade(t: np.ndarray) -> np.ndarray:
    return t * t * t * (t * (t * 6.0 - 15.0) + 10.0)


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


def _octave_factors(height: int, width: int, period: float, rng: np.random.Generator
                    ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One octave as ``weights @ rows``: an ``H × 2K`` matrix with 4 non-zeros per row
    (returned as their ``columns`` and ``values``, each ``H × 4``) times ``2K × W`` rows.

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
    # x-lerps of the gathered lattice columns (small: cells_y × W)
    rows = np.empty((2 * len(grad_x), width), np.float32)
    rows[0::2] = grad_x[:, ix] * (fx * (1.0 - u)) + grad_x[:, ix + 1] * ((fx - 1.0) * u)
    rows[1::2] = grad_y[:, ix] * (1.0 - u) + grad_y[:, ix + 1] * u  # P_j: 2j, Q_j: 2j + 1

    iy = np.floor(ys).astype(np.int64)
    fy = ys - iy
    v = _fade(fy)
    columns = np.stack([2 * iy, 2 * iy + 1, 2 * iy + 2, 2 * iy + 3], axis=1)
    values = np.stack([1.0 - v, (1.0 - v) * fy, v, v * (fy - 1.0)], axis=1)
    return columns, values, rows


def _combine(height: int, factors, amplitudes) -> np.ndarray:
    """``sum_i amplitude_i · weights_i @ rows_i`` as one sparse product (float32)."""
    offsets = np.cumsum([0] + [rows.shape[0] for _, _, rows in factors])
    columns = np.concatenate([c + off for (c, _, _), off in zip(factors, offsets)], axis=1)
    values = np.concatenate([a * v for (_, v, _), a in zip(factors, amplitudes)], axis=1)
    weights = scipy.sparse.csr_matrix(
        (values.astype(np.float32).ravel(), columns.ravel(),
         np.arange(0, columns.size + 1, columns.shape[1])),
        shape=(height, offsets[-1]))
    return weights @ np.concatenate([rows for _, _, rows in factors], axis=0)


def perlin(height: int, width: int, period: float, rng: np.random.Generator) -> np.ndarray:
    """Gradient noise in about [-0.7, 0.7] with one lattice cell per ``period`` pixels
    (float32)."""
    return _combine(height, [_octave_factors(height, width, period, rng)], [1.0])


def fractal_perlin(height: int, width: int, base_period: float, rng: np.random.Generator,
                   octaves: int = 6, persistence: float = 0.5,
                   lacunarity: float = 2.0) -> np.ndarray:
    """Sum of ``octaves`` Perlin layers: octave ``i`` has period
    ``base_period / lacunarity**i`` and amplitude ``persistence**i`` (float32).

    All octaves go into one sparse product (their weight matrices side by side, their
    row vectors stacked), so the full-size image is written once.
    """
    if octaves < 1:
        raise ValueError(f'octaves must be >= 1, got {octaves}')
    factors = [_octave_factors(height, width, base_period / lacunarity**octave, rng)
               for octave in range(octaves)]
    return _combine(height, factors, [persistence**octave for octave in range(octaves)])


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
