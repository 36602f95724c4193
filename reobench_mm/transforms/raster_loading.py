"""Multispectral rasters in the pipelines: :class:`LoadMultiBandImageFromFile` and
:class:`IgnoreNodataLabels`.

``LoadImageFromFile`` decodes through OpenCV, which keeps at most 4 channels of 8 or 16
bits and knows nothing of band names or nodata. GeoTIFFs (and every other format GDAL
reads) are read here with rasterio, which reads any band count and data type, a window
of a large scene without reading the rest, the file's band descriptions and its nodata
value or mask (GDAL's own mask rules). The image keeps the type the file stores
(``uint8``, ``uint16``, ``int16``, ``float32`` ...) as an ``H×W×C`` array, ``C`` the
number of chosen bands (1 stays ``H×W×1``).

A pixel is *nodata* when **every** chosen band is invalid there (a fill border, outside
the swath): a valid pixel whose value happens to equal the nodata value in one band (a
dark pixel in one band) is kept. Without ``nodata=`` a band's validity is GDAL's mask of
that band (its nodata value, or the file's internal mask band); with ``nodata=`` it is
``value != nodata`` (``NaN`` matches ``NaN``). The mask goes into
``results['nodata_mask']``; :class:`IgnoreNodataLabels`, right after the annotation
loading, gives those label pixels the ignored label::

    dict(type='LoadMultiBandImageFromFile', bands=['B02', 'B03', 'B04', 'B08'],
         band_names=SENTINEL2_BANDS),
    dict(type='LoadAnnotations'),
    dict(type='IgnoreNodataLabels', ignore_index=255),
    dict(type='PackSegInputs', meta_keys=(..., 'band_names', 'band_indices', 'window')),

The shared reading functions (:func:`open_raster`, :func:`select_bands`,
:func:`read_bands`, :func:`read_raster`) are what the per-band statistics
(:mod:`reobench_mm.datasets.band_statistics`) read with, so both see the same pixels.
"""
from __future__ import annotations

import math
import os.path as osp
import warnings
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
from mmcv.transforms import BaseTransform

from reobench_corruptions.base import PROTOCOLS, get_corruption, list_corruptions
from ..registry import TRANSFORMS
from .corruption import GEOMETRY_KEY

__all__ = ['LoadMultiBandImageFromFile', 'IgnoreNodataLabels', 'RasterRead',
           'SENTINEL2_BANDS', 'check_band_selection', 'check_band_names', 'check_window',
           'check_nodata', 'open_raster', 'select_bands', 'read_bands', 'read_raster']

#: The 13 bands of Sentinel-2 Level-1C in the order the products list them.
SENTINEL2_BANDS = ('B01', 'B02', 'B03', 'B04', 'B05', 'B06', 'B07', 'B08', 'B8A', 'B09',
                   'B10', 'B11', 'B12')

BandRequest = Union[int, str]
#: ``(col_off, row_off, width, height)`` in pixels, as ``rasterio.windows.Window`` takes it.
WindowTuple = Tuple[int, int, int, int]


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def check_band_selection(bands: Any) -> Optional[Tuple[BandRequest, ...]]:
    """``bands`` as a tuple of 1-based band indices and band names (None: every band).

    Raises:
        ValueError: not None nor a non-empty list of ints >= 1 and non-empty strings, or
            an index or name given twice.
    """
    if bands is None:
        return None
    valid = ("None (every band, in the file's order) or a list of 1-based band indices "
             "and band names, e.g. [4, 3, 2] or ['B04', 'B03', 'B02']")
    if isinstance(bands, (str, bytes)) or not isinstance(bands, (list, tuple)) or not bands:
        raise ValueError(f'bands must be {valid}; got {bands!r}')
    out: List[BandRequest] = []
    for band in bands:
        if _is_int(band) and band >= 1:
            out.append(int(band))
        elif isinstance(band, str) and band:
            out.append(band)
        else:
            raise ValueError(f'bands must be {valid}; got {band!r} in {list(bands)!r} '
                             '(band indices count from 1, as GDAL and rasterio count them)')
    if len(set(out)) != len(out):
        raise ValueError(f'bands lists a band more than once: {list(bands)!r}')
    return tuple(out)


