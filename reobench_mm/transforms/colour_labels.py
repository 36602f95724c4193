"""``LoadAnnotationsFromColours``: label maps stored as colour images (one RGB colour per
class), as DeepGlobe Land Cover stores its masks.

MMSegmentation's ``LoadAnnotations`` reads a label image as the class indices it holds; a
colour-coded mask needs its colours turned into indices first. This step reads the mask
(OpenCV, in RGB order), optionally binarises every channel at a threshold first (the
DeepGlobe release asks for a threshold of 128, since its masks are not all pure 0 and
255), and writes ``gt_seg_map`` with the index of each pixel's colour in ``colours``; a
colour of no class (DeepGlobe's black *unknown*, or any other) gets ``ignore_index``::

    dict(type='LoadAnnotationsFromColours',
         colours=[(0, 255, 255), (255, 255, 0), (255, 0, 255), (0, 255, 0), (0, 0, 255),
                  (255, 255, 255)], threshold=128, ignore_index=255)

Like ``LoadAnnotations`` it then applies the sample's ``label_map`` (the dataset's map of
its classes onto a subset given in ``metainfo``), and adds ``gt_seg_map`` to
``seg_fields``.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Tuple

import mmcv
import numpy as np
from mmcv.transforms import BaseTransform
from mmengine import fileio

from ..registry import TRANSFORMS

__all__ = ['LoadAnnotationsFromColours', 'colours_to_labels']

Colour = Tuple[int, int, int]


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _check_colours(colours: Any) -> Tuple[Colour, ...]:
    valid = 'a list of (r, g, b) triples of integers in 0..255, one per class, distinct'
    if isinstance(colours, (str, bytes)) or not isinstance(colours, (list, tuple)) \
            or not colours:
        raise ValueError(f'colours must be {valid}; got {colours!r}')
    out = []
    for colour in colours:
        if not isinstance(colour, (list, tuple)) or len(colour) != 3 or \
                not all(_is_int(c) and 0 <= c <= 255 for c in colour):
            raise ValueError(f'colours must be {valid}; got {colour!r} in {list(colours)!r}')
        out.append(tuple(int(c) for c in colour))
    if len(set(out)) != len(out):
        raise ValueError(f'colours names a colour for two classes: {out}')
    return tuple(out)


def _packed(rgb: np.ndarray) -> np.ndarray:
    """``H×W×3`` uint8 RGB as one ``0xRRGGBB`` integer per pixel."""
    rgb = rgb.astype(np.int32)
    return (rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2]


def colours_to_labels(rgb: np.ndarray, colours: Sequence[Colour],
                      threshold: Optional[int] = None, ignore_index: int = 255) -> np.ndarray:
    """The ``H×W`` uint8 label map of an ``H×W×3`` RGB colour mask: the index of each
    pixel's colour in ``colours``, ``ignore_index`` for other colours; with ``threshold``
    every channel is first set to 255 where it is ``>= threshold``, else to 0.

    Raises:
        ValueError: not an ``H×W×3`` array.
    """
    if rgb.ndim != 3 or rgb.shape[2] != 3:
        raise ValueError(f'a colour mask is H x W x 3, got shape {rgb.shape}')
    if threshold is not None:
        rgb = np.where(rgb >= threshold, 255, 0)
    packed = _packed(rgb)
    labels = np.full(packed.shape, ignore_index, np.uint8)
    for index, colour in enumerate(colours):
        labels[packed == _packed(np.asarray(colour).reshape(1, 1, 3))[0, 0]] = index
    return labels


@TRANSFORMS.register_module()
class LoadAnnotationsFromColours(BaseTransform):
    """Load a colour-coded label image as a label map (see the module docstring).

    Required Keys:

    - seg_map_path
    - label_map (optional), reduce_zero_label (optional: must not be True)

    Added Keys:

    - gt_seg_map (uint8 ``H×W``), seg_fields

    Args:
        colours: the RGB colour of each class, in class order.
        threshold: None (colours are matched exactly), or binarise each channel at this
            value first (``>= threshold`` is 255); then every colour must be binary (each
            channel 0 or 255).
        ignore_index: the label of pixels of no class's colour.
        backend_args: file backend arguments, as ``LoadAnnotations`` takes them.

    Raises:
        ValueError: bad arguments (when built). RuntimeError (when applied): a sample
            without ``seg_map_path`` or one loaded with ``reduce_zero_label``.
    """

    def __init__(self, colours: Sequence[Sequence[int]], threshold: Optional[int] = None,
                 ignore_index: int = 255, backend_args: Optional[dict] = None) -> None:
        self.colours = _check_colours(colours)
        if threshold is not None:
            if not _is_int(threshold) or not 1 <= threshold <= 255:
                raise ValueError(f'threshold must be None or an integer in 1..255 (DeepGlobe: '
                                 f'128), got {threshold!r}')
            odd = [c for c in self.colours if any(v not in (0, 255) for v in c)]
            if odd:
                raise ValueError(f'with threshold={threshold} every channel is 0 or 255, so '
                                 f'the colours {odd} can never match: give binary colours')
        self.threshold = None if threshold is None else int(threshold)
        if not _is_int(ignore_index) or not len(self.colours) <= ignore_index <= 255:
            raise ValueError(f'ignore_index must be an integer in {len(self.colours)}..255 '
                             f'(not a class index), got {ignore_index!r}')
        self.ignore_index = int(ignore_index)
        self.backend_args = dict(backend_args) if backend_args else None

    def transform(self, results: Dict[str, Any]) -> Dict[str, Any]:
        path = results.get('seg_map_path')
        if not path:
            raise RuntimeError('LoadAnnotationsFromColours needs the sample\'s seg_map_path; '
                               f'the sample has keys {sorted(results)}')
        if results.get('reduce_zero_label'):
            raise RuntimeError('LoadAnnotationsFromColours: the dataset loads with '
                               'reduce_zero_label, which has no meaning for colour labels '
                               f'(unmatched colours are ignored already) ({path})')
        rgb = mmcv.imfrombytes(fileio.get(path, backend_args=self.backend_args),
                               flag='color', channel_order='rgb', backend='cv2')
        labels = colours_to_labels(rgb, self.colours, self.threshold, self.ignore_index)
        label_map = results.get('label_map')
        if label_map:
            mapped = labels.copy()
            for old, new in label_map.items():
                mapped[labels == old] = new
            labels = mapped
        results['gt_seg_map'] = labels
        results.setdefault('seg_fields', []).append('gt_seg_map')
        return results

    def __repr__(self) -> str:
        return (f'{type(self).__name__}(colours={list(self.colours)}, threshold='
                f'{self.threshold}, ignore_index={self.ignore_index})')
