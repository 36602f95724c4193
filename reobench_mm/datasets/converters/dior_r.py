"""DIOR-R: DIOR images + oriented XML annotations -> DOTA-style text annotations.

Input (the official DIOR / DIOR-R release, extracted)::

    src/JPEGImages-trainval/*.jpg   src/JPEGImages-test/*.jpg   (800x800)
    src/Annotations/Oriented Bounding Boxes/*.xml               (DIOR-R ``robndbox``)
    src/ImageSets/Main/{trainval,test}.txt                      (image ids)

Output (read by :class:`reobench_mm.datasets.DIORRDataset`, or by MMRotate's
``DOTADataset`` with ``metainfo=dict(classes=DIOR_R_CLASSES)`` and ``img_suffix='jpg'``)::

    out_dir/{split}/annfiles/{id}.txt   one ``x1 y1 x2 y2 x3 y3 x4 y4 class difficult``
                                        line per object (corners left-top, right-top,
                                        right-bottom, left-bottom as in the XML)
    out_dir/{split}/images/{id}.jpg     symlinks to (or copies of) the images
    out_dir/{split}.txt                 the converted image ids, in the official order

Class names are written in MMRotate's ``DIORDataset`` spelling: the XML names
lower-cased (``Expressway-Service-area`` -> ``expressway-service-area``), in the same
class order, so label indices agree with models trained on MMRotate's ``DIORDataset``.
"""
from __future__ import annotations

import os
import os.path as osp
import shutil
import sys
import warnings
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

import numpy as np

from ...fileio import atomic_write_bytes, remove_stale_temporaries

__all__ = [
    'DIOR_R_CLASSES', 'DIORObject', 'DIORXMLAnnotation', 'convert_dior_r', 'dota_line',
    'normalise_dior_class', 'parse_dior_xml'
]

# The 20 DIOR-R classes, in the order (and lower-case spelling) of MMRotate's
# ``DIORDataset``.
DIOR_R_CLASSES = ('airplane', 'airport', 'baseballfield', 'basketballcourt', 'bridge',
                  'chimney', 'expressway-service-area', 'expressway-toll-station', 'dam',
                  'golffield', 'groundtrackfield', 'harbor', 'overpass', 'ship', 'stadium',
                  'storagetank', 'tenniscourt', 'trainstation', 'vehicle', 'windmill')

_OBB_KEYS = ('left_top', 'right_top', 'right_bottom', 'left_bottom')
_IMAGE_MODES = ('symlink', 'copy', 'none')


def normalise_dior_class(name: str) -> str:
    """The canonical spelling of a DIOR-R class name: stripped and lower-cased."""
    return name.strip().lower()


@dataclass
class DIORObject:
    """One annotated object: canonical class ``name``, corners ``(4, 2)`` in pixels."""
    name: str
    corners: np.ndarray
    difficult: int = 0
    angle: Optional[float] = None
    raw_name: str = ''


@dataclass
class DIORXMLAnnotation:
    """One parsed XML file; ``width``/``height`` are None when it has no ``<size>``."""
    filename: Optional[str]
    width: Optional[int]
    height: Optional[int]
    objects: List[DIORObject] = field(default_factory=list)


def _number(node: Optional[ET.Element], what: str, source: str) -> float:
    if node is None or node.text is None or not node.text.strip():
        raise ValueError(f'{source}: missing <{what}>')
    try:
        return float(node.text)
    except ValueError:
        raise ValueError(f'{source}: <{what}> is not a number: {node.text!r}') from None


