"""A grid of one image under every corruption and severity, labels overlaid.

Rows are corruptions, columns clean + severities 1..5. Every corruption is applied to the
whole image; each tile then shows

- ``view='crop'`` (default): a crop of the corrupted image at real size, one image pixel
  to one grid pixel, so that noise, blur and compression artefacts look as a model sees
  them (``crop_size``, default 128, and ``crop_origin``, default centred);
- ``view='whole'``: the whole corrupted image, downscaled so that its longer side is
  ``tile_size`` pixels (default 160): the layout of the scene, not its pixels.

Labels are drawn over the tiles: a label map as a light wash of class colours
(``overlay_alpha``) with its class boundaries at full colour, boxes or polygons as red
outlines. Geometric corruptions move them with the same transform as the pixels, and a
crop shifts them with the pixels.
"""
from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral, Real
from typing import List, Optional, Sequence, Tuple, Union

import cv2
import numpy as np

from .api import corrupt, corrupt_geometric
from .base import get_corruption, list_corruptions

__all__ = ['corruption_grid', 'tile_view', 'TileView', 'overlay_label_map', 'class_boundaries',
           'POTSDAM_PALETTE', 'VIEWS', 'DEFAULT_CROP_SIZE', 'DEFAULT_TILE_SIZE',
           'DEFAULT_OVERLAY_ALPHA']

# ISPRS colour code, RGB, for label ids 1..6 of the Potsdam converter (0 = boundary)
POTSDAM_PALETTE = np.array([[0, 0, 0], [255, 255, 255], [0, 0, 255], [0, 255, 255],
                            [0, 255, 0], [255, 255, 0], [255, 0, 0]], np.uint8)

#: What a tile shows: a real-size crop or the whole image downscaled.
VIEWS = ('crop', 'whole')
#: Side of the real-size crop (image pixels) and of a downscaled whole-image tile.
DEFAULT_CROP_SIZE, DEFAULT_TILE_SIZE = 128, 160
#: Weight of the class colours blended over the image (the boundaries are opaque).
DEFAULT_OVERLAY_ALPHA = 0.2

BOX_COLOUR = (255, 0, 0)
FONT, FONT_SCALE = cv2.FONT_HERSHEY_SIMPLEX, 0.45
CAPTION, HEADER, GAP = 20, 22, 4  # heights of the caption and title bands, tile spacing


# ----------------------------------------------------------------------------- the view
@dataclass(frozen=True)
class TileView:
    """The part of the image a tile shows and its size in the grid.

    Attributes:
        x0, y0: top-left image pixel shown.
        width, height: image pixels shown.
        tile_width, tile_height: grid pixels of the tile (equal to ``width``, ``height``
            for a real-size crop).
        image_width, image_height: the whole image.
    """
    x0: int
    y0: int
    width: int
    height: int
    tile_width: int
    tile_height: int
    image_width: int
    image_height: int

    @property
    def real_size(self) -> bool:
        """True when one image pixel is one grid pixel."""
        return (self.tile_width, self.tile_height) == (self.width, self.height)

    @property
    def scale(self) -> Tuple[float, float]:
        """Grid pixels per image pixel, ``(x, y)``."""
        return self.tile_width / self.width, self.tile_height / self.height

    def pixels(self, image: np.ndarray) -> np.ndarray:
        """The tile of an image of the full size (area-averaged when downscaled)."""
        region = image[self.y0:self.y0 + self.height, self.x0:self.x0 + self.width]
        if self.real_size:
            return np.ascontiguousarray(region)
        return cv2.resize(np.ascontiguousarray(region), (self.tile_width, self.tile_height),
                          interpolation=cv2.INTER_AREA)

    def labels(self, label_map: np.ndarray) -> np.ndarray:
        """The tile of a label map (nearest neighbour at pixel centres when scaled)."""
        if self.real_size:
            return label_map[self.y0:self.y0 + self.height, self.x0:self.x0 + self.width]
        rows = self.y0 + ((np.arange(self.tile_height) + 0.5) * self.height /
                          self.tile_height).astype(np.int64)
        cols = self.x0 + ((np.arange(self.tile_width) + 0.5) * self.width /
                          self.tile_width).astype(np.int64)
        return label_map[rows[:, None], cols[None, :]]

    def points(self, points: np.ndarray) -> np.ndarray:
        """``(..., 2)`` x/y image points (pixel-edge coordinates) in tile pixel-edge
        coordinates."""
        return (np.asarray(points, np.float64) - (self.x0, self.y0)) * self.scale

    def describe(self) -> List[str]:
        """Captions from the longest to the shortest."""
        size = f'{self.image_width}x{self.image_height}'
        if self.real_size:
            crop, at = f'{self.width}x{self.height}', f'x={self.x0}, y={self.y0}'
            return [f'real size (1 image pixel = 1 grid pixel): {crop} crop at {at} of the '
                    f'{size} image', f'real size: {crop} crop at {at} of {size}',
                    f'1:1 {crop} at {self.x0},{self.y0}']
        factor = f'{self.tile_width / self.width:.3g}x'
        return [f'whole {size} image scaled {factor} to {self.tile_width}x'
                f'{self.tile_height} tiles (not real size)', f'whole {size}, scaled {factor}',
                factor]


