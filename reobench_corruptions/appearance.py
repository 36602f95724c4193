"""Non-geometric corruptions: the 9 appearance corruptions of REOBench and the
calibration study's cloud + shadow, Poisson-Gaussian noise and wide motion blur.

Every function takes an ``H×W×C`` float32 image in [0, 1], the severity's table
value and a generator, and returns a new float32 image of the same shape (clipping
is done by the caller); the input is not modified. Tables and algorithms:
``docs/corruptions.md``.

Memory: kernels whose formula would hold several full-size temporaries work in row
tiles (:func:`~reobench_corruptions.base.row_tiles`), drawing random numbers in
the order of one whole-image draw, so that the result does not depend on the tile
size; on large images their extra memory is about the output plus an ``H×W`` float32
map at most.
"""
from functools import lru_cache
from typing import Callable, Iterator, List, Optional, Sequence, Tuple

import cv2
import numpy as np

from .band_noise import BandNoise, band_noise_parameters
from .base import (_scaled_float32, from_float, register_corruption, register_uint8_kernel,
                   row_tiles, to_float)
from .noise import fractal_perlin, fractal_perlin_field

# Kernels registered with ``register_uint8_kernel`` skip the float round trip for uint8
# images (the common case): a 256-entry lookup table for pointwise formulas, the JPEG
# codec on the bytes themselves, integer noise offsets. Each says how it relates to the
# float path.


