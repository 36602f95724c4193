"""A grid of one image under every corruption and severity, labels overlaid.

Rows are corruptions, columns clean + severities 1..5. Geometric corruptions move
the overlaid labels with the same transform as the pixels.
"""
from __future__ import annotations

from typing import List, Optional, Sequence

import cv2
import numpy as np

from .api import corrupt, corrupt_geometric
from .base import get_corruption, list_corruptions

__all__ = ['corruption_grid', 'POTSDAM_PALETTE']

# ISPRS colour code, RGB, for label ids 1..6 of the Potsdam converter (0 = boundary)
POTSDAM_PALETTE = np.array([[0, 0, 0], [255, 255, 255], [0, 0, 255], [0, 255, 255],
                            [0, 255, 0], [255, 255, 0], [255, 0, 0]], np.uint8)


def _overlay_map(tile: np.ndarray, label_map: np.ndarray, ignore_index: int) -> np.ndarray:
    colours = POTSDAM_PALETTE[np.clip(label_map, 0, len(POTSDAM_PALETTE) - 1)]
    blended = (0.6 * tile + 0.4 * colours).astype(np.uint8)
    blended[label_map == ignore_index] = tile[label_map == ignore_index]
    return blended


def _draw_polygons(tile: np.ndarray, polygons: np.ndarray, scale: float) -> np.ndarray:
    tile = np.ascontiguousarray(tile)
    for polygon in polygons:
        pts = np.round((polygon.reshape(-1, 2) - 0.5) * scale * 4).astype(np.int32)
        cv2.polylines(tile, [pts], True, (255, 0, 0), 1, cv2.LINE_AA, 2)
    return tile


FONT, FONT_SCALE = cv2.FONT_HERSHEY_SIMPLEX, 0.45


def _text_width(text: str) -> int:
    return cv2.getTextSize(text, FONT, FONT_SCALE, 1)[0][0]


def _column_titles(tile_width: int) -> List[str]:
    """The longest of ``severity k`` / ``sev k`` / ``k`` that fits over a tile."""
    for form in ('severity {}', 'sev {}', '{}'):
        titles = ['clean' if form != '{}' else '0'] + [form.format(s) for s in range(1, 6)]
        if max(_text_width(t) for t in titles) <= tile_width - 2:
            return titles
    return titles


def corruption_grid(image: np.ndarray, protocol: str = 'reobench',
                    corruptions: Optional[Sequence[str]] = None, *, seed: int = 0,
                    key: str = 'preview', tile_size: int = 160,
                    label_map: Optional[np.ndarray] = None,
                    polygons: Optional[np.ndarray] = None,
                    ignore_index: int = 255) -> np.ndarray:
    """Render the grid as one ``uint8`` RGB image.

    Args:
        image: ``H×W×3`` RGB ``uint8`` (other band counts: the first 3 bands shown).
        label_map: optional Potsdam label ids (``H×W``) to overlay.
        polygons: optional ``(N, 8)`` box/polygon corners (pixel-edge coordinates).
    """
    names: List[str] = list(corruptions) if corruptions else list_corruptions(protocol)
    h, w = image.shape[:2]
    scale = tile_size / max(h, w)
    th, tw = max(1, round(h * scale)), max(1, round(w * scale))
    # the label column fits the longest name; column titles shrink to fit small tiles
    header, label_width = 22, max(_text_width(name) for name in names) + 12
    grid = np.full((header + len(names) * (th + 4), label_width + 6 * (tw + 4), 3), 255,
                   np.uint8)
    for col, title in enumerate(_column_titles(tw)):
        cv2.putText(grid, title, (label_width + col * (tw + 4) + 1, 15), FONT, FONT_SCALE,
                    (0, 0, 0), 1, cv2.LINE_AA)
    for row, name in enumerate(names):
        spec = get_corruption(name, protocol)
        y0 = header + row * (th + 4)
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
                    polys = geometry.apply_to_points(
                        np.asarray(polys, np.float64).reshape(len(polys), -1, 2))
            else:
                out = corrupt(image, name, severity, seed=seed, key=key, protocol=protocol)
            tile = out[..., :3] if out.ndim == 3 else np.repeat(out[..., None], 3, axis=2)
            if tile.shape[2] == 1:
                tile = np.repeat(tile, 3, axis=2)
            if labels is not None:
                tile = _overlay_map(tile, labels, ignore_index)
            tile = cv2.resize(tile, (tw, th), interpolation=cv2.INTER_AREA)
            if polys is not None:
                tile = _draw_polygons(tile, np.asarray(polys), scale)
            x0 = label_width + severity * (tw + 4)
            grid[y0:y0 + th, x0:x0 + tw] = tile
    return grid
