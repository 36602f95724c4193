"""DynamicEarthNet (Toker et al., CVPR 2022): monthly land-cover labels on daily
PlanetScope (Planet Fusion) images, in its release layout.

Layout (the release's folders and the authors' split files)::

    <data_root>/planet/<zone>/<lonlat>/<cube_id>/PF-SR/<YYYY-MM-DD>.tif   4 bands
    <data_root>/labels/<cube_id>_<zone>/Labels/Raster/<scene>/<scene>-<YYYY_MM_01>.tif
    <data_root>/dynnet_training_splits/{train,val,test}.txt

A split file line is ``<planet folder> <label file> <YYYY-MM>``: the cube's ``PF-SR``
folder (written ``/reprocess-cropped/UTM-24000/...``, the authors' folder, which the
release calls ``planet/``), the month's label file and the month. The image of a sample
is that month's first daily image, ``<YYYY-MM>-01.tif``, as the authors' loader takes
one image per month (its ``single`` mode). Images: 1024x1024, bands blue, green, red,
near infrared (the authors' loader reads bands 3, 2, 1, 4 as red, green, blue, NIR).

Labels are one-hot rasters of 7 uint8 bands (255 where the pixel has the class): impervious
surface, agriculture, forest & other vegetation, wetlands, soil, water, snow & ice. As in
the authors' loader, snow & ice is ignored (6 classes are scored) and a pixel set in no
band is class 0; the configs read them with
``LoadOneHotAnnotations(on_value=255, ignore_bands=[7], unlabelled=0)``.
"""
from __future__ import annotations

import os.path as osp
import re
from typing import List, Optional, Sequence

from ..registry import DATASETS
from .raster_layouts import RasterLayoutDataset, Sample

__all__ = ['DynamicEarthNetDataset', 'DYNAMICEARTHNET_CLASSES', 'DYNAMICEARTHNET_BANDS',
           'DYNAMICEARTHNET_LABEL_RULES', 'parse_split_line']

#: The 6 scored classes (label bands 1..6); band 7, snow & ice, is ignored.
DYNAMICEARTHNET_CLASSES = ('impervious surface', 'agriculture', 'forest & other vegetation',
                           'wetlands', 'soil', 'water')
#: The bands of a ``PF-SR`` image, in file order.
DYNAMICEARTHNET_BANDS = ('BLUE', 'GREEN', 'RED', 'NIR')
DYNAMICEARTHNET_LABEL_RULES = dict(boundaries='full', ignore_index=255,
                                   reduce_zero_label=False, nodata=None)
#: The authors' image folder, which the release calls ``planet``.
_AUTHORS_FOLDER = 'reprocess-cropped/UTM-24000/'
_MONTH = re.compile(r'^\d{4}-\d{2}$')


def parse_split_line(line: str, where: str):
    """``(planet_folder, label_file, month)`` of a split-file line, the folders relative
    to the release root (the authors' image folder renamed ``planet/``).

    Raises:
        ValueError: not three fields, or a month that is not ``YYYY-MM``.
    """
    fields = line.split()
    if len(fields) != 3 or not _MONTH.match(fields[2]):
        raise ValueError(f'{where}: a DynamicEarthNet split line is "<planet folder> <label '
                         f'file> <YYYY-MM>", got {line!r}')
    folder, label, month = fields
    folder = folder.lstrip('/')
    if folder.startswith(_AUTHORS_FOLDER):
        folder = 'planet/' + folder[len(_AUTHORS_FOLDER):]
    return folder, label.lstrip('/'), month


@DATASETS.register_module()
class DynamicEarthNetDataset(RasterLayoutDataset):
    """DynamicEarthNet months in the release layout (module docstring).

    ``ann_file`` is one of the authors' split files (``dynnet_training_splits/train.txt``
    ...), relative to ``data_root``; it is required, as the release's labels and images
    are paired only there. A sample id is ``<cube folder>@<YYYY-MM>``.

    Args:
        day: the day of the month whose image a sample takes (``'01'``, the authors'
            single-image choice).
        Every other argument is ``BaseSegDataset``'s.
    """

    METAINFO = dict(classes=DYNAMICEARTHNET_CLASSES,
                    palette=[[96, 96, 96], [204, 204, 0], [0, 204, 0], [0, 0, 153],
                             [153, 76, 0], [0, 128, 255]],
                    label_rules=DYNAMICEARTHNET_LABEL_RULES, band_names=DYNAMICEARTHNET_BANDS)
    LAYOUT = ('the split file\'s planet/.../PF-SR/<YYYY-MM>-<day>.tif images and '
              'labels/.../Labels/Raster/... label files')

    def __init__(self, day: str = '01', **kwargs) -> None:
        if not isinstance(day, str) or not re.fullmatch(r'\d{2}', day) or \
                not 1 <= int(day) <= 31:
            raise ValueError(f'DynamicEarthNetDataset: day must be a day of the month as two '
                             f'digits, e.g. \'01\'; got {day!r}')
        self.day = day
        super().__init__(**kwargs)

    def split_ids(self) -> Optional[List[str]]:
        if not self.ann_file:
            raise ValueError('DynamicEarthNetDataset needs ann_file, one of the split files '
                             '(e.g. \'dynnet_training_splits/train.txt\'): the release pairs '
                             'images and labels only there')
        return super().split_ids()

    def find_samples(self, ids: Optional[Sequence[str]]) -> List[Sample]:
        root = self.data_root or ''
        samples = []
        for line in ids or ():
            folder, label, month = parse_split_line(line, self.ann_file)
            sample_id = f'{osp.dirname(folder.rstrip("/"))}@{month}'
            samples.append((sample_id, osp.join(root, folder, f'{month}-{self.day}.tif'),
                            osp.join(root, label)))
        return samples
