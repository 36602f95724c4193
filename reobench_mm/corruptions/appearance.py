"""Non-geometric corruptions: the 9 appearance corruptions of REOBench and the
calibration study's cloud + shadow, Poisson-Gaussian noise and wide motion blur.

Every function takes an ``H×W×C`` float32 image in [0, 1], the severity's table
value and a generator, and returns a float32 image of the same shape (clipping is
done by the caller). Tables and algorithms: ``shared/spec/corruptions.md``.
"""
import cv2
import numpy as np

from .base import register_corruption
from .noise import fractal_perlin

# ---------------------------------------------------------------------- REOBench: sensor


@register_corruption('gaussian_noise', 'reobench', 'sensor', 'σ on [0, 1]',
                     (0.04, 0.05, 0.06, 0.07, 0.08))
def gaussian_noise(image: np.ndarray, sigma: float, rng: np.random.Generator) -> np.ndarray:
    return image + np.float32(sigma) * rng.standard_normal(image.shape, dtype=np.float32)


@register_corruption('salt_pepper_noise', 'reobench', 'sensor', 'fraction of elements',
                     (0.005, 0.01, 0.02, 0.03, 0.05))
def salt_pepper_noise(image: np.ndarray, amount: float, rng: np.random.Generator) -> np.ndarray:
    # each element (band of a pixel) independently: salt with p = a/2, pepper with p = a/2
    draw = rng.random(image.shape, dtype=np.float32)
    out = image.copy()
    out[draw < amount / 2] = 1.0
    out[(draw >= amount / 2) & (draw < amount)] = 0.0
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


