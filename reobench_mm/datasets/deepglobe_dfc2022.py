"""DeepGlobe Land Cover and DFC2022 (MiniFrance), each in its official release's layout.

**DeepGlobe Land Cover** (the 2018 challenge's release): 2448×2448 RGB satellite images
(50 cm) with colour-coded masks, in one folder per split; only ``train`` (803 images) has
masks::

    <data_root>/train/<id>_sat.jpg
    <data_root>/train/<id>_mask.png      # RGB, one colour per class
    <data_root>/valid/<id>_sat.jpg
    <data_root>/test/<id>_sat.jpg

The mask colours (:data:`DEEPGLOBE_COLOURS`): urban land cyan, agriculture yellow,
rangeland magenta, forest green, water blue, barren white, unknown black (not scored:
loaded as 255). The release asks to binarise the masks at 128 first, their values not
being pure 0 and 255; load them with ``LoadAnnotationsFromColours(colours=
DEEPGLOBE_COLOURS, threshold=128)``. A held-out part of ``train`` is chosen with
``ann_file`` (a text file of ``<id>`` names, one a line, as MMSegmentation's datasets
read it) or a ``HeldOutSplitDataset``.

**DFC2022** (IEEE GRSS Data Fusion Contest 2022, on MiniFrance): 2000×2000 RGB
orthophotos (BD ORTHO, 50 cm, 3-band ``uint8`` GeoTIFF), a DEM and UrbanAtlas 2012 labels
(``uint8``, 0 no information, 1..15 the classes of :data:`DFC2022_CLASSES`), one folder
per region::

    <data_root>/labeled_train/<region>/BDORTHO/<id>.tif
    <data_root>/labeled_train/<region>/UrbanAtlas/<id>_UA2012.tif
    <data_root>/labeled_train/<region>/RGEALTI/<id>_RGEALTI.tif
    <data_root>/unlabeled_train/<region>/...   <data_root>/val/<region>/...  (no labels)

Labels are read with ``reduce_zero_label=True`` (0 ignored, 1..15 become 0..14).
"""
from __future__ import annotations

import glob
import os.path as osp
from typing import Any, List, Optional, Sequence

from mmseg.datasets import BaseSegDataset

from ..registry import DATASETS

__all__ = ['DeepGlobeLandCoverDataset', 'DFC2022Dataset', 'DEEPGLOBE_CLASSES',
           'DEEPGLOBE_COLOURS', 'DFC2022_CLASSES']

DEEPGLOBE_CLASSES = ('urban_land', 'agriculture_land', 'rangeland', 'forest_land', 'water',
                     'barren_land')
#: The mask colour of each class (RGB), in class order; black (unknown) is no class.
DEEPGLOBE_COLOURS = ((0, 255, 255), (255, 255, 0), (255, 0, 255), (0, 255, 0), (0, 0, 255),
                     (255, 255, 255))
#: UrbanAtlas 2012's classes of DFC2022, label values 1..15 (0: no information).
DFC2022_CLASSES = (
    'urban_fabric', 'industrial_commercial_public_military_private_and_transport_units',
    'mine_dump_and_construction_sites', 'artificial_non_agricultural_vegetated_areas',
    'arable_land', 'permanent_crops', 'pastures', 'complex_and_mixed_cultivation_patterns',
    'orchards_at_the_fringe_of_urban_classes', 'forests', 'herbaceous_vegetation_associations',
    'open_spaces_with_little_or_no_vegetation', 'wetlands', 'water', 'clouds_and_shadows')
#: The contest's colours of the classes 1..15.
_DFC2022_PALETTE = [
    [219, 95, 87], [219, 151, 87], [219, 208, 87], [173, 219, 87], [117, 219, 87],
    [123, 196, 123], [88, 177, 88], [212, 246, 212], [176, 226, 176], [0, 128, 0],
    [88, 176, 167], [153, 93, 19], [87, 155, 219], [0, 98, 255], [35, 31, 32]]


