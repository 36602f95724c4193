"""REOBench's released corrupted test sets -> files this package's datasets read.

The REOBench authors released their corrupted test sets as folders, one per corruption and
severity. What their code reads (repository lx709/REOBench):

DIOR (``Detection/configs/DIOR/eval/<model>/<folder>/<k>.py``)::

    DIOR_corrupted/<folder>/<k>/<id>.jpg          the corrupted test images
    DIOR_corrupted/<folder>/<k>labels/<id>.txt    rotate, scale, translate: the moved boxes

  A label file holds one object per line, ``x1 y1 x2 y2 x3 y3 x4 y4 class difficulty``:
  the MMRotate 0.x DOTA text format (``ann_file`` is a folder of ``.txt`` files, read by
  ``DOTADataset.load_annotations`` of their ``Detection/mmrotate/datasets/dota.py``). The
  other nine corruptions keep the clean annotations.

Potsdam (``Segmentation/configs/vit_base_win/*_corrupted.py``)::

    Potsdam_corrupted/<folder>/severity_<k>/val/<name>.png     the corrupted test images
    Potsdam_corrupted/<folder>/severity_<k>/label/<name>.png   rotate, scale, translate

  The label maps are class-index PNGs, not ISPRS colour masks: the authors' loader reads
  them as one grey channel (``Segmentation/mmseg/datasets/pipelines/loading.py``,
  ``imfrombytes(..., flag='grayscale', backend='pillow')``) and their ``PotsdamDataset``
  (``Segmentation/mmseg/datasets/potsdam.py``) sets ``reduce_zero_label=False`` and
  ``ignore_index=5``: 0-4 are impervious surface, building, low vegetation, tree and car,
  5 is clutter (ignored in their runs). Their code does not say what fills areas without
  source content; any value other than 0-5 is read here as no label.
  :func:`decode_released_potsdam_mask` decodes them as their loader does and writes the
  package's encoding (ids 1..n, 0 ignored, read with ``reduce_zero_label=True``).

Folder names differ between the authors' files: :data:`RELEASED_FOLDER_NAMES` lists every
name their code uses for each corruption (one table; the option ``corruption_files``'s
``folders='reobench'`` takes the DIOR names from it).

:func:`convert_reobench_release` converts the moved labels into ``out_dir``::

    out_dir/<corruption>/<k>/annfiles/<id>.txt      DIOR, for DIORRDataset (DOTA lines)
    out_dir/<corruption>/<k>/Annotations/<id>.xml   DIOR, for DIORRXMLDataset and MMRotate's
    out_dir/<corruption>/<k>/test.txt                 DIORDataset (DIOR-R XML, id list)
    out_dir/<corruption>/<k>/ann_dir/<name>.png     Potsdam, label ids of the package
    out_dir/corruption_files.py                     the ``corruption_files`` option

and :func:`write_released_sweep_config` writes a config that reads every condition from
the files. Every file is written atomically.
"""
from __future__ import annotations

import glob
import os
import os.path as osp
import pprint
import re
import warnings
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ...fileio import atomic_write_bytes, atomic_write_text, remove_stale_temporaries
from .dior_r import DIOR_R_CLASSES, DIORObject, dota_line, normalise_dior_class

__all__ = [
    'RELEASED_FOLDER_NAMES', 'REOBENCH_FOLDERS', 'RELEASED_POTSDAM_CLUTTER', 'TASKS',
    'ReleasedCondition', 'ReleasedSet', 'corruption_of_folder', 'find_released_conditions',
    'parse_released_labels', 'dior_xml_text', 'decode_released_potsdam_mask',
    'convert_reobench_release', 'corruption_files_option', 'config_label_settings',
    'write_released_sweep_config'
]