def parse_dior_xml(path_or_text: str, box_type: str = 'obb') -> DIORXMLAnnotation:
    """Parse a DIOR(-R) XML annotation (a path, or the XML text itself).

    Args:
        box_type: ``'obb'`` reads the oriented ``robndbox`` (4 corners), ``'hbb'`` the
            horizontal ``bndbox`` of the DIOR horizontal annotations (as 4 corners).
    """
    if box_type not in ('obb', 'hbb'):
        raise ValueError(f"box_type must be 'obb' or 'hbb', got {box_type!r}")
    if path_or_text.lstrip().startswith('<'):
        source, root = '<xml text>', ET.fromstring(path_or_text)
    else:
        source, root = path_or_text, ET.parse(path_or_text).getroot()
    width = height = None
    size = root.find('size')
    if size is not None:
        try:
            width, height = int(float(size.findtext('width'))), int(float(size.findtext('height')))
        except (TypeError, ValueError):
            width = height = None
        if not width or not height or width <= 0 or height <= 0:
            width = height = None
    objects = []
    for index, obj in enumerate(root.findall('object')):
        where = f'{source} (object {index})'
        raw_name = obj.findtext('name')
        if raw_name is None or not raw_name.strip():
            raise ValueError(f'{where}: missing <name>')
        if box_type == 'obb':
            box = obj.find('robndbox')
            if box is None:
                raise ValueError(f'{where}: missing <robndbox>')
            corners = [(_number(box.find(f'x_{key}'), f'x_{key}', where),
                        _number(box.find(f'y_{key}'), f'y_{key}', where)) for key in _OBB_KEYS]
        else:
            box = obj.find('bndbox')
            if box is None:
                raise ValueError(f'{where}: missing <bndbox>')
            x0, y0, x1, y1 = (_number(box.find(k), k, where)
                              for k in ('xmin', 'ymin', 'xmax', 'ymax'))
            corners = [(x0, y0), (x1, y0), (x1, y1), (x0, y1)]
        difficult = obj.findtext('difficult')
        angle = obj.findtext('angle')
        objects.append(DIORObject(
            name=normalise_dior_class(raw_name), corners=np.asarray(corners, np.float64),
            difficult=int(float(difficult)) if difficult and difficult.strip() else 0,
            angle=float(angle) if angle and angle.strip() else None, raw_name=raw_name))
    return DIORXMLAnnotation(root.findtext('filename'), width, height, objects)


def _format_number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def dota_line(obj: DIORObject) -> str:
    """``'x1 y1 x2 y2 x3 y3 x4 y4 class difficult'`` (corners in the XML's order)."""
    coords = ' '.join(_format_number(v) for v in np.asarray(obj.corners).reshape(-1))
    return f'{coords} {obj.name} {int(obj.difficult)}'


def _read_ids(path: str) -> List[str]:
    with open(path, encoding='utf-8') as f:
        return [line.strip() for line in f if line.strip()]


def _convert_image(task: tuple) -> dict:
    (image_id, split, image_path, xml_path, out_dir, images, classes) = task
    annotation = parse_dior_xml(xml_path)
    kept, skipped = [], Counter()
    for obj in annotation.objects:
        if obj.name in classes:
            kept.append(dota_line(obj))
        else:
            skipped[obj.raw_name] += 1
    split_dir = osp.join(out_dir, split)
    text = ''.join(line + '\n' for line in kept)
    atomic_write_bytes(osp.join(split_dir, 'annfiles', f'{image_id}.txt'), text.encode())
    if images != 'none':
        target = osp.join(split_dir, 'images', osp.basename(image_path))
        tmp = f'{target}.{os.getpid()}.tmp'
        if images == 'symlink':
            os.symlink(osp.abspath(image_path), tmp)
            os.replace(tmp, target)
        elif not (osp.isfile(target) and not osp.islink(target)
                  and osp.getsize(target) == osp.getsize(image_path)):
            shutil.copyfile(image_path, tmp)
            os.replace(tmp, target)
    return dict(id=image_id, split=split, objects=len(kept), skipped=skipped)


def _locate_image(src: str, split: str, image_id: str, suffix: str) -> Optional[str]:
    for folder in (f'JPEGImages-{split}', 'JPEGImages-trainval', 'JPEGImages-test',
                   'JPEGImages'):
        path = osp.join(src, folder, image_id + suffix)
        if osp.isfile(path):
            return path
    return None


