"""``ErodeLabelBoundaries``: score a label map the way ISPRS's eroded references are scored.

ISPRS releases the Potsdam and Vaihingen references twice: complete, and with the
boundaries of the objects eroded by a circular disc of radius 3 pixels, the eroded band
being ignored in the evaluation (the 2D Semantic Labeling Contest's description of its
``..._noBoundary`` / ``..._eroded`` files). MMSegmentation's Vaihingen converter reads
the eroded reference only, so a Potsdam model compared with its Vaihingen numbers must
have its Potsdam labels eroded the same way. The rule, applied to the label map as it is
loaded (every label value, the ignored one included, is a region):

- a pixel is a *boundary* pixel when a pixel of another value lies within the disc of
  radius ``radius`` around it: the offsets ``(dy, dx)`` with ``dy² + dx² ≤ radius²``
  (29 pixels for radius 3; ISPRS does not publish its structuring element, this is the
  Euclidean disc);
- beyond the image border nothing is known, so the border erodes nothing (a patch is
  eroded as if its neighbours continued it);
- boundary pixels become ``ignore_index``.

Put it after the annotation-loading step of a test pipeline (after ``reduce_zero_label``
is applied, so ``ignore_index`` is the evaluator's), before resizing or packing::

    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='reobench_mm.ErodeLabelBoundaries', radius=3, ignore_index=255),
"""
from __future__ import annotations

from typing import Any, Dict

import cv2
import numpy as np
from mmcv.transforms import BaseTransform

from ..registry import TRANSFORMS

__all__ = ['ErodeLabelBoundaries', 'erode_label_boundaries', 'disc', 'ISPRS_EROSION_RADIUS']

#: The radius in pixels of ISPRS's eroded references.
ISPRS_EROSION_RADIUS = 3


def _check_int(name: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or \
            not low <= value <= high:
        raise ValueError(f'{name} must be an integer in {low}..{high}, got {value!r}')
    return int(value)


def disc(radius: int) -> np.ndarray:
    """The structuring element: a ``(2r+1)²`` uint8 array, 1 where ``dy² + dx² ≤ r²``."""
    radius = _check_int('radius', radius, 1, 255)
    offsets = np.arange(-radius, radius + 1)
    return (offsets[:, None] ** 2 + offsets[None, :] ** 2 <= radius ** 2).astype(np.uint8)


def erode_label_boundaries(label: np.ndarray, radius: int = ISPRS_EROSION_RADIUS,
                           ignore_index: int = 255) -> np.ndarray:
    """``label`` (an ``H×W`` integer map) with its boundary pixels (see the module
    docstring) set to ``ignore_index``; a new array of ``label``'s dtype.

    A pixel is a boundary pixel exactly when the smallest and the largest value within
    its disc differ (one grey erosion and one grey dilation with OpenCV; replicating the
    border adds no value that the disc does not already reach inside the image).

    Raises:
        ValueError: not a 2-D integer map, a bad radius, or an ``ignore_index`` the
            map's dtype cannot hold.
    """
    label = np.asarray(label)
    if label.ndim != 2 or not np.issubdtype(label.dtype, np.integer):
        raise ValueError(f'a label map is a 2-D integer array, got shape {label.shape} of '
                         f'{label.dtype}')
    info = np.iinfo(label.dtype)
    ignore_index = _check_int('ignore_index', ignore_index, max(info.min, 0), info.max)
    kernel = disc(radius)
    # OpenCV's morphology takes uint8/uint16: label values are ranked into a compact code
    values, codes = np.unique(label, return_inverse=True)
    if len(values) < 2:
        return label.copy()
    codes = codes.reshape(label.shape).astype(np.uint8 if len(values) <= 256 else np.uint16)
    low = cv2.erode(codes, kernel, borderType=cv2.BORDER_REPLICATE)
    high = cv2.dilate(codes, kernel, borderType=cv2.BORDER_REPLICATE)
    out = label.copy()
    out[low != high] = ignore_index
    return out


@TRANSFORMS.register_module()
class ErodeLabelBoundaries(BaseTransform):
    """Ignore the boundary band of ``gt_seg_map`` (see the module docstring).

    Args:
        radius: the disc's radius in pixels (ISPRS: 3).
        ignore_index: the label the boundary pixels take: the evaluator's ignored label.

    Raises:
        ValueError: a bad radius or ignore index (when built); a result without
            ``gt_seg_map`` (when applied: the step comes after the annotations are
            loaded).
    """

    def __init__(self, radius: int = ISPRS_EROSION_RADIUS, ignore_index: int = 255) -> None:
        self.radius = _check_int('radius', radius, 1, 255)
        self.ignore_index = _check_int('ignore_index', ignore_index, 0, 65535)

    def transform(self, results: Dict[str, Any]) -> Dict[str, Any]:
        if results.get('gt_seg_map') is None:
            raise ValueError('ErodeLabelBoundaries needs gt_seg_map: put it after the '
                             f'annotation-loading step (image {results.get("img_path")})')
        results['gt_seg_map'] = erode_label_boundaries(results['gt_seg_map'], self.radius,
                                                       self.ignore_index)
        return results

    def __repr__(self) -> str:
        return (f'{type(self).__name__}(radius={self.radius}, '
                f'ignore_index={self.ignore_index})')
