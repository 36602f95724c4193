"""The pixel corruptions on batches of torch tensors, on any device.

:func:`corrupt_torch` applies one corruption of the numpy engine
(:func:`reobench_corruptions.corrupt`) to a ``B×C×H×W`` batch, with the same severity
tables, full scales and per-sample seeding, following the same computation order (a
float32 working copy divided by the full scale, the corruption, clipping to [0, 1],
rounding back to the dtype). Imports torch: import this module explicitly
(``from reobench_corruptions.torch_engine import corrupt_torch``); the package itself
never imports it and stays numpy/OpenCV only.

Covered (see :func:`torch_corruptions`), with the parity each has with the numpy
engine (:data:`PARITY`):

- ``exact``: the same draws (taken from the sample's numpy generator,
  :func:`~reobench_corruptions.base.make_rng`, on the CPU, and moved to the device) and
  the same maths: equal to the numpy engine up to float rounding, i.e. within one grey
  level (the blurs' uint8 results come from OpenCV's integer filters in the numpy
  engine). ``brightness_contrast``, ``haze``, ``gaussian_blur``, both ``motion_blur``,
  ``data_gaps`` (stripe angle), ``cloud`` and ``cloud_shadow`` (the Perlin lattice
  gradients; the full-size field is built on the device).
- ``statistical``: full-size noise drawn on the device by a torch generator seeded from
  the sample's numpy generator: the same distribution as the numpy engine, other draws.
  ``gaussian_noise``, ``salt_pepper_noise``, ``poisson_gaussian_noise``. Their draws are
  reproducible for a given device type (CPU and CUDA generators differ).
- ``exact`` too, the geometric corruptions ``rotate``, ``scale`` and ``translate``
  (:func:`corrupt_geometric_torch`, which also returns each sample's
  :class:`~reobench_corruptions.geometric.GeometricTransform`; label maps move with
  :func:`warp_label_map_torch`): OpenCV's fixed-point sampling reproduced
  (:mod:`~reobench_corruptions.torch_geometric`), the same bits as the numpy engine for
  ``uint8`` images and for label maps.
- ``exact``, ``compression_artifacts``: torchvision's JPEG codec (libjpeg, the same
  encoder settings and decoder as OpenCV's: the same bits) on the CPU, the image's bytes
  copied there and back; ``jpeg_codec='device'`` uses nvJPEG on CUDA tensors instead
  (another codec: its parity is measured, not assumed). torchvision is imported only
  when JPEG is used.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from . import torch_kernels as kernels
from .appearance import (CLOUD_BRIGHTNESS, CLOUD_CELL_PIXELS, CLOUD_CORE_DEPTH,
                         SHADOW_DARKENING, SHADOW_OFFSET_FRACTION, check_bands,
                         check_channel_order, reobench_motion_kernel)
from .api import check_arguments
from .band_noise import band_noise_parameters, resolve_band_noise
from .band_values import MaxValue, check_band_names
from .base import FLOAT32_SCALES, get_corruption, list_corruptions, make_rng
from .geometric import (DEFAULT_SCALE_CANVAS, GeometricTransform, check_border,
                        check_canvas, check_ignore_index, geometric_transform,
                        identity_transform)
from .torch_checks import (TORCH_DTYPES, Key, blanked, check_images, check_keys,
                           check_tensor)
from .torch_geometric import warp_image, warp_labels

__all__ = ['corrupt_torch', 'corrupt_geometric_torch', 'warp_label_map_torch',
           'torch_corruptions', 'PARITY', 'TORCH_DTYPES']

@dataclass(frozen=True)
class _Batch:
    """One call's inputs once checked: the images, their full scale (one, or one per
    band), and each sample's numpy generator (None for the corruptions that draw
    nothing)."""
    images: torch.Tensor
    scale: Union[float, Tuple[float, ...]]
    rngs: Tuple[Optional[np.random.Generator], ...]

    @property
    def device(self) -> torch.device:
        return self.images.device

    def working(self) -> torch.Tensor:
        """The float32 working copy divided by the full scale (``base.to_float``)."""
        return _to_float(self.images, self.scale)

    def generator(self, index: int) -> torch.Generator:
        """A torch generator on the device, seeded by the first draw of sample
        ``index``'s numpy generator."""
        generator = torch.Generator(device=self.device)
        generator.manual_seed(int(self.rngs[index].integers(0, 2**63)))
        return generator

    def to_device(self, array: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(array)).to(self.device)