def _pair(value, what: str) -> Tuple[int, int]:
    try:
        values = (value, value) if isinstance(value, Integral) else tuple(value)
    except TypeError:  # neither an integer nor a sequence
        values = ()
    if len(values) != 2 or not all(isinstance(v, Integral) and not isinstance(v, bool)
                                   for v in values):
        raise ValueError(f'{what} must be an integer or a pair of integers, got {value!r}')
    return int(values[0]), int(values[1])


def tile_view(image_shape: Sequence[int], view: str = 'crop', *,
              crop_size: Union[None, int, Sequence[int]] = None,
              crop_origin: Optional[Sequence[int]] = None,
              tile_size: Optional[int] = None) -> TileView:
    """Where the tiles of an image of ``image_shape`` (``H, W, ...``) come from.

    Args:
        view: ``'crop'`` (a real-size crop) or ``'whole'`` (the image downscaled).
        crop_size: ``'crop'``: side (or ``(width, height)``) of the crop in image pixels,
            default :data:`DEFAULT_CROP_SIZE`; clipped to the image.
        crop_origin: ``'crop'``: ``(x, y)`` of the crop's top-left pixel; default the
            crop centred in the image. The crop must lie inside the image.
        tile_size: ``'whole'``: the longer side of a tile in grid pixels, default
            :data:`DEFAULT_TILE_SIZE`.

    Raises:
        ValueError: an unknown view, a non-positive size, a crop outside the image, or
            an option of the other view.
    """
    height, width = int(image_shape[0]), int(image_shape[1])
    if view == 'whole':
        if crop_size is not None or crop_origin is not None:
            raise ValueError("crop_size and crop_origin set the crop of view='crop'; with "
                             "view='whole' the tile size is tile_size")
        size = DEFAULT_TILE_SIZE if tile_size is None else tile_size
        if not isinstance(size, Integral) or isinstance(size, bool) or size < 1:
            raise ValueError(f'tile_size must be an integer >= 1, got {size!r}')
        scale = size / max(height, width)
        return TileView(0, 0, width, height, max(1, round(width * scale)),
                        max(1, round(height * scale)), width, height)
    if view != 'crop':
        raise ValueError(f'view must be one of {list(VIEWS)}, got {view!r}')
    if tile_size is not None:
        raise ValueError("tile_size sets the tiles of view='whole'; a real-size crop is "
                         'sized by crop_size')
    cw, ch = _pair(DEFAULT_CROP_SIZE if crop_size is None else crop_size, 'crop_size')
    if cw < 1 or ch < 1:
        raise ValueError(f'crop_size must be >= 1 pixel, got {cw}x{ch}')
    cw, ch = min(cw, width), min(ch, height)
    if crop_origin is None:
        x0, y0 = (width - cw) // 2, (height - ch) // 2
    else:
        x0, y0 = _pair(crop_origin, 'crop_origin')
        if not (0 <= x0 <= width - cw and 0 <= y0 <= height - ch):
            raise ValueError(f'a {cw}x{ch} crop at x={x0}, y={y0} does not fit in the '
                             f'{width}x{height} image: x must be 0..{width - cw} and y '
                             f'0..{height - ch}')
    return TileView(x0, y0, cw, ch, cw, ch, width, height)