def check_band_names(band_names: Any) -> Optional[Tuple[str, ...]]:
    """``band_names`` as a tuple of distinct non-empty strings (None: none given).

    Raises:
        ValueError: anything else.
    """
    if band_names is None:
        return None
    if isinstance(band_names, (str, bytes)) or not isinstance(band_names, (list, tuple)) \
            or not band_names or not all(isinstance(n, str) and n for n in band_names):
        raise ValueError('band_names must be None or a list of the names of every band of '
                         "the files, in their order, e.g. ('B01', 'B02', ..., 'B12'); got "
                         f'{band_names!r}')
    if len(set(band_names)) != len(band_names):
        raise ValueError(f'band_names names a band twice: {list(band_names)!r}')
    return tuple(band_names)


def check_window(window: Any) -> Optional[WindowTuple]:
    """``window`` as ``(col_off, row_off, width, height)`` ints (None: the whole raster).

    Raises:
        ValueError: not four ints, a negative offset or a width or height below 1.
    """
    if window is None:
        return None
    if not isinstance(window, (list, tuple)) or len(window) != 4 or \
            not all(_is_int(v) for v in window):
        raise ValueError('window must be None (the whole raster) or (col_off, row_off, '
                         f'width, height) in pixels, four ints; got {window!r}')
    col_off, row_off, width, height = (int(v) for v in window)
    if col_off < 0 or row_off < 0 or width < 1 or height < 1:
        raise ValueError('window (col_off, row_off, width, height) needs offsets >= 0 and '
                         f'a width and height >= 1; got {tuple(window)!r}')
    return col_off, row_off, width, height


def check_nodata(nodata: Any) -> Optional[float]:
    """``nodata`` as a float (``NaN`` allowed; None: the file's own).

    Raises:
        ValueError: not None nor a real number.
    """
    if nodata is None:
        return None
    if isinstance(nodata, (bool, np.bool_)) or not isinstance(
            nodata, (int, float, np.integer, np.floating)):
        raise ValueError("nodata must be None (the file's own nodata value or mask) or a "
                         f'number, e.g. 0 or float("nan"); got {nodata!r}')
    return float(nodata)


def _rasterio():
    try:
        import rasterio
    except ImportError as error:  # a runtime requirement: said how to install it
        raise ImportError('reading rasters needs rasterio: pip install -r '
                          'requirements/runtime.txt (or pip install rasterio)') from error
    return rasterio


def open_raster(path: str) -> Any:
    """The file opened with rasterio (a ``DatasetReader``; close it, or use ``with``).
    Whether it is georeferenced does not matter: only pixels are read, so rasterio's
    ``NotGeoreferencedWarning`` is not shown.

    Raises:
        FileNotFoundError: no such file. ValueError: a file rasterio cannot read.
    """
    rasterio = _rasterio()
    if not isinstance(path, str) or not path:
        raise ValueError(f'a raster path must be a non-empty string, got {path!r}')
    if '://' not in path and not path.startswith('/vsi') and not osp.isfile(path):
        raise FileNotFoundError(f'raster {path!r} does not exist' + (
            ' (it is a folder)' if osp.isdir(path) else ''))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', rasterio.errors.NotGeoreferencedWarning)
            return rasterio.open(path)
    except rasterio.errors.RasterioIOError as error:
        raise ValueError(f'cannot read {path!r} as a raster: {error}') from error


def _available(src: Any, band_names: Optional[Sequence[str]]) -> str:
    described = [d for d in src.descriptions if d]
    return (f'indices 1..{src.count}; band descriptions '
            f'{described if described else "(none set)"}; band_names '
            f'{list(band_names) if band_names else "(none given)"}')