def convert_dior_r(src: str, out_dir: str, *, splits: Sequence[str] = ('trainval', 'test'),
                   images: str = 'symlink', classes: Sequence[str] = DIOR_R_CLASSES,
                   ann_subdir: str = osp.join('Annotations', 'Oriented Bounding Boxes'),
                   image_suffix: str = '.jpg', nproc: int = 1,
                   progress: bool = True) -> dict:
    """Convert DIOR-R under ``src`` into DOTA-style annotations under ``out_dir``.

    Args:
        src: the extracted release (see the module docstring).
        out_dir: output root.
        splits: names of ``ImageSets/Main/{split}.txt`` lists to convert.
        images: ``'symlink'`` (absolute links, the default), ``'copy'``, or ``'none'``
            (no ``images`` folder: point ``data_prefix.img_path`` at the source folder).
        classes: classes to keep (canonical spelling); objects of other classes are
            left out and counted in the summary.
        nproc: worker processes.
        progress: show an MMEngine progress bar.

    Returns:
        A summary: ``images`` and ``objects`` (per split), ``skipped_objects`` (raw
        class name -> count), ``missing`` (split -> ids without image or XML) and
        ``message``.
    """
    if images not in _IMAGE_MODES:
        raise ValueError(f'images must be one of {_IMAGE_MODES}, got {images!r}')
    if nproc < 1:
        raise ValueError(f'nproc must be >= 1, got {nproc}')
    classes = tuple(normalise_dior_class(c) for c in classes)
    unknown = sorted(set(classes) - set(DIOR_R_CLASSES))
    if unknown:
        raise ValueError(f'unknown DIOR-R classes {unknown}; valid: {DIOR_R_CLASSES}')
    tasks, missing = [], {}
    for split in splits:
        list_path = osp.join(src, 'ImageSets', 'Main', f'{split}.txt')
        if not osp.isfile(list_path):
            raise FileNotFoundError(f'split list {list_path} does not exist')
        for image_id in _read_ids(list_path):
            image_path = _locate_image(src, split, image_id, image_suffix)
            xml_path = osp.join(src, ann_subdir, f'{image_id}.xml')
            lacks = [kind for kind, ok in (('image', image_path is not None),
                                           ('annotation', osp.isfile(xml_path))) if not ok]
            if lacks:
                missing.setdefault(split, []).append(f'{image_id} ({" and ".join(lacks)})')
                continue
            tasks.append((image_id, split, image_path, xml_path, out_dir, images,
                          frozenset(classes)))
    message = ''
    if missing:
        message = 'DIOR-R images left out for lack of files under {}:\n'.format(src) + '\n'.join(
            f'  {split}: {len(ids)}: ' + ', '.join(ids[:20]) + (' ...' if len(ids) > 20 else '')
            for split, ids in missing.items())
        warnings.warn(message, UserWarning)
    if not tasks:
        raise FileNotFoundError(f'no DIOR-R image with both a JPEG and an XML under {src} '
                                f'for splits {tuple(splits)}')
    for split in splits:
        for sub in ('annfiles', 'images') if images != 'none' else ('annfiles', ):
            folder = osp.join(out_dir, split, sub)
            os.makedirs(folder, exist_ok=True)
            remove_stale_temporaries(folder)

    if progress:
        from mmengine.utils import track_parallel_progress, track_progress
        if nproc > 1:
            results = track_parallel_progress(_convert_image, tasks, nproc, chunksize=16,
                                              file=sys.stdout)
        else:
            results = track_progress(_convert_image, tasks, file=sys.stdout)
    elif nproc > 1:
        from multiprocessing import Pool
        with Pool(nproc) as pool:
            results = pool.map(_convert_image, tasks, chunksize=16)
    else:
        results = [_convert_image(task) for task in tasks]

    summary = dict(images={s: 0 for s in splits}, objects={s: 0 for s in splits},
                   skipped_objects=Counter(), missing=missing, message=message)
    ids: Dict[str, List[str]] = {s: [] for s in splits}
    for result in results:
        summary['images'][result['split']] += 1
        summary['objects'][result['split']] += result['objects']
        summary['skipped_objects'].update(result['skipped'])
        ids[result['split']].append(result['id'])
    for split in splits:
        atomic_write_bytes(osp.join(out_dir, f'{split}.txt'),
                           ''.join(i + '\n' for i in ids[split]).encode())
    summary['skipped_objects'] = dict(summary['skipped_objects'])
    if summary['skipped_objects']:
        warnings.warn(f'objects of classes outside {len(classes)} kept classes left out: '
                      f'{summary["skipped_objects"]}', UserWarning)
    return summary
