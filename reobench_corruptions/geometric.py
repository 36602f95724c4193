"""Geometric corruptions (rotate, scale, translate) and the transform they apply.

Each returns the moved image and a :class:`GeometricTransform` holding the exact
numbers used, so that label maps, boxes and polygons can be moved identically.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple, Union

import cv2
import numpy as np

from .base import register_corruption, register_uint8_kernel

__all__ = ['GeometricTransform', 'BORDER_MODES', 'SCALE_CANVASES', 'DEFAULT_SCALE_CANVAS',
           'check_border', 'check_canvas', 'check_ignore_index', 'geometric_transform',
           'rotate_transform', 'scale_transform', 'translate_transform']

BORDER_MODES = {'reflect': cv2.BORDER_REFLECT, 'constant': cv2.BORDER_CONSTANT}

# How ``scale`` fills the frame around the shrunk image: the REOBench generator pastes it
# on black; the authors' released corrupted images were padded from the image's own
# edges (``replicate``: each edge pixel repeated outwards, OpenCV BORDER_REPLICATE);
# ``reflect`` mirrors the shrunk image about its edges (OpenCV BORDER_REFLECT, the border
# of ``rotate`` and ``translate``). Which of these the published numbers used is in
# docs/corruptions.md ("The scale canvas").
SCALE_CANVASES = {'replicate': cv2.BORDER_REPLICATE, 'reflect': cv2.BORDER_REFLECT,
                  'black': None}
DEFAULT_SCALE_CANVAS = 'replicate'


def check_border(border: str) -> None:
    """Raise a ValueError naming the valid border modes unless ``border`` is one."""
    if border not in BORDER_MODES:
        raise ValueError(f'border must be one of {list(BORDER_MODES)}, got {border!r}')


def check_canvas(canvas: str) -> None:
    """Raise a ValueError naming the valid ``scale`` canvases unless ``canvas`` is one."""
    if not isinstance(canvas, str) or canvas not in SCALE_CANVASES:
        raise ValueError(f'canvas (how scale fills the frame around the shrunk image) must be '
                         f'one of {list(SCALE_CANVASES)}, got {canvas!r}')


# Where a label comes from is decided by OpenCV's 8-bit nearest-neighbour rule for every
# dtype: uint8 maps are warped directly (as always), other dtypes by warping their flat
# pixel index written as 4 bytes per pixel (an 8-bit image), then gathering. OpenCV's
# own int16/float64 nearest paths pick other source pixels at a few constant borders.
_NO_SOURCE = 0xFFFFFFFF  # the index bytes outside the image (255, 255, 255, 255)


def _nearest_warp_index(source_shape: Tuple[int, int], matrix: np.ndarray,
                        output_shape: Tuple[int, int], border: int) -> np.ndarray:
    """Flat source index of every output pixel (int64; -1 where there is no source
    content) under OpenCV's 8-bit INTER_NEAREST warp."""
    count = source_shape[0] * source_shape[1]
    if count >= _NO_SOURCE:
        raise ValueError(f'label maps of more than {_NO_SOURCE - 1} pixels are not supported '
                         f'for this dtype (got {source_shape}); use uint8 labels')
    index_bytes = np.arange(count, dtype='<u4').view(np.uint8).reshape(source_shape + (4, ))
    moved = cv2.warpAffine(index_bytes, matrix, output_shape[::-1], flags=cv2.INTER_NEAREST,
                           borderMode=border, borderValue=(255, 255, 255, 255))
    index = np.ascontiguousarray(moved).view('<u4').reshape(output_shape).astype(np.int64)
    index[index == _NO_SOURCE] = -1
    return index


def _nearest_exact_resize_index(size: int, new_size: int, axis: int) -> np.ndarray:
    """Source positions of OpenCV's 8-bit INTER_NEAREST_EXACT resize along ``axis``
    (0: rows, 1: columns) from ``size`` to ``new_size`` samples."""
    shape = (size, 1, 4) if axis == 0 else (1, size, 4)
    target = (1, new_size) if axis == 0 else (new_size, 1)
    index_bytes = np.arange(size, dtype='<u4').view(np.uint8).reshape(shape)
    moved = cv2.resize(index_bytes, target, interpolation=cv2.INTER_NEAREST_EXACT)
    return np.ascontiguousarray(moved).view('<u4').reshape(new_size).astype(np.int64)


