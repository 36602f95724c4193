"""ISPRS Potsdam: official 6000x6000 tiles -> 512x512 patches in MMSegmentation's layout.

Input (any mix of the official zips and already-extracted folders under ``src``):

- images: ``2_Ortho_RGB.zip`` (``top_potsdam_{a}_{b}_RGB.tif``) or ``3_Ortho_IRRG.zip``
  (``top_potsdam_{a}_{b}_IRRG.tif``);
- labels: ``5_Labels_all.zip`` (full reference, ``top_potsdam_{a}_{b}_label.tif``; the
  default, used for evaluation on non-eroded labels) or ``5_Labels_all_noBoundary.zip``
  (eroded reference, ``top_potsdam_{a}_{b}_label_noBoundary.tif``, boundaries black).

Output (``PotsdamDataset`` of MMSegmentation reads it unchanged)::

    out_dir/img_dir/{train,val}/{a}_{b}_{x0}_{y0}_{x1}_{y1}.png   RGB patches
    out_dir/ann_dir/{train,val}/{a}_{b}_{x0}_{y0}_{x1}_{y1}.png   uint8 label ids

Label ids follow MMSegmentation's Potsdam converter: 0 is ignored (boundary pixels of
the eroded reference and any colour that is not one of the six class colours), 1..6
are impervious surface, building, low vegetation, tree, car, clutter, and the dataset
is read with ``reduce_zero_label=True`` (0 -> 255, 1..6 -> 0..5). With
``num_classes=5`` (clutter as ignore, as in the RVSA recipe) clutter is written as 0
too and the dataset needs ``metainfo=dict(classes=POTSDAM_CLASSES_5)``.

Patch grid: the tiles are cut into ``ceil(6000 / 512) = 12`` rows and columns of
512x512 patches starting at 0, 512, ..., 5120; as 6000 is not a multiple of 512 the
last row and column start at 6000 - 512 = 5488 instead of 5632, i.e. they are aligned
to the tile edge and overlap their neighbours by 144 pixels. That gives 144 patches
per tile, 3,456 for the 24 training tiles and 2,016 for the 14 test tiles.
"""
from __future__ import annotations

import json
import math
import os
import os.path as osp
import re
import sys
import warnings
import zipfile
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import cv2
import numpy as np

from ...fileio import atomic_write_bytes, remove_stale_temporaries

__all__ = [
    'POTSDAM_CLASSES', 'POTSDAM_CLASSES_5', 'POTSDAM_COLOURS', 'POTSDAM_IGNORE_ID',
    'POTSDAM_SPLITS', 'TileSource', 'colour_to_label', 'convert_potsdam',
    'find_potsdam_tiles', 'patch_boxes', 'patch_starts'
]

# Class names as in MMSegmentation's ``PotsdamDataset``; label id = index + 1.
POTSDAM_CLASSES = ('impervious_surface', 'building', 'low_vegetation', 'tree', 'car',
                   'clutter')
# Five-class variant: clutter is written as the ignore id.
POTSDAM_CLASSES_5 = POTSDAM_CLASSES[:5]
POTSDAM_IGNORE_ID = 0

# Colour legend of the ISPRS labels (RGB).
POTSDAM_COLOURS = {
    'impervious_surface': (255, 255, 255),
    'building': (0, 0, 255),
    'low_vegetation': (0, 255, 255),
    'tree': (0, 255, 0),
    'car': (255, 255, 0),
    'clutter': (255, 0, 0),
}

# The standard split of the 38 labelled tiles (the one MMSegmentation's converter
# uses): 24 training tiles and 14 test tiles (written to ``val``).
POTSDAM_SPLITS = {
    'train': ('2_10', '2_11', '2_12', '3_10', '3_11', '3_12', '4_10', '4_11', '4_12',
              '5_10', '5_11', '5_12', '6_7', '6_8', '6_9', '6_10', '6_11', '6_12', '7_7',
              '7_8', '7_9', '7_10', '7_11', '7_12'),
    'val': ('2_13', '2_14', '3_13', '3_14', '4_13', '4_14', '4_15', '5_13', '5_14',
            '5_15', '6_13', '6_14', '6_15', '7_13'),
}

_TILE_FILE = re.compile(r'^top_potsdam_(\d+)_(\d+)_(rgb|irrg|label|label_noboundary)\.tiff?$',
                        re.IGNORECASE)
_MODALITIES = ('rgb', 'irrg')
_MANIFEST = '.potsdam_conversion.json'


