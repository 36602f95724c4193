"""Entry points of the corruption engine."""
from __future__ import annotations

from typing import Optional, Sequence, Tuple, Union

import numpy as np

from .appearance import check_bands
from .band_noise import check_band_noise, resolve_band_noise
from .band_values import (MaxValue, band_extremes, check_acted_bands, check_band_max_values,
                          check_band_names, from_float_bands, out_of_range_note,
                          per_band_full_scales, scaled_float32_bands)
from .base import (_native, as_bands, check_image, check_seed, check_severity, full_scale,
                   get_corruption, list_corruptions, make_rng, sample_key)
from .geometric import GeometricTransform, check_border, check_canvas, identity_transform

__all__ = ['corrupt', 'corrupt_geometric', 'check_arguments']


def check_arguments(name: str, severity: int, seed: int, protocol: str,
                    max_value: MaxValue, options: dict) -> tuple:
    """The checks every engine makes before it looks at an image: the corruption of the
    protocol, the severity, its options (the form of ``band_noise``), the seed and the
    full scale (one, or one per band: :data:`~reobench_corruptions.band_values.MaxValue`);
    ``(spec, severity, seed)``.

    Every pixel-value corruption takes ``bands`` (see :func:`corrupt`) besides its own
    options; a geometric one refuses it.

    Raises:
        KeyError: an unknown corruption; TypeError: an unknown option (``bands`` for a
            geometric corruption); ValueError: a bad severity, seed or ``max_value``.
    """
    spec = get_corruption(name, protocol)
    severity = check_severity(severity)
    if 'bands' in options and not spec.takes_bands:
        raise TypeError(f'{name} is a geometric corruption: it moves every band together, '
                        'so it takes no bands option (bands is for the pixel-value '
                        f'corruptions); valid options of {name}: {list(spec.options)}')
    unknown = set(options) - set(spec.accepted_options)
    if unknown:
        raise TypeError(f'{name} got unknown options {sorted(unknown)}; '
                        f'valid: {list(spec.accepted_options) or "none"}')
    seed = check_seed(seed)
    check_band_max_values(max_value)  # kept as given: messages show the caller's value
    if 'band_noise' in options:
        check_band_noise(options['band_noise'])
    return spec, severity, seed


def _run(image: np.ndarray, name: str, severity: int, seed: int, key, protocol: str,
         max_value: MaxValue, options: dict, band_names: Optional[Sequence] = None):
    """Check every argument, then run the corruption; ``(spec, result, scale)``, with
    result None at severity 0 and scale the full scale (one number, or one per band)."""
    spec, severity, seed = check_arguments(name, severity, seed, protocol, max_value, options)
    sample_key(key)  # a bad key is an error at every severity
    bands = as_bands(image)
    count = bands.shape[2]
    names = check_band_names(band_names, count)
    per_band = per_band_full_scales(bands.dtype, max_value, count, names)
    if per_band is None:
        full_scale(bands.dtype, max_value)  # dtype and max_value first, as check_image
    # options that can be checked without running the corruption: an error at every
    # severity, severity 0 included
    selected = check_bands(options.get('bands'), count)
    if per_band is None and selected is None:
        try:
            scale, blank = check_image(bands, max_value), []
        except ValueError as error:  # values out of range: say which bands
            limit = float(_native(bands.dtype).type(full_scale(bands.dtype, max_value)))
            raise ValueError(f'{error}{out_of_range_note(*band_extremes(bands), limit, names)}'
                             ) from None
    else:  # only the bands the corruption acts on are checked
        scale, blank = check_acted_bands(bands, max_value, per_band, selected, names)
    if 'canvas' in options:
        check_canvas(options['canvas'])
    if options.get('band_noise') is not None:  # by name or kind: per band, in order
        options = dict(options, band_noise=resolve_band_noise(options['band_noise'], count,
                                                              names))
    if severity == 0:
        return spec, None, scale
    _check_key(spec, severity, key)
    rng = make_rng(seed, f'{protocol}/{name}', severity, key)
    parameter = spec.parameter_for(severity)
    if 'bands' not in spec.options:
        # a selection the kernel does not handle itself: it runs on every band and
        # corrupt() puts the bands not selected back
        options = {k: v for k, v in options.items() if k != 'bands'}
    if spec.uint8_func is not None and bands.dtype == np.uint8:
        # kernels may hand the array to OpenCV or reshape it: give them C order
        return spec, spec.uint8_func(np.ascontiguousarray(bands), parameter, rng,
                                     **options), scale
    return spec, spec.func(scaled_float32_bands(bands, scale, blank), parameter, rng,
                           **options), scale


def _check_key(spec, severity: int, key) -> None:
    """Refuse ``key=None`` for a corruption that draws random numbers: every image would
    get the same draws (the same noise field, stripes, cloud or shift)."""
    if key is None and spec.stochastic:
        draw_free = [n for n in list_corruptions(spec.protocol)
                     if not get_corruption(n, spec.protocol).stochastic]
        raise ValueError(
            f'{spec.name!r} (severity {severity}) draws random numbers and needs the '
            "sample's key: pass key= with a value stable for each image, e.g. its file "
            "name (key='tile_042.png') or its index in the dataset (key=42). Without a key "
            'every image would get the same random draws. Severity 0 and the corruptions '
            f'that draw nothing ({", ".join(draw_free)}) need no key.')


