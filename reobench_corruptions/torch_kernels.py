"""Building blocks of :mod:`reobench_corruptions.torch_engine`: OpenCV's borders and
filter kernels, and the fractal Perlin field, on torch tensors of any device.

Imports torch; nothing in ``reobench_corruptions/__init__.py`` imports this module, so
the engine itself stays numpy/OpenCV only.

Filters work on ``N×1×H×W`` float32 tensors (every band of every sample is one of the
``N``), as OpenCV's separable filters do: the rows first, then the columns, each as a
cross-correlation with explicit padding by index (OpenCV's ``borderInterpolate``), so any
padding works, also one wider than the image, and sums of shifted views.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Tuple

import numpy as np
import torch

from .noise import _fade, _lattice

__all__ = ['BORDER_REFLECT', 'BORDER_REFLECT_101', 'border_indices', 'filter_rows',
           'filter_columns', 'shift_rows', 'gaussian_blur', 'gaussian_taps',
           'fractal_perlin_torch', 'quantile_linear', 'jpeg_round_trip', 'JPEG_CODECS']

BORDER_REFLECT = 'reflect'  # OpenCV BORDER_REFLECT: fedcba|abcdefgh|hgfedcb
BORDER_REFLECT_101 = 'reflect_101'  # OpenCV BORDER_REFLECT_101 (default): gfedcb|abcdefgh|gfedcba

# OpenCV's fixed kernels for sigma <= 0 and small odd sizes (getGaussianKernel)
_SMALL_GAUSSIANS = {
    1: (1.0, ),
    3: (0.25, 0.5, 0.25),
    5: (0.0625, 0.25, 0.375, 0.25, 0.0625),
    7: (0.03125, 0.109375, 0.21875, 0.28125, 0.21875, 0.109375, 0.03125),
    9: (4 / 256, 13 / 256, 30 / 256, 51 / 256, 60 / 256, 51 / 256, 30 / 256, 13 / 256,
        4 / 256),
}


@lru_cache(maxsize=256)
def border_indices(size: int, before: int, after: int, mode: str) -> np.ndarray:
    """Source index of each position of an axis of ``size`` padded by ``before`` and
    ``after`` elements, as OpenCV's ``borderInterpolate`` gives it for ``mode``
    (:data:`BORDER_REFLECT` or :data:`BORDER_REFLECT_101`). int64, length
    ``before + size + after``; reflection repeats until every index is inside."""
    if size < 1:
        raise ValueError(f'an axis to pad has at least one element, got {size}')
    if mode not in (BORDER_REFLECT, BORDER_REFLECT_101):
        raise ValueError(f'unknown border {mode!r}; valid: {BORDER_REFLECT!r}, '
                         f'{BORDER_REFLECT_101!r}')
    index = np.arange(-before, size + after, dtype=np.int64)
    if size == 1:
        return np.zeros_like(index)
    shift = 0 if mode == BORDER_REFLECT_101 else 1
    while True:
        low, high = index < 0, index >= size
        if not (low.any() or high.any()):
            return index
        index[low] = -index[low] - shift
        index[high] = 2 * size - index[high] - 2 + shift


def _pad_axis(x: torch.Tensor, dim: int, before: int, after: int, mode: str) -> torch.Tensor:
    if before == 0 and after == 0:
        return x
    index = torch.from_numpy(border_indices(x.shape[dim], before, after, mode))
    return x.index_select(dim, index.to(x.device))


def _correlate(padded: torch.Tensor, taps: np.ndarray, dim: int, length: int
               ) -> torch.Tensor:
    """``Σ_j taps[j] · padded[j:j + length]`` along ``dim``, accumulated left to right
    in float32 (shifted views: on the CPU several times faster than a 1-channel
    ``conv2d``, and the same order of sums on every device)."""
    out = None
    for j, tap in enumerate(np.asarray(taps, np.float32)):
        if tap == 0:
            continue
        term = padded.narrow(dim, j, length) * float(tap)
        out = term if out is None else out + term
    return out if out is not None else torch.zeros_like(padded.narrow(dim, 0, length))


def filter_rows(x: torch.Tensor, taps: np.ndarray, anchor: int, mode: str) -> torch.Tensor:
    """Cross-correlate every row of ``x`` (``N×1×H×W`` float32) with ``taps`` (1-D):
    ``out[..., c] = Σ_j taps[j] · x[..., c + j − anchor]``, borders by ``mode``."""
    padded = _pad_axis(x, 3, anchor, len(taps) - 1 - anchor, mode)
    return _correlate(padded, taps, 3, x.shape[3])


def filter_columns(x: torch.Tensor, taps: np.ndarray, anchor: int, mode: str) -> torch.Tensor:
    """:func:`filter_rows` along the columns (``out[r] = Σ_j taps[j] · x[r + j − anchor]``)."""
    padded = _pad_axis(x, 2, anchor, len(taps) - 1 - anchor, mode)
    return _correlate(padded, taps, 2, x.shape[2])


def shift_rows(x: torch.Tensor, offset: int, mode: str) -> torch.Tensor:
    """``out[r] = x[r + offset]`` along dim 2, rows outside the image taken by ``mode``."""
    if offset == 0:
        return x
    height, before = x.shape[2], max(0, -offset)
    index = border_indices(height, before, max(0, offset), mode)
    index = index[before + offset:before + offset + height]
    return x.index_select(2, torch.from_numpy(np.ascontiguousarray(index)).to(x.device))


@lru_cache(maxsize=64)
def gaussian_taps(ksize: int, sigma: float) -> np.ndarray:
    """OpenCV's 1-D Gaussian kernel (``getGaussianKernel(ksize, sigma, CV_32F)``):
    the fixed small kernels for ``sigma <= 0`` and ``ksize`` 1..9; otherwise
    ``exp(−(i − (ksize − 1)/2)² / 2σ²)`` normalised, with ``σ = 0.3·((ksize − 1)/2 − 1)
    + 0.8`` when ``sigma <= 0``. float32."""
    if ksize < 1 or ksize % 2 == 0:
        raise ValueError(f'a Gaussian kernel size is odd and >= 1, got {ksize}')
    if sigma <= 0 and ksize in _SMALL_GAUSSIANS:
        return np.array(_SMALL_GAUSSIANS[ksize], np.float32)
    if sigma <= 0:
        sigma = 0.3 * ((ksize - 1) * 0.5 - 1) + 0.8
    x = np.arange(ksize, dtype=np.float64) - (ksize - 1) * 0.5
    taps = np.exp(-x * x / (2.0 * sigma * sigma))
    return (taps / taps.sum()).astype(np.float32)


def gaussian_blur(x: torch.Tensor, ksize: int, sigma: float) -> torch.Tensor:
    """``cv2.GaussianBlur(x, (ksize, ksize), sigma)`` on ``N×1×H×W`` float32 (borders
    reflect-101, OpenCV's default): rows, then columns."""
    taps = gaussian_taps(ksize, sigma)
    rows = filter_rows(x, taps, ksize // 2, BORDER_REFLECT_101)
    return filter_columns(rows, taps, ksize // 2, BORDER_REFLECT_101)


def _octave_rows(height: int, width: int, period: float, amplitude: float,
                 rng: np.random.Generator, device: torch.device
                 ) -> Tuple[torch.Tensor, np.ndarray, np.ndarray]:
    """One Perlin octave as the engine's ``_octave_factors`` builds it: the lattice
    gradients drawn from ``rng`` on the CPU (small), the ``2K × W`` row vectors
    ``P_j``/``Q_j`` on ``device`` (float64, then float32), and per output row the four
    source rows and their float32 weights (times ``amplitude``)."""
    ys, xs, grad_x, grad_y = _lattice(height, width, period, rng)
    ix = np.floor(xs).astype(np.int64)
    fx = xs - ix
    u = _fade(fx)

    def on_device(array: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(array)).to(device)

    left, right = on_device(ix), on_device(ix + 1)
    gx, gy = on_device(grad_x), on_device(grad_y)
    p_rows = gx[:, left] * on_device(fx * (1.0 - u)) + gx[:, right] * on_device((fx - 1.0) * u)
    q_rows = gy[:, left] * on_device(1.0 - u) + gy[:, right] * on_device(u)
    rows = torch.stack([p_rows, q_rows], dim=1).reshape(-1, width).to(torch.float32)

    iy = np.floor(ys).astype(np.int64)
    fy = ys - iy
    v = _fade(fy)
    sources = np.stack([2 * iy, 2 * iy + 1, 2 * iy + 2, 2 * iy + 3], axis=1)
    weights = amplitude * np.stack([1.0 - v, (1.0 - v) * fy, v, v * (fy - 1.0)], axis=1)
    return rows, sources, weights.astype(np.float32)


def fractal_perlin_torch(height: int, width: int, base_period: float,
                         rng: np.random.Generator, device: torch.device, octaves: int = 6,
                         persistence: float = 0.5, lacunarity: float = 2.0) -> torch.Tensor:
    """``reobench_corruptions.noise.fractal_perlin`` on ``device`` (``H×W`` float32),
    with the same draws from ``rng`` (lattice gradients, taken on the CPU).

    The sum runs in the order of the engine's sparse product (octave by octave, four
    terms each, accumulated in float32), which makes it equal to the engine's field
    (bit for bit in the tests)."""
    out = torch.zeros((height, width), dtype=torch.float32, device=device)
    for octave in range(octaves):
        period = base_period / lacunarity**octave
        rows, sources, weights = _octave_rows(height, width, period, persistence**octave,
                                              rng, device)
        for term in range(4):
            gathered = rows.index_select(0, torch.from_numpy(sources[:, term]).to(device))
            out = out + torch.from_numpy(weights[:, term]).to(device)[:, None] * gathered
    return out


def quantile_linear(values: torch.Tensor, q: float) -> float:
    """``np.quantile(values, q)`` (method 'linear') of a float32 tensor, as numpy
    computes it for float32 input and a Python float ``q``: the two neighbouring order
    statistics, their difference in float32, the weight (or one minus it, from 0.5 on)
    rounded to float32. Returns the float32 result as a Python float."""
    flat = values.reshape(-1)
    count = flat.numel()
    virtual = (count - 1) * q
    below = int(np.floor(virtual))
    above = min(below + 1, count - 1)
    low = np.float32(torch.kthvalue(flat, below + 1).values.item())
    high = np.float32(torch.kthvalue(flat, above + 1).values.item()) if above != below \
        else low
    gamma = virtual - below  # a Python float: numpy rounds what it multiplies to float32
    diff = np.float32(high - low)
    if gamma >= 0.5:
        return float(np.float32(high - diff * np.float32(1 - gamma)))
    return float(np.float32(low + diff * np.float32(gamma)))


#: Where ``compression_artifacts`` runs the JPEG codec: ``'cpu'`` (libjpeg through
#: torchvision, the image's bytes copied to the CPU and back: the numpy engine's bits) or
#: ``'device'`` (torchvision's nvJPEG codec on CUDA tensors, without the copies).
JPEG_CODECS = ('cpu', 'device')


def jpeg_round_trip(image: torch.Tensor, quality: int, channel_order: str, codec: str
                ) -> torch.Tensor:
    """JPEG round trip of a ``C×H×W`` uint8 image at ``quality``, three bands at a time as
    colour JPEGs (4:2:0; ``channel_order`` 'rgb' or 'bgr'), the rest one band at a time as
    greyscale JPEGs, as :func:`reobench_corruptions.appearance.jpeg_round_trip`, with
    torchvision's codec on the CPU (``codec='cpu'``) or nvJPEG on the image's CUDA
    device (``'device'``)."""
    from torchvision.io import decode_jpeg, encode_jpeg
    out = torch.empty_like(image)
    start, bands = 0, image.shape[0]
    while start < bands:
        stop = start + 3 if bands - start >= 3 else start + 1
        chunk = image[start:stop]
        swap = stop - start == 3 and channel_order == 'bgr'  # the codec wants RGB
        chunk = chunk.flip(0) if swap else chunk
        if codec == 'cpu':
            decoded = decode_jpeg(encode_jpeg(chunk.cpu().contiguous(), quality=quality))
        else:
            decoded = decode_jpeg(encode_jpeg(chunk.contiguous(), quality=quality),
                                  device=image.device)
        out[start:stop] = (decoded.flip(0) if swap else decoded).to(image.device)
        start = stop
    return out