def reobench_motion_kernel(k: int) -> np.ndarray:
    """k×k kernel, zero except row (k−1)//2, which holds 1/k in every column."""
    kernel = np.zeros((k, k), np.float32)
    kernel[(k - 1) // 2, :] = 1.0 / k
    return kernel


@register_corruption('motion_blur', 'reobench', 'sensor', 'kernel size k', (2, 4, 6, 8, 10))
def motion_blur(image: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    kernel = reobench_motion_kernel(k)
    return _per_band(lambda x: cv2.filter2D(x, -1, kernel), image)


CHANNEL_ORDERS = ('rgb', 'bgr')


def check_channel_order(channel_order: str) -> None:
    """Raise a ValueError unless ``channel_order`` is ``'rgb'`` or ``'bgr'``."""
    if channel_order not in CHANNEL_ORDERS:
        raise ValueError(f"channel_order must be 'rgb' or 'bgr', got {channel_order!r}")


def jpeg_round_trip(image: np.ndarray, quality: int, channel_order: str = 'rgb') -> np.ndarray:
    """Baseline JPEG (4:2:0) encode + decode of a float image at ``quality``.

    Three bands are one colour JPEG (``channel_order`` says whether they are RGB or
    BGR, which decides the YCbCr conversion); any other band count is encoded three
    bands at a time as colour JPEGs in order, the rest one band at a time as
    greyscale JPEGs. JPEG is 8-bit, so every band is quantised to 256 levels.
    """
    check_channel_order(channel_order)
    if not 1 <= int(quality) <= 100:
        raise ValueError(f'JPEG quality must be in 1..100, got {quality}')
    params = [cv2.IMWRITE_JPEG_QUALITY, int(quality), cv2.IMWRITE_JPEG_SAMPLING_FACTOR,
              cv2.IMWRITE_JPEG_SAMPLING_FACTOR_420]
    out = np.empty_like(image)
    bands = image.shape[2]
    start = 0
    while start < bands:
        stop = start + 3 if bands - start >= 3 else start + 1
        chunk = np.rint(np.clip(image[..., start:stop], 0, 1) * 255).astype(np.uint8)
        if stop - start == 3 and channel_order == 'rgb':
            chunk = chunk[..., ::-1]
        ok, encoded = cv2.imencode('.jpg', np.ascontiguousarray(chunk), params)
        if not ok:
            raise RuntimeError('OpenCV failed to encode a JPEG')
        decoded = cv2.imdecode(encoded, cv2.IMREAD_UNCHANGED).reshape(chunk.shape)
        if stop - start == 3 and channel_order == 'rgb':
            decoded = decoded[..., ::-1]
        out[..., start:stop] = decoded.astype(np.float32) / 255.0
        start = stop
    return out


@register_corruption('compression_artifacts', 'reobench', 'sensor', 'JPEG quality',
                     (30, 25, 20, 15, 10), options=('channel_order', ))
def compression_artifacts(image: np.ndarray, quality: int, rng: np.random.Generator,
                          channel_order: str = 'rgb') -> np.ndarray:
    """JPEG round trip at the severity's quality (see :func:`jpeg_round_trip`)."""
    return jpeg_round_trip(image, quality, channel_order)


@register_corruption('data_gaps', 'reobench', 'sensor', 'stripes n / width w px',
                     ((2, 3), (3, 4), (4, 5), (5, 6), (6, 7)))
def data_gaps(image: np.ndarray, stripes_and_width, rng: np.random.Generator) -> np.ndarray:
    n, w = stripes_and_width
    height, width = image.shape[:2]
    theta = np.deg2rad(rng.uniform(0.0, 180.0))
    spacing = np.floor(np.sqrt(width**2 + height**2)) / n
    along_x = np.arange(width, dtype=np.float64) * np.cos(theta)
    along_y = np.arange(height, dtype=np.float64) * np.sin(theta)
    gaps = np.mod(along_y[:, None] + along_x[None, :], spacing) < w
    out = image.copy()
    out[gaps] = 0.0
    return out


# --------------------------------------------------------------- REOBench: environmental


@register_corruption('brightness_contrast', 'reobench', 'environmental', 'offset b / gain c',
                     ((0.0, 1.0), (0.1, 0.8), (0.2, 0.6), (0.3, 0.4), (0.4, 0.2)))
def brightness_contrast(image: np.ndarray, offset_and_gain, rng: np.random.Generator
                        ) -> np.ndarray:
    offset, gain = offset_and_gain
    return image * np.float32(gain) + np.float32(offset)


CLOUD_CELL_PIXELS = 200  # one base-octave noise cell per 200 px
CLOUD_BRIGHTNESS = 0.9  # flat grey of cloud tops, all bands


def cloud_mask(height: int, width: int, density: float, rng: np.random.Generator
               ) -> np.ndarray:
    """The soft REOBench cloud mask: fractal Perlin (6 octaves, persistence 0.5,
    lacunarity 2) min-max normalised, thresholded at 1 − d, Gaussian-blurred (11, σ 5)."""
    noise = fractal_perlin(height, width, CLOUD_CELL_PIXELS, rng)
    span = float(noise.max() - noise.min())
    noise = (noise - noise.min()) / span if span > 0 else np.zeros_like(noise)
    mask = (noise > 1.0 - density).astype(np.float32)
    return cv2.GaussianBlur(mask, (11, 11), 5)


@register_corruption('cloud', 'reobench', 'environmental', 'density d (threshold 1 − d)',
                     (0.10, 0.15, 0.20, 0.25, 0.30))
def cloud(image: np.ndarray, density: float, rng: np.random.Generator) -> np.ndarray:
    mask = cloud_mask(image.shape[0], image.shape[1], density, rng)[..., None]
    return image * (1.0 - mask) + np.float32(CLOUD_BRIGHTNESS) * mask


@register_corruption('haze', 'reobench', 'environmental', 'intensity I',
                     (0.2, 0.3, 0.4, 0.5, 0.6))
def haze(image: np.ndarray, intensity: float, rng: np.random.Generator) -> np.ndarray:
    return image * np.float32(1.0 - intensity) + np.float32(intensity)


# ----------------------------------------------------------- calibration-study shifts

SHADOW_OFFSET_FRACTION = 0.04  # shadow displacement, fraction of the image size
SHADOW_DARKENING = 0.5  # ground under full shadow keeps this fraction of its radiance
CLOUD_EDGE_OPACITY = 0.35  # opacity where the thickness just crosses the threshold


def cloud_shadow_layers(height: int, width: int, coverage: float, rng: np.random.Generator):
    """Cloud opacity and shadow maps for ``cloud_shadow``.

    The cloud covers the pixels whose fractal thickness is at or above its
    (1 − coverage) quantile, so the covered fraction equals ``coverage``; opacity rises
    from ``CLOUD_EDGE_OPACITY`` at the edge to 1 in thick cores. The shadow is the
    opacity map shifted by ``SHADOW_OFFSET_FRACTION`` of the image size (down-right).
    """
    thickness = fractal_perlin(height, width, CLOUD_CELL_PIXELS, rng)
    threshold = np.quantile(thickness, 1.0 - coverage)
    covered = thickness >= threshold
    span = float(thickness.max() - threshold)
    depth = (thickness - threshold) / span if span > 0 else np.ones_like(thickness)
    core = np.clip(depth / 0.5, 0.0, 1.0)
    opacity = np.where(covered, CLOUD_EDGE_OPACITY + (1 - CLOUD_EDGE_OPACITY) * core, 0.0)
    opacity = opacity.astype(np.float32)
    dy = max(1, int(round(SHADOW_OFFSET_FRACTION * height)))
    dx = max(1, int(round(SHADOW_OFFSET_FRACTION * width)))
    shadow = np.zeros_like(opacity)
    shadow[dy:, dx:] = opacity[:height - dy, :width - dx]
    return opacity, shadow


@register_corruption('cloud_shadow', 'geofm_calibration', 'environmental',
                     'fraction of pixels under cloud', (0.2, 0.4, 0.6, 0.8, 1.0))
def cloud_shadow(image: np.ndarray, coverage: float, rng: np.random.Generator) -> np.ndarray:
    opacity, shadow = cloud_shadow_layers(image.shape[0], image.shape[1], coverage, rng)
    ground = image * (1.0 - (1.0 - SHADOW_DARKENING) * shadow)[..., None]
    return ground * (1.0 - opacity[..., None]) + np.float32(CLOUD_BRIGHTNESS) * opacity[..., None]


@register_corruption('poisson_gaussian_noise', 'geofm_calibration', 'sensor',
                     'photon scale η / read noise σ',
                     ((200, 0.005), (100, 0.01), (50, 0.02), (25, 0.03), (12, 0.05)))
def poisson_gaussian_noise(image: np.ndarray, eta_and_sigma, rng: np.random.Generator
                           ) -> np.ndarray:
    eta, sigma = eta_and_sigma
    shot = rng.poisson(eta * image.astype(np.float64)) / eta
    return (shot + sigma * rng.standard_normal(image.shape)).astype(np.float32)


@register_corruption('motion_blur', 'geofm_calibration', 'sensor',
                     'horizontal box kernel width k', (3, 5, 9, 15, 21))
def wide_motion_blur(image: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    return _per_band(lambda x: cv2.blur(x, (k, 1), borderType=cv2.BORDER_REFLECT), image)
