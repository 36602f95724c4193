"""Geometric corruptions (rotate, scale, translate) and the transform they apply.

Each returns the moved image and a :class:`GeometricTransform` holding the exact
numbers used, so that label maps, boxes and polygons can be moved identically.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

import cv2
import numpy as np

from .base import register_corruption, register_uint8_kernel

__all__ = ['GeometricTransform', 'BORDER_MODES', 'check_border']

BORDER_MODES = {'reflect': cv2.BORDER_REFLECT, 'constant': cv2.BORDER_CONSTANT}


def check_border(border: str) -> None:
    """Raise a ValueError naming the valid border modes unless ``border`` is one."""
    if border not in BORDER_MODES:
        raise ValueError(f'border must be one of {list(BORDER_MODES)}, got {border!r}')


@dataclass(frozen=True)
class GeometricTransform:
    """An affine map from input to output pixels, and how uncovered areas are filled.

    Attributes:
        name: the corruption (``'identity'`` for severity 0).
        matrix: 2×3 affine matrix in continuous pixel-edge coordinates (the image
            spans ``[0, W] × [0, H]``; box and polygon coordinates use this frame).
        output_shape: ``(H, W)`` of the output.
        border: ``'reflect'`` (out-of-image samples mirror the image; their labels are
            the mirrored labels) or ``'constant'`` (no source content there).
        canvas: ``(top, left, height, width)`` of the pasted content for ``scale``,
            whose surroundings are always an empty canvas; None otherwise.
    """
    name: str
    matrix: np.ndarray
    output_shape: Tuple[int, int]
    border: str
    canvas: Tuple[int, int, int, int] = None

    @property
    def opencv_matrix(self) -> np.ndarray:
        """The same map in OpenCV's pixel-index coordinates (pixel centres at integers)."""
        linear, shift = self.matrix[:, :2], self.matrix[:, 2]
        return np.concatenate([linear, (shift + linear @ [0.5, 0.5] - 0.5)[:, None]], axis=1)

    def apply_to_points(self, points: np.ndarray) -> np.ndarray:
        """Move ``(..., 2)`` x/y points given in pixel-edge coordinates."""
        points = np.asarray(points, np.float64)
        return points @ self.matrix[:, :2].T + self.matrix[:, 2]

    def warp_label_map(self, label_map: np.ndarray, ignore_index: int) -> np.ndarray:
        """Move a label map with nearest-neighbour sampling; areas without source
        content (the ``scale`` canvas, ``constant`` borders) get ``ignore_index``."""
        h, w = self.output_shape
        if self.canvas is not None:
            top, left, nh, nw = self.canvas
            out = np.full((h, w) + label_map.shape[2:], ignore_index, dtype=label_map.dtype)
            # INTER_NEAREST_EXACT samples at pixel centres like the image's bilinear
            # resize; plain INTER_NEAREST is offset by up to half a source pixel
            out[top:top + nh, left:left + nw] = cv2.resize(
                label_map, (nw, nh), interpolation=cv2.INTER_NEAREST_EXACT).reshape(
                    (nh, nw) + label_map.shape[2:])
            return out
        return cv2.warpAffine(label_map, self.opencv_matrix, (w, h), flags=cv2.INTER_NEAREST,
                              borderMode=BORDER_MODES[self.border],
                              borderValue=ignore_index)

    def content_mask(self) -> np.ndarray:
        """Boolean ``(H, W)``: True where output pixels come from inside the input
        (all True with ``reflect`` borders and no canvas)."""
        return self.warp_label_map(np.ones(self.output_shape, np.uint8), 0).astype(bool)


def identity_transform(height: int, width: int) -> GeometricTransform:
    return GeometricTransform('identity', np.array([[1.0, 0, 0], [0, 1.0, 0]]), (height, width),
                              'reflect')


def _warp(image: np.ndarray, transform: GeometricTransform) -> np.ndarray:
    h, w = transform.output_shape

    def warp(x):
        return cv2.warpAffine(x, transform.opencv_matrix, (w, h), flags=cv2.INTER_LINEAR,
                              borderMode=BORDER_MODES[transform.border], borderValue=0)

    if image.shape[2] <= 4:
        return warp(image).reshape(image.shape)
    return np.stack([warp(image[..., c]) for c in range(image.shape[2])], axis=2)


def _from_opencv(name: str, opencv_matrix: np.ndarray, shape, border: str) -> GeometricTransform:
    linear, shift = opencv_matrix[:, :2], opencv_matrix[:, 2]
    edge = np.concatenate([linear, (shift - linear @ [0.5, 0.5] + 0.5)[:, None]], axis=1)
    return GeometricTransform(name, edge, tuple(shape), border)


@register_corruption('rotate', 'reobench', 'geometric', 'angle, degrees',
                     (30, 45, 60, 75, 90), options=('border', ))
def rotate(image: np.ndarray, angle: float, rng: np.random.Generator, border: str = 'reflect'):
    """Rotate by +angle (counter-clockwise on screen) about (W/2, H/2), bilinear."""
    check_border(border)
    h, w = image.shape[:2]
    matrix = cv2.getRotationMatrix2D((w / 2, h / 2), float(angle), 1.0)
    transform = _from_opencv('rotate', matrix, (h, w), border)
    return _warp(image, transform), transform


@register_corruption('scale', 'reobench', 'geometric', 'zoom-out ratio s',
                     (0.9, 0.8, 0.7, 0.6, 0.5), options=('border', ))
def scale(image: np.ndarray, ratio: float, rng: np.random.Generator, border: str = 'reflect'):
    """Resize (bilinear) to int(W·s) × int(H·s), paste centred on a black canvas.

    ``border`` is accepted for a uniform interface; the canvas is always empty.
    """
    check_border(border)
    h, w = image.shape[:2]
    nh, nw = max(1, int(h * ratio)), max(1, int(w * ratio))
    top, left = (h - nh) // 2, (w - nw) // 2
    out = np.zeros_like(image)
    out[top:top + nh, left:left + nw] = cv2.resize(
        image, (nw, nh), interpolation=cv2.INTER_LINEAR).reshape(nh, nw, image.shape[2])
    matrix = np.array([[nw / w, 0.0, left], [0.0, nh / h, top]])
    return out, GeometricTransform('scale', matrix, (h, w), 'constant', (top, left, nh, nw))


@register_corruption('translate', 'reobench', 'geometric', 'shift t px', (15, 20, 25, 30, 35),
                     options=('border', ))
def translate(image: np.ndarray, shift: int, rng: np.random.Generator,
              border: str = 'reflect'):
    """Shift by (±t, ±t), signs drawn at random (always diagonal)."""
    check_border(border)
    h, w = image.shape[:2]
    dx, dy = (float(shift) if s else -float(shift) for s in rng.integers(0, 2, size=2))
    transform = GeometricTransform('translate', np.array([[1.0, 0, dx], [0, 1.0, dy]]), (h, w),
                                   border)
    return _warp(image, transform), transform


# The three are dtype-generic: on uint8 images they run OpenCV's integer paths directly,
# as the REOBench generator did. ``translate`` (integer shifts) gives the same bits as
# the float path; ``rotate`` and ``scale`` use OpenCV's fixed-point bilinear weights and
# stay within one grey level of it.
register_uint8_kernel('rotate', 'reobench', 'within_one_level')(rotate)
register_uint8_kernel('scale', 'reobench', 'within_one_level')(scale)
register_uint8_kernel('translate', 'reobench', 'identical')(translate)