# ------------------------------------------------------------------------- geometry
def patch_starts(length: int, patch_size: int) -> List[int]:
    """Start offsets of ``ceil(length / patch_size)`` patches covering ``[0, length)``.

    Patches are contiguous from 0; the last one is shifted back to end at ``length``
    when ``length`` is not a multiple of ``patch_size``.
    """
    if patch_size <= 0:
        raise ValueError(f'patch_size must be positive, got {patch_size}')
    if length < patch_size:
        raise ValueError(f'a side of {length} pixels is smaller than the patch size '
                         f'{patch_size}')
    count = math.ceil(length / patch_size)
    return [min(i * patch_size, length - patch_size) for i in range(count)]


def patch_boxes(height: int, width: int, patch_size: int) -> List[Tuple[int, int, int, int]]:
    """Patch boxes ``(x0, y0, x1, y1)`` of a ``height x width`` tile, row by row."""
    return [(x, y, x + patch_size, y + patch_size) for y in patch_starts(height, patch_size)
            for x in patch_starts(width, patch_size)]


# --------------------------------------------------------------------------- labels
def _colour_key(rgb: np.ndarray) -> np.ndarray:
    key = rgb[..., 0].astype(np.uint32)  # channel by channel: no (H, W, 3) uint32 copy
    key <<= 8
    key |= rgb[..., 1]
    key <<= 8
    key |= rgb[..., 2]
    return key


def _colour_ids(rgb: np.ndarray, num_classes: int) -> Tuple[np.ndarray, int]:
    if num_classes not in (5, 6):
        raise ValueError(f'num_classes must be 6 (all classes) or 5 (clutter as ignore), '
                         f'got {num_classes}')
    if rgb.ndim != 3 or rgb.shape[2] != 3:
        raise ValueError(f'expected an RGB colour label of shape (H, W, 3), got {rgb.shape}')
    key = _colour_key(rgb)
    ids = np.full(key.shape, POTSDAM_IGNORE_ID, np.uint8)
    matched = 0
    for index, name in enumerate(POTSDAM_CLASSES):
        (r, g, b) = POTSDAM_COLOURS[name]
        mask = key == ((r << 16) | (g << 8) | b)
        matched += int(mask.sum())
        if index < num_classes:
            ids[mask] = index + 1
    return ids, key.size - matched


def colour_to_label(rgb: np.ndarray, num_classes: int = 6) -> np.ndarray:
    """Map an ISPRS colour label (``H x W x 3`` RGB) to uint8 label ids.

    Class colours map to 1..6 (1..5 with ``num_classes=5``, clutter then being 0);
    every other colour (e.g. the black boundaries of the eroded reference) maps to
    :data:`POTSDAM_IGNORE_ID` (0).
    """
    return _colour_ids(rgb, num_classes)[0]


# -------------------------------------------------------------------------- sources
@dataclass(frozen=True)
class TileSource:
    """A tile file on disk (``member`` is None) or a member of a zip archive."""
    path: str
    member: Optional[str] = None

    def __str__(self) -> str:
        return self.path if self.member is None else f'{self.path}:{self.member}'

    def read(self) -> np.ndarray:
        """Decode the tile as OpenCV does (colour images in BGR order)."""
        if self.member is None:
            array = cv2.imread(self.path, cv2.IMREAD_UNCHANGED)
        else:
            with zipfile.ZipFile(self.path) as archive:
                data = archive.read(self.member)
            array = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED)
        if array is None:
            raise ValueError(f'cannot decode {self}')
        if array.ndim != 3 or array.shape[2] not in (3, 4) or array.dtype != np.uint8:
            raise ValueError(f'{self}: expected an 8-bit 3-channel image, got shape '
                             f'{array.shape} and dtype {array.dtype}')
        return array[..., :3]


def find_potsdam_tiles(src: str, modality: str = 'rgb',
                       eroded: bool = False) -> Tuple[Dict[str, TileSource], Dict[str, TileSource]]:
    """Find the image and label tiles under ``src`` (zips and/or extracted folders).

    Returns:
        ``(images, labels)``: dicts from tile id (``'2_10'``) to :class:`TileSource`.
        A file on disk wins over a zip member of the same name.
    """
    if modality not in _MODALITIES:
        raise ValueError(f'modality must be one of {_MODALITIES}, got {modality!r}')
    if not osp.exists(src):
        raise FileNotFoundError(f'Potsdam source {src} does not exist')
    wanted_image = modality
    wanted_label = 'label_noboundary' if eroded else 'label'
    images: Dict[str, TileSource] = {}
    labels: Dict[str, TileSource] = {}

    def consider(name: str, source: TileSource) -> None:
        match = _TILE_FILE.match(osp.basename(name))
        if match is None:
            return
        tile, kind = f'{int(match.group(1))}_{int(match.group(2))}', match.group(3).lower()
        target = images if kind == wanted_image else labels if kind == wanted_label else None
        if target is None:
            return
        previous = target.get(tile)
        if previous is None or (previous.member is not None and source.member is None):
            target[tile] = source

    def scan_zip(path: str) -> None:
        with zipfile.ZipFile(path) as archive:
            for member in archive.namelist():
                if not member.endswith('/'):
                    consider(member, TileSource(path, member))

    if osp.isfile(src):
        if not zipfile.is_zipfile(src):
            raise ValueError(f'{src} is neither a folder nor a zip archive')
        scan_zip(src)
        return images, labels
    for dirpath, dirnames, filenames in os.walk(src, followlinks=True):
        dirnames.sort()
        for name in sorted(filenames):
            path = osp.join(dirpath, name)
            if name.lower().endswith('.zip'):
                scan_zip(path)
            else:
                consider(name, TileSource(path))
    return images, labels