def select_bands(src: Any, path: str, bands: Optional[Sequence[BandRequest]],
                 band_names: Optional[Sequence[str]] = None
                 ) -> Tuple[Tuple[int, ...], Tuple[Optional[str], ...]]:
    """The 1-based indices of the requested bands in the requested order, and their names.

    A name is looked up among the file's band descriptions first, then among
    ``band_names`` (the sensor's names of every band, in file order). A band's name in
    the result is its ``band_names`` entry when those are given (the same naming for
    every file of a dataset), else the file's description, else None.

    Raises:
        ValueError: ``band_names`` of another length than the file's band count, an
            index out of range, a name found nowhere or in two bands, a band chosen
            twice, or chosen bands of different data types; each message lists what is
            available.
    """
    count = src.count
    if band_names is not None and len(band_names) != count:
        raise ValueError(f'band_names names {len(band_names)} bands but {path!r} has '
                         f'{count}: give one name per band, in file order')
    descriptions = list(src.descriptions)
    indices: List[int] = []
    for band in (range(1, count + 1) if bands is None else bands):
        if _is_int(band):
            if not 1 <= band <= count:
                raise ValueError(f'band index {band} is out of range: {path!r} has {count} '
                                 f'bands (valid: {_available(src, band_names)})')
            indices.append(int(band))
            continue
        found = [i + 1 for i, d in enumerate(descriptions) if d == band]
        if not found and band_names is not None:
            found = [i + 1 for i, n in enumerate(band_names) if n == band]
        if len(found) != 1:
            what = 'is not a band name' if not found else f'names bands {found}'
            raise ValueError(f'band {band!r} {what} of {path!r} (valid: '
                             f'{_available(src, band_names)})')
        indices.append(found[0])
    if len(set(indices)) != len(indices):
        raise ValueError(f'bands {list(bands or [])!r} choose a band of {path!r} more than '
                         f'once (indices {indices})')
    dtypes = {src.dtypes[i - 1] for i in indices}
    if len(dtypes) > 1:
        raise ValueError(f'the chosen bands of {path!r} have different data types '
                         f'{sorted(dtypes)}: choose bands of one type')
    names = tuple(band_names[i - 1] if band_names is not None else descriptions[i - 1]
                  for i in indices)
    return tuple(indices), names


def _check_nodata_fits(nodata: float, dtype: np.dtype, path: str) -> None:
    """Refuse a ``nodata`` that no value of an integer ``dtype`` can equal."""
    if dtype.kind not in 'iu':
        return
    info = np.iinfo(dtype)
    if math.isnan(nodata) or nodata != int(nodata) or not info.min <= nodata <= info.max:
        raise ValueError(f'nodata={nodata!r} cannot occur in the {dtype} bands of {path!r}: '
                         f'give an integer in {info.min}..{info.max}')


def read_bands(src: Any, path: str, indices: Sequence[int], nodata: Optional[float] = None,
               window: Optional[WindowTuple] = None) -> Tuple[np.ndarray, np.ndarray]:
    """``(image, nodata_mask)``: the bands ``indices`` (1-based) of ``window`` (None: the
    whole raster) as a C-contiguous ``H×W×C`` array of the stored type, and the ``H×W``
    boolean mask of the pixels where every one of them is invalid (module docstring).

    Raises:
        ValueError: a window reaching outside the raster, or a ``nodata`` the bands'
            integer type cannot hold.
    """
    rasterio = _rasterio()
    from rasterio.windows import Window
    read_window = None
    if window is not None:
        col_off, row_off, width, height = window
        if col_off + width > src.width or row_off + height > src.height:
            raise ValueError(
                f'window (col_off={col_off}, row_off={row_off}, width={width}, height='
                f'{height}) reaches outside {path!r}, which is {src.width} columns by '
                f'{src.height} rows: col_off + width must be <= {src.width} and row_off + '
                f'height <= {src.height}')
        read_window = Window(col_off, row_off, width, height)
    indices = list(indices)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', rasterio.errors.NotGeoreferencedWarning)
        stacked = src.read(indices, window=read_window)  # C×H×W
        if nodata is None:
            invalid = np.ones(stacked.shape[1:], bool)
            for index in indices:  # GDAL's mask of each band: 0 where invalid
                invalid &= src.read_masks(index, window=read_window) == 0
                if not invalid.any():
                    break
    if nodata is not None:
        _check_nodata_fits(nodata, stacked.dtype, path)
        if math.isnan(nodata):
            invalid = np.isnan(stacked).all(axis=0) if stacked.dtype.kind == 'f' \
                else np.zeros(stacked.shape[1:], bool)
        else:
            invalid = (stacked == stacked.dtype.type(nodata)).all(axis=0)
    return np.ascontiguousarray(np.moveaxis(stacked, 0, -1)), invalid


