"""The geometric warps (``rotate``, ``scale``, ``translate``) on torch tensors.

The numpy engine moves pixels with OpenCV: ``cv2.warpAffine`` (bilinear for the image,
nearest for label maps) for ``rotate`` and ``translate``, ``cv2.resize`` (bilinear; label
maps nearest-exact) plus a frame for ``scale``. OpenCV computes where each output pixel
samples in fixed point; this module reproduces that arithmetic, so that the device gives
the numpy engine's pixels:

- ``warpAffine``: OpenCV inverts the matrix in double precision, then writes each
  source position as an integer in units of 1/1024 pixel, row offset plus column offset,
  each rounded to nearest (ties to even), and keeps 1/32-pixel steps for bilinear
  sampling (plus half a step) or whole pixels for nearest (plus half a pixel). Bilinear
  weights are products of those 1/32 steps: on ``uint8`` images the weighted sum of grey
  levels is an integer, rounded once (``(Σ w·v + 512) >> 10``), on float images the
  same weights in float32, summed in OpenCV's order.
- ``resize``: per axis, the source position ``(d + 0.5)·n/m − 0.5`` in float32, its
  floor and fraction (clamped at both ends); float images interpolate rows then
  columns in float32; ``uint8`` images use 11-bit integer weights and OpenCV's
  vectorised integer rounding of the vertical pass.

The positions depend on the rows and on the columns separately, so they are computed
on the CPU as two short integer arrays (``O(H + W)``) and combined on the device.
Checked against OpenCV 4.x on the real sample images: identical bits for ``uint8``
images, label maps of any dtype, and float ``rotate``/``translate``; float ``scale``
equals OpenCV's own resize, and differs from the Intel IPP resize that x86 builds use
for float32 by float rounding (≤ 4e-5 of the full scale).
"""
from __future__ import annotations

from typing import Tuple

import numpy as np
import torch

from .geometric import GeometricTransform, _nearest_exact_resize_index

__all__ = ['warp_image', 'warp_labels']

_AB_BITS = 10       # OpenCV warpAffine: source positions in 1/1024 pixel
_INTER_BITS = 5     # ... kept to 1/32 pixel for bilinear sampling
_INTER_STEPS = 1 << _INTER_BITS
_RESIZE_BITS = 11   # OpenCV resize: uint8 weights in 1/2048


def _opencv_inverse(matrix: np.ndarray) -> np.ndarray:
    """The inverse of a 2×3 affine matrix as ``cv2.warpAffine`` computes it (double
    precision, its operation order): ``[m0, m1, m2, m3, m4, m5]``."""
    m = [float(v) for v in np.asarray(matrix, np.float64).ravel()]
    det = m[0] * m[4] - m[1] * m[3]
    det = 1.0 / det if det != 0 else 0.0
    a11, a22 = m[4] * det, m[0] * det
    m[0], m[1], m[3], m[4] = a11, m[1] * -det, m[3] * -det, a22
    b1, b2 = -m[0] * m[2] - m[1] * m[5], -m[3] * m[2] - m[4] * m[5]
    m[2], m[5] = b1, b2
    return np.array(m)


def _affine_positions(transform: GeometricTransform, bits: int, device: torch.device
                      ) -> Tuple[torch.Tensor, torch.Tensor]:
    """``H×W`` int64 source positions (x, y) of every output pixel in units of
    ``2**-bits`` pixel (``bits`` 5: bilinear, 0: nearest), as ``cv2.warpAffine``."""
    m = _opencv_inverse(transform.opencv_matrix)
    height, width = transform.output_shape
    x, y = np.arange(width, dtype=np.float64), np.arange(height, dtype=np.float64)
    half = (1 << (_AB_BITS - 1)) if bits == 0 else (1 << (_AB_BITS - _INTER_BITS - 1))
    scale = float(1 << _AB_BITS)

    def fixed(values: np.ndarray) -> torch.Tensor:  # round half to even, as cvRound
        return torch.from_numpy(np.rint(values).astype(np.int64)).to(device)

    column_x, column_y = fixed(m[0] * x * scale), fixed(m[3] * x * scale)
    row_x = fixed((m[1] * y + m[2]) * scale) + half
    row_y = fixed((m[4] * y + m[5]) * scale) + half
    shift = _AB_BITS - bits
    return ((row_x[:, None] + column_x[None, :]) >> shift,
            (row_y[:, None] + column_y[None, :]) >> shift)