def check_ignore_index(ignore_index, dtype) -> Union[int, bool, float]:
    """``ignore_index`` as a value of a label map of ``dtype``, after checking that the
    dtype can hold it.

    Integer maps take any integer in their dtype's range; float maps any integer they
    represent exactly; ``bool`` maps only 0/1 (False/True), and since a boolean map has
    no spare value, that value is simply what areas without source content become (use
    :meth:`GeometricTransform.content_mask` or an integer map to tell them apart).

    Raises:
        TypeError: ``dtype`` is not an integer, bool or float dtype.
        ValueError: ``ignore_index`` is not an integer, or the dtype cannot hold it
            (the message gives the values it can hold).
    """
    dtype = np.dtype(dtype)
    if isinstance(ignore_index, (bool, np.bool_)):
        ignore_index = int(ignore_index)
    if not isinstance(ignore_index, (int, np.integer)):
        raise ValueError(f'ignore_index must be an integer, got {ignore_index!r} of type '
                         f'{type(ignore_index).__name__}')
    value = int(ignore_index)
    if dtype == np.bool_:
        if value not in (0, 1):
            raise ValueError(
                f'ignore_index={value} does not fit a bool label map, which holds only 0 '
                '(False) and 1 (True); pass ignore_index=0 or 1 (the value areas without '
                'source content get) or convert the map to an integer dtype such as uint8')
        return bool(value)
    if dtype.kind in 'iu':
        info = np.iinfo(dtype)
        if not info.min <= value <= info.max:
            raise ValueError(
                f'ignore_index={value} does not fit a {dtype.name} label map, which holds '
                f'{info.min}..{info.max}; choose an ignore_index in that range or convert '
                'the map to a wider integer dtype')
        return value
    if dtype.kind == 'f':
        if float(dtype.type(value)) != value:
            raise ValueError(f'ignore_index={value} is not exactly representable in a '
                             f'{dtype.name} label map; choose a smaller integer or convert '
                             'the map to an integer dtype')
        return value
    raise TypeError(f'unsupported label map dtype {dtype}; valid: bool, signed and unsigned '
                    'integers, float16/32/64')


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
        canvas: ``(top, left, height, width)`` of the pasted content for ``scale``;
            None otherwise. Label maps get the ignore index around it whatever the
            image's canvas fill (``canvas_fill``): that area holds no labelled content.
        input_shape: ``(H, W)`` of the image the transform was made for (None: the
            same as ``output_shape``, as for every corruption of the engine). Label
            maps must have this height and width.
        canvas_fill: for ``scale``, how the image's frame around the content was filled
            (a key of :data:`SCALE_CANVASES`); None otherwise.
    """
    name: str
    matrix: np.ndarray
    output_shape: Tuple[int, int]
    border: str
    canvas: Optional[Tuple[int, int, int, int]] = None
    input_shape: Optional[Tuple[int, int]] = None
    canvas_fill: Optional[str] = None

    @property
    def source_shape(self) -> Tuple[int, int]:
        """``(H, W)`` the inputs (image, label maps) must have."""
        shape = self.output_shape if self.input_shape is None else self.input_shape
        return int(shape[0]), int(shape[1])

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
        content (the ``scale`` canvas, ``constant`` borders) get ``ignore_index``.

        Args:
            label_map: ``H×W`` or ``H×W×C`` with the ``(H, W)`` of the image the
                transform was made for (:attr:`source_shape`); any integer dtype,
                ``bool`` or float16/32/64, any memory layout (never modified).
            ignore_index: an integer the map's dtype can hold (see
                :func:`check_ignore_index`; for ``bool`` maps 0 or 1, which is then
                simply the value of areas without source content).

        Returns:
            A new map of shape ``output_shape + label_map.shape[2:]`` and the same
            dtype: every value is a value of the input map or ``ignore_index``.

        Raises:
            TypeError: not a numpy array, or an unsupported dtype.
            ValueError: a shape other than the image's (both are named), or an
                ``ignore_index`` the dtype cannot hold.
        """
        if not isinstance(label_map, np.ndarray):
            raise TypeError(f'label_map must be a numpy array, got {type(label_map)}')
        source = self.source_shape
        if label_map.ndim not in (2, 3) or label_map.shape[:2] != source \
                or 0 in label_map.shape:
            raise ValueError(
                f'label map of shape {label_map.shape} does not match the image this '
                f'{self.name!r} transform was made for, of height × width {source}: a '
                'label map must be H×W or H×W×C with the image\'s H and W (it is not '
                'resampled; resize it to the image first)')
        fill = check_ignore_index(ignore_index, label_map.dtype)
        if label_map.dtype == np.bool_:  # 0/1 bytes: moved as a uint8 map
            as_bytes = np.ascontiguousarray(label_map).view(np.uint8)
            return self.warp_label_map(as_bytes, int(fill)).view(np.bool_)
        extra = label_map.shape[2:]
        direct = label_map.dtype == np.uint8 and (not extra or extra[0] <= 4)
        h, w = self.output_shape
        if self.canvas is not None:
            top, left, nh, nw = self.canvas
            out = np.full((h, w) + extra, fill, dtype=label_map.dtype)
            # INTER_NEAREST_EXACT samples at pixel centres like the image's bilinear
            # resize; plain INTER_NEAREST is offset by up to half a source pixel
            if direct:
                out[top:top + nh, left:left + nw] = cv2.resize(
                    np.ascontiguousarray(label_map), (nw, nh),
                    interpolation=cv2.INTER_NEAREST_EXACT).reshape((nh, nw) + extra)
            else:  # the same sample positions, row and column indices resized alone
                rows = _nearest_exact_resize_index(source[0], nh, axis=0)
                cols = _nearest_exact_resize_index(source[1], nw, axis=1)
                out[top:top + nh, left:left + nw] = label_map[rows[:, None], cols[None, :]]
            return out
        border = BORDER_MODES[self.border]
        if direct:
            return cv2.warpAffine(np.ascontiguousarray(label_map), self.opencv_matrix, (w, h),
                                  flags=cv2.INTER_NEAREST, borderMode=border,
                                  borderValue=(fill, ) * 4).reshape((h, w) + extra)
        index = _nearest_warp_index(source, self.opencv_matrix, (h, w), border)
        outside = index < 0
        index[outside] = 0
        out = label_map.reshape((-1, ) + extra)[index]
        out[outside] = fill
        return out

    def content_mask(self) -> np.ndarray:
        """Boolean ``(H, W)`` of the output: True where output pixels come from inside
        the input (all True with ``reflect`` borders and no canvas)."""
        return self.warp_label_map(np.ones(self.source_shape, np.uint8), 0).astype(bool)