#: The package's REOBench corruption names -> every folder name the authors' code gives
#: them; the first is the DIOR folder (``Detection/configs/DIOR/eval/*/<folder>/``). The
#: others: Potsdam ``salt_and_pepper_noise`` and ``translate_image``
#: (``Segmentation/configs/vit_base_win/*_corrupted.py``), AID ``gaussian_noise_new``,
#: ``haze_update_new``, ``data_gaps``, ``rotate_new``, ``scale_image``,
#: ``translate_image_new`` (``Classification/RemoteCLIP_eval.py``, list ``corruptions``).
#: The package's own name is accepted too.
RELEASED_FOLDER_NAMES: Dict[str, Tuple[str, ...]] = {
    'gaussian_noise': ('gaussian_noise', 'gaussian_noise_new'),
    'salt_pepper_noise': ('salt_and_pepper_noise', ),
    'gaussian_blur': ('gaussian_blur', ),
    'motion_blur': ('motion_blur', ),
    'compression_artifacts': ('compression_artifacts', ),
    'data_gaps': ('gaps', 'data_gaps'),
    'brightness_contrast': ('brightness_contrast', ),
    'cloud': ('clouds', ),
    'haze': ('haze', 'haze_update_new'),
    'rotate': ('rotate', 'rotate_new'),
    'scale': ('scale', 'scale_image'),
    'translate': ('translate', 'translate_image', 'translate_image_new'),
}
#: The package's names -> the authors' DIOR folder names, where they differ.
REOBENCH_FOLDERS: Dict[str, str] = {
    name: folders[0] for name, folders in RELEASED_FOLDER_NAMES.items() if folders[0] != name}
#: The clutter id of the released Potsdam label maps (their ``ignore_index``).
RELEASED_POTSDAM_CLUTTER = 5
#: The released sets this module reads.
TASKS = ('dior', 'potsdam')
GEOMETRIC = ('rotate', 'scale', 'translate')
SEVERITIES = (1, 2, 3, 4, 5)
_ROOTS = {'dior': 'DIOR_corrupted', 'potsdam': 'Potsdam_corrupted'}
_SUFFIX = {'dior': '.jpg', 'potsdam': '.png'}
_LABEL_FORMATS = ('dota', 'xml')
_OBB_KEYS = ('left_top', 'right_top', 'right_bottom', 'left_bottom')


def corruption_of_folder(name: str, aliases: Optional[Mapping[str, str]] = None
                         ) -> Optional[str]:
    """The package's corruption name for a released folder name (None: not one).

    Args:
        aliases: further folder names -> corruption names (they win).
    """
    key = name.strip().lower()
    for folder, corruption in (aliases or {}).items():
        if folder.strip().lower() == key:
            return corruption
    for corruption, folders in RELEASED_FOLDER_NAMES.items():
        if key == corruption or key in folders:
            return corruption
    return None


@dataclass
class ReleasedCondition:
    """One released folder: ``images`` and, for a geometric corruption, ``labels``."""
    corruption: str
    severity: int
    folder: str
    images: str
    labels: Optional[str] = None


@dataclass
class ReleasedSet:
    """The released folders found under ``root`` (see :func:`find_released_conditions`)."""
    task: str
    root: str
    conditions: List[ReleasedCondition] = field(default_factory=list)
    folders: Dict[str, str] = field(default_factory=dict)
    unknown: List[str] = field(default_factory=list)


def _severity_dirs(path: str, task: str) -> Dict[int, Dict[str, str]]:
    """severity -> {'images': folder, 'labels': folder} under one corruption folder."""
    found: Dict[int, Dict[str, str]] = {}
    for entry in sorted(os.listdir(path)):
        full = osp.join(path, entry)
        if not osp.isdir(full):
            continue
        if task == 'dior':
            match = re.fullmatch(r'(\d+)(labels)?', entry)
            if match:
                kind = 'labels' if match.group(2) else 'images'
                found.setdefault(int(match.group(1)), {})[kind] = full
        else:
            match = re.fullmatch(r'severity_(\d+)', entry)
            if match:
                for kind, sub in (('images', 'val'), ('labels', 'label')):
                    if osp.isdir(osp.join(full, sub)):
                        found.setdefault(int(match.group(1)), {})[kind] = osp.join(full, sub)
    return found


