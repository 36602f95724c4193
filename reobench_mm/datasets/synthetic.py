"""Synthetic aerial scenes in the ISPRS Potsdam and DIOR-R on-disk formats.

The embedded demo and test data of the project: small, generated from a seed, and
laid out exactly as MMSegmentation's ``PotsdamDataset`` and MMRotate's
``DIORDataset`` read them, so that every pipeline runs unchanged on them.

Scenes are drawn with OpenCV from layered procedural textures (grass, asphalt with
lane markings, gabled roofs with cast shadows, tree crowns, oriented cars; water with
ships, aprons with airplanes, tank farms, parking lots) so that a tiny model learns
something within CPU minutes and corruptions (cloud, blur, noise, ...) visibly hurt it.

Determinism: every image is drawn from its own generator seeded by
``(seed, dataset, split, index)``, and the encoders (PNG, baseline JPEG) are
deterministic, so the same seed gives the same bytes whatever the number of images.
This module uses only numpy and OpenCV.
"""
from __future__ import annotations

import os
import os.path as osp
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple
from xml.sax.saxutils import escape

import cv2
import numpy as np

__all__ = [
    'SYNTHETIC_DATA_VERSION', 'POTSDAM_CLASSES', 'POTSDAM_LABEL_IDS', 'DIOR_DEMO_CLASSES', 'OrientedObject',
    'draw_potsdam_scene', 'draw_dior_scene', 'write_potsdam', 'write_dior',
    'make_demo_data', 'oriented_box_corners'
]

# Label ids as written by MMSegmentation's Potsdam converter: 0 is the (ignored)
# boundary/no-data value, ``PotsdamDataset(reduce_zero_label=True)`` maps 1..6 to 0..5.
POTSDAM_CLASSES = ('impervious_surface', 'building', 'low_vegetation', 'tree', 'car',
                   'clutter')
POTSDAM_LABEL_IDS = {name: i + 1 for i, name in enumerate(POTSDAM_CLASSES)}
_IMPERVIOUS, _BUILDING, _LOW_VEG, _TREE, _CAR, _CLUTTER = range(1, 7)

# Bumped whenever the drawing changes, so that stale generated data is detected.
SYNTHETIC_DATA_VERSION = 2

# DIOR-R class names (as in the official annotations) used by the demo data.
DIOR_DEMO_CLASSES = ('airplane', 'ship', 'storagetank', 'vehicle')

_DATASET_IDS = {'potsdam': 1, 'dior': 2}
#: ``draw(rng, size) -> (image, labels)``: one tile of a writer
SceneDrawer = Callable[[np.random.Generator, int], Tuple[np.ndarray, Any]]
_SPLIT_IDS = {'train': 1, 'val': 2, 'test': 3, 'trainval': 4}


def _rng(seed: int, dataset: str, split: str, index: int) -> np.random.Generator:
    return np.random.default_rng([seed, _DATASET_IDS[dataset], _SPLIT_IDS[split], index])


# ----------------------------------------------------------------------------- textures
def _smooth_noise(rng: np.random.Generator, shape: Tuple[int, int], cell: float,
                  octaves: int = 3) -> np.ndarray:
    """Fractal value noise in about [-1, 1]: bicubic upsampling of random grids."""
    h, w = shape
    out = np.zeros((h, w), np.float32)
    amplitude, total = 1.0, 0.0
    for _ in range(octaves):
        gh, gw = max(2, int(np.ceil(h / cell)) + 1), max(2, int(np.ceil(w / cell)) + 1)
        grid = rng.standard_normal((gh, gw)).astype(np.float32)
        out += amplitude * cv2.resize(grid, (w, h), interpolation=cv2.INTER_CUBIC)
        total += amplitude
        amplitude *= 0.5
        cell = max(1.0, cell / 2)
    return out / total


def _texture(rng: np.random.Generator, shape: Tuple[int, int], colour: Sequence[float],
             cell: float, strength: float, grain: float) -> np.ndarray:
    """An RGB float image: a base colour modulated by smooth noise plus fine grain."""
    low = _smooth_noise(rng, shape, cell)[..., None]
    fine = rng.standard_normal(shape + (1, )).astype(np.float32)
    base = np.asarray(colour, np.float32)[None, None, :]
    return base * (1.0 + strength * low) + grain * fine


def _paint(image: np.ndarray, mask: np.ndarray, layer: np.ndarray) -> None:
    image[mask] = layer[mask]