def _float32_holds(scale: float) -> bool:
    return FLOAT32_SCALES[0] <= scale <= FLOAT32_SCALES[1]


def _to_float(images: torch.Tensor, scale: Union[float, Tuple[float, ...]]) -> torch.Tensor:
    """``images`` as float32 divided by ``scale``: ``x · float32(1/scale)`` (float64
    division for scales float32 cannot hold), as the numpy engine computes it; a tuple
    holds one full scale per band."""
    if isinstance(scale, tuple):  # bands: the first axis of C×H×W, the second of B×C×H×W
        axis = images.dim() - 3
        return torch.cat([_to_float(images.narrow(axis, b, 1), s)
                          for b, s in enumerate(scale)], axis)
    if images.dtype.is_floating_point and not _float32_holds(scale):
        return (images.to(torch.float64) / scale).to(torch.float32)
    out = images.to(torch.float32)
    if not images.dtype.is_floating_point or scale != 1.0:
        out = out * float(np.float32(1.0 / scale))
    return out


def _from_float(image: torch.Tensor, dtype: torch.dtype,
                scale: Union[float, Tuple[float, ...]]) -> torch.Tensor:
    """Clip to [0, 1], multiply by the full scale (a tuple: one per band), round to
    nearest for integer dtypes (``base.from_float``)."""
    if isinstance(scale, tuple):
        axis = image.dim() - 3
        return torch.cat([_from_float(image.narrow(axis, b, 1), dtype, s)
                          for b, s in enumerate(scale)], axis)
    image = image.clamp(0.0, 1.0)
    if dtype in (torch.uint8, torch.uint16):
        return torch.round(image * float(np.float32(scale))).to(dtype)
    if scale == 1.0:
        return image.to(dtype)
    if dtype == torch.float64 or not _float32_holds(scale):
        out = (image.to(torch.float64) * scale).to(dtype)
    else:
        out = (image * float(np.float32(scale))).to(dtype)
    limit = torch.tensor(float(TORCH_DTYPES[dtype](scale)), dtype=dtype, device=out.device)
    return torch.minimum(out, limit)


def _per_band(image: torch.Tensor, filter_fn: Callable[[torch.Tensor], torch.Tensor]
              ) -> torch.Tensor:
    """Apply an ``N×1×H×W`` filter to every band of every sample."""
    batch, bands, height, width = image.shape
    out = filter_fn(image.reshape(batch * bands, 1, height, width))
    return out.reshape(batch, bands, height, width)


# ------------------------------------------------------------------ the corruptions
# Each takes the checked batch, the severity's table value and the options, and returns
# the float32 result in [0, 1] before clipping (or, where noted, the input's dtype).


def _gaussian_noise(batch: _Batch, sigma: float, options: dict) -> torch.Tensor:
    x = batch.working()
    for i in range(x.shape[0]):
        noise = torch.randn(x.shape[1:], generator=batch.generator(i), dtype=torch.float32,
                            device=batch.device)
        x[i] = noise * float(np.float32(sigma)) + x[i]
    return x


def _salt_pepper_noise(batch: _Batch, amount: float, options: dict) -> torch.Tensor:
    x = batch.working()
    for i in range(x.shape[0]):
        draws = torch.rand(x.shape[1:], generator=batch.generator(i), dtype=torch.float64,
                           device=batch.device)
        x[i] = torch.where(draws < amount / 2, 1.0, torch.where(draws < amount, 0.0, x[i]))
    return x


def _gaussian_blur(batch: _Batch, k: int, options: dict) -> torch.Tensor:
    return _per_band(batch.working(), lambda x: kernels.gaussian_blur(x, k, 0.0))