def _uniform_uint32(rng: np.random.Generator, shape) -> np.ndarray:
    """Uniform 32-bit words: the generator's raw 64-bit output split in two (the
    cheapest draw numpy offers; ``rng.integers`` costs about twice as much)."""
    count = int(np.prod(shape))
    raw = rng.bit_generator.random_raw((count + 1) // 2)
    return raw.view(np.uint32)[:count].reshape(shape)


def _grey_levels_as_float(band: np.ndarray) -> np.ndarray:
    """A ``uint8`` band as the engine's float path sees it (``to_float``: x · (1/255)
    in float32)."""
    return _scaled_float32(band, 255.0)


def _pointwise_uint8_kernel(float_func: Callable) -> Callable:
    """uint8 kernel of a pointwise, draw-free corruption: the float path evaluated once
    on all 256 grey levels and applied as a lookup table (bit-identical results)."""

    def kernel(image: np.ndarray, parameter, rng: np.random.Generator) -> np.ndarray:
        levels = np.arange(256, dtype=np.uint8)
        table = from_float(float_func(to_float(levels[:, None, None]), parameter, rng),
                           levels)
        flat = np.ascontiguousarray(image).reshape(image.shape[0], -1)
        return cv2.LUT(flat, table).reshape(image.shape)

    kernel.__doc__ = f'uint8 lookup-table kernel of ``{float_func.__name__}``.'
    return kernel

# ---------------------------------------------------------------------- REOBench: sensor


@register_corruption('gaussian_noise', 'reobench', 'sensor', 'σ on [0, 1]',
                     (0.04, 0.05, 0.06, 0.07, 0.08), stochastic=True)
def gaussian_noise(image: np.ndarray, sigma: float, rng: np.random.Generator) -> np.ndarray:
    # image + σ·z, computed in the noise's own buffer (one full-size allocation)
    noise = rng.standard_normal(image.shape, dtype=np.float32)
    noise *= np.float32(sigma)
    noise += image
    return noise


NOISE_TRUNCATION_SIGMAS = 6.0  # discrete noise offsets beyond ±6σ (mass 2e-9) are dropped


@lru_cache(maxsize=64)
def rounded_gaussian_alias_table(scale: float) -> Tuple[int, np.ndarray, np.ndarray,
                                                        np.ndarray]:
    """Walker alias table of ``round(scale · z)``, ``z ~ N(0, 1)``, on ``±6·scale``.

    Returns ``(index_bits, thresholds, values, aliases)``: a uniform 32-bit draw ``u``
    picks bin ``u >> (32 − index_bits)``; its low bits below ``thresholds[bin]`` give
    ``values[bin]``, otherwise ``aliases[bin]``. Probabilities are exact to 2⁻²⁴.
    """
    from scipy.special import ndtr  # here: importing the engine does not import scipy
    half = max(1, int(np.ceil(NOISE_TRUNCATION_SIGMAS * scale)))
    offsets = np.arange(-half, half + 1)
    probabilities = ndtr((offsets + 0.5) / scale) - ndtr((offsets - 0.5) / scale)
    index_bits = int(np.ceil(np.log2(len(offsets))))
    index_bits = max(index_bits, 8)
    bins, fraction_bits = 2**index_bits, 32 - index_bits
    scaled = np.zeros(bins)
    scaled[:len(offsets)] = probabilities / probabilities.sum() * bins
    values = np.zeros(bins, np.int16)
    values[:len(offsets)] = offsets
    aliases = values.copy()
    thresholds = np.full(bins, 2**fraction_bits, np.uint32)
    small = [i for i in range(bins) if scaled[i] < 1.0]
    large = [i for i in range(bins) if scaled[i] >= 1.0]
    while small and large:  # Vose's construction
        low, high = small.pop(), large[-1]
        thresholds[low] = int(round(scaled[low] * 2**fraction_bits))
        aliases[low] = values[high]
        scaled[high] -= 1.0 - scaled[low]
        if scaled[high] < 1.0:
            small.append(large.pop())
    return index_bits, thresholds, values, aliases


@register_uint8_kernel('gaussian_noise', 'reobench', 'same_distribution')
def gaussian_noise_uint8(image: np.ndarray, sigma: float, rng: np.random.Generator
                         ) -> np.ndarray:
    """Same distribution as the float path followed by rounding: with an integer grey
    level ``x``, ``round(x + 255σz) = x + round(255σz)``, so the integer offset
    ``round(255σz)`` is drawn directly (alias method, one 32-bit draw per element).

    Runs in row tiles of an even element count (32-bit words come two per 64-bit
    draw), so the draws are those of one whole-image call."""
    out = np.empty(image.shape, np.uint8)
    for start, stop in row_tiles(image.shape[0], image[0].size, even=True):
        out[start:stop] = _gaussian_noise_uint8_band(image[start:stop], sigma, rng)
    return out


def _gaussian_noise_uint8_band(image: np.ndarray, sigma: float, rng: np.random.Generator
                               ) -> np.ndarray:
    index_bits, thresholds, values, aliases = rounded_gaussian_alias_table(255.0 * sigma)
    draws = _uniform_uint32(rng, image.shape).reshape(image.shape[0], -1)
    fraction_bits = 32 - index_bits
    bins = draws >> np.uint32(fraction_bits)
    draws &= np.uint32(2**fraction_bits - 1)
    if index_bits <= 8:  # σ ≤ 0.083: OpenCV lookup tables on byte indices (fast path)
        bins = bins.astype(np.uint8)
        keep = draws.view(np.int32) < cv2.LUT(bins, thresholds.astype(np.int32))
        # alias + keep·(value − alias): arithmetic is ~3x faster than np.where here
        offsets = cv2.LUT(bins, values - aliases)
        offsets *= keep.view(np.uint8)
        offsets += cv2.LUT(bins, aliases)
    else:
        offsets = np.where(draws < thresholds[bins], values[bins], aliases[bins])
    offsets += image.reshape(offsets.shape)
    return np.clip(offsets, 0, 255, out=offsets).astype(np.uint8).reshape(image.shape)


def salt_pepper_draws(shape, amount: float, rng: np.random.Generator
                      ) -> Tuple[np.ndarray, np.ndarray]:
    """Boolean salt and pepper masks: each element independently salt with probability
    ``amount / 2`` and pepper with probability ``amount / 2``."""
    draws = _uniform_uint32(rng, shape)
    half = np.uint32(round(amount / 2 * 2**32))
    salt = draws < half
    pepper = draws < 2 * half
    pepper ^= salt
    return salt, pepper


@register_corruption('salt_pepper_noise', 'reobench', 'sensor', 'fraction of elements',
                     (0.005, 0.01, 0.02, 0.03, 0.05), stochastic=True)
def salt_pepper_noise(image: np.ndarray, amount: float, rng: np.random.Generator) -> np.ndarray:
    return _salt_pepper(image, amount, rng, 1.0)


@register_uint8_kernel('salt_pepper_noise', 'reobench', 'identical')
def salt_pepper_noise_uint8(image: np.ndarray, amount: float, rng: np.random.Generator
                            ) -> np.ndarray:
    """Bit-identical to the float path (same draws)."""
    return _salt_pepper(image, amount, rng, 255)


def _salt_pepper(image: np.ndarray, amount: float, rng: np.random.Generator, salt_value
                 ) -> np.ndarray:
    """A copy of ``image`` with salt (``salt_value``) and pepper (0), drawn in row
    tiles of an even element count: the draws of one whole-image call."""
    out = np.array(image, order='C')
    for start, stop in row_tiles(image.shape[0], image[0].size, even=True):
        band = out[start:stop]
        salt, pepper = salt_pepper_draws(band.shape, amount, rng)
        band[salt], band[pepper] = salt_value, 0
    return out


def _per_band(filter_fn, image: np.ndarray) -> np.ndarray:
    """Apply an OpenCV filter to any band count (OpenCV handles up to 4 per call)."""
    if image.shape[2] <= 4:
        return filter_fn(image).reshape(image.shape)
    return np.stack([filter_fn(image[..., c]) for c in range(image.shape[2])], axis=2)


@register_corruption('gaussian_blur', 'reobench', 'sensor', 'kernel size k', (3, 5, 7, 9, 11))
def gaussian_blur(image: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    # σ = 0 lets OpenCV derive it from k: 0.3·((k−1)/2 − 1) + 0.8; border reflect-101
    return _per_band(lambda x: cv2.GaussianBlur(x, (k, k), 0), image)


# OpenCV's filters are dtype-generic: on uint8 images their integer paths run directly
# (as in the REOBench generator), within one grey level of the float path.
register_uint8_kernel('gaussian_blur', 'reobench', 'within_one_level')(gaussian_blur)


def reobench_motion_kernel(k: int) -> np.ndarray:
    """k×k kernel, zero except row (k−1)//2, which holds 1/k in every column."""
    kernel = np.zeros((k, k), np.float32)
    kernel[(k - 1) // 2, :] = 1.0 / k
    return kernel


@register_corruption('motion_blur', 'reobench', 'sensor', 'kernel size k', (2, 4, 6, 8, 10))
def motion_blur(image: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    kernel = reobench_motion_kernel(k)
    return _per_band(lambda x: cv2.filter2D(x, -1, kernel), image)


register_uint8_kernel('motion_blur', 'reobench', 'within_one_level')(motion_blur)


CHANNEL_ORDERS = ('rgb', 'bgr')


def check_channel_order(channel_order: str) -> None:
    """Raise a ValueError unless ``channel_order`` is ``'rgb'`` or ``'bgr'``."""
    if channel_order not in CHANNEL_ORDERS:
        raise ValueError(f"channel_order must be 'rgb' or 'bgr', got {channel_order!r}")


def jpeg_round_trip(image: np.ndarray, quality: int, channel_order: str = 'rgb') -> np.ndarray:
    """Baseline JPEG (4:2:0) encode + decode at ``quality`` of an ``H×W×C`` ``uint8``
    image (returned as ``uint8``) or float image in [0, 1] (quantised to 256 levels,
    returned as float32).

    Three bands are one colour JPEG (``channel_order`` says whether they are RGB or
    BGR, which decides the YCbCr conversion); any other band count is encoded three
    bands at a time as colour JPEGs in order, the rest one band at a time as
    greyscale JPEGs.
    """
    check_channel_order(channel_order)
    if not 1 <= int(quality) <= 100:
        raise ValueError(f'JPEG quality must be in 1..100, got {quality}')
    if image.dtype != np.uint8:
        quantised = np.clip(image, 0, 1)
        quantised *= 255
        quantised = np.rint(quantised, out=quantised).astype(np.uint8)
        decoded = jpeg_round_trip(quantised, quality, channel_order)
        del quantised
        out = decoded.astype(np.float32)
        out /= 255
        return out
    params = [cv2.IMWRITE_JPEG_QUALITY, int(quality), cv2.IMWRITE_JPEG_SAMPLING_FACTOR,
              cv2.IMWRITE_JPEG_SAMPLING_FACTOR_420]
    out = np.empty_like(image)
    start, bands = 0, image.shape[2]
    while start < bands:
        stop = start + 3 if bands - start >= 3 else start + 1
        chunk = np.ascontiguousarray(image[..., start:stop])
        swap = stop - start == 3 and channel_order == 'rgb'  # OpenCV's codec wants BGR
        # the BGR copy is dropped once encoded, and the decoded bytes are swapped back in
        # place: about one image of memory besides the result
        encoded = _jpeg_encode(cv2.cvtColor(chunk, cv2.COLOR_RGB2BGR) if swap else chunk,
                               params)
        decoded = cv2.imdecode(encoded, cv2.IMREAD_UNCHANGED)
        del encoded
        if swap:
            cv2.cvtColor(decoded, cv2.COLOR_BGR2RGB, dst=decoded)
        if bands == stop - start:
            return decoded.reshape(image.shape)  # one chunk: no copy into ``out``
        out[..., start:stop] = decoded.reshape(chunk.shape)
        start = stop
    return out


def _jpeg_encode(image: np.ndarray, params) -> np.ndarray:
    ok, encoded = cv2.imencode('.jpg', image, params)
    if not ok:
        raise RuntimeError('OpenCV failed to encode a JPEG')
    return encoded


@register_corruption('compression_artifacts', 'reobench', 'sensor', 'JPEG quality',
                     (30, 25, 20, 15, 10), options=('channel_order', ))
def compression_artifacts(image: np.ndarray, quality: int, rng: np.random.Generator,
                          channel_order: str = 'rgb') -> np.ndarray:
    """JPEG round trip at the severity's quality (see :func:`jpeg_round_trip`)."""
    return jpeg_round_trip(image, quality, channel_order)


# on uint8 images, the JPEG codec on the bytes themselves: bit-identical to the float path
register_uint8_kernel('compression_artifacts', 'reobench', 'identical')(compression_artifacts)


def data_gap_mask(height: int, width: int, stripes: int, stripe_width: float,
                  rng: np.random.Generator) -> np.ndarray:
    """``H×W`` bool, True in the stripes: θ ~ U[0°, 180°), spacing
    ``s = floor(sqrt(W² + H²)) / n``; pixel (x, y) is in a stripe when
    ``(x·cosθ + y·sinθ) mod s < w``.

    Evaluated as ``(a + b) mod s`` with ``a = (y·sinθ) mod s`` per row and
    ``b = (x·cosθ) mod s`` per column (the same value up to rounding; ~4x faster than
    a per-pixel ``mod``): ``a + b`` lies in [0, 2s), so only one wrap is possible.
    """
    gap_rows = _data_gap_rows(height, width, stripes, stripe_width, rng)
    return gap_rows(0, height)


def _data_gap_rows(height: int, width: int, stripes: int, stripe_width: float,
                   rng: np.random.Generator) -> Callable[[int, int], np.ndarray]:
    """Draw θ and return ``rows(start, stop)``: those rows of :func:`data_gap_mask`."""
    theta = np.deg2rad(rng.uniform(0.0, 180.0))
    spacing = np.floor(np.sqrt(width**2 + height**2)) / stripes
    along_x = np.mod(np.arange(width, dtype=np.float64) * np.cos(theta), spacing)
    along_y = np.mod(np.arange(height, dtype=np.float64) * np.sin(theta), spacing)

    def rows(start: int, stop: int) -> np.ndarray:
        phase = np.add.outer(along_y[start:stop], along_x)
        gaps = phase < stripe_width
        wrapped = phase >= spacing
        wrapped &= phase < spacing + stripe_width
        gaps |= wrapped
        return gaps

    return rows


@register_corruption('data_gaps', 'reobench', 'sensor', 'stripes n / width w px',
                     ((2, 3), (3, 4), (4, 5), (5, 6), (6, 7)), stochastic=True)
def data_gaps(image: np.ndarray, stripes_and_width, rng: np.random.Generator) -> np.ndarray:
    """Zero the pixels in the stripes of :func:`data_gap_mask` (in row tiles: the
    float64 phase of a whole large image would be 8 bytes per pixel)."""
    gap_rows = _data_gap_rows(*image.shape[:2], *stripes_and_width, rng)
    out = np.empty(image.shape, image.dtype)
    for start, stop in row_tiles(image.shape[0], image.shape[1] * 8):
        gaps, band = gap_rows(start, stop), image[start:stop]
        if image.shape[2] <= 4:  # OpenCV's masked copy is ~4x faster than boolean indexing
            keep = np.logical_not(gaps).view(np.uint8)
            out[start:stop] = cv2.bitwise_and(band, band, mask=keep).reshape(band.shape)
        else:
            out[start:stop] = band
            out[start:stop][gaps] = 0
    return out


# zeroing pixels is dtype-free: the same function is the (bit-identical) uint8 kernel
register_uint8_kernel('data_gaps', 'reobench', 'identical')(data_gaps)


# --------------------------------------------------------------- REOBench: environmental


@register_corruption('brightness_contrast', 'reobench', 'environmental', 'offset b / gain c',
                     ((0.0, 1.0), (0.1, 0.8), (0.2, 0.6), (0.3, 0.4), (0.4, 0.2)),
                     band_domain='optical')
def brightness_contrast(image: np.ndarray, offset_and_gain, rng: np.random.Generator
                        ) -> np.ndarray:
    offset, gain = offset_and_gain
    out = image * np.float32(gain)
    out += np.float32(offset)  # in place: one full-size allocation
    return out


register_uint8_kernel('brightness_contrast', 'reobench', 'identical')(
    _pointwise_uint8_kernel(brightness_contrast))


CLOUD_CELL_PIXELS = 200  # one base-octave noise cell per 200 px
CLOUD_BRIGHTNESS = 0.9  # flat grey of cloud tops, all bands


def cloud_mask(height: int, width: int, density: float, rng: np.random.Generator
               ) -> np.ndarray:
    """The soft REOBench cloud mask: fractal Perlin (6 octaves, persistence 0.5,
    lacunarity 2) min-max normalised, thresholded at 1 − d, Gaussian-blurred (11, σ 5).
    One ``H×W`` float32 array (threshold and blur run in place)."""
    noise = fractal_perlin(height, width, CLOUD_CELL_PIXELS, rng)
    low, high = cv2.minMaxLoc(noise)[:2]
    if not high > low:  # a flat field (1-pixel images): nothing exceeds the threshold
        return np.zeros((height, width), np.float32)
    # (noise − low) / (high − low) > 1 − d, without normalising the whole field
    threshold = low + (1.0 - density) * (high - low)
    cv2.threshold(noise, threshold, 1.0, cv2.THRESH_BINARY, dst=noise)
    return cv2.GaussianBlur(noise, (11, 11), 5, dst=noise)


def _cloud_clear_weight(height: int, width: int, density: float, rng: np.random.Generator
                        ) -> np.ndarray:
    """``1 − mask`` of :func:`cloud_mask`, in the mask's own buffer."""
    weight = cloud_mask(height, width, density, rng)
    return np.subtract(1.0, weight, out=weight)


@register_corruption('cloud', 'reobench', 'environmental', 'density d (threshold 1 − d)',
                     (0.10, 0.15, 0.20, 0.25, 0.30), stochastic=True,
                     band_domain='optical')
def cloud(image: np.ndarray, density: float, rng: np.random.Generator) -> np.ndarray:
    weight = _cloud_clear_weight(image.shape[0], image.shape[1], density, rng)
    # x·(1 − m) + 0.9·m computed as (x − 0.9)·(1 − m) + 0.9: three in-place passes
    out = np.empty(image.shape, np.float32)
    for start, stop in row_tiles(image.shape[0], image[0].size):
        band = out[start:stop]
        np.subtract(image[start:stop], np.float32(CLOUD_BRIGHTNESS), out=band)
        band *= _per_band_weight(weight[start:stop], image.shape[2])
        band += np.float32(CLOUD_BRIGHTNESS)
    return out


@register_uint8_kernel('cloud', 'reobench', 'within_one_level')
def cloud_uint8(image: np.ndarray, density: float, rng: np.random.Generator) -> np.ndarray:
    """The same mask and blend on grey levels (cloud top 0.9 · 255), rounded once:
    within one grey level of the float path."""
    weight = _cloud_clear_weight(image.shape[0], image.shape[1], density, rng)
    top = np.float32(CLOUD_BRIGHTNESS * 255)
    out = np.empty(image.shape, np.uint8)
    for start, stop in row_tiles(image.shape[0], image[0].size):
        band = image[start:stop].astype(np.float32)
        band -= top
        band *= _per_band_weight(weight[start:stop], image.shape[2])
        band += top
        out[start:stop] = np.rint(band, out=band).astype(np.uint8)
    return out


def _per_band_weight(weight: np.ndarray, bands: int) -> np.ndarray:
    """An ``H×W`` weight repeated over ``bands``: numpy multiplies ~2x faster by a full
    ``H×W×C`` array than by an ``H×W×1`` one broadcast over a short last axis."""
    return cv2.merge([weight] * bands).reshape(*weight.shape, bands)


@register_corruption('haze', 'reobench', 'environmental', 'intensity I',
                     (0.2, 0.3, 0.4, 0.5, 0.6), band_domain='optical')
def haze(image: np.ndarray, intensity: float, rng: np.random.Generator) -> np.ndarray:
    out = image * np.float32(1.0 - intensity)
    out += np.float32(intensity)  # in place: one full-size allocation
    return out


register_uint8_kernel('haze', 'reobench', 'identical')(_pointwise_uint8_kernel(haze))


# ----------------------------------------------------------- calibration-study shifts

SHADOW_OFFSET_FRACTION = 0.04  # shadow displacement, fraction of the image size
SHADOW_DARKENING = 0.5  # ground under full shadow keeps this fraction of its radiance
# Opacity ramps from 0 at the cloud edge to 1 over this fraction of the thickness range
# above the threshold (smoothstep: soft edges, no jump, near-opaque thick cores).
CLOUD_CORE_DEPTH = 0.5


def cloud_opacity(depth: np.ndarray) -> np.ndarray:
    """Cloud opacity from the normalised thickness above the threshold, ``depth`` (0 at
    the cloud edge, 1 at the thickest point; negative outside the cloud):
    ``smoothstep(clip(depth / CLOUD_CORE_DEPTH, 0, 1))`` with ``smoothstep(t) =
    t²(3 − 2t)``. 0 outside the cloud and at its edge, rising continuously (with zero
    slope at both ends) to 1 in the cores. float32, same shape."""
    ramp = np.clip(np.asarray(depth, np.float64) / CLOUD_CORE_DEPTH, 0.0, 1.0)
    return (ramp * ramp * (3.0 - 2.0 * ramp)).astype(np.float32)


def check_bands(bands, num_bands: Optional[int] = None) -> Optional[List[int]]:
    """Validate a band selection: None (every band) or a non-empty sequence of distinct
    integer band indices counted from 0, each below ``num_bands`` when that is given.

    Returns:
        None, or the indices as a sorted list of Python ``int``.

    Raises:
        ValueError: anything else (a bare integer, a string, bools, floats, negative or
            repeated indices, an empty selection, an index >= ``num_bands``); the
            message names the valid indices.
    """
    if bands is None:
        return None
    valid = (f'0..{num_bands - 1} for this {num_bands}-band image' if num_bands is not None
             else 'integers >= 0')
    if isinstance(bands, (str, bytes)) or not isinstance(bands, (list, tuple, range,
                                                                 np.ndarray)):
        raise ValueError(f'bands must be None (every band) or a list of band indices '
                         f'counted from 0 (valid: {valid}), e.g. [0, 1, 2]; got {bands!r}')
    values = list(np.asarray(bands).reshape(-1)) if isinstance(bands, np.ndarray) \
        else list(bands)
    if not values:
        raise ValueError(f'bands selects no band; give at least one index (valid: {valid}) '
                         'or None for every band')
    for value in values:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise ValueError(f'band indices must be integers counted from 0 (valid: {valid}); '
                             f'got {value!r} of type {type(value).__name__} in {bands!r}')
        if value < 0 or (num_bands is not None and value >= num_bands):
            raise ValueError(f'band index {int(value)} is out of range; valid: {valid}')
    if len(set(int(v) for v in values)) != len(values):
        raise ValueError(f'bands lists an index more than once: {bands!r}')
    return sorted(int(v) for v in values)


def cloud_shadow_layers(height: int, width: int, coverage: float, rng: np.random.Generator
                        ) -> Tuple[np.ndarray, np.ndarray]:
    """Cloud opacity and shadow maps for ``cloud_shadow`` (``H×W`` float32 each).

    The cloud covers the pixels whose fractal thickness is above its (1 − coverage)
    quantile, so the covered fraction equals ``coverage``; opacity is
    :func:`cloud_opacity` of the thickness above that quantile divided by the range
    above it: 0 at the cloud edge, 1 in thick cores. The shadow is the opacity map
    shifted by ``SHADOW_OFFSET_FRACTION`` of the image size (down-right); the strips it
    uncovers at the top and left repeat the map's first row and column.
    """
    bands = list(_cloud_shadow_bands(height, width, coverage, rng, width))
    return (np.concatenate([opacity for _, _, opacity, _ in bands]),
            np.concatenate([shadow for _, _, _, shadow in bands]))


def _cloud_shadow_bands(height: int, width: int, coverage: float, rng: np.random.Generator,
                        row_elements: int
                        ) -> Iterator[Tuple[int, int, np.ndarray, np.ndarray]]:
    """:func:`cloud_shadow_layers` as ``(start, stop, opacity, shadow)`` row tiles.

    The thickness field is held whole once, for its quantile (partitioned in place),
    then evaluated again a tile at a time from its small factors; the last rows of
    opacity are kept for the shadow of the tiles below them.
    """
    field = fractal_perlin_field(height, width, CLOUD_CELL_PIXELS, rng)
    thickness = field.image()
    threshold = np.quantile(thickness, 1.0 - coverage, overwrite_input=True)
    span = float(thickness.max() - threshold)
    del thickness
    dy = max(1, int(round(SHADOW_OFFSET_FRACTION * height)))
    dx = max(1, int(round(SHADOW_OFFSET_FRACTION * width)))
    kept, kept_start = np.empty((0, width), np.float32), 0  # opacity rows from kept_start
    for start, stop in row_tiles(height, row_elements):
        thickness = field.rows_between(start, stop)
        if span > 0:
            opacity = cloud_opacity((thickness - threshold) / span)
        else:  # a flat field (1-pixel images): all of it is cloud core
            opacity = np.ones_like(thickness, dtype=np.float32)
        kept = np.concatenate([kept, opacity])
        # shadow pixel (r, c) is opacity pixel (max(r − dy, 0), max(c − dx, 0)): the cloud
        # map moved down-right, its first row and column standing in for the unseen cloud
        # beyond the frame (so a cloud crossing the edge casts no hard-edged shadow)
        source = kept[np.maximum(np.arange(start, stop) - dy, 0) - kept_start]
        shadow = np.empty_like(opacity)
        shadow[:, dx:] = source[:, :width - dx]
        shadow[:, :dx] = source[:, :1]
        yield start, stop, opacity, shadow
        keep_from = max(kept_start, stop - dy)  # what the next tiles' shadows need
        kept, kept_start = kept[keep_from - kept_start:], keep_from


def _cloud_shadow_blend(image: np.ndarray, opacity: np.ndarray, shadow: np.ndarray
                        ) -> np.ndarray:
    ground = image * (1.0 - (1.0 - SHADOW_DARKENING) * shadow)[..., None]
    return ground * (1.0 - opacity[..., None]) + np.float32(CLOUD_BRIGHTNESS) * opacity[..., None]


@register_corruption('cloud_shadow', 'geofm_calibration', 'environmental',
                     'fraction of pixels under cloud', (0.2, 0.4, 0.6, 0.8, 1.0),
                     options=('bands', ), stochastic=True, band_domain='optical')
def cloud_shadow(image: np.ndarray, coverage: float, rng: np.random.Generator,
                 bands: Optional[Sequence[int]] = None) -> np.ndarray:
    """Ground darkened under the shadow, then the cloud blended over it (row tiles).

    Args:
        bands: the band indices (from 0) the cloud and shadow affect, e.g. the optical
            bands of a multi-sensor stack; the others are returned unchanged. None:
            every band. The cloud field does not depend on it, so the selected bands are
            exactly those of the all-band result.
    """
    selected = check_bands(bands, image.shape[2])
    out = None  # allocated once the whole thickness field is gone
    for start, stop, opacity, shadow in _cloud_shadow_bands(
            image.shape[0], image.shape[1], coverage, rng, image[0].size):
        if out is None:
            out = np.empty(image.shape, np.float32)
        if selected is None:
            out[start:stop] = _cloud_shadow_blend(image[start:stop], opacity, shadow)
        else:
            out[start:stop] = image[start:stop]
            out[start:stop, :, selected] = _cloud_shadow_blend(
                image[start:stop][..., selected], opacity, shadow)
    return out


@register_uint8_kernel('cloud_shadow', 'geofm_calibration', 'identical')
def cloud_shadow_uint8(image: np.ndarray, coverage: float, rng: np.random.Generator,
                       bands: Optional[Sequence[int]] = None) -> np.ndarray:
    """The float path and its rounding, a row tile at a time (no full-size float
    copy of the image): bit-identical to it."""
    selected = check_bands(bands, image.shape[2])
    out = None  # allocated once the whole thickness field is gone
    for start, stop, opacity, shadow in _cloud_shadow_bands(
            image.shape[0], image.shape[1], coverage, rng, image[0].size):
        if out is None:
            out = np.empty(image.shape, np.uint8)
        band = image[start:stop]
        if selected is None:
            out[start:stop] = from_float(
                _cloud_shadow_blend(_grey_levels_as_float(band), opacity, shadow), band)
        else:
            out[start:stop] = band
            chosen = np.ascontiguousarray(band[..., selected])
            out[start:stop, :, selected] = from_float(
                _cloud_shadow_blend(_grey_levels_as_float(chosen), opacity, shadow), chosen)
    return out


# photon counts are kept between the two passes in a float32 buffer: exact below 2**24
_EXACT_FLOAT32_COUNTS = 2**24


@register_corruption('poisson_gaussian_noise', 'geofm_calibration', 'sensor',
                     'photon scale η / read noise σ',
                     ((200, 0.005), (100, 0.01), (50, 0.02), (25, 0.03), (12, 0.05)),
                     options=('band_noise', ), stochastic=True)
def poisson_gaussian_noise(image: np.ndarray, eta_and_sigma, rng: np.random.Generator,
                           band_noise: BandNoise = None) -> np.ndarray:
    """``Poisson(η·x) / η + σ·z``, in float64, rounded to float32.

    The draws are every element's photon count in order, then every element's read
    noise: two passes over row tiles (the counts wait in the output buffer), the same
    draws and values as two whole-image draws.

    Args:
        band_noise: (η, σ) multipliers per band (:mod:`~reobench_corruptions.band_noise`;
            here a sequence of pairs, one per band): band ``b`` gets η·a_b and σ·c_b.
            None: the severity's (η, σ) on every band.
    """
    eta, sigma = band_noise_parameters(eta_and_sigma, band_noise, image.shape[2])
    out = np.empty(image.shape, np.float32)
    tiles = list(row_tiles(image.shape[0], image[0].size))
    for start, stop in tiles:
        counts = rng.poisson(eta * image[start:stop].astype(np.float64))
        if counts.size and counts.max() >= _EXACT_FLOAT32_COUNTS:
            raise ValueError(f'photon counts reach {counts.max()}, beyond what the engine '
                             f'keeps exactly ({_EXACT_FLOAT32_COUNTS}); image values must '
                             'be in [0, 1]')
        out[start:stop] = counts
    for start, stop in tiles:
        shot = out[start:stop].astype(np.float64)
        shot /= eta
        out[start:stop] = shot + sigma * rng.standard_normal(shot.shape)
    return out


@register_uint8_kernel('poisson_gaussian_noise', 'geofm_calibration', 'identical')
def poisson_gaussian_noise_uint8(image: np.ndarray, eta_and_sigma, rng: np.random.Generator,
                                 band_noise: BandNoise = None) -> np.ndarray:
    """The float path and its rounding in row tiles, bit-identical to it. Between the
    two passes each count waits in the output as its low byte; the few counts above
    255 (only where η·x is near 255 or more) are kept aside."""
    eta, sigma = band_noise_parameters(eta_and_sigma, band_noise, image.shape[2])
    out = np.empty(image.shape, np.uint8)
    tiles = list(row_tiles(image.shape[0], image[0].size))
    large = {}
    for start, stop in tiles:
        counts = rng.poisson(eta * _grey_levels_as_float(image[start:stop]).astype(np.float64))
        out[start:stop] = counts.astype(np.uint8)  # the low byte
        above = np.flatnonzero(counts > 255)
        if above.size:
            large[start] = above, counts.reshape(-1)[above]
    for start, stop in tiles:
        band = out[start:stop]
        shot = band.astype(np.float64)
        if start in large:
            positions, counts = large.pop(start)
            shot.reshape(-1)[positions] = counts
        shot /= eta
        noisy = (shot + sigma * rng.standard_normal(shot.shape)).astype(np.float32)
        out[start:stop] = from_float(noisy, band)
    return out


@register_corruption('motion_blur', 'geofm_calibration', 'sensor',
                     'horizontal box kernel width k', (3, 5, 9, 15, 21))
def wide_motion_blur(image: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    return _per_band(lambda x: cv2.blur(x, (k, 1), borderType=cv2.BORDER_REFLECT), image)


register_uint8_kernel('motion_blur', 'geofm_calibration', 'within_one_level')(wide_motion_blur)