def corrupt(image: np.ndarray, name: str, severity: int, *, seed: int = 0,
            key: Union[None, int, str] = None, protocol: str = 'reobench',
            max_value: MaxValue = None, band_names: Optional[Sequence[Optional[str]]] = None,
            **options) -> np.ndarray:
    """Apply corruption ``name`` at ``severity`` (0 = clean, 1..5).

    Args:
        image: ``H×W`` or ``H×W×C`` array (any band count, any memory layout; never
            modified), ``uint8``, ``uint16``, ``float16``, ``float32`` or ``float64``,
            in either byte order (the result has the input's). The values of the bands
            the corruption acts on (``bands``; every band without it) must lie in
            [0, full scale] (see ``max_value``); the others come back bit-identical
            whatever they hold.
        name: a corruption of ``protocol`` (see :func:`list_corruptions`).
        severity: an integer 0..5; 0 returns an unchanged copy (after the same checks).
        seed: global seed, an integer >= 0. Together with ``name``, ``severity`` and
            ``key`` it fixes every random draw.
        key: the sample's stable key (its file name, or its index), a ``str`` or
            ``int``. Required (not None) at severities 1..5 of the corruptions that
            draw random numbers (``get_corruption(name).stochastic``: noise, stripes,
            clouds, shifts), so that different images get different draws; the
            others, and severity 0, take None.
        protocol: ``'reobench'`` or ``'geofm_calibration'``.
        max_value: the images' full scale: for ``uint16`` default 65535 (a whole
            number in 1..65535, e.g. 4095 for 12-bit data); for float images default
            1.0 (e.g. 255 for ``LoadImageFromFile(to_float32=True)``; any finite value
            > 0 up to the dtype's largest); ``uint8`` is always 255 (None or 255 only).
            Or one full scale per band: a list with one entry per band (None: the
            dtype's default), or a mapping from band name to full scale (needs
            ``band_names``; bands it does not name take the default); see
            :mod:`~reobench_corruptions.band_values`.
        band_names: the name of every band, in order (e.g. ``['B02', 'B03', 'VV']``), or
            None. Needed by the options given by band name (a ``max_value`` mapping;
            ``band_noise`` as a mapping or ``'sensor'``) and used to name bands in
            errors; it does not choose the bands a corruption acts on (``bands`` does).
        **options: the corruption's own options (e.g. ``channel_order`` for
            ``compression_artifacts``, ``border`` for geometric ones, ``canvas`` for
            ``scale``, ``band_noise`` for ``poisson_gaussian_noise``, see
            :mod:`~reobench_corruptions.band_noise`); anything else is an error. Every
            pixel-value (non-geometric)
            corruption also takes ``bands``, a list of band positions counted from 0
            (e.g. the optical bands of a multi-sensor stack): the listed bands are
            exactly those of the all-band result, the others are returned
            bit-identical to the input's; None is every band. Geometric corruptions
            move every band together and refuse it.

    Returns:
        A new array of the input's shape and dtype (geometric corruptions: the image
        alone; use :func:`corrupt_geometric` for the transform). Float results lie in
        [0, ``max_value``].

    Raises:
        KeyError: an unknown name (the message says which protocol has it, or
            suggests close names, and lists the valid ones).
        TypeError: an unknown option (``bands`` for a geometric one), a non-array
            image, an unsupported dtype (int32, int64, bool, ...), a key that is neither
            str nor int.
        ValueError: a bad protocol, severity, seed or ``max_value``, a bad shape,
            values outside [0, full scale] / NaN / inf in a band the corruption acts on
            (see :func:`check_image`; the message names the band), ``band_names`` or a
            per-band ``max_value`` / ``band_noise`` that does not fit the image, or no
            key for a corruption that draws random numbers.
    """
    spec, result, scale = _run(image, name, severity, seed, key, protocol, max_value,
                               options, band_names)
    if result is None:
        return image.copy()
    if spec.moves_labels:
        result = result[0]
    if result.dtype == np.uint8 and image.dtype == np.uint8:  # from a uint8 kernel
        out = result.reshape(image.shape)
    else:
        out = from_float_bands(result, image, scale, max_value)
    if options.get('bands') is not None:
        _keep_other_bands(out, image, options['bands'])
    return out


def _keep_other_bands(out: np.ndarray, image: np.ndarray, selected) -> None:
    """Copy the bands of ``image`` not in ``selected`` into ``out`` (same shape and
    dtype): exactly the input's values, whatever the dtype conversion did to them."""
    others = [b for b in range(as_bands(image).shape[2]) if b not in set(selected)]
    if others:
        as_bands(out)[..., others] = as_bands(image)[..., others]


def corrupt_geometric(image: np.ndarray, name: str, severity: int, *, seed: int = 0,
                      key: Union[None, int, str] = None, protocol: str = 'reobench',
                      border: str = 'reflect', max_value: MaxValue = None,
                      band_names: Optional[Sequence[Optional[str]]] = None,
                      **options) -> Tuple[np.ndarray, GeometricTransform]:
    """Apply a geometric corruption and return ``(image, transform)``.

    ``transform`` holds the affine matrix, input and output shapes, border mode and
    canvas used, so labels can be moved with the same numbers (see
    :class:`GeometricTransform`). Arguments and errors as :func:`corrupt`;
    ``options`` are the corruption's own options besides ``border`` (``canvas`` for
    ``scale``), anything else is an error. A non-geometric ``name`` is a ValueError.
    """
    spec = get_corruption(name, protocol)
    if not spec.moves_labels:
        raise ValueError(f'{name} is not a geometric corruption; use corrupt()')
    check_border(border)
    spec, result, scale = _run(image, name, severity, seed, key, protocol, max_value,
                               dict(options, border=border), band_names)
    if result is None:
        return image.copy(), identity_transform(*image.shape[:2])
    moved, transform = result
    if moved.dtype == np.uint8 and image.dtype == np.uint8:  # from a uint8 kernel
        return moved.reshape(image.shape), transform
    return from_float_bands(moved, image, scale, max_value), transform