@dataclass(frozen=True)
class RasterRead:
    """What :func:`read_raster` read.

    Attributes:
        image: ``H×W×C`` array of the stored type, the bands in the requested order.
        nodata_mask: ``H×W`` boolean, True where every chosen band is invalid.
        band_indices: the 1-based file indices of the bands of ``image``.
        band_names: their names (:func:`select_bands`; None for an unnamed band).
        window: the window read, None for the whole raster.
    """
    image: np.ndarray
    nodata_mask: np.ndarray
    band_indices: Tuple[int, ...]
    band_names: Tuple[Optional[str], ...]
    window: Optional[WindowTuple]


def read_raster(path: str, bands: Optional[Sequence[BandRequest]] = None,
                band_names: Optional[Sequence[str]] = None, nodata: Optional[float] = None,
                window: Optional[WindowTuple] = None) -> RasterRead:
    """Read the chosen bands of a raster file (arguments as
    :class:`LoadMultiBandImageFromFile` takes them, checked here).

    Raises:
        FileNotFoundError: no such file. ValueError: a file rasterio cannot read, and
            the errors of the ``check_*`` functions, :func:`select_bands` and
            :func:`read_bands`.
    """
    bands, band_names = check_band_selection(bands), check_band_names(band_names)
    nodata, window = check_nodata(nodata), check_window(window)
    with open_raster(path) as src:
        indices, names = select_bands(src, path, bands, band_names)
        image, mask = read_bands(src, path, indices, nodata, window)
    return RasterRead(image, mask, indices, names, window)


@TRANSFORMS.register_module()
class LoadMultiBandImageFromFile(BaseTransform):
    """Load a multispectral raster (GeoTIFF or any format GDAL reads) with rasterio.

    Required Keys:

    - img_path

    Added Keys:

    - img (``H×W×C`` numpy array of the file's data type), img_shape, ori_shape (the
      image's ``(H, W)``, as ``LoadImageFromFile`` sets them)
    - nodata_mask (``H×W`` bool: True where every chosen band is nodata; all False for a
      file without nodata value or mask)
    - band_names (tuple: each band's name, None where it has none), band_indices (tuple:
      their 1-based indices in the file), window (the window read, or None)

    To carry the band names into the data sample's metainfo, add ``'band_names'`` (and
    ``'band_indices'``, ``'window'``) to the packing step's ``meta_keys``.

    Args:
        bands: None (every band, in file order) or a list of 1-based band indices and
            band names, in the order the image gets them. A name is matched against the
            file's band descriptions, else against ``band_names``.
        band_names: the names of every band of the files, in file order (e.g.
            :data:`SENTINEL2_BANDS`); they name the bands in the results.
        nodata: the value that marks nodata, overriding the file's (None: the file's
            nodata value or mask band, as GDAL reports it).
        window: ``(col_off, row_off, width, height)`` in pixels: read only that part of
            the raster (a windowed read of a large scene); None: the whole raster.
        to_float32: give the image as float32 (as ``LoadImageFromFile``'s option): for
            data types the corruption engine does not take (int16 reflectances, int32),
            with the corruptions' ``max_value`` set to the sensor's full scale; values
            below 0 (a signed type's fill) are then refused by the engine unless they are
            nodata and the corruption leaves those bands alone.

    Raises:
        ValueError: bad arguments (when built); a file rasterio cannot read, a band index
            out of range, a name not found (the message lists the available names), or a
            window reaching outside the raster (when applied). FileNotFoundError: a
            missing file. KeyError: a sample without ``img_path``.
    """

    def __init__(self, bands: Optional[Sequence[BandRequest]] = None,
                 band_names: Optional[Sequence[str]] = None, nodata: Optional[float] = None,
                 window: Optional[Sequence[int]] = None, to_float32: bool = False) -> None:
        if not isinstance(to_float32, bool):
            raise ValueError(f'to_float32 must be True or False, got {to_float32!r}')
        self.to_float32 = to_float32
        self.bands = check_band_selection(bands)
        self.band_names = check_band_names(band_names)
        self.nodata = check_nodata(nodata)
        self.window = check_window(window)

    def transform(self, results: Dict[str, Any]) -> Dict[str, Any]:
        if not results.get('img_path'):
            raise KeyError('LoadMultiBandImageFromFile needs the sample\'s img_path (the '
                           f'raster file to read); the sample has keys {sorted(results)}')
        read = read_raster(results['img_path'], self.bands, self.band_names, self.nodata,
                           self.window)
        results['img'] = read.image.astype(np.float32) if self.to_float32 else read.image
        results['img_shape'] = read.image.shape[:2]
        results['ori_shape'] = read.image.shape[:2]
        results['nodata_mask'] = read.nodata_mask
        results['band_names'] = read.band_names
        results['band_indices'] = read.band_indices
        results['window'] = read.window
        return results

    def __repr__(self) -> str:
        return (f'{type(self).__name__}(bands={self.bands!r}, band_names={self.band_names!r}, '
                f'nodata={self.nodata!r}, window={self.window!r}, '
                f'to_float32={self.to_float32!r})')


