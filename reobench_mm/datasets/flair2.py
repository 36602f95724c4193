"""FLAIR #2 (Garioud et al., NeurIPS 2023 Datasets and Benchmarks): French land cover
from aerial imagery, in its release layout (the aerial part; the Sentinel-2 time series
are not read).

Layout (the release's folders, as the official baseline reads them)::

    <data_root>/flair_aerial_train/<domain>/<zone>/img/IMG_<n>.tif   5 bands, uint8, 512x512
    <data_root>/flair_labels_train/<domain>/<zone>/msk/MSK_<n>.tif   uint8 1..19
    <data_root>/flair_2_aerial_test/...  and  flair_2_labels_test/... (same below)

A domain is a French département and year (``D006_2020``). Image bands: red, green, blue,
near infrared, elevation (a surface-height band), 0.2 m pixels. Labels 1..19: building,
pervious surface, impervious surface, bare soil, water, coniferous, deciduous, brushwood,
vineyard, herbaceous vegetation, agricultural land, plowed land, swimming pool, snow,
clear cut, mixed, ligneous, greenhouse, other.

The 13 classes of the official baselines: labels 1..12 are classes 0..11 and 13..19 are
merged into class 12, ``other`` (the baseline's ``labels[labels > 13] = 13; labels - 1``).
Here ``LoadAnnotations(reduce_zero_label=True)`` makes 1..19 into 0..18 (and a 0, which
the release does not use, into the ignore label 255), and the dataset's ``label_map``
(which ``LoadAnnotations`` applies next) merges 12..18 into 12. The official metric
averages the IoU of the first 12 classes (``other`` is left out of the mean, its pixels
still count as errors of the classes predicted there); MMSegmentation's ``IoUMetric``
averages all 13.

Splits: the release's train and test folders; the official baseline draws its validation
domains at random from the training domains (80/20, no seed), so a validation split is
given here by domains (``domains=``) or by a split list.
"""
from __future__ import annotations

import glob
import os.path as osp
from typing import Dict, List, Optional, Sequence

from ..registry import DATASETS
from .raster_layouts import RasterLayoutDataset, Sample

__all__ = ['FLAIR2Dataset', 'FLAIR2_CLASSES', 'FLAIR2_RELEASE_CLASSES', 'FLAIR2_BANDS',
           'FLAIR2_LABEL_RULES', 'FLAIR2_LABEL_MAP']

#: The release's 19 classes, labels 1..19.
FLAIR2_RELEASE_CLASSES = (
    'building', 'pervious surface', 'impervious surface', 'bare soil', 'water',
    'coniferous', 'deciduous', 'brushwood', 'vineyard', 'herbaceous vegetation',
    'agricultural land', 'plowed land', 'swimming pool', 'snow', 'clear cut', 'mixed',
    'ligneous', 'greenhouse', 'other')
#: The 13 classes of the official baselines: the first 12, then ``other`` for the rest.
FLAIR2_CLASSES = FLAIR2_RELEASE_CLASSES[:12] + ('other',)
#: After ``reduce_zero_label`` (labels 1..19 -> 0..18): 12..18 merged into 12.
FLAIR2_LABEL_MAP: Dict[int, int] = {**{i: i for i in range(12)},
                                    **{i: 12 for i in range(12, 19)}}
#: The bands of an aerial image, in file order.
FLAIR2_BANDS = ('RED', 'GREEN', 'BLUE', 'NIR', 'ELEVATION')
FLAIR2_LABEL_RULES = dict(boundaries='full', ignore_index=255, reduce_zero_label=True,
                          nodata=None)
# the release's colours of labels 1..12, and black for the merged "other"
_PALETTE = [[219, 14, 154], [147, 142, 123], [248, 12, 0], [169, 113, 1], [21, 83, 174],
            [25, 74, 38], [70, 228, 131], [243, 166, 13], [102, 0, 130], [85, 255, 0],
            [255, 243, 13], [228, 223, 124], [0, 0, 0]]