def find_released_conditions(src: str, task: str,
                             aliases: Optional[Mapping[str, str]] = None) -> ReleasedSet:
    """The released folders of ``task`` (``'dior'`` or ``'potsdam'``) under ``src`` (the
    ``DIOR_corrupted`` / ``Potsdam_corrupted`` folder, or the folder holding it).

    Raises:
        ValueError: an unknown task, two folders naming one corruption, or no folder of
            a known corruption under ``src``.
        FileNotFoundError: ``src`` is not a folder.
    """
    if task not in TASKS:
        raise ValueError(f'task must be one of {TASKS}, got {task!r}')
    if not osp.isdir(src):
        raise FileNotFoundError(f'released folder {src} does not exist')
    bad = sorted(c for c in (aliases or {}).values() if c not in RELEASED_FOLDER_NAMES)
    if bad:
        raise ValueError(f'aliases name {bad}, not REOBench corruptions; valid: '
                         f'{list(RELEASED_FOLDER_NAMES)}')
    root = osp.join(src, _ROOTS[task]) if osp.isdir(osp.join(src, _ROOTS[task])) else src
    release = ReleasedSet(task, osp.abspath(root))
    for entry in sorted(os.listdir(root)):
        path = osp.join(root, entry)
        if not osp.isdir(path):
            continue
        corruption = corruption_of_folder(entry, aliases)
        if corruption is None:
            release.unknown.append(entry)
            continue
        if corruption in release.folders:
            raise ValueError(f'{root}: folders {release.folders[corruption]!r} and {entry!r} '
                             f'both hold {corruption}; keep one')
        release.folders[corruption] = entry
        for severity, kinds in sorted(_severity_dirs(path, task).items()):
            if severity not in SEVERITIES:
                release.unknown.append(f'{entry} (severity {severity})')
                continue
            if 'images' not in kinds:
                continue
            labels = kinds.get('labels') if corruption in GEOMETRIC else None
            release.conditions.append(ReleasedCondition(corruption, severity, entry,
                                                        kinds['images'], labels))
    if not release.conditions:
        names = ', '.join(sorted({n for f in RELEASED_FOLDER_NAMES.values() for n in f}))
        layout = ('<folder>/<k>/*.jpg (and <folder>/<k>labels/)' if task == 'dior' else
                  '<folder>/severity_<k>/val/*.png (and .../label/)')
        raise ValueError(f'no released {task} folder under {src}: expected {layout} with '
                         f'<folder> one of {names}'
                         + (f'; found {release.unknown}' if release.unknown else ''))
    return release


# ------------------------------------------------------------------------------- DIOR
def parse_released_labels(path: str) -> Tuple[List[DIORObject], Counter]:
    """The objects of a released DIOR label file (DOTA lines) and the raw class names left
    out (not DIOR-R classes), counted. ``imagesource:``/``gsd:`` and blank lines are
    skipped; a missing difficulty is 0.

    Raises:
        ValueError: a line without 8 finite coordinates and a class name (file and line).
    """
    objects, skipped = [], Counter()
    with open(path, encoding='utf-8') as handle:
        for number, line in enumerate(handle, 1):
            parts = line.split()
            if not parts or re.match(r'[A-Za-z_]+:', parts[0]):  # imagesource:..., gsd:...
                continue
            where = f'{path}:{number}'
            if len(parts) < 9:
                raise ValueError(f'{where}: expected x1 y1 ... x4 y4 class [difficulty], '
                                 f'got {line.strip()!r}')
            try:
                corners = np.array([float(v) for v in parts[:8]], np.float64).reshape(4, 2)
                difficult = int(float(parts[9])) if len(parts) > 9 else 0
            except ValueError:
                raise ValueError(f'{where}: coordinates and difficulty must be numbers, got '
                                 f'{line.strip()!r}') from None
            if not np.isfinite(corners).all():
                raise ValueError(f'{where}: coordinates must be finite, got {line.strip()!r}')
            name = normalise_dior_class(parts[8])
            if name not in DIOR_R_CLASSES:
                skipped[parts[8]] += 1
                continue
            objects.append(DIORObject(name, corners, difficult, raw_name=parts[8]))
    return objects, skipped


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def dior_xml_text(image_id: str, objects: Sequence[DIORObject],
                  size: Optional[Tuple[int, int]] = None) -> str:
    """A DIOR-R XML annotation (``robndbox`` corners in the objects' order) of ``objects``;
    ``size`` is ``(width, height)``."""
    root = ET.Element('annotation')
    ET.SubElement(root, 'filename').text = f'{image_id}.jpg'
    if size is not None:
        node = ET.SubElement(root, 'size')
        for key, value in (('width', size[0]), ('height', size[1]), ('depth', 3)):
            ET.SubElement(node, key).text = str(int(value))
    for obj in objects:
        node = ET.SubElement(root, 'object')
        ET.SubElement(node, 'type').text = 'robndbox'
        ET.SubElement(node, 'name').text = obj.name
        ET.SubElement(node, 'difficult').text = str(int(obj.difficult))
        box = ET.SubElement(node, 'robndbox')
        for key, (x, y) in zip(_OBB_KEYS, np.asarray(obj.corners).reshape(4, 2)):
            ET.SubElement(box, f'x_{key}').text = _number(x)
            ET.SubElement(box, f'y_{key}').text = _number(y)
    ET.indent(root)
    return ET.tostring(root, encoding='unicode') + '\n'


