"""Fractal Perlin (gradient) noise, vectorised over the whole image.

Written here rather than taken from a package: the usual Python Perlin packages
evaluate one point per call (a per-pixel Python loop, seconds per image), while
this evaluates each octave with a few array operations over the pixel grid.
"""
import numpy as np

__all__ = ['perlin', 'fractal_perlin', 'perlin_per_pixel']


def _fade(t: np.ndarray) -> np.ndarray:
    return t * t * t * (t * (t * 6.0 - 15.0) + 10.0)


def perlin(height: int, width: int, period: float, rng: np.random.Generator) -> np.ndarray:
    """Gradient noise in about [-0.7, 0.7] with one lattice cell per ``period`` pixels.

    Unit gradients are drawn at random for every lattice point the image needs, which
    is distributed like classic Perlin noise at a random offset.

    The x-interpolation is done once per lattice row: for lattice row ``j`` the
    contribution to any pixel is ``P_j(x) + (y - j) * Q_j(x)`` with ``P_j`` the
    x-lerp of ``gx * (x - i)`` and ``Q_j`` the x-lerp of ``gy``, both independent of
    ``y``. Pixels then only need two row gathers and a y-lerp, instead of gathering
    four gradients per pixel.
    """
    if period <= 0:
        raise ValueError(f'period must be > 0, got {period}')
    ys = ((np.arange(height, dtype=np.float64) + 0.5) / period)
    xs = ((np.arange(width, dtype=np.float64) + 0.5) / period)
    cells_y, cells_x = int(np.floor(ys[-1])) + 2, int(np.floor(xs[-1])) + 2
    angles = rng.uniform(0.0, 2.0 * np.pi, size=(cells_y, cells_x))
    grad_x, grad_y = np.cos(angles), np.sin(angles)

    iy, ix = np.floor(ys).astype(np.int64), np.floor(xs).astype(np.int64)
    fy, fx = ys - iy, xs - ix
    u = _fade(fx)
    # per lattice row: x-lerps of the x-gradient term and of the y-gradient
    left, right = grad_x[:, ix] * fx, grad_x[:, ix + 1] * (fx - 1.0)
    p_rows = (left + u * (right - left)).astype(np.float32)
    q_rows = (grad_y[:, ix] + u * (grad_y[:, ix + 1] - grad_y[:, ix])).astype(np.float32)
    fy32 = fy.astype(np.float32)[:, None]
    top = p_rows[iy] + fy32 * q_rows[iy]
    bottom = p_rows[iy + 1] + (fy32 - 1.0) * q_rows[iy + 1]
    return top + _fade(fy32) * (bottom - top)


def fractal_perlin(height: int, width: int, base_period: float, rng: np.random.Generator,
                   octaves: int = 6, persistence: float = 0.5,
                   lacunarity: float = 2.0) -> np.ndarray:
    """Sum of ``octaves`` Perlin layers: octave ``i`` has period
    ``base_period / lacunarity**i`` and amplitude ``persistence**i``."""
    if octaves < 1:
        raise ValueError(f'octaves must be >= 1, got {octaves}')
    total = np.zeros((height, width), np.float32)
    for octave in range(octaves):
        total += persistence**octave * perlin(height, width, base_period / lacunarity**octave,
                                              rng)
    return total


def perlin_per_pixel(height: int, width: int, period: float,
                     rng: np.random.Generator) -> np.ndarray:
    """The textbook algorithm, one pixel at a time: the reference :func:`perlin` is
    tested and benchmarked against (same draws from ``rng``, so equal results).
    Seconds per 512×512 image; not for production use."""
    ys, xs = (np.arange(height) + 0.5) / period, (np.arange(width) + 0.5) / period
    cells_y, cells_x = int(np.floor(ys[-1])) + 2, int(np.floor(xs[-1])) + 2
    angles = rng.uniform(0.0, 2.0 * np.pi, size=(cells_y, cells_x))
    grad_x, grad_y = np.cos(angles), np.sin(angles)
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