# ----------------------------------------------------------------------------- overlays
def class_boundaries(label_map: np.ndarray, ignore_index: int = 255) -> np.ndarray:
    """Boolean mask of the pixels next to (4-neighbour) a pixel of another class, on
    both sides of each boundary; ignored pixels and their edges are not boundaries."""
    labels = np.asarray(label_map)
    valid = labels != ignore_index
    mask = np.zeros(labels.shape, bool)
    for axis in (0, 1):
        a = [slice(None)] * 2
        b = [slice(None)] * 2
        a[axis], b[axis] = slice(None, -1), slice(1, None)
        a, b = tuple(a), tuple(b)
        differs = (labels[a] != labels[b]) & valid[a] & valid[b]
        mask[a] |= differs
        mask[b] |= differs
    return mask


def overlay_label_map(tile: np.ndarray, label_map: np.ndarray,
                      alpha: float = DEFAULT_OVERLAY_ALPHA, ignore_index: int = 255,
                      boundaries: Optional[np.ndarray] = None) -> np.ndarray:
    """``(1 - alpha) · tile + alpha · colour`` where the map has a label (rounded),
    the tile unchanged where it is ``ignore_index``, and the class colour itself on the
    ``boundaries`` mask (default :func:`class_boundaries` of the map)."""
    colours = POTSDAM_PALETTE[np.clip(label_map, 0, len(POTSDAM_PALETTE) - 1)]
    labelled = label_map != ignore_index
    blended = np.rint((1.0 - alpha) * tile.astype(np.float32) +
                      alpha * colours.astype(np.float32)).astype(np.uint8)
    out = np.where(labelled[..., None], blended, tile)
    if boundaries is None:
        boundaries = class_boundaries(label_map, ignore_index)
    out[boundaries] = colours[boundaries]
    return out


def _boundaries_in_view(label_map: np.ndarray, view: TileView,
                        ignore_index: int) -> np.ndarray:
    """The class boundaries of the tile: for a crop those of the full map (one pixel of
    context around the crop), for a downscaled tile those of its own labels."""
    if not view.real_size:
        return class_boundaries(view.labels(label_map), ignore_index)
    top, left = max(view.y0 - 1, 0), max(view.x0 - 1, 0)
    context = label_map[top:view.y0 + view.height + 1, left:view.x0 + view.width + 1]
    mask = class_boundaries(context, ignore_index)
    return mask[view.y0 - top:view.y0 - top + view.height,
                view.x0 - left:view.x0 - left + view.width]


def _draw_polygons(tile: np.ndarray, polygons: np.ndarray, view: TileView) -> np.ndarray:
    """Red outlines of ``(N, K, 2)`` image points: pixel-edge coordinates to the tile's
    pixel-centre coordinates, 2 bits of sub-pixel precision."""
    tile = np.ascontiguousarray(tile)
    for polygon in view.points(polygons):
        pts = np.round((polygon - 0.5) * 4).astype(np.int32)
        cv2.polylines(tile, [pts], True, BOX_COLOUR, 1, cv2.LINE_AA, 2)
    return tile


# ----------------------------------------------------------------------------- text
def _text_width(text: str) -> int:
    return cv2.getTextSize(text, FONT, FONT_SCALE, 1)[0][0]


def _column_titles(tile_width: int) -> List[str]:
    """The longest of ``severity k`` / ``sev k`` / ``k`` that fits over a tile."""
    for form in ('severity {}', 'sev {}', '{}'):
        titles = ['clean' if form != '{}' else '0'] + [form.format(s) for s in range(1, 6)]
        if max(_text_width(t) for t in titles) <= tile_width - 2:
            return titles
    return titles


def _fitting(texts: Sequence[str], width: int) -> str:
    """The first of ``texts`` at most ``width`` pixels wide ('' when none fits)."""
    return next((t for t in texts if _text_width(t) <= width), '')


def _rgb(image: np.ndarray) -> np.ndarray:
    """The first three bands (a single band repeated) as ``H×W×3``."""
    if image.ndim == 2:
        image = image[..., None]
    if image.shape[2] < 3:
        return np.repeat(image[..., :1], 3, axis=2)
    return image[..., :3]