def oriented_box_corners(cx: float, cy: float, length: float, width: float,
                         angle: float) -> np.ndarray:
    """Corners (4, 2) of a box of ``length`` along ``angle`` (radians, image axes).

    Order: left-top, right-top, right-bottom, left-bottom in the box's own frame,
    which is the corner order of DIOR-R's ``robndbox``.
    """
    u = np.array([np.cos(angle), np.sin(angle)]) * length / 2
    v = np.array([-np.sin(angle), np.cos(angle)]) * width / 2
    c = np.array([cx, cy])
    return np.stack([c - u - v, c + u - v, c + u + v, c - u + v])


def _fill(mask_shape: Tuple[int, int], polygon: np.ndarray) -> np.ndarray:
    mask = np.zeros(mask_shape, np.uint8)
    cv2.fillPoly(mask, [np.round(polygon * 16).astype(np.int32)], 1, cv2.LINE_AA, 4)
    return mask.astype(bool)


def _shadow(image: np.ndarray, casters: np.ndarray, receivers: np.ndarray,
            offset: Tuple[int, int], darkness: float) -> None:
    """Darken ``receivers`` where the ``casters`` mask, shifted by ``offset``, falls."""
    dx, dy = offset
    shifted = np.zeros_like(casters)
    h, w = casters.shape
    shifted[max(dy, 0):h + min(dy, 0), max(dx, 0):w + min(dx, 0)] = \
        casters[max(-dy, 0):h - max(dy, 0), max(-dx, 0):w - max(dx, 0)]
    region = shifted & receivers
    image[region] *= darkness


