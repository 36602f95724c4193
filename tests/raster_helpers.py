"""Small GeoTIFFs written with rasterio for the multispectral tests."""
from typing import Optional, Sequence

import numpy as np
import rasterio
from rasterio.transform import Affine

from reobench_mm.transforms.raster_loading import SENTINEL2_BANDS

#: Width of the nodata frame of :func:`sentinel2_tile`.
BORDER = 3


def write_raster(path, bands: np.ndarray, nodata: Optional[float] = None,
                 descriptions: Optional[Sequence[str]] = None) -> str:
    """Write a ``C×H×W`` array as a georeferenced GeoTIFF (UTM 33N, 10 m pixels)."""
    count, height, width = bands.shape
    with rasterio.open(str(path), 'w', driver='GTiff', width=width, height=height,
                       count=count, dtype=bands.dtype, nodata=nodata, crs='EPSG:32633',
                       transform=Affine(10, 0, 500000, 0, -10, 5000000)) as dst:
        dst.write(bands)
        for index, name in enumerate(descriptions or (), start=1):
            dst.set_band_description(index, name)
    return str(path)


def sentinel2_bands(seed: int = 0, height: int = 40, width: int = 48) -> np.ndarray:
    """A ``13×H×W`` uint16 Sentinel-2-like array: values 1..10000 inside (so no valid
    pixel equals the nodata value 0 in every band), a nodata frame of :data:`BORDER`
    pixels (0 in every band), and one valid pixel that is 0 in band 5 only."""
    rng = np.random.default_rng(seed)
    bands = rng.integers(1, 10001, (len(SENTINEL2_BANDS), height, width)).astype(np.uint16)
    bands[:, :BORDER] = bands[:, -BORDER:] = 0
    bands[:, :, :BORDER] = bands[:, :, -BORDER:] = 0
    bands[4, height // 2, width // 2] = 0
    return bands


def sentinel2_tile(path, seed: int = 0, height: int = 40, width: int = 48,
                   described: bool = True) -> np.ndarray:
    """Write :func:`sentinel2_bands` to ``path`` (nodata 0, band descriptions
    ``B01`` ... ``B12`` unless ``described=False``); returns the array written."""
    bands = sentinel2_bands(seed, height, width)
    write_raster(path, bands, nodata=0, descriptions=SENTINEL2_BANDS if described else None)
    return bands
