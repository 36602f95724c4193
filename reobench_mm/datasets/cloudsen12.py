"""CloudSEN12 (Aybar et al., Scientific Data 2022): Sentinel-2 cloud and cloud-shadow
segmentation, in its per-patch GeoTIFF layout.

Layout (as the authors' own scripts read it)::

    <data_root>/high/<roi_id>/<s2_id>/S2L1C.tif            13 bands, int16, 509x509
    <data_root>/high/<roi_id>/<s2_id>/S2L2A.tif            Level-2A bands
    <data_root>/high/<roi_id>/<s2_id>/labels/manual_hq.tif  uint8 0..3

``high`` is the subset with high-quality manual labels (``scribble`` and ``nolabel`` are
the others). ``S2L1C.tif`` holds the 13 Level-1C bands B1, B2, ..., B8, B8A, B9, B10, B11,
B12 (the file's band descriptions), top-of-atmosphere reflectance x 10,000. Labels:
0 clear, 1 thick cloud, 2 thin cloud, 3 cloud shadow (the paper's Table 3); every pixel of
a high-quality label is one of them, so nothing is ignored but the pixels without image
data (every band 0), which the configs' ``IgnoreNodataLabels`` gives the ignore label 255.
"""
from __future__ import annotations

import glob
import os.path as osp
from typing import List, Optional, Sequence

from ..registry import DATASETS
from ..transforms.raster_loading import SENTINEL2_BANDS
from .raster_layouts import RasterLayoutDataset, Sample

__all__ = ['CloudSEN12Dataset', 'CLOUDSEN12_CLASSES', 'CLOUDSEN12_LABEL_RULES']

#: The label values 0..3, in order.
CLOUDSEN12_CLASSES = ('clear', 'thick cloud', 'thin cloud', 'cloud shadow')
#: Every pixel labelled (0..3); nodata image pixels are ignored (255) by the pipeline.
CLOUDSEN12_LABEL_RULES = dict(boundaries='full', ignore_index=255, reduce_zero_label=False,
                              nodata=None)


@DATASETS.register_module()
class CloudSEN12Dataset(RasterLayoutDataset):
    """CloudSEN12 patches in their per-patch folders (module docstring).

    Samples are the patch folders ``<roi_id>/<s2_id>`` under ``data_prefix['img_path']``
    (e.g. ``'high'``) that hold ``image_file``; a split list (``ann_file``) names them one
    per line, ``<roi_id>/<s2_id>``.

    Args:
        image_file: the image of a patch folder: ``'S2L1C.tif'`` (13 bands) or
            ``'S2L2A.tif'``.
        label_file: the label, relative to the patch folder: ``'labels/manual_hq.tif'``.
        Every other argument is ``BaseSegDataset``'s.
    """

    METAINFO = dict(classes=CLOUDSEN12_CLASSES,
                    palette=[[60, 160, 60], [255, 255, 255], [170, 200, 230], [60, 60, 60]],
                    label_rules=CLOUDSEN12_LABEL_RULES, band_names=SENTINEL2_BANDS)
    LAYOUT = '<roi_id>/<s2_id>/S2L1C.tif and <roi_id>/<s2_id>/labels/manual_hq.tif'

    def __init__(self, image_file: str = 'S2L1C.tif',
                 label_file: str = 'labels/manual_hq.tif', **kwargs) -> None:
        for name, value in (('image_file', image_file), ('label_file', label_file)):
            if not isinstance(value, str) or not value or osp.isabs(value):
                raise ValueError(f'CloudSEN12Dataset: {name} must be a file name relative '
                                 f'to the patch folder, e.g. \'S2L1C.tif\'; got {value!r}')
        self.image_file, self.label_file = image_file, label_file
        super().__init__(**kwargs)

    def find_samples(self, ids: Optional[Sequence[str]]) -> List[Sample]:
        root = self.image_root()
        if ids is None:
            found = glob.glob(osp.join(glob.escape(root), '*', '*', self.image_file))
            ids = sorted(osp.relpath(osp.dirname(p), root).replace(osp.sep, '/')
                         for p in found)
        samples = []
        for sample_id in ids:
            if sample_id.count('/') != 1:
                raise ValueError(f'CloudSEN12Dataset: a split list names patches as '
                                 f'<roi_id>/<s2_id>, got {sample_id!r}')
            folder = osp.join(root, sample_id)
            samples.append((sample_id, osp.join(folder, self.image_file),
                            osp.join(folder, self.label_file)))
        return samples