# ------------------------------------------------------------------------ conversion
def _patch_name(tile: str, box: Tuple[int, int, int, int]) -> str:
    return f'{tile}_{box[0]}_{box[1]}_{box[2]}_{box[3]}.png'


def _encode_png(array: np.ndarray) -> bytes:
    ok, buffer = cv2.imencode('.png', np.ascontiguousarray(array))
    if not ok:
        raise OSError('PNG encoding failed')
    return buffer.tobytes()


def _convert_tile(task: tuple) -> dict:
    """Cut one tile into patches; skip patches already written unless ``overwrite``."""
    (tile, split, image_src, label_src, out_dir, patch_size, tile_size, num_classes,
     overwrite) = task
    img_dir = osp.join(out_dir, 'img_dir', split)
    ann_dir = osp.join(out_dir, 'ann_dir', split)
    result = dict(tile=tile, split=split, patches=0, written=0, unknown_pixels=0)

    def pending(boxes):
        return [box for box in boxes if overwrite
                or not osp.exists(osp.join(img_dir, _patch_name(tile, box)))
                or not osp.exists(osp.join(ann_dir, _patch_name(tile, box)))]

    if tile_size is not None:
        boxes = patch_boxes(tile_size, tile_size, patch_size)
        result['patches'] = len(boxes)
        if not pending(boxes):
            return result  # already converted by an earlier run
    image = image_src.read()  # BGR, written back as is: the PNG holds RGB
    label_bgr = label_src.read()
    if image.shape[:2] != label_bgr.shape[:2]:
        raise ValueError(f'tile {tile}: image {image_src} is {image.shape[1]}x{image.shape[0]} '
                         f'but label {label_src} is {label_bgr.shape[1]}x{label_bgr.shape[0]}')
    height, width = image.shape[:2]
    if tile_size is not None and (height, width) != (tile_size, tile_size):
        raise ValueError(f'tile {tile}: expected {tile_size}x{tile_size} pixels, got '
                         f'{width}x{height} ({image_src}); pass tile_size=None to accept '
                         'any size')
    ids, unknown = _colour_ids(label_bgr[..., ::-1], num_classes)
    del label_bgr
    boxes = patch_boxes(height, width, patch_size)
    result.update(patches=len(boxes), unknown_pixels=unknown)
    for box in pending(boxes):
        x0, y0, x1, y1 = box
        name = _patch_name(tile, box)
        atomic_write_bytes(osp.join(img_dir, name), _encode_png(image[y0:y1, x0:x1]))
        atomic_write_bytes(osp.join(ann_dir, name), _encode_png(ids[y0:y1, x0:x1]))
        result['written'] += 1
    return result


def _missing_message(missing: Dict[str, List[str]], splits: Dict[str, Sequence[str]],
                     src: str) -> str:
    lines = [f'{len(missing)} Potsdam tile(s) are missing under {src}:']
    for split, tiles in splits.items():
        entries = [f'{tile} ({" and ".join(missing[tile])})' for tile in tiles if tile in missing]
        if entries:
            lines.append(f'  {split}: ' + ', '.join(entries))
    return '\n'.join(lines)