def _image_size(path: str) -> Tuple[int, int]:
    from PIL import Image
    with Image.open(path) as image:
        return image.size


def _convert_dior(condition: ReleasedCondition, out: str, label_format: str) -> dict:
    sub = 'annfiles' if label_format == 'dota' else 'Annotations'
    folder = osp.join(out, sub)
    os.makedirs(folder, exist_ok=True)
    remove_stale_temporaries(folder)
    written, ids, skipped, missing, objects_count = set(), [], Counter(), [], 0
    for path in sorted(glob.glob(osp.join(condition.labels, '*.txt'))):
        image_id = osp.splitext(osp.basename(path))[0]
        image = osp.join(condition.images, image_id + _SUFFIX['dior'])
        if not osp.isfile(image):
            missing.append(image_id)
            continue
        objects, left_out = parse_released_labels(path)
        skipped.update(left_out)
        objects_count += len(objects)
        if label_format == 'dota':
            name, text = f'{image_id}.txt', ''.join(dota_line(o) + '\n' for o in objects)
        else:
            name, text = f'{image_id}.xml', dior_xml_text(image_id, objects, _image_size(image))
        atomic_write_text(osp.join(folder, name), text)
        written.add(name)
        ids.append(image_id)
    _remove_others(folder, written)
    if label_format == 'xml':
        atomic_write_text(osp.join(out, 'test.txt'), ''.join(i + '\n' for i in ids))
    images = {osp.splitext(osp.basename(p))[0]
              for p in glob.glob(osp.join(condition.images, '*' + _SUFFIX['dior']))}
    return dict(labels=len(ids), objects=objects_count, skipped_objects=dict(skipped),
                labels_without_image=missing, unlabelled=len(images - set(ids)),
                blocking=[])


def _remove_others(folder: str, keep: set) -> None:
    """Files of an earlier conversion that this one did not write (a changed release)."""
    for name in os.listdir(folder):
        if name not in keep and osp.isfile(osp.join(folder, name)):
            os.remove(osp.join(folder, name))


# ---------------------------------------------------------------------------- Potsdam
def decode_released_potsdam_mask(path: str, num_classes: int = 5) -> np.ndarray:
    """A released Potsdam label map as the package's label ids (uint8).

    Read as the authors' loader reads it (Pillow, converted to RGB then one grey channel):
    0-4 are impervious surface, building, low vegetation, tree and car and become 1-5;
    5 (clutter) becomes 0 (ignored) with ``num_classes=5`` and 6 with ``num_classes=6``;
    any other value is no label (0).

    Raises:
        ValueError: ``num_classes`` is not 5 or 6, or the file is a colour image (an
            ISPRS colour mask is not what the authors' loader reads).
    """
    if num_classes not in (5, 6):
        raise ValueError(f'num_classes must be 5 (clutter ignored, the released setting) '
                         f'or 6 (clutter a class), got {num_classes}')
    from PIL import Image, ImageOps
    with Image.open(path) as image:
        image = ImageOps.exif_transpose(image)
        rgb = np.asarray(image if image.mode == 'RGB' else image.convert('RGB'))
    if not ((rgb[..., 0] == rgb[..., 1]).all() and (rgb[..., 1] == rgb[..., 2]).all()):
        raise ValueError(f'{path} is a colour image: the released label maps are class-index '
                         'PNGs (0-4 the classes, 5 clutter), read as one grey channel')
    values = rgb[..., 0]
    lut = np.zeros(256, np.uint8)
    lut[:5] = np.arange(1, 6)
    lut[RELEASED_POTSDAM_CLUTTER] = 6 if num_classes == 6 else 0
    return lut[values]


def _convert_potsdam(condition: ReleasedCondition, out: str, num_classes: int) -> dict:
    import cv2
    folder = osp.join(out, 'ann_dir')
    os.makedirs(folder, exist_ok=True)
    remove_stale_temporaries(folder)
    written, missing, values = set(), [], Counter()
    for path in sorted(glob.glob(osp.join(condition.labels, '*.png'))):
        name = osp.basename(path)
        if not osp.isfile(osp.join(condition.images, name)):
            missing.append(name)
            continue
        ids = decode_released_potsdam_mask(path, num_classes)
        counts = np.bincount(ids.ravel(), minlength=7)
        values.update({i: int(n) for i, n in enumerate(counts) if n})
        ok, data = cv2.imencode('.png', ids)
        if not ok:
            raise OSError(f'cannot encode the label map of {path}')
        atomic_write_bytes(osp.join(folder, name), data.tobytes())
        written.add(name)
    _remove_others(folder, written)
    images = {osp.basename(p) for p in glob.glob(osp.join(condition.images, '*.png'))}
    without = sorted(images - written)
    blocking = [f'{len(without)} image(s) without a label map, e.g. {without[0]}'] \
        if without else []
    return dict(labels=len(written), pixels=dict(sorted(values.items())),
                labels_without_image=missing, unlabelled=len(without), blocking=blocking)


