"""SpaceNet 2 building footprints (GeoJSON polygons) -> building masks on the image grid.

The release (``SN2_buildings_train_AOI_<n>_<city>.tar.gz``, extracted) holds per AOI::

    AOI_2_Vegas_Train/MUL/MUL_AOI_2_Vegas_img<k>.tif        8 bands, uint16, 1.24 m
    AOI_2_Vegas_Train/MUL-PanSharpen/MUL-PanSharpen_AOI_2_Vegas_img<k>.tif   8 bands, 0.3 m
    AOI_2_Vegas_Train/geojson/buildings/buildings_AOI_2_Vegas_img<k>.geojson

(also ``PAN``, ``RGB-PanSharpen`` and ``summaryData``). The footprints are polygons in
geographic coordinates; a segmentation mask is made from them on each image's own pixel
grid with ``rasterio.features.rasterize``:

- every polygon of the chip's GeoJSON, reprojected from the file's coordinate system
  (its ``crs`` member; without one GeoJSON's WGS 84 longitude/latitude) to the image's
  (``rasterio.warp.transform_geom``; the release's images and footprints are both WGS 84,
  so this changes nothing there);
- burnt as 1 into a 0 background with the image's affine transform and size;
  ``all_touched=False``: a pixel is a building when its centre lies inside a polygon
  (GDAL's rule; TorchGeo's SpaceNet reader rasterises the same way); holes stay 0;
- a chip without buildings (an empty feature collection, or an empty file) gives an
  all-0 mask.

:func:`write_building_masks` writes the mask of every chip of a product as a uint8
GeoTIFF (the image's grid and georeferencing) to
``<AOI folder>/building_masks/<product>/buildings_<chip>.tif``, which
:class:`~reobench_mm.datasets.spacenet2.SpaceNet2Dataset` reads. Files are written
atomically; a rerun skips masks that exist unless ``overwrite``.
"""
from __future__ import annotations

import glob
import json
import os.path as osp
import warnings
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ...fileio import atomic_write_bytes, remove_stale_temporaries

__all__ = ['SPACENET2_PRODUCTS', 'MASK_FOLDER', 'chip_id', 'footprint_path',
           'building_mask_path', 'read_footprints', 'rasterize_buildings',
           'write_building_masks']

#: The 8-band image products of the release (each in a folder of its name).
SPACENET2_PRODUCTS = ('MUL', 'MUL-PanSharpen')
#: The folder of an AOI the masks are written to.
MASK_FOLDER = 'building_masks'
_GEOJSON_DEFAULT_CRS = 'OGC:CRS84'


def chip_id(image_path: str, product: str) -> str:
    """``AOI_2_Vegas_img1`` of ``.../MUL/MUL_AOI_2_Vegas_img1.tif``.

    Raises:
        ValueError: a file name that is not ``<product>_<chip>.tif``.
    """
    name = osp.basename(image_path)
    prefix = f'{product}_'
    if not (name.startswith(prefix) and name.endswith('.tif')) or len(name) <= len(prefix) + 4:
        raise ValueError(f'{image_path!r} is not a SpaceNet 2 {product} image '
                         f'({product}_AOI_<n>_<city>_img<k>.tif)')
    return name[len(prefix):-len('.tif')]


def _aoi_folder(image_path: str) -> str:
    return osp.dirname(osp.dirname(osp.abspath(image_path)))


def footprint_path(image_path: str, product: str) -> str:
    """The chip's GeoJSON: ``<AOI>/geojson/buildings/buildings_<chip>.geojson``."""
    return osp.join(_aoi_folder(image_path), 'geojson', 'buildings',
                    f'buildings_{chip_id(image_path, product)}.geojson')


def building_mask_path(image_path: str, product: str) -> str:
    """Where :func:`write_building_masks` puts the chip's mask:
    ``<AOI>/building_masks/<product>/buildings_<chip>.tif``."""
    return osp.join(_aoi_folder(image_path), MASK_FOLDER, product,
                    f'buildings_{chip_id(image_path, product)}.tif')