def _reobench_motion_blur(batch: _Batch, k: int, options: dict) -> torch.Tensor:
    # cv2.filter2D with a k×k kernel whose row (k−1)//2 holds 1/k, anchor (k//2, k//2):
    # the source row is r + (k−1)//2 − k//2 (one row up for even k), columns c − k//2 ..
    # c + k − 1 − k//2; borders reflect-101
    row = (k - 1) // 2
    taps = reobench_motion_kernel(k)[row]
    mode = kernels.BORDER_REFLECT_101

    def blur(x: torch.Tensor) -> torch.Tensor:
        return kernels.filter_rows(kernels.shift_rows(x, row - k // 2, mode), taps, k // 2,
                                   mode)

    return _per_band(batch.working(), blur)


def _wide_motion_blur(batch: _Batch, k: int, options: dict) -> torch.Tensor:
    # cv2.blur(x, (k, 1), borderType=BORDER_REFLECT): the sum of k columns around each
    # pixel (anchor k//2) times 1/k
    ones = np.ones(k, np.float32)
    scale = float(np.float32(1.0 / k))
    return _per_band(batch.working(), lambda x: kernels.filter_rows(
        x, ones, k // 2, kernels.BORDER_REFLECT) * scale)


def _brightness_contrast(batch: _Batch, offset_and_gain, options: dict) -> torch.Tensor:
    offset, gain = offset_and_gain
    return batch.working() * float(np.float32(gain)) + float(np.float32(offset))


def _haze(batch: _Batch, intensity: float, options: dict) -> torch.Tensor:
    return batch.working() * float(np.float32(1.0 - intensity)) + \
        float(np.float32(intensity))


def _data_gaps(batch: _Batch, stripes_and_width, options: dict) -> torch.Tensor:
    stripes, stripe_width = stripes_and_width
    x = batch.working()
    height, width = x.shape[2:]
    for i, rng in enumerate(batch.rngs):
        # the stripe angle and the per-row / per-column phases, as the numpy engine
        # computes them (O(H + W), on the CPU); the H×W phase on the device, in float64
        theta = np.deg2rad(rng.uniform(0.0, 180.0))
        spacing = np.floor(np.sqrt(width**2 + height**2)) / stripes
        along_x = np.mod(np.arange(width, dtype=np.float64) * np.cos(theta), spacing)
        along_y = np.mod(np.arange(height, dtype=np.float64) * np.sin(theta), spacing)
        phase = batch.to_device(along_y)[:, None] + batch.to_device(along_x)[None, :]
        gaps = (phase < stripe_width) | ((phase >= spacing) & (phase < spacing + stripe_width))
        x[i] = x[i].masked_fill(gaps, 0.0)
    return x


def _cloud_weights(batch: _Batch, density: float) -> torch.Tensor:
    """``B×1×H×W`` clear-sky weights ``1 − mask`` of the REOBench cloud mask:
    fractal Perlin min-max thresholded at 1 − d (compared in float32, as
    ``cv2.threshold`` does), Gaussian-blurred (11, σ 5, reflect-101)."""
    height, width = batch.images.shape[2:]
    masks = []
    for rng in batch.rngs:
        noise = kernels.fractal_perlin_torch(height, width, CLOUD_CELL_PIXELS, rng,
                                             batch.device)
        low, high = float(noise.min()), float(noise.max())
        if not high > low:
            masks.append(torch.zeros_like(noise))
            continue
        threshold = float(np.float32(low + (1.0 - density) * (high - low)))
        masks.append((noise > threshold).to(torch.float32))
    blurred = kernels.gaussian_blur(torch.stack(masks)[:, None], 11, 5.0)
    return 1.0 - blurred


def _cloud(batch: _Batch, density: float, options: dict) -> torch.Tensor:
    weight = _cloud_weights(batch, density)
    if batch.images.dtype == torch.uint8:
        # the numpy engine's uint8 kernel: the blend on grey levels, rounded once
        top = float(np.float32(CLOUD_BRIGHTNESS * 255))
        blended = (batch.images.to(torch.float32) - top) * weight + top
        return torch.round(blended).to(torch.uint8)
    top = float(np.float32(CLOUD_BRIGHTNESS))
    return (batch.working() - top) * weight + top


def _cloud_shadow_layers(height: int, width: int, coverage: float,
                         rng: np.random.Generator, device: torch.device
                         ) -> Tuple[torch.Tensor, torch.Tensor]:
    """Cloud opacity and shadow (``H×W`` float32) of ``cloud_shadow``: the Perlin
    thickness above its (1 − coverage) quantile, smoothstep-ramped, and the same map
    moved down-right by ``SHADOW_OFFSET_FRACTION`` (edges repeated)."""
    thickness = kernels.fractal_perlin_torch(height, width, CLOUD_CELL_PIXELS, rng, device)
    threshold = np.float32(kernels.quantile_linear(thickness, 1.0 - coverage))
    span = float(np.float32(thickness.max().item()) - threshold)
    if span > 0:
        # divide by a device tensor: a Python divisor may be turned into a multiplication
        # by its reciprocal, which rounds differently from numpy's division
        divisor = torch.tensor(span, dtype=torch.float32, device=device)
        depth = (thickness - float(threshold)) / divisor
        ramp = (depth.to(torch.float64) / CLOUD_CORE_DEPTH).clamp(0.0, 1.0)
        opacity = (ramp * ramp * (3.0 - 2.0 * ramp)).to(torch.float32)
    else:
        opacity = torch.ones_like(thickness)
    dy = max(1, int(round(SHADOW_OFFSET_FRACTION * height)))
    dx = max(1, int(round(SHADOW_OFFSET_FRACTION * width)))
    rows = (torch.arange(height, device=device) - dy).clamp(min=0)
    columns = (torch.arange(width, device=device) - dx).clamp(min=0)
    shadow = opacity.index_select(0, rows).index_select(1, columns)
    return opacity, shadow


def _cloud_shadow(batch: _Batch, coverage: float, options: dict) -> torch.Tensor:
    x = batch.working()
    selected = check_bands(options.get('bands'), x.shape[1])
    height, width = x.shape[2:]
    for i, rng in enumerate(batch.rngs):
        opacity, shadow = _cloud_shadow_layers(height, width, coverage, rng, batch.device)
        image = x[i] if selected is None else x[i, selected]
        ground = image * (1.0 - (1.0 - SHADOW_DARKENING) * shadow)
        blended = ground * (1.0 - opacity) + float(np.float32(CLOUD_BRIGHTNESS)) * opacity
        if selected is None:
            x[i] = blended
        else:
            x[i, selected] = blended
    return x


def _poisson_gaussian_noise(batch: _Batch, eta_and_sigma, options: dict) -> torch.Tensor:
    eta, sigma = band_noise_parameters(eta_and_sigma, options.get('band_noise'),
                                       batch.images.shape[1])
    if isinstance(eta, np.ndarray):  # one (η, σ) per band: C×1×1 on the device
        eta, sigma = (batch.to_device(v)[:, None, None] for v in (eta, sigma))
    x = batch.working()
    for i in range(x.shape[0]):
        generator = batch.generator(i)
        counts = torch.poisson(eta * x[i].to(torch.float64), generator=generator)
        read = torch.randn(x.shape[1:], generator=generator, dtype=torch.float64,
                           device=batch.device)
        x[i] = (counts / eta + sigma * read).to(torch.float32)
    return x


def _compression_artifacts(batch: _Batch, quality: int, options: dict) -> torch.Tensor:
    # uint8: the codec on the bytes themselves; other dtypes quantised to 256 levels first
    # and returned as float32 in [0, 1], as the numpy engine does
    order, codec = options.get('channel_order', 'rgb'), options['jpeg_codec']
    if batch.images.dtype == torch.uint8:
        return torch.stack([kernels.jpeg_round_trip(image, int(quality), order, codec)
                            for image in batch.images])
    quantised = torch.round(batch.working().clamp(0.0, 1.0) * 255.0).to(torch.uint8)
    decoded = torch.stack([kernels.jpeg_round_trip(image, int(quality), order, codec)
                           for image in quantised])
    return decoded.to(torch.float32) / 255.0


_EXACT, _STATISTICAL = 'exact', 'statistical'

#: (protocol, name) -> (parity with the numpy engine, implementation).
_IMPLEMENTATIONS: Dict[Tuple[str, str], Tuple[str, Callable]] = {
    ('reobench', 'gaussian_noise'): (_STATISTICAL, _gaussian_noise),
    ('reobench', 'salt_pepper_noise'): (_STATISTICAL, _salt_pepper_noise),
    ('reobench', 'gaussian_blur'): (_EXACT, _gaussian_blur),
    ('reobench', 'motion_blur'): (_EXACT, _reobench_motion_blur),
    ('reobench', 'data_gaps'): (_EXACT, _data_gaps),
    ('reobench', 'brightness_contrast'): (_EXACT, _brightness_contrast),
    ('reobench', 'cloud'): (_EXACT, _cloud),
    ('reobench', 'haze'): (_EXACT, _haze),
    ('reobench', 'compression_artifacts'): (_EXACT, _compression_artifacts),
    ('geofm_calibration', 'cloud_shadow'): (_EXACT, _cloud_shadow),
    ('geofm_calibration', 'poisson_gaussian_noise'): (_STATISTICAL, _poisson_gaussian_noise),
    ('geofm_calibration', 'motion_blur'): (_EXACT, _wide_motion_blur),
}

#: ``(protocol, name) -> 'exact' | 'statistical'``: whether :func:`corrupt_torch` draws
#: the numpy engine's random numbers (equal results up to float rounding: within one
#: grey level) or its own ones from the same distribution.
PARITY: Dict[Tuple[str, str], str] = {
    **{key: parity for key, (parity, _) in _IMPLEMENTATIONS.items()},
    **{('reobench', name): _EXACT for name in ('rotate', 'scale', 'translate')}}


def torch_corruptions(protocol: str = 'reobench') -> List[str]:
    """Names of the corruptions of ``protocol`` that :func:`corrupt_torch` implements,
    in the registry's order.

    Args:
        protocol: ``'reobench'`` or ``'geofm_calibration'``.

    Returns:
        The covered names: every corruption of the protocol (the geometric ones, which
        move labels, through :func:`corrupt_geometric_torch`).
    """
    return [name for name in list_corruptions(protocol) if (protocol, name) in PARITY]


def _refuse_uncovered(name: str, protocol: str) -> None:
    get_corruption(name, protocol)  # KeyError for unknown names, listing valid ones
    if (protocol, name) not in PARITY:
        raise NotImplementedError(f'{name} has no torch implementation; corrupt_torch '
                                  f'covers ({protocol}): {torch_corruptions(protocol)}')


def corrupt_torch(images: torch.Tensor, name: str, severity: int, *,
                  keys: Optional[Sequence[Key]] = None, seed: int = 0,
                  protocol: str = 'reobench', max_value: MaxValue = None,
                  band_names: Optional[Sequence[Optional[str]]] = None,
                  jpeg_codec: str = 'cpu', **options) -> torch.Tensor:
    """Apply corruption ``name`` at ``severity`` to a batch of images on its device.

    The torch counterpart of :func:`reobench_corruptions.corrupt`, image by image:
    ``corrupt_torch(images, name, s, keys=keys)[i]`` corresponds to
    ``corrupt(images[i] as H×W×C, name, s, key=keys[i])``, exactly (within one grey
    level) or in distribution (see :data:`PARITY`).

    Args:
        images: a ``B×C×H×W`` tensor (any band count, any device) of dtype
            ``torch.uint8``, ``torch.uint16`` (uint16 data: ``torch.from_numpy`` of a
            uint16 array, or ``x.to(torch.uint16)``; int32 is refused),
            ``torch.float16``, ``torch.float32`` or ``torch.float64``, with values in
            [0, full scale]. Never modified.
        name: a covered corruption of ``protocol`` (see :func:`torch_corruptions`).
        severity: an integer 0..5; 0 returns an unchanged copy (after the checks).
        keys: one key per sample (``str`` or ``int``, e.g. file names or dataset
            indices), in batch order; required at severities 1..5 of the corruptions
            that draw random numbers. Each sample's draws depend on its key and
            ``seed`` only, so a batch gives the results of single calls.
        seed: the global seed, an integer >= 0.
        protocol: ``'reobench'`` or ``'geofm_calibration'``.
        max_value: the full scale: ``uint8`` 255 (None or 255); ``uint16`` default
            65535 (a whole number, e.g. 4095 for 12-bit data); floats default 1.0. Or
            one per band, a list or a mapping by band name, as :func:`corrupt` takes it.
            Only the bands the corruption acts on (``bands``) are checked; the others
            come back bit-identical whatever they hold.
        band_names: the name of every band, in order, or None: as :func:`corrupt`
            (needed by a ``max_value`` or ``band_noise`` given by band name).
        jpeg_codec: where ``compression_artifacts`` runs its codec
            (:data:`~reobench_corruptions.torch_kernels.JPEG_CODECS`):
            ``'cpu'`` (libjpeg, the numpy engine's bits; the image's bytes go to the CPU
            and back) or ``'device'`` (nvJPEG on CUDA tensors; its parity with libjpeg
            is measured by ``benchmarks/gpu_device_check.py``, not assumed).
        **options: the corruption's own options (``bands`` for every pixel-value
            corruption, ``channel_order`` for ``compression_artifacts``, ``band_noise``
            for ``poisson_gaussian_noise``, ``border`` for the geometric ones, ``canvas``
            for ``scale``); anything else is an error.

    Returns:
        A new tensor of the input's shape, dtype and device.

    Raises:
        KeyError: an unknown corruption name (the message lists the valid ones).
        TypeError: not a tensor, an unsupported dtype, an unknown option, bad keys.
        ValueError: a bad shape, severity, seed, protocol, ``max_value`` or
            ``jpeg_codec``; values out of range; a number of keys other than ``B``;
            missing keys; ``jpeg_codec='device'`` for images not on a CUDA device.
    """
    _refuse_uncovered(name, protocol)
    if jpeg_codec not in kernels.JPEG_CODECS:
        raise ValueError(f'jpeg_codec must be one of {kernels.JPEG_CODECS}, got '
                         f'{jpeg_codec!r}')
    if get_corruption(name, protocol).moves_labels:
        return corrupt_geometric_torch(images, name, severity, keys=keys, seed=seed,
                                       protocol=protocol, max_value=max_value,
                                       band_names=band_names, **options)[0]
    spec, severity, seed = check_arguments(name, severity, seed, protocol, max_value, options)
    count = check_tensor(images)
    names = check_band_names(band_names, count)
    selected = check_bands(options.get('bands'), count)
    scale, blank = check_images(images, max_value, selected, names)
    if options.get('band_noise') is not None:  # by name or kind: per band, in order
        options = dict(options, band_noise=resolve_band_noise(options['band_noise'],
                                                              images.shape[1], names))
    if options.get('channel_order') is not None:
        check_channel_order(options['channel_order'])
    if name == 'compression_artifacts':
        if jpeg_codec == 'device' and images.device.type != 'cuda':
            raise ValueError("jpeg_codec='device' runs nvJPEG on CUDA tensors; the images "
                             f"are on {images.device}: use jpeg_codec='cpu'")
        options = dict(options, jpeg_codec=jpeg_codec)
    keys = check_keys(keys, images.shape[0], spec, severity)
    if severity == 0:
        return images.clone()
    rngs = tuple(make_rng(seed, f'{protocol}/{name}', severity, key) for key in keys) \
        if spec.stochastic else tuple(None for _ in keys)
    parameter = spec.parameter_for(severity)
    with torch.no_grad():
        result = _IMPLEMENTATIONS[(protocol, name)][1](
            _Batch(blanked(images, blank), scale, rngs), parameter, options)
        if not (result.dtype == images.dtype == torch.uint8):  # else from a uint8 path
            result = _from_float(result, images.dtype, scale)
        selected = options.get('bands')
        if selected is not None:
            for band in set(range(images.shape[1])) - set(selected):
                result[:, band].copy_(images[:, band])  # (uint16 tensors cannot be indexed)
    return result


def corrupt_geometric_torch(images: torch.Tensor, name: str, severity: int, *,
                            keys: Optional[Sequence[Key]] = None, seed: int = 0,
                            protocol: str = 'reobench', border: str = 'reflect',
                            max_value: MaxValue = None,
                            band_names: Optional[Sequence[Optional[str]]] = None, **options
                            ) -> Tuple[torch.Tensor, List[GeometricTransform]]:
    """Apply geometric corruption ``name`` (``rotate``, ``scale``, ``translate``) to a
    batch on its device; ``(images, transforms)``, one transform per sample.

    The torch counterpart of :func:`reobench_corruptions.corrupt_geometric`: the same
    transform (drawn from the sample's key for ``translate``) and the same pixels — for
    ``uint8`` images the same bits; for other dtypes the same up to float rounding
    (within one grey level; see :mod:`~reobench_corruptions.torch_geometric`). Move
    label maps with :func:`warp_label_map_torch` and boxes or points with the
    transforms' :meth:`~reobench_corruptions.geometric.GeometricTransform.apply_to_points`.

    Args:
        images, keys, seed, protocol, max_value, band_names: as :func:`corrupt_torch`
            (``keys`` are needed by ``translate``, which draws its signs).
        name: ``'rotate'``, ``'scale'`` or ``'translate'``.
        severity: an integer 0..5; 0 returns an unchanged copy and identity transforms.
        border: ``'reflect'`` or ``'constant'`` (as the numpy engine).
        **options: ``canvas`` for ``scale``; anything else is an error.

    Raises:
        ValueError: a corruption that does not move labels, a bad border or canvas, and
            the errors of :func:`corrupt_torch`.
    """
    spec = get_corruption(name, protocol)
    if not spec.moves_labels:
        raise ValueError(f'{name} is not a geometric corruption; use corrupt_torch()')
    check_border(border)
    spec, severity, seed = check_arguments(name, severity, seed, protocol, max_value,
                                           dict(options, border=border))
    canvas = options.get('canvas', DEFAULT_SCALE_CANVAS)
    check_canvas(canvas)
    names = check_band_names(band_names, check_tensor(images))
    scale, _ = check_images(images, max_value, None, names)
    keys = check_keys(keys, images.shape[0], spec, severity)
    shape = tuple(images.shape[2:])
    if severity == 0:
        return images.clone(), [identity_transform(*shape) for _ in keys]
    parameter = spec.parameter_for(severity)
    transforms = [geometric_transform(
        name, shape, parameter,
        make_rng(seed, f'{protocol}/{name}', severity, key) if spec.stochastic else None,
        border, canvas) for key in keys]
    out = torch.empty_like(images)
    with torch.no_grad():
        for i, transform in enumerate(transforms):
            if images.dtype == torch.uint8:  # OpenCV's integer paths, as the numpy engine
                out[i] = warp_image(images[i], transform)
            else:
                moved = warp_image(_to_float(images[i:i + 1], scale)[0], transform)
                out[i] = _from_float(moved, images.dtype, scale)
    return out, transforms


def _numpy_dtype(dtype: torch.dtype) -> np.dtype:
    try:
        return torch.empty(0, dtype=dtype).numpy().dtype
    except TypeError:
        raise TypeError(f'unsupported label map dtype {dtype}; valid: bool, signed and '
                        'unsigned integers, float16/32/64') from None


def warp_label_map_torch(label_map: torch.Tensor, transform: GeometricTransform,
                         ignore_index: int) -> torch.Tensor:
    """Move a label map on its device as
    :meth:`~reobench_corruptions.geometric.GeometricTransform.warp_label_map` moves it
    (nearest sampling, ``ignore_index`` where there is no source content): the same
    values.

    Args:
        label_map: ``H×W`` or ``…×H×W`` (e.g. mmseg's ``1×H×W``), with the ``(H, W)``
            of the image the transform was made for; any integer dtype, bool or
            float16/32/64. Never modified.
        transform: a transform of :func:`corrupt_geometric_torch` (or the numpy engine).
        ignore_index: an integer the dtype can hold (see
            :func:`~reobench_corruptions.geometric.check_ignore_index`).

    Returns:
        A new tensor of shape ``…×output_shape``, the dtype and device of the input.

    Raises:
        TypeError: not a tensor, or an unsupported dtype.
        ValueError: a height and width other than the image's, or an ``ignore_index``
            the dtype cannot hold.
    """
    if not isinstance(label_map, torch.Tensor):
        raise TypeError(f'label_map must be a torch.Tensor, got {type(label_map).__name__}')
    source = transform.source_shape
    if label_map.dim() < 2 or tuple(label_map.shape[-2:]) != source or \
            label_map.numel() == 0:
        raise ValueError(
            f'label map of shape {tuple(label_map.shape)} does not match the image this '
            f'{transform.name!r} transform was made for, of height × width {source}: a '
            'label map must be H×W or …×H×W with the image\'s H and W')
    fill = check_ignore_index(ignore_index, _numpy_dtype(label_map.dtype))
    with torch.no_grad():
        return warp_labels(label_map, transform, fill)
