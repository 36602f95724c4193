"""SpaceNet 2 (Van Etten et al., 2018): building footprints on WorldView-3 8-band
multispectral chips of Las Vegas, Paris, Shanghai and Khartoum, in the release layout
plus the masks :func:`~reobench_mm.datasets.converters.spacenet2.write_building_masks`
writes beside it.

Layout::

    <data_root>/AOI_2_Vegas_Train/MUL/MUL_AOI_2_Vegas_img<k>.tif          (release)
    <data_root>/AOI_2_Vegas_Train/geojson/buildings/buildings_AOI_2_Vegas_img<k>.geojson
    <data_root>/AOI_2_Vegas_Train/building_masks/MUL/buildings_AOI_2_Vegas_img<k>.tif

Images: 8 bands, uint16 (11-bit digital numbers): coastal, blue, green, yellow, red,
red edge, near infrared 1 and 2 (WorldView-3's multispectral bands in product order);
``MUL`` chips are about 163x163 pixels of 1.24 m (200 m), ``MUL-PanSharpen`` 650x650 of
0.3 m. Labels: 0 background, 1 building. Pixels without image data (every band 0, the
edges of the AOIs) are ignored through ``IgnoreNodataLabels``. Only the training
tarballs carry footprints (the public test chips have none), so every split is a part of
them, named by a split list.
"""
from __future__ import annotations

import glob
import os.path as osp
from typing import List, Optional, Sequence

from reobench_corruptions.bands import WORLDVIEW3_MS_BANDS
from ..registry import DATASETS
from .converters.spacenet2 import SPACENET2_PRODUCTS, building_mask_path, chip_id
from .raster_layouts import RasterLayoutDataset, Sample

__all__ = ['SpaceNet2Dataset', 'SPACENET2_CLASSES', 'WORLDVIEW3_MS_BANDS',
           'SPACENET2_LABEL_RULES']

SPACENET2_CLASSES = ('background', 'building')
#: WorldView-3's 8 multispectral bands, in product order.
SPACENET2_LABEL_RULES = dict(boundaries='full', ignore_index=255, reduce_zero_label=False,
                             nodata=None)


@DATASETS.register_module()
class SpaceNet2Dataset(RasterLayoutDataset):
    """SpaceNet 2 chips of one 8-band product with their building masks (module
    docstring). Without a split list every chip under ``data_root`` is a sample; a split
    list names chips one per line (``AOI_2_Vegas_img1``).

    Args:
        product: ``'MUL'`` or ``'MUL-PanSharpen'``: the images, and the grid of the masks
            (written for that product).
        Every other argument is ``BaseSegDataset``'s.
    """

    METAINFO = dict(classes=SPACENET2_CLASSES, palette=[[0, 0, 0], [230, 60, 40]],
                    label_rules=SPACENET2_LABEL_RULES, band_names=WORLDVIEW3_MS_BANDS)
    LAYOUT = ('AOI_<n>_<city>_Train/<product>/<product>_<chip>.tif with '
              'AOI_<n>_<city>_Train/building_masks/<product>/buildings_<chip>.tif (written '
              'by reobench_mm.datasets.converters.spacenet2.write_building_masks)')

    def __init__(self, product: str = 'MUL', **kwargs) -> None:
        if product not in SPACENET2_PRODUCTS:
            raise ValueError(f'SpaceNet2Dataset: unknown product {product!r}; valid: '
                             f'{list(SPACENET2_PRODUCTS)}')
        self.product = product
        super().__init__(**kwargs)

    def find_samples(self, ids: Optional[Sequence[str]]) -> List[Sample]:
        root = self.image_root()
        pattern = osp.join(glob.escape(root), '**', self.product, f'{self.product}_*.tif')
        images = {chip_id(p, self.product): p for p in glob.glob(pattern, recursive=True)}
        if ids is None:
            ids = sorted(images)
        unknown = [i for i in ids if i not in images]
        if unknown:
            raise FileNotFoundError(
                f'SpaceNet2Dataset: {len(unknown)} chips of the split list have no '
                f'{self.product} image under {root!r}, e.g. {unknown[:3]}')
        return [(i, images[i], building_mask_path(images[i], self.product)) for i in ids]