def read_footprints(path: str) -> Tuple[List[Dict[str, Any]], str]:
    """``(geometries, crs)`` of a footprint GeoJSON: the non-empty geometries of its
    features and its coordinate system (``'OGC:CRS84'`` when it names none). An empty
    file has no geometries.

    Raises:
        FileNotFoundError: no such file. ValueError: not JSON, or not a GeoJSON
            FeatureCollection.
    """
    if not osp.isfile(path):
        raise FileNotFoundError(f'building footprints {path!r} do not exist')
    with open(path, encoding='utf-8') as handle:
        text = handle.read()
    if not text.strip():
        return [], _GEOJSON_DEFAULT_CRS
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f'{path!r} is not JSON: {error}') from error
    if not isinstance(data, dict) or data.get('type') != 'FeatureCollection':
        raise ValueError(f'{path!r} is not a GeoJSON FeatureCollection')
    crs = ((data.get('crs') or {}).get('properties') or {}).get('name') or _GEOJSON_DEFAULT_CRS
    geometries = [f['geometry'] for f in data.get('features') or []
                  if isinstance(f, dict) and f.get('geometry')]
    return geometries, crs


def rasterize_buildings(geojson_path: str, image_path: str) -> np.ndarray:
    """The ``uint8`` building mask (1 building, 0 background) of a chip on the pixel
    grid of ``image_path`` (module docstring).

    Raises:
        FileNotFoundError, ValueError: a missing or unreadable GeoJSON or image.
    """
    import rasterio
    from rasterio.crs import CRS
    from rasterio.features import rasterize
    from rasterio.warp import transform_geom

    from ...transforms.raster_loading import open_raster
    geometries, crs = read_footprints(geojson_path)
    with open_raster(image_path) as src:
        shape, transform, image_crs = (src.height, src.width), src.transform, src.crs
    if not geometries:
        return np.zeros(shape, np.uint8)
    if image_crs is None:
        raise ValueError(f'{image_path!r} has no coordinate system: building footprints '
                         'in map coordinates cannot be placed on it')
    source = CRS.from_user_input(crs)
    if source != image_crs:
        geometries = [transform_geom(source, image_crs, g) for g in geometries]
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', rasterio.errors.NotGeoreferencedWarning)
        return rasterize(((g, 1) for g in geometries), out_shape=shape, fill=0,
                         transform=transform, all_touched=False, dtype=np.uint8)


def _geotiff_bytes(mask: np.ndarray, image_path: str) -> bytes:
    from rasterio.io import MemoryFile

    from ...transforms.raster_loading import open_raster
    with open_raster(image_path) as src:
        crs, transform = src.crs, src.transform
    with MemoryFile() as memory:
        with memory.open(driver='GTiff', width=mask.shape[1], height=mask.shape[0], count=1,
                         dtype='uint8', crs=crs, transform=transform,
                         compress='deflate') as dst:
            dst.write(mask, 1)
        return memory.read()


def write_building_masks(root: str, product: str = 'MUL', overwrite: bool = False,
                         aois: Optional[List[str]] = None) -> List[str]:
    """Write the building mask of every ``product`` chip under ``root`` (the folder of
    the extracted ``AOI_<n>_<city>_Train`` folders, or one of them).

    Args:
        root: the release folder.
        product: ``'MUL'`` (1.24 m) or ``'MUL-PanSharpen'`` (0.3 m): the grid of the
            masks, the images :class:`~reobench_mm.datasets.spacenet2.SpaceNet2Dataset`
            reads with them.
        overwrite: rewrite masks that exist.
        aois: only these AOI folders (``['AOI_2_Vegas_Train']``); None: all.

    Returns:
        The paths of the masks written.

    Raises:
        ValueError: an unknown product. FileNotFoundError: no image of the product under
            ``root``, or a chip without its GeoJSON.
    """
    if product not in SPACENET2_PRODUCTS:
        raise ValueError(f'unknown SpaceNet 2 product {product!r}; valid: '
                         f'{list(SPACENET2_PRODUCTS)}')
    pattern = osp.join(glob.escape(root), '**', product, f'{product}_*.tif')
    images = sorted(p for p in glob.glob(pattern, recursive=True)
                    if aois is None or osp.basename(_aoi_folder(p)) in aois)
    if not images:
        raise FileNotFoundError(f'no {product} image under {root!r} (expected '
                                f'AOI_<n>_<city>_Train/{product}/{product}_*.tif)')
    written, cleaned = [], set()
    for image in images:
        target = building_mask_path(image, product)
        folder = osp.dirname(target)
        if folder not in cleaned and osp.isdir(folder):  # an interrupted run's temporaries
            remove_stale_temporaries(folder)
        cleaned.add(folder)
        if osp.isfile(target) and not overwrite:
            continue
        mask = rasterize_buildings(footprint_path(image, product), image)
        atomic_write_bytes(target, _geotiff_bytes(mask, image))
        written.append(target)
    return written