# ----------------------------------------------------------------------------- the grid
def corruption_grid(image: np.ndarray, protocol: str = 'reobench',
                    corruptions: Optional[Sequence[str]] = None, *, seed: int = 0,
                    key: str = 'preview', view: str = 'crop',
                    crop_size: Union[None, int, Sequence[int]] = None,
                    crop_origin: Optional[Sequence[int]] = None,
                    tile_size: Optional[int] = None,
                    label_map: Optional[np.ndarray] = None,
                    polygons: Optional[np.ndarray] = None, ignore_index: int = 255,
                    overlay_alpha: float = DEFAULT_OVERLAY_ALPHA) -> np.ndarray:
    """Render the grid as one ``uint8`` RGB image.

    A caption band on top says what the tiles show (the crop and its position, or the
    scale of the whole image), a title band names the columns, the left column the rows.

    Args:
        image: ``H×W×3`` RGB ``uint8`` (other band counts: the first 3 bands shown).
        protocol, corruptions: the rows (default every corruption of the protocol).
        seed, key: the seed and the sample key of the corruptions' random draws (use the
            file name as the key, as the evaluation does).
        view, crop_size, crop_origin, tile_size: what a tile shows (:func:`tile_view`).
        label_map: optional Potsdam label ids (``H×W``) to overlay.
        polygons: optional ``(N, 2K)`` box/polygon corners (pixel-edge coordinates).
        ignore_index: the label map's value of unlabelled pixels (left unpainted).
        overlay_alpha: weight of the class colours over the image, 0..1 (0: class
            boundaries only).

    Raises:
        ValueError: a bad view option (see :func:`tile_view`) or ``overlay_alpha``.
    """
    names: List[str] = list(corruptions) if corruptions else list_corruptions(protocol)
    if not isinstance(overlay_alpha, Real) or not 0.0 <= overlay_alpha <= 1.0:
        raise ValueError(f'overlay_alpha must be a number in [0, 1], got {overlay_alpha!r}')
    shown = tile_view(image.shape, view, crop_size=crop_size, crop_origin=crop_origin,
                      tile_size=tile_size)
    th, tw = shown.tile_height, shown.tile_width
    if polygons is not None:
        polygons = np.asarray(polygons, np.float64).reshape(len(polygons), -1, 2)
    # the label column fits the longest name; column titles shrink to fit small tiles
    label_width = max(_text_width(name) for name in names) + 12
    top = CAPTION + HEADER
    grid = np.full((top + len(names) * (th + GAP), label_width + 6 * (tw + GAP), 3), 255,
                   np.uint8)
    cv2.putText(grid, _fitting(shown.describe(), grid.shape[1] - 8), (4, 14), FONT,
                FONT_SCALE, (0, 0, 0), 1, cv2.LINE_AA)
    for col, title in enumerate(_column_titles(tw)):
        cv2.putText(grid, title, (label_width + col * (tw + GAP) + 1, CAPTION + 15), FONT,
                    FONT_SCALE, (0, 0, 0), 1, cv2.LINE_AA)
    for row, name in enumerate(names):
        spec = get_corruption(name, protocol)
        y0 = top + row * (th + GAP)
        cv2.putText(grid, name, (4, y0 + th // 2), FONT, FONT_SCALE, (0, 0, 0), 1,
                    cv2.LINE_AA)
        for severity in range(6):
            labels, polys = label_map, polygons
            if spec.moves_labels:
                out, geometry = corrupt_geometric(image, name, severity, seed=seed, key=key,
                                                  protocol=protocol)
                if labels is not None:
                    labels = geometry.warp_label_map(labels, ignore_index)
                if polys is not None:
                    polys = geometry.apply_to_points(polys)
            else:
                out = corrupt(image, name, severity, seed=seed, key=key, protocol=protocol)
            tile = shown.pixels(_rgb(out))
            if labels is not None:
                tile = overlay_label_map(tile, shown.labels(labels), overlay_alpha,
                                         ignore_index,
                                         _boundaries_in_view(labels, shown, ignore_index))
            if polys is not None:
                tile = _draw_polygons(tile, polys, shown)
            x0 = label_width + severity * (tw + GAP)
            grid[y0:y0 + th, x0:x0 + tw] = tile
    return grid