def _geometric_corruption(results: Dict[str, Any]) -> Optional[str]:
    """The geometric corruption an earlier step applied to the sample, if any."""
    name, severity = results.get('corruption'), results.get('severity')
    if not name or not severity:
        return None
    for protocol in PROTOCOLS:
        if name in list_corruptions(protocol) and get_corruption(name, protocol).moves_labels:
            return f'{name} (severity {severity})'
    return None


@TRANSFORMS.register_module()
class IgnoreNodataLabels(BaseTransform):
    """Set ``gt_seg_map`` to ``ignore_index`` where ``nodata_mask`` (from
    :class:`LoadMultiBandImageFromFile`) is True, so nodata pixels are not scored.

    Put it right after the annotation loading, before any step that moves the labels
    (flips, crops, geometric corruptions): the mask stays where the file had it.

    Args:
        ignore_index: the label nodata pixels get: the evaluator's ignored label.

    Raises:
        ValueError: a bad ``ignore_index`` (when built). RuntimeError (when applied): no
            ``nodata_mask`` or ``gt_seg_map`` yet, a mask of another shape than the label
            map, labels an earlier step flipped or moved by a geometric corruption, or an
            ``ignore_index`` the label map's type cannot hold.
    """

    def __init__(self, ignore_index: int = 255) -> None:
        if not _is_int(ignore_index) or ignore_index < 0:
            raise ValueError(f'ignore_index must be an integer >= 0, got {ignore_index!r}')
        self.ignore_index = int(ignore_index)

    def transform(self, results: Dict[str, Any]) -> Dict[str, Any]:
        where = f'(image {results.get("img_path")})'
        mask, label = results.get('nodata_mask'), results.get('gt_seg_map')
        if mask is None or label is None:
            missing = 'nodata_mask' if mask is None else 'gt_seg_map'
            raise RuntimeError(f'IgnoreNodataLabels needs {missing}: put it after '
                               'LoadMultiBandImageFromFile and LoadAnnotations ' + where)
        # a geometric corruption whose labels are still to be moved (labels loaded after
        # the corruption; ApplyCorruptionToLabels moves them next): labels and mask are
        # both where the file has them, and the ignored pixels move with the labels
        pending = GEOMETRY_KEY in results
        moved = (None if pending else _geometric_corruption(results)) or \
            ('a flip' if results.get('flip') else None)
        if moved:
            raise RuntimeError(
                f'IgnoreNodataLabels runs after {moved} moved the labels, but the nodata '
                'mask is where the file has it: put IgnoreNodataLabels right after '
                f'LoadAnnotations, before the steps that move labels {where}')
        if tuple(mask.shape) != tuple(label.shape[:2]):
            raise RuntimeError(f'IgnoreNodataLabels: the nodata mask is {mask.shape[0]}x'
                               f'{mask.shape[1]} but gt_seg_map {label.shape[0]}x'
                               f'{label.shape[1]}; put it right after LoadAnnotations, '
                               f'before resizing or cropping {where}')
        if label.dtype.kind in 'iu' and self.ignore_index > np.iinfo(label.dtype).max:
            raise RuntimeError(f'IgnoreNodataLabels: ignore_index={self.ignore_index} does '
                               f'not fit the {label.dtype} label map {where}')
        label = label.copy()
        label[mask] = self.ignore_index
        results['gt_seg_map'] = label
        return results

    def __repr__(self) -> str:
        return f'{type(self).__name__}(ignore_index={self.ignore_index})'
