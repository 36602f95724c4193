"""Shifted synthetic test sets: an out-of-distribution partner for each demo dataset.

The demo models are trained on :mod:`~reobench_mm.datasets.synthetic`'s scenes; these
sets are drawn by the same scene generators and then changed the way a real shift
changes imagery, so that the demo (and the tests) can evaluate a real-shift condition
without downloading anything:

- ``potsdam_shifted`` (the Potsdam → Vaihingen kind of shift: ``sensor`` and ``scale``):
  each tile is a 2 × 2 mosaic of scenes shrunk to one tile (twice the ground sampling
  distance), shown as a near-infrared / red / green composite like Vaihingen's
  orthophotos: vegetation bright in the first band
  (:func:`near_infrared_composite`). Same layout and label ids as the demo Potsdam set
  (``img_dir/val``, ``ann_dir/val``).
- ``dior_shifted`` (``scale`` and ``geographic``): 2 × 2 mosaics of scenes at twice the
  ground sampling distance with an arid colour balance (:func:`arid_palette`); the boxes
  are moved and scaled with the scenes. Same DIOR-R layout (test split only).

Nothing here is fingerprinted as code: it writes data, which the data part of the
fingerprint covers.
"""
from __future__ import annotations

import os.path as osp
from typing import Dict, List, Tuple

import cv2
import numpy as np

from .synthetic import (POTSDAM_LABEL_IDS, OrientedObject, draw_dior_scene,
                        draw_potsdam_scene, write_dior, write_potsdam)

__all__ = ['SHIFTED_DATA_VERSION', 'SHIFTED_SETS', 'near_infrared_composite', 'arid_palette',
           'draw_potsdam_shifted', 'draw_dior_shifted', 'write_shifted_demo_data',
           'MOSAIC']

#: Bumped whenever the shifted scenes change.
SHIFTED_DATA_VERSION = 1
#: Folder of each shifted set under the demo data root -> the demo dataset it shifts.
SHIFTED_SETS = {'potsdam_shifted': 'potsdam', 'dior_shifted': 'dior'}
#: Scenes per side of a mosaic: the ground sampling distance grows by this factor.
MOSAIC = 2
_SEED_OFFSET = 7919  # other scenes than the demo sets' own
_VEGETATION = (POTSDAM_LABEL_IDS['low_vegetation'], POTSDAM_LABEL_IDS['tree'])


def near_infrared_composite(image: np.ndarray, label: np.ndarray) -> np.ndarray:
    """An RGB tile as a near-infrared / red / green composite (IRRG, Vaihingen's band
    order): the first band is a near-infrared response, high on vegetation (label ids
    low vegetation and tree) and about the brightness elsewhere; then red and green."""
    rgb = image.astype(np.float32)
    brightness = rgb.mean(axis=2)
    vegetation = np.isin(label, _VEGETATION)
    nir = np.where(vegetation, 150.0 + 0.6 * rgb[..., 1], 0.85 * brightness)
    out = np.stack([nir, rgb[..., 0], rgb[..., 1]], axis=2)
    return np.clip(np.round(out), 0, 255).astype(np.uint8)


def arid_palette(image: np.ndarray) -> np.ndarray:
    """A drier, brighter colour balance (more red, less blue), as scenes of another
    climate zone look."""
    out = image.astype(np.float32) * np.array([1.12, 1.02, 0.78], np.float32) + 12.0
    return np.clip(np.round(out), 0, 255).astype(np.uint8)


def _shrink(mosaic: np.ndarray, size: int, nearest: bool) -> np.ndarray:
    mode = cv2.INTER_NEAREST if nearest else cv2.INTER_AREA
    return cv2.resize(mosaic, (size, size), interpolation=mode)


def draw_potsdam_shifted(rng: np.random.Generator, size: int) -> Tuple[np.ndarray, np.ndarray]:
    """One ``potsdam_shifted`` tile: ``(IRRG image, label ids)``."""
    tiles = [draw_potsdam_scene(rng, size) for _ in range(MOSAIC * MOSAIC)]
    rows = [np.concatenate([t[k] for t in tiles[r * MOSAIC:(r + 1) * MOSAIC]], axis=1)
            for k in (0, 1) for r in range(MOSAIC)]
    image = _shrink(np.concatenate(rows[:MOSAIC], axis=0), size, nearest=False)
    label = _shrink(np.concatenate(rows[MOSAIC:], axis=0), size, nearest=True)
    return near_infrared_composite(image, label), label


def draw_dior_shifted(rng: np.random.Generator, size: int
                      ) -> Tuple[np.ndarray, List[OrientedObject]]:
    """One ``dior_shifted`` scene: ``(image, objects)``, the objects' corners moved with
    their scene and scaled with the mosaic."""
    canvas = np.zeros((MOSAIC * size, MOSAIC * size, 3), np.uint8)
    objects: List[OrientedObject] = []
    for index in range(MOSAIC * MOSAIC):
        row, col = divmod(index, MOSAIC)
        image, found = draw_dior_scene(rng, size)
        canvas[row * size:(row + 1) * size, col * size:(col + 1) * size] = image
        offset = np.array([col * size, row * size], np.float64)
        objects += [OrientedObject(o.name, (np.asarray(o.corners) + offset) / MOSAIC,
                                   o.angle_deg) for o in found]
    return arid_palette(_shrink(canvas, size, nearest=False)), objects


def write_shifted_demo_data(root: str, seed: int = 0, num_test: int = 8,
                            size: int = 256) -> Dict[str, Dict[str, int]]:
    """Write ``potsdam_shifted/`` and ``dior_shifted/`` under ``root`` (test images
    only); returns the image counts per set and split."""
    seed = seed + _SEED_OFFSET
    return {
        'potsdam_shifted': write_potsdam(osp.join(root, 'potsdam_shifted'), 0, num_test,
                                         size, seed, draw=draw_potsdam_shifted),
        'dior_shifted': write_dior(osp.join(root, 'dior_shifted'), 0, num_test, size, seed,
                                   draw=draw_dior_shifted),
    }