# ---------------------------------------------------------------------------- together
def convert_reobench_release(src: str, out_dir: str, task: str, *, label_format: str = 'dota',
                             num_classes: int = 5, aliases: Optional[Mapping[str, str]] = None
                             ) -> dict:
    """Convert the moved labels of a released set and write the ``corruption_files``
    option (``out_dir/corruption_files.py``).

    Args:
        src: the released ``DIOR_corrupted`` / ``Potsdam_corrupted`` folder (or its parent).
        out_dir: output root (see the module docstring).
        task: ``'dior'`` or ``'potsdam'``.
        label_format: DIOR only: ``'dota'`` (DIORRDataset) or ``'xml'`` (DIORRXMLDataset,
            MMRotate's DIORDataset).
        num_classes: Potsdam only: 5 (clutter ignored, the released setting) or 6.
        aliases: further released folder names -> the package's corruption names.

    Returns:
        A summary: ``conditions`` (``'rotate@2'`` -> counts and problems), ``complete``
        (corruptions found at all five severities with every label), ``incomplete``
        (corruption -> what is missing), ``unknown`` folders, ``corruption_files`` (the
        option) and ``files`` (what was written).
    """
    if label_format not in _LABEL_FORMATS:
        raise ValueError(f'label_format must be one of {_LABEL_FORMATS}, got {label_format!r}')
    if task == 'potsdam' and num_classes not in (5, 6):
        raise ValueError(f'num_classes must be 5 or 6, got {num_classes}')
    release = find_released_conditions(src, task, aliases)
    if release.unknown:
        warnings.warn(f'{release.root}: folders of no known corruption left out: '
                      f'{release.unknown}', UserWarning)
    conditions: Dict[str, dict] = {}
    for condition in release.conditions:
        key = f'{condition.corruption}@{condition.severity}'
        images = len(glob.glob(osp.join(condition.images, '*' + _SUFFIX[task])))
        record: dict = dict(folder=condition.folder, images=images, blocking=[])
        out = osp.join(out_dir, condition.corruption, str(condition.severity))
        if condition.corruption in GEOMETRIC:
            if condition.labels is None:
                record['blocking'] = ['no moved labels (' + (
                    f'{condition.severity}labels/' if task == 'dior' else 'label/') + ')']
            elif task == 'dior':
                record.update(_convert_dior(condition, out, label_format))
            else:
                record.update(_convert_potsdam(condition, out, num_classes))
        if not images:
            record['blocking'].append('no images')
        conditions[key] = record
    complete, incomplete = [], {}
    for corruption in release.folders:
        lacks = [f'severity {s}' for s in SEVERITIES if f'{corruption}@{s}' not in conditions]
        lacks += [f'severity {key.split("@")[1]}: {problem}' for key, record in
                  conditions.items() if key.split('@')[0] == corruption
                  for problem in record['blocking']]
        if lacks:
            incomplete[corruption] = lacks
        else:
            complete.append(corruption)
    complete = [c for c in RELEASED_FOLDER_NAMES if c in complete]
    option = corruption_files_option(release, out_dir, complete, label_format)
    path = osp.join(out_dir, 'corruption_files.py')
    atomic_write_text(path, _option_text(release, option, label_format, num_classes))
    return dict(task=task, root=release.root, conditions=conditions, complete=complete,
                incomplete=incomplete, unknown=release.unknown, corruption_files=option,
                files=[path])


def _template(path: str) -> str:
    return osp.abspath(path).replace('{', '{{').replace('}', '}}')