def identity_transform(height: int, width: int) -> GeometricTransform:
    """The transform of severity 0: every pixel stays where it is."""
    return GeometricTransform('identity', np.array([[1.0, 0, 0], [0, 1.0, 0]]), (height, width),
                              'reflect', input_shape=(height, width))


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
    return GeometricTransform(name, edge, tuple(shape), border, input_shape=tuple(shape))


def rotate_transform(shape: Tuple[int, int], angle: float,
                     border: str = 'reflect') -> GeometricTransform:
    """The transform of ``rotate``: +angle degrees (counter-clockwise on screen) about
    (W/2, H/2) of an image of ``shape`` (H, W)."""
    h, w = shape
    matrix = cv2.getRotationMatrix2D((w / 2, h / 2), float(angle), 1.0)
    return _from_opencv('rotate', matrix, (h, w), border)


def scale_transform(shape: Tuple[int, int], ratio: float,
                    canvas: str = DEFAULT_SCALE_CANVAS) -> GeometricTransform:
    """The transform of ``scale``: the image of ``shape`` (H, W) resized to
    int(W·s) × int(H·s) and placed at top ``(H − nh)//2``, left ``(W − nw)//2``."""
    h, w = shape
    nh, nw = max(1, int(h * ratio)), max(1, int(w * ratio))
    top, left = (h - nh) // 2, (w - nw) // 2
    matrix = np.array([[nw / w, 0.0, left], [0.0, nh / h, top]])
    return GeometricTransform('scale', matrix, (h, w), 'constant', (top, left, nh, nw),
                              input_shape=(h, w), canvas_fill=canvas)


def translate_transform(shape: Tuple[int, int], shift: int, rng: np.random.Generator,
                        border: str = 'reflect') -> GeometricTransform:
    """The transform of ``translate``: a shift by (±t, ±t), the two signs drawn from
    ``rng`` (the sample's generator)."""
    h, w = shape
    dx, dy = (float(shift) if s else -float(shift) for s in rng.integers(0, 2, size=2))
    return GeometricTransform('translate', np.array([[1.0, 0, dx], [0, 1.0, dy]]), (h, w),
                              border, input_shape=(h, w))