def _reflect(index: torch.Tensor, size: int) -> torch.Tensor:
    """OpenCV's BORDER_REFLECT of source indices (``fedcba|abcdef|fedcba``)."""
    if size == 1:
        return torch.zeros_like(index)
    index = torch.remainder(index, 2 * size)
    return torch.where(index >= size, 2 * size - 1 - index, index)


def _gather(image: torch.Tensor, rows: torch.Tensor, columns: torch.Tensor, border: str
            ) -> Tuple[torch.Tensor, torch.Tensor]:
    """``image[..., rows, columns]`` (``rows``/``columns``: ``H×W`` source indices, any
    values) and the mask of positions inside the image (all True with ``reflect``, whose
    outside positions are mirrored; with ``constant`` the values there are arbitrary)."""
    height, width = image.shape[-2:]
    if border == 'reflect':
        rows, columns = _reflect(rows, height), _reflect(columns, width)
        inside = torch.ones(rows.shape, dtype=torch.bool, device=rows.device)
    else:
        inside = (rows >= 0) & (rows < height) & (columns >= 0) & (columns < width)
        rows, columns = rows.clamp(0, height - 1), columns.clamp(0, width - 1)
    flat = (rows * width + columns).reshape(-1)
    values = image.reshape(image.shape[:-2] + (-1, )).index_select(-1, flat)
    return values.reshape(image.shape[:-2] + rows.shape), inside


def _warp_affine(image: torch.Tensor, transform: GeometricTransform) -> torch.Tensor:
    """Bilinear ``cv2.warpAffine`` of a ``C×H×W`` uint8 (exact integer arithmetic) or
    float32 image; outside the image: mirrored (``reflect``) or 0 (``constant``)."""
    x, y = _affine_positions(transform, _INTER_BITS, image.device)
    x0, fx = x >> _INTER_BITS, x & (_INTER_STEPS - 1)
    y0, fy = y >> _INTER_BITS, y & (_INTER_STEPS - 1)
    integer = image.dtype == torch.uint8
    source = image.to(torch.int32) if integer else image
    taps = []
    for dy in (0, 1):
        for dx in (0, 1):
            values, inside = _gather(source, y0 + dy, x0 + dx, transform.border)
            taps.append(torch.where(inside, values, torch.zeros((), dtype=values.dtype,
                                                                device=values.device)))
    if integer:  # weights (32 − f)·(32 − g) etc.: 1024 in all
        wx, wy = (_INTER_STEPS - fx, fx), (_INTER_STEPS - fy, fy)
        weights = [(wy[i] * wx[j]).to(torch.int32) for i in (0, 1) for j in (0, 1)]
        total = sum(t * w for t, w in zip(taps, weights))
        return ((total + (1 << (2 * _INTER_BITS - 1))) >> (2 * _INTER_BITS)).to(torch.uint8)
    ax1 = fx.to(torch.float32) / _INTER_STEPS
    ay1 = fy.to(torch.float32) / _INTER_STEPS
    ax0, ay0 = 1.0 - ax1, 1.0 - ay1
    weights = (ay0 * ax0, ay0 * ax1, ay1 * ax0, ay1 * ax1)
    return taps[0] * weights[0] + taps[1] * weights[1] + taps[2] * weights[2] + \
        taps[3] * weights[3]