def _finish(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Sensor look: per-image colour balance, optics blur, noise, 8-bit quantisation."""
    gain = rng.uniform(0.9, 1.1, size=3).astype(np.float32)
    image = image * gain[None, None, :]
    image = cv2.GaussianBlur(image, (0, 0), 0.7)
    image += rng.normal(0.0, 2.0, image.shape).astype(np.float32)
    return np.clip(np.round(image), 0, 255).astype(np.uint8)


# ------------------------------------------------------------------------ Potsdam scene
_ROOF_COLOURS = ((168, 84, 62), (150, 70, 55), (92, 92, 98), (175, 172, 165),
                 (120, 100, 90), (190, 120, 90))
_CAR_COLOURS = ((235, 235, 235), (30, 30, 35), (170, 30, 30), (40, 60, 150),
                (160, 165, 170), (210, 200, 60))


def _draw_car(image: np.ndarray, label: np.ndarray, rng: np.random.Generator,
              cx: float, cy: float, angle: float, length: float) -> None:
    corners = oriented_box_corners(cx, cy, length, length * 0.45, angle)
    body = _fill(label.shape, corners)
    colour = np.asarray(_CAR_COLOURS[rng.integers(len(_CAR_COLOURS))], np.float32)
    image[body] = colour
    # windscreen: a dark band across the front third
    front = oriented_box_corners(cx + np.cos(angle) * length * 0.18,
                                 cy + np.sin(angle) * length * 0.18, length * 0.16,
                                 length * 0.38, angle)
    image[_fill(label.shape, front)] = (25, 30, 40)
    label[body] = _CAR


def draw_potsdam_scene(rng: np.random.Generator,
                       size: int = 256) -> Tuple[np.ndarray, np.ndarray]:
    """Draw one Potsdam-like tile.

    Returns:
        ``(image, label)``: ``uint8`` RGB ``(size, size, 3)`` and ``uint8`` label ids
        ``(size, size)`` with the values of :data:`POTSDAM_LABEL_IDS`.
    """
    shape = (size, size)
    label = np.full(shape, _LOW_VEG, np.uint8)
    image = _texture(rng, shape, (96, 126, 62), cell=size / 6, strength=0.18, grain=6)

    # roads with sidewalks and dashed lane markings
    road_dirs = []
    for _ in range(rng.integers(1, 3)):
        horizontal = rng.random() < 0.5
        oblique = rng.uniform(-0.25, 0.25) if rng.random() < 0.3 else 0.0
        width = rng.uniform(0.07, 0.11) * size
        pos = rng.uniform(0.2, 0.8) * size
        angle = oblique if horizontal else np.pi / 2 + oblique
        centre = np.array([size / 2, pos]) if horizontal else np.array([pos, size / 2])
        along = np.array([np.cos(angle), np.sin(angle)])
        road = _fill(shape, oriented_box_corners(*centre, size * 3, width, angle))
        walk = _fill(shape, oriented_box_corners(*centre, size * 3, width * 1.6, angle))
        _paint(image, walk & ~road, _texture(rng, shape, (178, 172, 160), size / 16, 0.08, 5))
        _paint(image, road, _texture(rng, shape, (118, 118, 122), size / 10, 0.1, 7))
        label[walk] = _IMPERVIOUS
        for t in np.arange(-1.5 * size, 1.5 * size, size * 0.12):
            p = centre + along * t
            dash = _fill(shape, oriented_box_corners(*p, size * 0.05, 1.6, angle))
            image[dash] = (235, 235, 230)
        road_dirs.append((centre, along, angle, width))

    # a paved yard or parking lot
    if rng.random() < 0.7:
        cx, cy = rng.uniform(0.15, 0.85, 2) * size
        lot = _fill(shape, oriented_box_corners(cx, cy, *rng.uniform(0.15, 0.3, 2) * size,
                                                rng.uniform(0, np.pi)))
        _paint(image, lot, _texture(rng, shape, (150, 148, 145), size / 12, 0.08, 6))
        label[lot] = _IMPERVIOUS

    # clutter: bare soil or containers
    for _ in range(rng.integers(0, 3)):
        cx, cy = rng.uniform(0.1, 0.9, 2) * size
        axes = tuple(int(a) for a in rng.uniform(0.03, 0.08, 2) * size)
        blob = np.zeros(shape, np.uint8)
        cv2.ellipse(blob, (int(cx), int(cy)), axes, float(rng.uniform(0, 180)), 0, 360, 1, -1)
        blob = blob.astype(bool) & (label == _LOW_VEG)
        colour = (140, 110, 80) if rng.random() < 0.6 else tuple(rng.uniform(60, 230, 3))
        _paint(image, blob, _texture(rng, shape, colour, size / 20, 0.15, 8))
        label[blob] = _CLUTTER

    # buildings: gabled roofs, placed off the roads
    building_mask = np.zeros(shape, bool)
    for _ in range(rng.integers(2, 6)):
        for _attempt in range(20):
            cx, cy = rng.uniform(0.1, 0.9, 2) * size
            length, width = rng.uniform(0.14, 0.32) * size, rng.uniform(0.1, 0.18) * size
            angle = rng.choice([0.0, np.pi / 2]) + rng.uniform(-0.1, 0.1)
            corners = oriented_box_corners(cx, cy, length, width, angle)
            footprint = _fill(shape, corners)
            margin = cv2.dilate(footprint.astype(np.uint8), np.ones((5, 5), np.uint8)) > 0
            if (np.any(margin & (label == _IMPERVIOUS) & ~building_mask)
                    or np.any(margin & building_mask)):
                continue
            colour = np.asarray(_ROOF_COLOURS[rng.integers(len(_ROOF_COLOURS))], np.float32)
            half = _fill(shape, oriented_box_corners(
                cx - np.sin(angle) * width / 4, cy + np.cos(angle) * width / 4,
                length, width / 2, angle))
            lit = _texture(rng, shape, colour * 1.08, size / 24, 0.06, 4)
            _paint(image, footprint, lit)
            image[footprint & half] *= 0.72
            ridge = _fill(shape, oriented_box_corners(cx, cy, length, 1.5, angle))
            image[ridge] = colour * 0.55
            label[footprint] = _BUILDING
            building_mask |= footprint
            break

    # cars on the roads, aligned with them
    for centre, along, angle, width in road_dirs:
        normal = np.array([-along[1], along[0]])
        for _ in range(rng.integers(2, 7)):
            t = rng.uniform(-0.5, 0.5) * size
            lane = rng.choice([-1, 1]) * width * 0.25
            cx, cy = centre + along * t + normal * lane
            heading = angle + (np.pi if lane < 0 else 0.0)
            if 4 < cx < size - 4 and 4 < cy < size - 4:
                _draw_car(image, label, rng, cx, cy, heading, size * rng.uniform(0.045, 0.055))
    # parked cars on paved ground
    paved = np.argwhere(label == _IMPERVIOUS)
    for _ in range(rng.integers(0, 5) if len(paved) else 0):
        cy, cx = paved[rng.integers(len(paved))]
        _draw_car(image, label, rng, float(cx), float(cy), float(rng.uniform(0, np.pi)),
                  size * rng.uniform(0.045, 0.055))

    # trees: clustered round crowns, overhanging anything but roofs, lit from the
    # top-left (the side away from the cast shadows) with a leafy texture
    tree_mask = np.zeros(shape, bool)
    lighting = np.ones(shape, np.float32)
    ys, xs = np.mgrid[0:size, 0:size].astype(np.float32)
    for _ in range(rng.integers(2, 6)):
        gx, gy = rng.uniform(0, 1, 2) * size
        for _ in range(rng.integers(2, 9)):
            cx, cy = np.array([gx, gy]) + rng.normal(0, 0.06, 2) * size
            radius = rng.uniform(0.025, 0.05) * size
            crown = np.zeros(shape, np.uint8)
            cv2.circle(crown, (int(cx * 4), int(cy * 4)), int(radius * 4), 1, -1, cv2.LINE_AA, 2)
            crown = crown.astype(bool) & ~building_mask
            toward_sun = -((xs - cx) + (ys - cy)) / (radius * np.sqrt(2.0))
            lighting[crown] = 1.0 + 0.35 * np.clip(toward_sun[crown], -1.0, 1.0)
            tree_mask |= crown
    leaves = _smooth_noise(rng, shape, max(2.0, size / 64), octaves=2)[..., None]
    crowns = np.asarray((50, 96, 38), np.float32) * lighting[..., None] * (1.0 + 0.3 * leaves)
    crowns += rng.normal(0, 4, crowns.shape).astype(np.float32)

    # shadows of roofs and crowns on the ground, then the crowns themselves
    _shadow(image, building_mask | tree_mask, ~building_mask & ~tree_mask,
            (int(size * 0.02) + 1, int(size * 0.025) + 1), 0.62)
    _paint(image, tree_mask, crowns)
    label[tree_mask] = _TREE
    return _finish(image, rng), label


# -------------------------------------------------------------------------- DIOR scene
@dataclass(frozen=True)
class OrientedObject:
    """One annotated object: DIOR-R class name and its 4 corners (x, y) in pixels."""
    name: str
    corners: np.ndarray
    angle_deg: float


def _airplane_polygon(cx: float, cy: float, length: float, angle: float) -> np.ndarray:
    # local frame: x along the fuselage (nose at +x), y across
    span = length * 0.95
    pts = np.array([
        (0.5, 0.0), (0.38, 0.05), (0.1, 0.06), (-0.05, span / length / 2),
        (-0.15, span / length / 2), (-0.05, 0.06), (-0.38, 0.05), (-0.48, 0.2),
        (-0.52, 0.2), (-0.5, 0.0), (-0.52, -0.2), (-0.48, -0.2), (-0.38, -0.05),
        (-0.05, -0.06), (-0.15, -span / length / 2), (-0.05, -span / length / 2),
        (0.1, -0.06), (0.38, -0.05)
    ]) * length
    rot = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    return pts @ rot.T + np.array([cx, cy])


def _ship_polygon(cx: float, cy: float, length: float, width: float,
                  angle: float) -> np.ndarray:
    pts = np.array([(0.5, 0.0), (0.32, 0.5), (-0.5, 0.5), (-0.5, -0.5), (0.32, -0.5)])
    pts = pts * np.array([length, width])
    rot = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    return pts @ rot.T + np.array([cx, cy])


def _place(rng: np.random.Generator, occupied: np.ndarray, region: np.ndarray,
           corners_fn, attempts: int = 30):
    """Rejection-sample a box that lies inside ``region`` and overlaps nothing."""
    for _ in range(attempts):
        corners, payload = corners_fn()
        h, w = occupied.shape
        if corners.min() < 0 or corners[:, 0].max() > w - 1 or corners[:, 1].max() > h - 1:
            continue  # the rasterised mask is clipped, so test the corners themselves
        mask = _fill(occupied.shape, corners)
        if mask.sum() < 4 or np.any(mask & occupied) or np.any(mask & ~region):
            continue
        occupied |= cv2.dilate(mask.astype(np.uint8), np.ones((3, 3), np.uint8)) > 0
        return corners, payload
    return None


def draw_dior_scene(rng: np.random.Generator,
                    size: int = 256) -> Tuple[np.ndarray, List[OrientedObject]]:
    """Draw one DIOR-like scene: land, optionally water, and 2-3 object groups.

    Returns:
        ``(image, objects)``: ``uint8`` RGB ``(size, size, 3)`` and the annotated
        objects, all fully inside the image.
    """
    shape = (size, size)
    image = _texture(rng, shape, (150, 140, 118), size / 5, 0.15, 6)
    occupied = np.zeros(shape, bool)
    objects: List[OrientedObject] = []
    groups = list(rng.permutation(DIOR_DEMO_CLASSES)[:rng.integers(2, 4)])

    def add(name: str, corners: np.ndarray, angle: float) -> None:
        deg = float(np.degrees(angle) % 180.0)
        objects.append(OrientedObject(name, corners, round(deg, 2)))

    if 'ship' in groups:  # water body on one side with a straight shoreline
        side = rng.integers(4)
        extent = rng.uniform(0.35, 0.55) * size
        water = np.zeros(shape, bool)
        sl = {0: np.s_[:int(extent), :], 1: np.s_[-int(extent):, :],
              2: np.s_[:, :int(extent)], 3: np.s_[:, -int(extent):]}[side]
        water[sl] = True
        _paint(image, water, _texture(rng, shape, (38, 70, 84), size / 8, 0.12, 3))
        for _ in range(rng.integers(2, 6)):
            def ship():
                length = rng.uniform(0.09, 0.2) * size
                width = length * rng.uniform(0.22, 0.3)
                angle = rng.uniform(0, 2 * np.pi)
                cx, cy = rng.uniform(0.05, 0.95, 2) * size
                return oriented_box_corners(cx, cy, length, width, angle), (cx, cy, length,
                                                                             width, angle)
            placed = _place(rng, occupied, water, ship)
            if placed is None:
                continue
            corners, (cx, cy, length, width, angle) = placed
            wake = oriented_box_corners(cx - np.cos(angle) * length * 0.9,
                                        cy - np.sin(angle) * length * 0.9, length * 0.9,
                                        width * 0.8, angle)
            image[_fill(shape, wake) & water & ~occupied] += 25
            hull = _fill(shape, _ship_polygon(cx, cy, length, width, angle))
            image[hull] = rng.choice([(225, 225, 222), (180, 60, 50), (120, 125, 130)])
            deck = _fill(shape, oriented_box_corners(cx - np.cos(angle) * length * 0.15,
                                                     cy - np.sin(angle) * length * 0.15,
                                                     length * 0.3, width * 0.6, angle))
            image[deck] = (200, 200, 195)
            add('ship', corners, angle)
        land = ~water
    else:
        land = np.ones(shape, bool)

    if 'airplane' in groups:
        apron = np.zeros(shape, bool)
        cx, cy = rng.uniform(0.3, 0.7, 2) * size
        apron |= _fill(shape, oriented_box_corners(cx, cy, size * 0.7, size * 0.6,
                                                   rng.uniform(-0.2, 0.2)))
        apron &= land
        _paint(image, apron, _texture(rng, shape, (175, 175, 170), size / 10, 0.05, 4))
        for _ in range(rng.integers(1, 4)):
            def plane():
                length = rng.uniform(0.16, 0.26) * size
                angle = rng.uniform(0, 2 * np.pi)
                cx, cy = rng.uniform(0.1, 0.9, 2) * size
                return oriented_box_corners(cx, cy, length, length * 0.95,
                                            angle), (cx, cy, length, angle)
            placed = _place(rng, occupied, apron, plane)
            if placed is None:
                continue
            corners, (cx, cy, length, angle) = placed
            body = _fill(shape, _airplane_polygon(cx, cy, length, angle))
            _shadow(image, body, apron & ~body, (3, 3), 0.6)
            image[body] = (238, 238, 240)
            add('airplane', corners, angle)

    if 'storagetank' in groups:
        farm_centre = rng.uniform(0.25, 0.75, 2) * size
        for _ in range(rng.integers(2, 7)):
            def tank():
                radius = rng.uniform(0.035, 0.08) * size
                cx, cy = farm_centre + rng.normal(0, 0.15, 2) * size
                return oriented_box_corners(cx, cy, 2 * radius, 2 * radius, 0.0), (cx, cy,
                                                                                   radius)
            placed = _place(rng, occupied, land, tank)
            if placed is None:
                continue
            _, (cx, cy, radius) = placed
            disc = np.zeros(shape, np.uint8)
            cv2.circle(disc, (int(cx * 4), int(cy * 4)), int(radius * 4), 1, -1, cv2.LINE_AA, 2)
            disc = disc.astype(bool)
            _shadow(image, disc, land & ~disc, (int(radius * 0.35) + 1, int(radius * 0.35) + 1),
                    0.5)
            image[disc] = (215, 215, 210)
            inner = np.zeros(shape, np.uint8)
            cv2.circle(inner, (int(cx * 4), int(cy * 4)), int(radius * 0.75 * 4), 1, 1,
                       cv2.LINE_AA, 2)
            image[inner.astype(bool)] = (160, 160, 158)
            corners = oriented_box_corners(cx, cy, 2 * radius, 2 * radius, 0.0)
            add('storagetank', corners, 0.0)

    if 'vehicle' in groups:
        lot_angle = rng.uniform(0, np.pi)
        cx, cy = rng.uniform(0.3, 0.7, 2) * size
        lot = _fill(shape, oriented_box_corners(cx, cy, size * 0.5, size * 0.35, lot_angle))
        lot &= land & ~occupied
        _paint(image, lot, _texture(rng, shape, (95, 95, 100), size / 10, 0.08, 5))
        for _ in range(rng.integers(3, 10)):
            def vehicle():
                length = rng.uniform(0.045, 0.06) * size
                angle = lot_angle + np.pi / 2 + rng.choice([0.0, np.pi]) + rng.normal(0, 0.05)
                px, py = rng.uniform(0.1, 0.9, 2) * size
                return oriented_box_corners(px, py, length, length * 0.5,
                                            angle), (px, py, length, angle)
            placed = _place(rng, occupied, lot, vehicle)
            if placed is None:
                continue
            corners, (px, py, length, angle) = placed
            scratch = np.zeros(shape, np.uint8)
            _draw_car(image, scratch, rng, px, py, angle, length)
            add('vehicle', corners, angle)

    return _finish(image, rng), objects


# ------------------------------------------------------------------------------ writers
def _write_png(path: str, rgb_or_label: np.ndarray) -> None:
    array = rgb_or_label[..., ::-1] if rgb_or_label.ndim == 3 else rgb_or_label
    if not cv2.imwrite(path, np.ascontiguousarray(array), [cv2.IMWRITE_PNG_COMPRESSION, 6]):
        raise OSError(f'could not write {path}')


def write_potsdam(root: str, num_train: int = 16, num_val: int = 8, size: int = 256,
                  seed: int = 0, draw: Optional[SceneDrawer] = None) -> Dict[str, int]:
    """Write a Potsdam-format dataset as produced by MMSegmentation's converter.

    Layout: ``img_dir/{train,val}/*.png`` (RGB) and ``ann_dir/{train,val}/*.png``
    (label ids 1..6, see :data:`POTSDAM_LABEL_IDS`; read with
    ``reduce_zero_label=True``). Tile names follow the converter's
    ``{area}_{row}_{x0}_{y0}_{x1}_{y1}.png`` pattern. ``draw(rng, size)`` draws each
    tile (default :func:`draw_potsdam_scene`).
    """
    draw = draw or draw_potsdam_scene
    counts = {}
    for split, count in (('train', num_train), ('val', num_val)):
        if count < 0:
            raise ValueError(f'number of {split} images must be >= 0, got {count}')
        os.makedirs(osp.join(root, 'img_dir', split), exist_ok=True)
        os.makedirs(osp.join(root, 'ann_dir', split), exist_ok=True)
        area = 2 if split == 'train' else 6
        for index in range(count):
            image, label = draw(_rng(seed, 'potsdam', split, index), size)
            row, col = divmod(index, 8)
            name = f'{area}_{10 + row}_{col * size}_0_{(col + 1) * size}_{size}.png'
            _write_png(osp.join(root, 'img_dir', split, name), image)
            _write_png(osp.join(root, 'ann_dir', split, name), label)
        counts[split] = count
    return counts


def _dior_xml(filename: str, size: int, objects: Sequence[OrientedObject]) -> str:
    lines = [
        '<annotation>', '    <folder>JPEGImages</folder>',
        f'    <filename>{escape(filename)}</filename>', '    <source>',
        '        <database>reobench_mm synthetic</database>', '    </source>',
        '    <size>', f'        <width>{size}</width>', f'        <height>{size}</height>',
        '        <depth>3</depth>', '    </size>', '    <segmented>0</segmented>'
    ]
    keys = ('left_top', 'right_top', 'right_bottom', 'left_bottom')
    for obj in objects:
        corners = np.round(obj.corners).astype(int)
        lines += [
            '    <object>', '        <type>robndbox</type>',
            f'        <name>{escape(obj.name)}</name>', '        <pose>Unspecified</pose>',
            '        <truncated>0</truncated>', '        <difficult>0</difficult>',
            '        <robndbox>'
        ]
        for key, (x, y) in zip(keys, corners):
            lines += [f'            <x_{key}>{x}</x_{key}>', f'            <y_{key}>{y}</y_{key}>']
        lines += ['        </robndbox>', f'        <angle>{obj.angle_deg:g}</angle>',
                  '    </object>']
    lines.append('</annotation>')
    return '\n'.join(lines) + '\n'


def write_dior(root: str, num_trainval: int = 16, num_test: int = 8, size: int = 256,
               seed: int = 0, jpeg_quality: int = 95,
               draw: Optional[SceneDrawer] = None) -> Dict[str, int]:
    """Write a DIOR-R-format dataset as MMRotate's ``DIORDataset`` reads it.

    Layout: ``JPEGImages-trainval/*.jpg``, ``JPEGImages-test/*.jpg``,
    ``Annotations/Oriented Bounding Boxes/*.xml`` (``robndbox`` corners and angle)
    and ``ImageSets/Main/{trainval,test}.txt`` (image ids, one per line). ``draw(rng,
    size)`` draws each scene (default :func:`draw_dior_scene`).
    """
    draw = draw or draw_dior_scene
    ann_dir = osp.join(root, 'Annotations', 'Oriented Bounding Boxes')
    sets_dir = osp.join(root, 'ImageSets', 'Main')
    os.makedirs(ann_dir, exist_ok=True)
    os.makedirs(sets_dir, exist_ok=True)
    counts = {}
    offset = 1
    for split, count in (('trainval', num_trainval), ('test', num_test)):
        if count < 0:
            raise ValueError(f'number of {split} images must be >= 0, got {count}')
        img_dir = osp.join(root, f'JPEGImages-{split}')
        os.makedirs(img_dir, exist_ok=True)
        ids = []
        for index in range(count):
            image, objects = draw(_rng(seed, 'dior', split, index), size)
            image_id = f'{offset + index:05d}'
            path = osp.join(img_dir, image_id + '.jpg')
            if not cv2.imwrite(path, np.ascontiguousarray(image[..., ::-1]),
                               [cv2.IMWRITE_JPEG_QUALITY, jpeg_quality]):
                raise OSError(f'could not write {path}')
            with open(osp.join(ann_dir, image_id + '.xml'), 'w', encoding='utf-8') as f:
                f.write(_dior_xml(image_id + '.jpg', size, objects))
            ids.append(image_id)
        with open(osp.join(sets_dir, f'{split}.txt'), 'w', encoding='utf-8') as f:
            f.write(''.join(i + '\n' for i in ids))
        counts[split] = count
        offset += count
    return counts


#: Test tiles of the demo Potsdam set: 2 are held out for the temperature, and 10 images
#: let the exact paired permutation test reach p = 2 / 2^10 (below 0.05 after the
#: Benjamini-Hochberg correction over up to 25 numbers); 6 could never go below 0.031.
DEMO_POTSDAM_TEST = 12


def make_demo_data(root: str, seed: int = 0, num_train: int = 24, num_test: int = 8,
                   size: int = 256, num_potsdam_test: int = DEMO_POTSDAM_TEST
                   ) -> Dict[str, Dict[str, int]]:
    """Write both demo datasets under ``root``: ``potsdam/`` (``num_train`` training and
    ``num_potsdam_test`` test tiles) and ``dior/`` (``num_train`` and ``num_test``)."""
    if size < 32:
        raise ValueError(f'size must be >= 32 pixels, got {size}')
    return {
        'potsdam': write_potsdam(osp.join(root, 'potsdam'), num_train, num_potsdam_test, size,
                                 seed),
        'dior': write_dior(osp.join(root, 'dior'), num_train, num_test, size, seed),
    }


def tree_digest(root: str) -> str:
    """A CRC32 over every file's relative path and bytes under ``root`` (sorted)."""
    crc = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            path = osp.join(dirpath, name)
            crc = zlib.crc32(osp.relpath(path, root).encode(), crc)
            with open(path, 'rb') as f:
                crc = zlib.crc32(f.read(), crc)
    return f'{crc:08x}'