def convert_potsdam(src: str, out_dir: str, *, eroded: bool = False, modality: str = 'rgb',
                    num_classes: int = 6, patch_size: int = 512,
                    tile_size: Optional[int] = 6000,
                    splits: Optional[Dict[str, Sequence[str]]] = None, nproc: int = 1,
                    overwrite: bool = False, progress: bool = True) -> dict:
    """Convert the official Potsdam release under ``src`` into patches under ``out_dir``.

    Args:
        src: folder holding the official zips and/or their extracted folders (searched
            recursively), or one zip.
        out_dir: output root (``img_dir``/``ann_dir`` are created in it).
        eroded: use the eroded reference (``5_Labels_all_noBoundary``) instead of the
            full one (``5_Labels_all``, the default, for non-eroded evaluation).
        modality: ``'rgb'`` (``2_Ortho_RGB``) or ``'irrg'`` (``3_Ortho_IRRG``).
        num_classes: 6, or 5 to write clutter as the ignore id.
        patch_size: side of the square patches.
        tile_size: expected tile side (6000 for the official release); a tile of
            another size is an error. ``None`` accepts any size.
        splits: output split -> tile ids; defaults to :data:`POTSDAM_SPLITS`.
        nproc: worker processes (each needs about 0.5 GB for a 6000x6000 tile).
        overwrite: rewrite patches that already exist (by default a rerun only writes
            what is missing) and allow different options than an earlier run.
        progress: show an MMEngine progress bar.

    Returns:
        A summary: ``patches`` (per split), ``written``, ``tiles`` (per split),
        ``missing`` (tile -> ``['image']``/``['label']``/both), ``unknown_pixels``
        (per tile, pixels of non-class colours, mapped to ignore) and ``message``.

    Missing tiles do not stop the conversion: they are listed in a warning (and in the
    summary) so that they can be added and the command run again.
    """
    splits = dict(POTSDAM_SPLITS if splits is None else splits)
    if nproc < 1:
        raise ValueError(f'nproc must be >= 1, got {nproc}')
    if num_classes not in (5, 6):
        raise ValueError(f'num_classes must be 6 (all classes) or 5 (clutter as ignore), '
                         f'got {num_classes}')
    if tile_size is not None and tile_size < patch_size:
        raise ValueError(f'tile_size {tile_size} is smaller than patch_size {patch_size}')
    seen = [tile for tiles in splits.values() for tile in tiles]
    duplicates = sorted({tile for tile in seen if seen.count(tile) > 1})
    if duplicates:
        raise ValueError(f'tiles in more than one split: {duplicates}')

    images, labels = find_potsdam_tiles(src, modality, eroded)
    missing: Dict[str, List[str]] = {}
    for tile in seen:
        parts = [kind for kind, found in (('image', images), ('label', labels))
                 if tile not in found]
        if parts:
            missing[tile] = parts
    label_kind = '5_Labels_all_noBoundary (eroded)' if eroded else '5_Labels_all (full)'
    if len(missing) == len(seen):
        raise FileNotFoundError(
            f'no complete Potsdam tile (image and label) found under {src}: expected '
            f'top_potsdam_{{a}}_{{b}}_{modality.upper()}.tif and '
            f'top_potsdam_{{a}}_{{b}}_{"label_noBoundary" if eroded else "label"}.tif files '
            f'({"3_Ortho_IRRG" if modality == "irrg" else "2_Ortho_RGB"} and {label_kind}, '
            'as zips or extracted folders)')
    message = _missing_message(missing, splits, src) if missing else ''
    if message:
        warnings.warn(message + '\nThe other tiles are converted; add the missing files and '
                      'run the command again to complete the dataset.', UserWarning)

    options = dict(modality=modality, labels='eroded' if eroded else 'full',
                   num_classes=num_classes, patch_size=patch_size)
    manifest = osp.join(out_dir, _MANIFEST)
    if osp.exists(manifest) and not overwrite:
        with open(manifest, encoding='utf-8') as f:
            previous = json.load(f)
        if previous != options:
            raise ValueError(f'{out_dir} holds a conversion with options {previous}, not '
                             f'{options}: use another output folder or overwrite=True')
    for split in splits:
        for kind in ('img_dir', 'ann_dir'):
            folder = osp.join(out_dir, kind, split)
            os.makedirs(folder, exist_ok=True)
            remove_stale_temporaries(folder)
    atomic_write_bytes(manifest, json.dumps(options, indent=1).encode())

    tasks = [(tile, split, images[tile], labels[tile], out_dir, patch_size, tile_size,
              num_classes, overwrite) for split, tiles in splits.items() for tile in tiles
             if tile not in missing]
    if progress:
        from mmengine.utils import track_parallel_progress, track_progress
        if nproc > 1:
            results = track_parallel_progress(_convert_tile, tasks, nproc, file=sys.stdout)
        else:
            results = track_progress(_convert_tile, tasks, file=sys.stdout)
    elif nproc > 1:
        from multiprocessing import Pool
        with Pool(nproc) as pool:
            results = pool.map(_convert_tile, tasks, chunksize=1)
    else:
        results = [_convert_tile(task) for task in tasks]

    summary = dict(patches={split: 0 for split in splits}, written=0,
                   tiles={split: [] for split in splits}, missing=missing,
                   unknown_pixels={}, message=message)
    for result in results:
        summary['patches'][result['split']] += result['patches']
        summary['written'] += result['written']
        summary['tiles'][result['split']].append(result['tile'])
        if result['unknown_pixels']:
            summary['unknown_pixels'][result['tile']] = result['unknown_pixels']
    return summary