def corruption_files_option(release: ReleasedSet, out_dir: str, corruptions: Sequence[str],
                            label_format: str = 'dota') -> dict:
    """The ``corruption_files`` option reading ``corruptions`` from the released folders
    and the labels converted into ``out_dir``."""
    root, out = _template(release.root), _template(out_dir)
    condition = osp.join(out, '{corruption}', '{severity}')
    if release.task == 'dior':
        dataset = dict(data_prefix=dict(img_path=osp.join(root, '{folder}', '{severity}')))
        geometric = dict(ann_file=osp.join(condition, 'annfiles') + os.sep) \
            if label_format == 'dota' else dict(ann_file=osp.join(condition, 'test.txt'),
                                                ann_subdir=osp.join(condition, 'Annotations'))
    else:
        dataset = dict(data_prefix=dict(
            img_path=osp.join(root, '{folder}', 'severity_{severity}', 'val')))
        geometric = dict(data_prefix=dict(seg_map_path=osp.join(condition, 'ann_dir')))
    option = dict(dataset=dataset)
    if any(c in GEOMETRIC for c in corruptions):
        option['geometric'] = geometric
    option['folders'] = {c: f for c, f in release.folders.items()
                         if f != c and c in corruptions}
    option['corruptions'] = list(corruptions)
    return option


def _option_text(release: ReleasedSet, option: dict, label_format: str,
                 num_classes: int) -> str:
    if release.task == 'dior':
        reads = 'DIOR, moved labels as ' + ('DOTA text (DIORRDataset)' if label_format == 'dota'
                                            else 'DIOR-R XML (DIORRXMLDataset, DIORDataset)')
    else:
        reads = f'Potsdam, moved label maps as ids 1..{num_classes}, 0 ignored'
    return (f'# corruption_files for the released set {release.root} ({reads}).\n'
            '# Written by tools/dataset_converters/reobench_released.py; use it as\n'
            '# test_cfg = dict(corruption_files=corruption_files).\n'
            f'corruption_files = {pprint.pformat(option, width=88, sort_dicts=False)}\n')


# ------------------------------------------------------------------------------ configs
_DOTA_TYPES = ('DIORRDataset', 'DOTADataset')
_XML_TYPES = ('DIORRXMLDataset', 'DIORDataset')
_SEG_TYPES = ('PotsdamDataset', 'BaseSegDataset')


def config_label_settings(config: str, task: str) -> dict:
    """What the test dataset of ``config`` reads: ``label_format`` (DIOR) or
    ``num_classes`` (Potsdam), from its type, ``metainfo`` and ``reduce_zero_label``.

    Raises:
        ValueError: a test dataset of another task or one whose labels the converted files
            do not fit (named, with what fits).
    """
    from mmengine.config import Config
    dataset = Config.fromfile(config).get('test_dataloader', {}).get('dataset', {})
    while isinstance(dataset.get('dataset'), Mapping):  # wrappers, e.g. ClassMappedDataset
        dataset = dataset['dataset']
    kind = str(dataset.get('type', '')).rsplit('.', 1)[-1]
    if task == 'dior':
        if kind in _DOTA_TYPES:
            return dict(label_format='dota')
        if kind in _XML_TYPES:
            return dict(label_format='xml')
        raise ValueError(f'{config}: the test dataset is {kind or "not set"}; the released '
                         f'DIOR labels convert for {_DOTA_TYPES + _XML_TYPES}')
    if kind not in _SEG_TYPES:
        raise ValueError(f'{config}: the test dataset is {kind or "not set"}; the released '
                         f'Potsdam label maps convert for {_SEG_TYPES}')
    if dataset.get('reduce_zero_label', True) is not True:
        raise ValueError(f'{config}: the test dataset reads labels with reduce_zero_label='
                         f'{dataset.get("reduce_zero_label")}; the converted label maps hold '
                         'ids 1..n with 0 ignored, read with reduce_zero_label=True')
    classes = (dataset.get('metainfo') or {}).get('classes')
    num_classes = len(classes) if classes else 6
    if num_classes not in (5, 6):
        raise ValueError(f'{config}: the test dataset has {num_classes} classes; the '
                         'released Potsdam label maps convert to 5 or 6')
    return dict(num_classes=num_classes)


def write_released_sweep_config(config: str, option: Mapping, out_dir: str) -> str:
    """Write ``out_dir/<config stem>_released.py``: ``config`` with ``test_cfg`` reading
    the released conditions from files (``option``); returns its path."""
    stem = osp.splitext(osp.basename(config))[0]
    path = osp.join(out_dir, f'{stem}_released.py')
    text = (f'# {stem} with the released corrupted conditions read from files; written by\n'
            '# tools/dataset_converters/reobench_released.py. Run it with\n'
            '# tools/robustness_test.py.\n'
            f'_base_ = [{osp.abspath(config)!r}]\n'
            'test_cfg = dict(corruption_files='
            f'{pprint.pformat(dict(option), width=80, sort_dicts=False)})\n')
    atomic_write_text(path, text)
    return path
