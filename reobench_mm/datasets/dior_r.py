"""DIOR-R datasets for MMRotate pipelines (20 classes, 800x800 images).

- :class:`DIORRDataset` reads the output of ``tools/dataset_converters/dior_r.py``
  (DOTA-style ``annfiles`` folders, the same format as MMRotate's ``DOTADataset``).
- :class:`DIORRXMLDataset` reads the original layout (split list + XML folder), like
  MMRotate 1.x's ``DIORDataset`` but without two of its faults: an object whose class
  is not in ``metainfo['classes']`` (e.g. when training on a subset) is left out
  instead of raising ``KeyError``, and for an XML without ``<size>`` the width and
  height are read from the image in the right order (MMRotate swaps them).

Both yield ``instances`` with ``bbox`` (8 corner coordinates, a quadrilateral: load
them with ``LoadAnnotations(box_type='qbox')`` and ``ConvertBoxType`` to rotated
boxes, as the MMRotate DOTA configs do), ``bbox_label`` and ``ignore_flag``
(``difficult > diff_thr``; by default nothing is ignored). Neither imports MMRotate.
"""
from __future__ import annotations

import colorsys
import glob
import os.path as osp
from typing import List, Optional

import cv2
import numpy as np
from mmengine.dataset import BaseDataset
from mmengine.fileio import get, get_local_path, list_from_file
from mmengine.logging import print_log

from ..registry import DATASETS
from .converters.dior_r import DIOR_R_CLASSES, normalise_dior_class, parse_dior_xml

__all__ = ['DIORRDataset', 'DIORRXMLDataset']


def _palette(count: int) -> List[tuple]:
    """``count`` well-separated RGB colours (hues on the golden-ratio sequence)."""
    colours = []
    for i in range(count):
        hue = (i * 0.618033988749895) % 1.0
        value = 0.95 if i % 2 == 0 else 0.7
        r, g, b = colorsys.hsv_to_rgb(hue, 0.85, value)
        colours.append((int(r * 255), int(g * 255), int(b * 255)))
    return colours


_METAINFO = dict(classes=DIOR_R_CLASSES, palette=_palette(len(DIOR_R_CLASSES)))


class _DIORRBase(BaseDataset):
    METAINFO = _METAINFO

    def __init__(self, diff_thr: int = 100, img_suffix: str = 'jpg', **kwargs) -> None:
        if diff_thr < 0:
            raise ValueError(f'diff_thr must be >= 0, got {diff_thr}')
        self.diff_thr = diff_thr
        self.img_suffix = img_suffix.lstrip('.')
        super().__init__(**kwargs)

    def _class_map(self) -> dict:
        classes = self.metainfo.get('classes')
        if not classes:
            raise ValueError(f'{type(self).__name__} needs metainfo classes')
        return {normalise_dior_class(c): i for i, c in enumerate(classes)}

    def _instance(self, corners, label: int, difficult: int) -> dict:
        return dict(bbox=[float(v) for v in np.asarray(corners, np.float64).reshape(-1)],
                    bbox_label=label, ignore_flag=int(difficult > self.diff_thr))

    @staticmethod
    def _report_skipped(skipped: dict) -> None:
        if skipped:
            print_log(f'objects of classes outside metainfo left out: {skipped}',
                      logger='current')

    def filter_data(self) -> List[dict]:
        """Drop images without objects when ``filter_cfg.filter_empty_gt`` (training)."""
        if self.test_mode or not (self.filter_cfg or {}).get('filter_empty_gt', False):
            return self.data_list
        return [info for info in self.data_list if info['instances']]

    def get_cat_ids(self, idx: int) -> List[int]:
        return [inst['bbox_label'] for inst in self.get_data_info(idx)['instances']]