@DATASETS.register_module()
class FLAIR2Dataset(RasterLayoutDataset):
    """FLAIR #2 aerial patches and labels (module docstring), read with
    ``reduce_zero_label=True`` and the 19 -> 13 class merge.

    ``data_prefix`` names the release's folders, e.g. ``dict(img_path='flair_aerial_train',
    seg_map_path='flair_labels_train')``. A sample id (a split-list line) is the image's
    path below the image folder without ``.tif``: ``D006_2020/Z1_NN/img/IMG_000001``.

    Args:
        domains: only the samples of these domains (e.g. ``['D006_2020']``); None: all.
        Every other argument is ``BaseSegDataset``'s (``reduce_zero_label`` must stay
        True, ``metainfo`` classes the 13 above: another label set goes through
        ``ClassMappedDataset``).

    Raises:
        ValueError: ``reduce_zero_label=False``, other classes, a bad ``domains``.
    """

    METAINFO = dict(classes=FLAIR2_CLASSES, palette=_PALETTE, label_rules=FLAIR2_LABEL_RULES,
                    band_names=FLAIR2_BANDS)
    LAYOUT = '<domain>/<zone>/img/IMG_<n>.tif with <domain>/<zone>/msk/MSK_<n>.tif'

    def __init__(self, domains: Optional[Sequence[str]] = None,
                 reduce_zero_label: bool = True, **kwargs) -> None:
        if reduce_zero_label is not True:
            raise ValueError('FLAIR2Dataset reads labels 1..19 with reduce_zero_label=True '
                             f'(1..19 -> 0..18, then merged into 13 classes); got '
                             f'reduce_zero_label={reduce_zero_label!r}')
        if domains is not None and (isinstance(domains, (str, bytes)) or not domains or
                                    not all(isinstance(d, str) and d for d in domains)):
            raise ValueError('FLAIR2Dataset: domains must be None or a list of domain '
                             f'folder names, e.g. [\'D006_2020\']; got {domains!r}')
        self.domains = None if domains is None else tuple(domains)
        super().__init__(reduce_zero_label=True, **kwargs)

    @classmethod
    def get_label_map(cls, new_classes: Optional[Sequence] = None) -> Dict[int, int]:
        """The 19 -> 13 merge (:data:`FLAIR2_LABEL_MAP`).

        Raises:
            ValueError: classes other than :data:`FLAIR2_CLASSES`.
        """
        if new_classes is not None and tuple(new_classes) != FLAIR2_CLASSES:
            raise ValueError(f'FLAIR2Dataset has the 13 classes {list(FLAIR2_CLASSES)}; '
                             f'got {list(new_classes)} (map them to another label set with '
                             'ClassMappedDataset)')
        return dict(FLAIR2_LABEL_MAP)

    def find_samples(self, ids: Optional[Sequence[str]]) -> List[Sample]:
        root = self.image_root()
        if ids is None:
            found = glob.glob(osp.join(glob.escape(root), '*', '*', 'img', 'IMG_*.tif'))
            ids = sorted(osp.relpath(p, root)[:-len('.tif')].replace(osp.sep, '/')
                         for p in found)
        samples = []
        for sample_id in ids:
            parts = sample_id.split('/')
            if len(parts) != 4 or parts[2] != 'img' or not parts[3].startswith('IMG_'):
                raise ValueError(f'FLAIR2Dataset: a sample id is <domain>/<zone>/img/'
                                 f'IMG_<n>, got {sample_id!r}')
            if self.domains is not None and parts[0] not in self.domains:
                continue
            label = '/'.join(parts[:2] + ['msk', 'MSK_' + parts[3][len('IMG_'):]])
            samples.append((sample_id, osp.join(root, sample_id + self.img_suffix),
                            osp.join(self.label_root(), label + self.seg_map_suffix)))
        return samples
