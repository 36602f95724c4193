"""Per-band statistics of multispectral rasters: the mean and standard deviation a model's
``data_preprocessor`` normalises with, the range, and percentiles (e.g. 2 and 98, for a
display stretch or for clipping).

The pixels are those :class:`~reobench_mm.transforms.raster_loading.LoadMultiBandImageFromFile`
gives (the same band selection, names and nodata rules, read by the same functions): a
pixel in its ``nodata_mask`` (every chosen band nodata) counts in no band. The standard
deviation is the population one (``numpy.std``), over every valid pixel of every file.
The files are streamed, a strip of rows at a time, so scenes larger than memory are fine.

How exact:

- Integer bands of at most 16 bits (``uint8``, ``int8``, ``uint16``, ``int16``: digital
  numbers, Sentinel-2 and Landsat products) are counted value by value (a histogram with
  one bin per possible value): the mean, the standard deviation and the percentiles
  (numpy's default, linear interpolation between the ranks) are those of all the values,
  at any number of files; the sums are Python integers, rounded once at the end.
- Other types (floats, 32-bit integers): mean and variance are merged strip by strip in
  float64 (the pairwise update of Chan, Golub and LeVeque), equal to numpy's on the same
  values up to rounding. The percentiles are ``numpy.percentile`` of all the values while
  every file has at most ``max_samples_per_file`` pixels (``exact_percentiles``); a larger
  file contributes a seeded random sample of about that many pixels, each value weighted
  by the inverse of its file's sampling rate, and the percentiles are the weighted
  inverted-CDF ones of the samples: an estimate, said so in the result.

Command line: ``tools/analysis_tools/band_statistics.py``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..transforms.raster_loading import (BandRequest, check_band_names, check_band_selection,
                                         check_nodata, open_raster, read_bands, select_bands)

__all__ = ['BandStats', 'BandStatistics', 'band_statistics', 'dataset_image_paths',
           'DEFAULT_PERCENTILES', 'DEFAULT_MAX_SAMPLES_PER_FILE']

DEFAULT_PERCENTILES = (2.0, 98.0)
#: Pixels of a float raster kept for its percentiles (more: a random sample of about this
#: many): 2**22, 16 MiB per float32 band.
DEFAULT_MAX_SAMPLES_PER_FILE = 1 << 22
#: Pixels read at a time (a strip of whole rows).
_STRIP_PIXELS = 1 << 20
#: The histogram covers every value of the integer types up to 16 bits: -32768..65535.
_HIST_OFFSET, _HIST_SIZE = 1 << 15, (1 << 16) + (1 << 15)


@dataclass(frozen=True)
class BandStats:
    """The statistics of one band.

    Attributes:
        index: its 1-based index in the (first) file. name: its name, or None.
        count: valid pixels. mean, std: over them (population std).
        minimum, maximum: the extreme valid values.
        percentiles: ``{q: value}`` for each requested ``q`` in [0, 100].
    """
    index: int
    name: Optional[str]
    count: int
    mean: float
    std: float
    minimum: float
    maximum: float
    percentiles: Dict[float, float]


@dataclass(frozen=True)
class BandStatistics:
    """The result of :func:`band_statistics`.

    Attributes:
        files: the rasters read. dtype: their data type.
        bands: one :class:`BandStats` per chosen band, in the chosen order.
        exact_percentiles: whether the percentiles are those of all the values.
        percentile_method: how they were found (see the module docstring).
    """
    files: Tuple[str, ...]
    dtype: str
    bands: Tuple[BandStats, ...]
    exact_percentiles: bool
    percentile_method: str

    def as_dict(self) -> Dict[str, Any]:
        """A JSON-ready dict (percentile keys as ``'2'``, ``'98'``...)."""
        return dict(
            files=list(self.files), dtype=self.dtype, exact_percentiles=self.exact_percentiles,
            percentile_method=self.percentile_method,
            mean=[b.mean for b in self.bands], std=[b.std for b in self.bands],
            bands=[dict(index=b.index, name=b.name, count=b.count, mean=b.mean, std=b.std,
                        minimum=b.minimum, maximum=b.maximum,
                        percentiles={f'{q:g}': v for q, v in b.percentiles.items()})
                   for b in self.bands])

    def data_preprocessor(self) -> str:
        """``data_preprocessor=dict(mean=[...], std=[...])`` for a config."""
        def numbers(values: Sequence[float]) -> str:
            return ', '.join(f'{v:.7g}' for v in values)
        return (f'data_preprocessor=dict(mean=[{numbers([b.mean for b in self.bands])}], '
                f'std=[{numbers([b.std for b in self.bands])}])')


def _check_percentiles(percentiles: Any) -> Tuple[float, ...]:
    if isinstance(percentiles, (str, bytes)) or not isinstance(percentiles, (list, tuple)) \
            or not all(isinstance(q, (int, float)) and not isinstance(q, bool)
                       and 0 <= q <= 100 for q in percentiles):
        raise ValueError('percentiles must be a list of numbers in [0, 100], e.g. [2, 98]; '
                         f'got {percentiles!r}')
    return tuple(float(q) for q in percentiles)


def _linear_percentile(values: np.ndarray, cumulative: np.ndarray, q: float) -> float:
    """numpy's default percentile (linear between ranks) from sorted distinct ``values``
    and the cumulative counts of each."""
    position = (int(cumulative[-1]) - 1) * (q / 100)
    low = math.floor(position)
    gamma = position - low

    def at(rank: int) -> float:
        return float(values[np.searchsorted(cumulative, rank, side='right')])
    a, b = at(low), at(min(low + 1, int(cumulative[-1]) - 1))
    return a + (b - a) * gamma if gamma < 0.5 else b - (b - a) * (1 - gamma)


class _Histograms:
    """Value counts of each band (integer types of at most 16 bits): exact statistics."""

    def __init__(self, bands: int) -> None:
        self.counts = np.zeros((bands, _HIST_SIZE), np.int64)

    def add(self, valid: np.ndarray) -> None:
        for band in range(valid.shape[1]):
            self.counts[band] += np.bincount(valid[:, band].astype(np.intp) + _HIST_OFFSET,
                                             minlength=_HIST_SIZE)

    def band(self, band: int, percentiles: Sequence[float]) -> tuple:
        present = np.flatnonzero(self.counts[band])
        counts = self.counts[band, present]
        values = present - _HIST_OFFSET
        n = int(counts.sum())
        big_values, big_counts = values.astype(object), counts.astype(object)
        total = int((big_values * big_counts).sum())
        squares = int((big_values * big_values * big_counts).sum())
        mean, variance = total / n, (n * squares - total * total) / (n * n)
        cumulative = np.cumsum(counts)
        return (n, mean, math.sqrt(variance), float(values[0]), float(values[-1]),
                {q: _linear_percentile(values, cumulative, q) for q in percentiles})


class _Moments:
    """Count, mean and squared deviations merged per strip, and the percentile samples
    (float and 32-bit integer types)."""

    def __init__(self, bands: int) -> None:
        self.count = 0
        self.mean = np.zeros(bands)
        self.m2 = np.zeros(bands)
        self.low = np.full(bands, np.inf)
        self.high = np.full(bands, -np.inf)
        self.samples: List[np.ndarray] = []
        self.weights: List[np.ndarray] = []
        self.sampled = False

    def add(self, valid: np.ndarray, rate: float, rng: np.random.Generator) -> None:
        values = valid.astype(np.float64)
        n = len(values)
        mean = values.mean(axis=0)
        m2 = ((values - mean) ** 2).sum(axis=0)
        total = self.count + n
        delta = mean - self.mean
        self.mean = self.mean + delta * (n / total)
        self.m2 = self.m2 + m2 + delta ** 2 * (self.count * n / total)
        self.count = total
        self.low = np.minimum(self.low, values.min(axis=0))
        self.high = np.maximum(self.high, values.max(axis=0))
        if rate < 1:
            self.sampled = True
            values = values[rng.random(n) < rate]
        self.samples.append(values)
        self.weights.append(np.full(len(values), 1 / rate))

    def band(self, band: int, percentiles: Sequence[float]) -> tuple:
        values = np.concatenate([s[:, band] for s in self.samples])
        if not self.sampled:
            found = {q: float(np.percentile(values, q)) for q in percentiles}
        else:  # weighted inverted CDF: the first value whose cumulative weight reaches q
            order = np.argsort(values, kind='stable')
            cumulative = np.cumsum(np.concatenate(self.weights)[order])
            found = {q: float(values[order][min(np.searchsorted(
                cumulative, q / 100 * cumulative[-1], side='left'), len(values) - 1)])
                for q in percentiles}
        return (self.count, float(self.mean[band]), math.sqrt(self.m2[band] / self.count),
                float(self.low[band]), float(self.high[band]), found)


def _is_small_int(dtype: np.dtype) -> bool:
    return dtype.kind in 'iu' and dtype.itemsize <= 2


@dataclass
class _Run:
    """What the first file fixed: the bands, their names and the data type."""
    indices: Tuple[int, ...] = ()
    names: Tuple[Optional[str], ...] = ()
    dtype: Optional[np.dtype] = None
    accumulator: Any = None
    files: List[str] = field(default_factory=list)


def _start_or_check(run: _Run, path: str, indices: Tuple[int, ...],
                    names: Tuple[Optional[str], ...], dtype: np.dtype) -> None:
    if run.dtype is None:
        run.indices, run.names, run.dtype = indices, names, dtype
        run.accumulator = _Histograms(len(indices)) if _is_small_int(dtype) \
            else _Moments(len(indices))
        return
    first = run.files[0]
    if len(indices) != len(run.indices):
        raise ValueError(f'{path!r} gives {len(indices)} bands but {first!r} gave '
                         f'{len(run.indices)}: statistics need the same bands in every file')
    if dtype != run.dtype:
        raise ValueError(f'{path!r} stores {dtype} but {first!r} {run.dtype}: statistics '
                         'need one data type')
    clash = [(a, b) for a, b in zip(run.names, names) if a and b and a != b]
    if clash:
        raise ValueError(f'the bands of {path!r} are named {list(names)} but those of '
                         f'{first!r} {list(run.names)}: choose the bands by index or give '
                         'band_names')


def band_statistics(paths: Sequence[str], bands: Optional[Sequence[BandRequest]] = None,
                    band_names: Optional[Sequence[str]] = None,
                    nodata: Optional[float] = None,
                    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
                    max_samples_per_file: int = DEFAULT_MAX_SAMPLES_PER_FILE,
                    seed: int = 0) -> BandStatistics:
    """Each chosen band's mean, population std, range and percentiles over the valid
    pixels of every file (see the module docstring for what is exact).

    Args:
        paths: the raster files (e.g. :func:`dataset_image_paths` of a built dataset).
        bands, band_names, nodata: as ``LoadMultiBandImageFromFile`` takes them.
        percentiles: the percentiles to find, each in [0, 100].
        max_samples_per_file: float rasters: pixels of a file kept for the percentiles
            (more: a random sample of about this many).
        seed: seed of that sample.

    Raises:
        FileNotFoundError: a missing file. ValueError: bad arguments, no file, files of
            different bands or data types, a band without any valid pixel, non-finite
            values not marked nodata, and the errors of reading (band not found...).
    """
    if isinstance(paths, (str, bytes)) or not isinstance(paths, (list, tuple)) or not paths:
        raise ValueError(f'paths must be a non-empty list of raster files, got {paths!r}')
    requested, names_given = check_band_selection(bands), check_band_names(band_names)
    nodata, quantiles = check_nodata(nodata), _check_percentiles(percentiles)
    if isinstance(max_samples_per_file, bool) or not isinstance(max_samples_per_file, int) \
            or max_samples_per_file < 1:
        raise ValueError(f'max_samples_per_file must be an int >= 1, got '
                         f'{max_samples_per_file!r}')
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f'seed must be an int >= 0, got {seed!r}')
    run = _Run()
    for number, path in enumerate(paths):
        with open_raster(path) as src:
            indices, names = select_bands(src, path, requested, names_given)
            _start_or_check(run, path, indices, names, np.dtype(src.dtypes[indices[0] - 1]))
            run.files.append(path)
            rate = min(1.0, max_samples_per_file / (src.width * src.height))
            rng = np.random.default_rng([seed, number])
            rows = max(1, _STRIP_PIXELS // src.width)
            for row in range(0, src.height, rows):
                window = (0, row, src.width, min(rows, src.height - row))
                image, invalid = read_bands(src, path, indices, nodata, window)
                valid = image[~invalid]  # N×C
                if not len(valid):
                    continue
                if isinstance(run.accumulator, _Histograms):
                    run.accumulator.add(valid)
                    continue
                if not np.isfinite(valid).all():
                    raise ValueError(f'{path!r} holds NaN or infinite values that are not '
                                     'nodata: give nodata=float("nan") (--nodata nan) or '
                                     'set the file\'s nodata value')
                run.accumulator.add(valid, rate, rng)
    stats = []
    for band, (index, name) in enumerate(zip(run.indices, run.names)):
        if isinstance(run.accumulator, _Moments) and run.accumulator.count == 0 or \
                isinstance(run.accumulator, _Histograms) and not run.accumulator.counts[band].any():
            raise ValueError(f'band {name or index} has no valid pixel in the {len(paths)} '
                             'files (every pixel is nodata)')
        stats.append(BandStats(index, name, *run.accumulator.band(band, quantiles)))
    histogram = isinstance(run.accumulator, _Histograms)
    exact = histogram or not run.accumulator.sampled
    method = ('a count of every value (exact)' if histogram else
              'all values (exact)' if exact else
              f'a weighted random sample of at most about {max_samples_per_file} pixels per '
              'file (an estimate)')
    return BandStatistics(tuple(run.files), str(run.dtype), tuple(stats), exact, method)


def dataset_image_paths(dataset: Any) -> List[str]:
    """The ``img_path`` of every sample of a built MMEngine dataset, in order.

    Raises:
        TypeError: not a dataset. ValueError: a sample without ``img_path``.
    """
    if not hasattr(dataset, 'get_data_info') or not hasattr(dataset, '__len__'):
        raise TypeError(f'expected a built dataset (with get_data_info), got '
                        f'{type(dataset).__name__}')
    paths = []
    for index in range(len(dataset)):
        path = dataset.get_data_info(index).get('img_path')
        if not path:
            raise ValueError(f'sample {index} of the dataset has no img_path')
        paths.append(path)
    return paths