@DATASETS.register_module()
class DIORRDataset(_DIORRBase):
    """DIOR-R in the DOTA text format written by the DIOR-R converter.

    Args:
        ann_file: folder of ``{id}.txt`` files (``x1 y1 ... x4 y4 class difficult``),
            e.g. ``'trainval/annfiles/'``; ``''`` lists the images of
            ``data_prefix.img_path`` without annotations.
        data_prefix: ``dict(img_path='trainval/images/')``.
        diff_thr: objects with ``difficult > diff_thr`` get ``ignore_flag=1``.
        img_suffix: image file extension.
    """

    def load_data_list(self) -> List[dict]:
        img_dir = self.data_prefix.get('img_path', '')
        if not self.ann_file:
            paths = sorted(glob.glob(osp.join(img_dir, f'*.{self.img_suffix}')))
            return [dict(img_path=p, file_name=osp.basename(p),
                         img_id=osp.splitext(osp.basename(p))[0], instances=[]) for p in paths]
        txt_files = sorted(glob.glob(osp.join(self.ann_file, '*.txt')))
        if not txt_files:
            raise FileNotFoundError(f'no annotation .txt file in {self.ann_file}')
        cat2label, skipped, data_list = self._class_map(), {}, []
        for txt_file in txt_files:
            img_id = osp.splitext(osp.basename(txt_file))[0]
            file_name = f'{img_id}.{self.img_suffix}'
            instances = []
            with open(txt_file, encoding='utf-8') as f:
                for number, line in enumerate(f, 1):
                    parts = line.split()
                    if not parts or ':' in parts[0]:  # blank, imagesource:GoogleEarth, gsd:0.1
                        continue
                    if len(parts) < 9:
                        raise ValueError(f'{txt_file}:{number}: expected 8 coordinates and '
                                         f'a class name, got {line.strip()!r}')
                    label = cat2label.get(normalise_dior_class(parts[8]))
                    if label is None:
                        skipped[parts[8]] = skipped.get(parts[8], 0) + 1
                        continue
                    difficult = int(float(parts[9])) if len(parts) > 9 else 0
                    instances.append(self._instance([float(v) for v in parts[:8]], label,
                                                    difficult))
            data_list.append(dict(img_id=img_id, file_name=file_name,
                                  img_path=osp.join(img_dir, file_name), instances=instances))
        self._report_skipped(skipped)
        return data_list


@DATASETS.register_module()
class DIORRXMLDataset(_DIORRBase):
    """DIOR-R in its original layout: split list, JPEG folder, XML folder.

    Args:
        ann_file: split list, e.g. ``'ImageSets/Main/trainval.txt'``.
        data_prefix: ``dict(img_path='JPEGImages-trainval')``.
        ann_subdir: XML folder relative to ``data_root``.
        ann_type: ``'obb'`` (DIOR-R ``robndbox``) or ``'hbb'`` (DIOR ``bndbox``).
        diff_thr: objects with ``difficult > diff_thr`` get ``ignore_flag=1``.
        img_suffix: image file extension.
        backend_args: MMEngine file backend arguments.
    """

    def __init__(self, ann_subdir: str = 'Annotations/Oriented Bounding Boxes/',
                 ann_type: str = 'obb', diff_thr: int = 100, img_suffix: str = 'jpg',
                 backend_args: Optional[dict] = None, **kwargs) -> None:
        if ann_type not in ('obb', 'hbb'):
            raise ValueError(f"ann_type must be 'obb' or 'hbb', got {ann_type!r}")
        self.ann_subdir = ann_subdir
        self.ann_type = ann_type
        self.backend_args = backend_args
        super().__init__(diff_thr=diff_thr, img_suffix=img_suffix, **kwargs)

    def _image_size(self, img_path: str) -> tuple:
        """``(width, height)`` of an image, read from the file."""
        data = np.frombuffer(get(img_path, backend_args=self.backend_args), np.uint8)
        image = cv2.imdecode(data, cv2.IMREAD_UNCHANGED)
        if image is None:
            raise ValueError(f'cannot decode {img_path}')
        height, width = image.shape[:2]
        return width, height

    def load_data_list(self) -> List[dict]:
        cat2label, skipped, data_list = self._class_map(), {}, []
        img_dir = self.data_prefix.get('img_path', '')
        for img_id in list_from_file(self.ann_file, backend_args=self.backend_args):
            img_id = img_id.strip()
            if not img_id:
                continue
            file_name = f'{img_id}.{self.img_suffix}'
            img_path = osp.join(img_dir, file_name)
            xml_path = osp.join(self.data_root or '', self.ann_subdir, f'{img_id}.xml')
            with get_local_path(xml_path, backend_args=self.backend_args) as local:
                annotation = parse_dior_xml(local, box_type=self.ann_type)
            width, height = annotation.width, annotation.height
            if width is None:
                width, height = self._image_size(img_path)
            instances = []
            for obj in annotation.objects:
                label = cat2label.get(obj.name)
                if label is None:
                    skipped[obj.raw_name] = skipped.get(obj.raw_name, 0) + 1
                    continue
                instances.append(self._instance(obj.corners, label, obj.difficult))
            data_list.append(dict(img_id=img_id, file_name=file_name, img_path=img_path,
                                  xml_path=xml_path, width=width, height=height,
                                  instances=instances))
        self._report_skipped(skipped)
        return data_list

    def filter_data(self) -> List[dict]:
        """Also drop images whose shorter side is below ``filter_cfg.min_size``."""
        data_list = super().filter_data()
        min_size = (self.filter_cfg or {}).get('min_size', 0) if not self.test_mode else 0
        return [info for info in data_list if min(info['width'], info['height']) >= min_size]