@DATASETS.register_module()
class DeepGlobeLandCoverDataset(BaseSegDataset):
    """DeepGlobe Land Cover (module docstring): ``<id>_sat.jpg`` images with
    ``<id>_mask.png`` colour masks, by default the ``train`` folder (the one with masks).

    Args:
        data_prefix: the image and mask folders (default both ``train``).
        **kwargs: the other arguments of MMSegmentation's ``BaseSegDataset`` (``ann_file``,
            ``metainfo``, ``pipeline``...; an unknown one is a TypeError).
    """
    METAINFO = dict(classes=DEEPGLOBE_CLASSES, palette=[list(c) for c in DEEPGLOBE_COLOURS],
                    label_colours=[list(c) for c in DEEPGLOBE_COLOURS],
                    label_rules=dict(boundaries='full', ignore_index=255,
                                     reduce_zero_label=False, nodata=None))

    def __init__(self, data_prefix: Optional[dict] = None, **kwargs: Any) -> None:
        super().__init__(img_suffix='_sat.jpg', seg_map_suffix='_mask.png',
                         data_prefix=data_prefix or dict(img_path='train',
                                                         seg_map_path='train'), **kwargs)


@DATASETS.register_module()
class DFC2022Dataset(BaseSegDataset):
    """DFC2022 (module docstring): the orthophotos and UrbanAtlas labels of ``split_dir``,
    every region or those of ``regions``, sorted by path.

    Args:
        split_dir: the release's folder, ``'labeled_train'`` (the one with labels).
        regions: None (every region folder) or the region folders to read (e.g. a
            held-out part of the regions).
        data_root: the folder holding ``labeled_train/``.
        **kwargs: the other arguments of MMSegmentation's ``BaseSegDataset``
            (``metainfo``, ``pipeline``...; an unknown one is a TypeError).

    Raises:
        ValueError: a region that is not a folder of ``split_dir`` (the message lists
            them), no image found, or an image without its label file.
    """
    METAINFO = dict(classes=DFC2022_CLASSES, palette=_DFC2022_PALETTE,
                    label_rules=dict(boundaries='full', ignore_index=255,
                                     reduce_zero_label=True, nodata=0))

    def __init__(self, split_dir: str = 'labeled_train',
                 regions: Optional[Sequence[str]] = None, reduce_zero_label: bool = True,
                 **kwargs: Any) -> None:
        if not isinstance(split_dir, str) or not split_dir:
            raise ValueError(f'split_dir must be a folder name (labeled_train), got '
                             f'{split_dir!r}')
        if regions is not None and (isinstance(regions, str) or not regions or
                                    not all(isinstance(r, str) and r for r in regions)):
            raise ValueError(f'regions must be None or a list of region folder names, got '
                             f'{regions!r}')
        self.split_dir = split_dir
        self.regions = None if regions is None else tuple(regions)
        super().__init__(img_suffix='.tif', seg_map_suffix='_UA2012.tif',
                         reduce_zero_label=reduce_zero_label, **kwargs)

    def load_data_list(self) -> List[dict]:
        """Every ``<region>/BDORTHO/<id>.tif`` with its ``UrbanAtlas/<id>_UA2012.tif``."""
        folder = osp.join(self.data_root or '', self.split_dir)
        available = sorted(d for d in glob.glob(osp.join(folder, '*'))
                           if osp.isdir(osp.join(d, 'BDORTHO')))
        names = [osp.basename(d) for d in available]
        if self.regions is not None:
            unknown = [r for r in self.regions if r not in names]
            if unknown:
                raise ValueError(f'DFC2022: region(s) {unknown} are not region folders of '
                                 f'{folder!r} (it has {names})')
            available = [d for d in available if osp.basename(d) in self.regions]
        data_list = []
        for region in available:
            for image in sorted(glob.glob(osp.join(region, 'BDORTHO', '*.tif'))):
                stem = osp.splitext(osp.basename(image))[0]
                label = osp.join(region, 'UrbanAtlas', f'{stem}_UA2012.tif')
                if not osp.isfile(label):
                    raise ValueError(f'DFC2022: {image!r} has no label file {label!r} (only '
                                     'labeled_train has UrbanAtlas labels)')
                data_list.append(dict(img_path=image, seg_map_path=label,
                                      label_map=self.label_map,
                                      reduce_zero_label=self.reduce_zero_label,
                                      seg_fields=[], region=osp.basename(region)))
        if not data_list:
            raise ValueError(f'DFC2022: no <region>/BDORTHO/<id>.tif under {folder!r} '
                             '(data_root must hold the unzipped labeled_train folder)')
        return data_list