def geometric_transform(name: str, shape: Tuple[int, int], parameter, rng: np.random.Generator,
                        border: str = 'reflect', canvas: str = DEFAULT_SCALE_CANVAS
                        ) -> GeometricTransform:
    """The transform corruption ``name`` (``rotate``, ``scale`` or ``translate``) applies
    at the severity's ``parameter`` to an image of ``shape`` (H, W), drawing from the
    sample's ``rng`` as the corruption does: the one definition both engines use.

    Raises:
        ValueError: a bad ``border`` or ``canvas``, or a name that is not one of the three.
    """
    check_border(border)
    if name == 'rotate':
        return rotate_transform(shape, parameter, border)
    if name == 'scale':
        check_canvas(canvas)
        return scale_transform(shape, parameter, canvas)
    if name == 'translate':
        return translate_transform(shape, parameter, rng, border)
    raise ValueError(f'{name!r} is not a geometric corruption; valid: rotate, scale, '
                     'translate')


@register_corruption('rotate', 'reobench', 'geometric', 'angle, degrees',
                     (30, 45, 60, 75, 90), options=('border', ))
def rotate(image: np.ndarray, angle: float, rng: np.random.Generator, border: str = 'reflect'):
    """Rotate by +angle (counter-clockwise on screen) about (W/2, H/2), bilinear."""
    check_border(border)
    transform = rotate_transform(image.shape[:2], angle, border)
    return _warp(image, transform), transform


@register_corruption('scale', 'reobench', 'geometric', 'zoom-out ratio s',
                     (0.9, 0.8, 0.7, 0.6, 0.5), options=('border', 'canvas'))
def scale(image: np.ndarray, ratio: float, rng: np.random.Generator, border: str = 'reflect',
          canvas: str = DEFAULT_SCALE_CANVAS):
    """Resize (bilinear) to int(W·s) × int(H·s), placed at top ``(H − nh)//2``, left
    ``(W − nw)//2`` of a frame of the original size.

    Args:
        canvas: how the frame around the shrunk image is filled: ``'replicate'`` (edge
            pixels repeated outwards, as in the authors' released files; the default),
            ``'reflect'`` (mirrored about the edges) or ``'black'`` (zeros, as the
            REOBench generator script). See :data:`SCALE_CANVASES`.
        border: accepted for a uniform interface with ``rotate`` and ``translate``; it
            does not change ``scale``.

    Labels: boxes and points move with the affine map; label maps get the ignore index
    outside the content whatever the canvas (see :class:`GeometricTransform`).
    """
    check_border(border)
    check_canvas(canvas)
    h, w = image.shape[:2]
    transform = scale_transform((h, w), ratio, canvas)
    top, left, nh, nw = transform.canvas
    content = cv2.resize(image, (nw, nh), interpolation=cv2.INTER_LINEAR)
    if canvas == 'black':
        out = np.zeros_like(image)
        out[top:top + nh, left:left + nw] = content.reshape(nh, nw, image.shape[2])
    else:
        out = cv2.copyMakeBorder(content, top, h - nh - top, left, w - nw - left,
                                 SCALE_CANVASES[canvas]).reshape(image.shape)
    return out, transform


@register_corruption('translate', 'reobench', 'geometric', 'shift t px', (15, 20, 25, 30, 35),
                     options=('border', ), stochastic=True)
def translate(image: np.ndarray, shift: int, rng: np.random.Generator,
              border: str = 'reflect'):
    """Shift by (±t, ±t), signs drawn at random (always diagonal)."""
    check_border(border)
    transform = translate_transform(image.shape[:2], shift, rng, border)
    return _warp(image, transform), transform


# The three are dtype-generic: on uint8 images they run OpenCV's integer paths directly,
# as the REOBench generator did. ``translate`` (integer shifts) gives the same bits as
# the float path; ``rotate`` and ``scale`` use OpenCV's fixed-point bilinear weights and
# stay within one grey level of it.
register_uint8_kernel('rotate', 'reobench', 'within_one_level')(rotate)
register_uint8_kernel('scale', 'reobench', 'within_one_level')(scale)
register_uint8_kernel('translate', 'reobench', 'identical')(translate)