def _resize_axis(size: int, new_size: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``cv2.resize`` bilinear taps along one axis: first and second source index and
    the float32 fraction of each of the ``new_size`` outputs."""
    step = 1.0 / (new_size / size)
    position = ((np.arange(new_size, dtype=np.float64) + 0.5) * step - 0.5).astype(np.float32)
    first = np.floor(position).astype(np.int64)
    fraction = (position - first.astype(np.float32)).astype(np.float32)
    low, high = first < 0, first >= size - 1
    fraction[low | high] = 0.0
    first[low], first[high] = 0, size - 1
    return first, np.minimum(first + 1, size - 1), fraction


def _resize(image: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """Bilinear ``cv2.resize`` of a ``C×H×W`` uint8 or float32 image to ``height×width``."""
    device = image.device
    cols0, cols1, fx = (torch.from_numpy(a).to(device)
                        for a in _resize_axis(image.shape[-1], width))
    rows0, rows1, fy = (torch.from_numpy(a).to(device)
                        for a in _resize_axis(image.shape[-2], height))
    if image.dtype == torch.uint8:
        unit = float(1 << _RESIZE_BITS)

        def weights(f: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
            return (torch.round((1.0 - f) * unit).to(torch.int32),
                    torch.round(f * unit).to(torch.int32))

        (ax0, ax1), (ay0, ay1) = weights(fx), weights(fy)
        x = image.to(torch.int32)
        rows = x.index_select(-1, cols0) * ax0 + x.index_select(-1, cols1) * ax1
        top, bottom = rows.index_select(-2, rows0), rows.index_select(-2, rows1)
        # OpenCV's vectorised vertical pass: each row's sum shifted by 4, multiplied,
        # shifted by 16, then the two added and rounded by 2 bits
        out = (((ay0[:, None] * (top >> 4)) >> 16) + ((ay1[:, None] * (bottom >> 4)) >> 16)
               + 2) >> 2
        return out.clamp(0, 255).to(torch.uint8)
    rows = image.index_select(-1, cols0) * (1.0 - fx) + image.index_select(-1, cols1) * fx
    return rows.index_select(-2, rows0) * (1.0 - fy)[:, None] + \
        rows.index_select(-2, rows1) * fy[:, None]


def _frame_index(size: int, start: int, length: int, fill: str) -> np.ndarray:
    """Index into the content (``length`` samples placed at ``start``) of each of the
    ``size`` frame positions, as ``cv2.copyMakeBorder`` fills: ``replicate``,
    ``reflect``, or -1 (no content) for ``black``/label maps."""
    position = np.arange(size, dtype=np.int64) - start
    if fill == 'replicate':
        return np.clip(position, 0, length - 1)
    if fill == 'reflect':
        if length == 1:
            return np.zeros_like(position)
        position = np.mod(position, 2 * length)
        return np.where(position >= length, 2 * length - 1 - position, position)
    return np.where((position >= 0) & (position < length), position, -1)


def _scale(image: torch.Tensor, transform: GeometricTransform) -> torch.Tensor:
    """``scale``'s image: the content resized, then framed as ``canvas_fill`` says."""
    top, left, new_height, new_width = transform.canvas
    content = _resize(image, new_height, new_width)
    height, width = transform.output_shape
    rows = _frame_index(height, top, new_height, transform.canvas_fill)
    columns = _frame_index(width, left, new_width, transform.canvas_fill)
    return _frame(content, rows, columns, 0)


def _frame(content: torch.Tensor, rows: np.ndarray, columns: np.ndarray, fill
           ) -> torch.Tensor:
    """``content[..., rows, columns]`` with ``fill`` where a row or column index is -1."""
    device = content.device
    row_index = torch.from_numpy(np.maximum(rows, 0)).to(device)
    column_index = torch.from_numpy(np.maximum(columns, 0)).to(device)
    out = content.index_select(-2, row_index).index_select(-1, column_index)
    outside = torch.from_numpy((rows[:, None] < 0) | (columns[None, :] < 0)).to(device)
    if bool(outside.any()):
        out = out.masked_fill(outside, fill)
    return out


def warp_image(image: torch.Tensor, transform: GeometricTransform) -> torch.Tensor:
    """Move a ``C×H×W`` image (``uint8``, or float32 scaled to [0, 1]) by ``transform``
    as the numpy engine's corruption does: ``uint8`` in, ``uint8`` out (OpenCV's integer
    paths); float32 in, float32 out, not yet clipped."""
    if transform.name == 'identity':
        return image.clone()
    if transform.canvas is not None:
        return _scale(image, transform)
    return _warp_affine(image, transform)


def warp_labels(label_map: torch.Tensor, transform: GeometricTransform, fill
                ) -> torch.Tensor:
    """Move a ``...×H×W`` label map (any dtype) by ``transform`` with OpenCV's nearest
    sampling, as :meth:`GeometricTransform.warp_label_map`: ``fill`` where there is no
    source content (the ``scale`` frame, ``constant`` borders)."""
    if transform.name == 'identity':
        return label_map.clone()
    if transform.canvas is not None:
        top, left, new_height, new_width = transform.canvas
        height, width = transform.source_shape
        rows = _nearest_exact_resize_index(height, new_height, axis=0)
        columns = _nearest_exact_resize_index(width, new_width, axis=1)
        out_rows = _frame_index(transform.output_shape[0], top, new_height, 'black')
        out_columns = _frame_index(transform.output_shape[1], left, new_width, 'black')
        return _frame(label_map, np.where(out_rows < 0, -1, rows[np.maximum(out_rows, 0)]),
                      np.where(out_columns < 0, -1, columns[np.maximum(out_columns, 0)]),
                      fill)
    x, y = _affine_positions(transform, 0, label_map.device)
    values, inside = _gather(label_map, y, x, transform.border)
    if transform.border == 'reflect':
        return values
    return values.masked_fill(~inside, fill)
