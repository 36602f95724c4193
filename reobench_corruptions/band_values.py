"""Full scales per band, and the value check of the bands a corruption acts on.

The engine's value contract (:mod:`.base`) is that every value lies in [0, full scale],
with one full scale (``max_value``) for the whole image. A multi-sensor stack needs two
refinements, both here:

- **Full scale per band.** ``max_value`` may give each band its own full scale: a
  sequence with one entry per band of the image (None: the dtype's default), or a
  mapping from band name to full scale (names matched as
  :func:`~reobench_corruptions.bands.band_kind` matches them, without regard to case and
  surrounding spaces; bands the mapping does not name take the dtype's default; a name
  that is no band of the image is an error, so that a misspelt name is never ignored).
  Each band is divided by its own full scale before the corruption and multiplied by it
  after. A mapping needs the image's band names (``band_names=`` of
  :func:`~reobench_corruptions.corrupt`).
- **Only the bands a corruption acts on are checked** (its ``bands`` option; every band
  without one). The others come back bit-identical whatever they hold, e.g. a
  Sentinel-1 band in dB (negative values) next to Sentinel-2 reflectances under an
  optical-only corruption. Where such a band lies outside its range, the corruption sees
  zeros in its place (it is put back afterwards); a band inside its range is seen as it
  is, so the acted-on bands are those of the all-band result.

Errors name the band (its position from 0, and its name when known), the values found,
its valid range and what to change. Pure numpy: the torch engine computes each band's
extremes itself and shares :func:`check_band_ranges`.
"""
from __future__ import annotations

import math
import numbers
from typing import (Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple, Union)

import numpy as np

from .bands import band_kinds
from .base import (_as_given, _native, _scaled_float32, as_bands, check_max_value,
                   from_float, full_scale)

__all__ = ['MaxValue', 'check_band_max_values', 'check_band_names', 'needs_band_names',
           'by_band_name', 'band_label', 'per_band_full_scales', 'band_scales',
           'check_band_ranges', 'band_extremes', 'out_of_range_note',
           'check_acted_bands', 'scaled_float32_bands', 'from_float_bands']

#: What ``max_value`` may be: None or one number (every band), a sequence with one entry
#: per band (None: the dtype's default), or a mapping from band name to full scale.
MaxValue = Union[None, float, Sequence[Optional[float]], Mapping[str, Optional[float]]]
#: A full scale for the whole image (one number) or one per band.
Scale = Union[float, Tuple[float, ...]]

_FORMS = ('None or one number > 0 (the full scale of every band), a list with one full '
          'scale per band of the image (None: the dtype\'s default), or a mapping from '
          'band name to full scale')


def _is_sequence(value: Any) -> bool:
    return isinstance(value, (list, tuple)) or (isinstance(value, np.ndarray)
                                                and value.ndim == 1)


def _key(name: str) -> str:
    return name.strip().upper()


def _check_entry(value: Any, where: str) -> None:
    if value is None:
        return
    try:
        check_max_value(value)
    except ValueError as error:
        raise ValueError(f'{where}: {error}') from None


def check_band_max_values(max_value: Any) -> MaxValue:
    """Validate ``max_value`` without an image (see :data:`MaxValue`).

    Returns:
        None or a Python ``float`` for one full scale (as
        :func:`~reobench_corruptions.base.check_max_value`), a tuple for a sequence, a
        dict for a mapping.

    Raises:
        ValueError: an empty sequence or mapping, a key that is not a string, two keys
            for the same band, or an entry that is not None or a finite number > 0; the
            message names the entry and the valid forms.
    """
    if isinstance(max_value, Mapping):
        if not max_value:
            raise ValueError(f'max_value maps no band name; valid: {_FORMS}')
        seen: Dict[str, str] = {}
        for name, value in max_value.items():
            if not isinstance(name, str):
                raise ValueError(f'max_value by band name maps band names (strings) to full '
                                 f'scales, got the key {name!r} of type {type(name).__name__}')
            if _key(name) in seen:
                raise ValueError(f'max_value names the band {name!r} twice (as '
                                 f'{seen[_key(name)]!r} too); names are matched without '
                                 'regard to case and surrounding spaces')
            seen[_key(name)] = name
            _check_entry(value, f'max_value[{name!r}]')
        return dict(max_value)
    if _is_sequence(max_value):
        values = list(max_value)
        if not values:
            raise ValueError(f'max_value lists no full scale; valid: {_FORMS}')
        for index, value in enumerate(values):
            _check_entry(value, f'max_value[{index}]')
        return tuple(values)
    return check_max_value(max_value)


def needs_band_names(max_value: Any, options: Mapping[str, Any]) -> bool:
    """Whether a call with this ``max_value`` and these corruption options looks bands up
    by name: a ``max_value`` mapping, or a ``band_noise`` mapping or ``'sensor'``."""
    return isinstance(max_value, Mapping) or \
        isinstance(options.get('band_noise'), (Mapping, str))


def check_band_names(band_names: Optional[Sequence[Optional[str]]], num_bands: int
                     ) -> Optional[Tuple[Optional[str], ...]]:
    """The image's band names as a tuple (None when not given), one per band.

    Raises:
        TypeError: a single string, or a name that is neither a string nor None.
        ValueError: another number of names than the image has bands.
    """
    if band_names is None:
        return None
    band_kinds(band_names)  # a TypeError for a single string or a name of another type
    names = tuple(band_names)
    if len(names) != num_bands:
        raise ValueError(f'band_names name {len(names)} bands ({list(names)}) but the image '
                         f'has {num_bands}; they must name every band of the image, in order')
    return names


def by_band_name(mapping: Mapping[str, Any], names: Optional[Sequence[Optional[str]]],
                 what: str) -> List[Any]:
    """``mapping``'s entries as a list with one entry per band of ``names`` (None for the
    bands it does not name); ``what`` names the option in errors.

    Raises:
        ValueError: no band names, or a key that names no band of the image (the message
            lists the image's bands).
    """
    if names is None:
        raise ValueError(f'{what} is given by band name ({list(mapping)}), so it needs the '
                         "image's band names: pass band_names=[...] (one name per band, in "
                         "order; ApplyCorruption passes the sample's band_names)")
    positions: Dict[str, List[int]] = {}
    for index, name in enumerate(names):
        if name is not None:
            positions.setdefault(_key(name), []).append(index)
    out: List[Any] = [None] * len(names)
    for name, value in mapping.items():
        if _key(name) not in positions:
            raise ValueError(f'{what} names the band {name!r}, which this image does not '
                             f'have; its bands are {list(names)}')
        for index in positions[_key(name)]:
            out[index] = value
    return out


def band_label(index: int, names: Optional[Sequence[Optional[str]]] = None) -> str:
    """``'band 13 (VV)'``, or ``'band 13'`` for an unnamed band."""
    if names is not None and names[index] is not None:
        return f'band {index} ({names[index]})'
    return f'band {index}'


def per_band_full_scales(dtype: Any, max_value: MaxValue, num_bands: int,
                         names: Optional[Sequence[Optional[str]]] = None
                         ) -> Optional[Tuple[Tuple[float, ...], Tuple[Any, ...]]]:
    """``(full scales, entries as given)``, one of each per band, for a ``max_value``
    sequence or mapping; None for None or one number (then
    :func:`~reobench_corruptions.base.full_scale` gives the one full scale).

    Raises:
        ValueError: a sequence of another length than the band count, a mapping without
            band names or naming a band the image lacks, or an entry the dtype cannot use
            (the message names the band).
        TypeError: an unsupported dtype.
    """
    if isinstance(max_value, Mapping):
        given = by_band_name(max_value, names, 'max_value')
    elif _is_sequence(max_value):
        given = list(max_value)
        if len(given) != num_bands:
            raise ValueError(f'max_value lists {len(given)} full scales but the image has '
                             f'{num_bands} bands; give one per band, in order (None for the '
                             "dtype's default), or one number for every band")
    else:
        return None
    scales = []
    for index, value in enumerate(given):
        try:
            scales.append(full_scale(dtype, value))
        except ValueError as error:
            raise ValueError(f'max_value of {band_label(index, names)}: {error}') from None
    return tuple(scales), tuple(given)


def check_band_ranges(lows: Sequence[Any], highs: Sequence[Any], limits: Sequence[float],
                      acted: Set[int], shown: Sequence[str], per_band: bool,
                      names: Optional[Sequence[Optional[str]]] = None) -> List[int]:
    """Check each band's extremes against [0, its full scale].

    Args:
        lows, highs: each band's smallest and largest value (NaN where it holds NaN).
        limits: each band's full scale as the image's dtype holds it.
        acted: the bands the corruption acts on.
        shown: each band's full scale as the caller gave it, for messages.
        per_band: whether the full scales were given per band (for messages).
        names: the band names, if known (for messages).

    Returns:
        The bands outside ``acted`` whose values lie outside their range (or are not
        finite): the corruption is to see zeros in their place.

    Raises:
        ValueError: a band of ``acted`` holds NaN/inf or values outside [0, full scale];
            the message names the band, the values found, the valid range and what to do.
    """
    blank = []
    for band, (low, high) in enumerate(zip(lows, highs)):
        finite = math.isfinite(float(low)) and math.isfinite(float(high))
        if finite and low >= 0 and high <= limits[band]:
            continue
        if band not in acted:
            blank.append(band)
            continue
        label = band_label(band, names)
        if not finite:
            found = 'NaN' if math.isnan(float(low)) or math.isnan(float(high)) else 'inf'
            raise ValueError(
                f'{label}: found {found}; the bands a corruption acts on must be finite (no '
                'NaN or inf). Fill the band before the corruption, or leave it out of the '
                'corruption (bands=[...] lists the bands it acts on)')
        scope = 'that band' if per_band else 'the image'
        raise ValueError(
            f'{label} has values in [{low!s}, {high!s}], outside its valid range '
            f'[0, {shown[band]}] (0 to the full scale of {scope}, max_value); the '
            'corruption acts on this band, and values are never clipped. Valid: values in '
            '[0, full scale]. Give the band its own full scale (max_value as a list with '
            'one value per band, or a mapping by band name), leave it out of the corruption '
            '(bands=[...]; ApplyCorruption does so under an optical-only corruption for a '
            'sample with band_names), or bring it into range first (e.g. SAR backscatter '
            'in dB, which is negative, converted to linear power; negative values after '
            'Normalize mean the corruption runs too late)')
    return blank


def band_scales(dtype: Any, max_value: MaxValue,
                per_band: Optional[Tuple[Tuple[float, ...], Tuple[Any, ...]]], count: int
                ) -> Tuple[Tuple[float, ...], Tuple[str, ...]]:
    """Every band's full scale, and its text for messages (as the caller gave it; the
    dtype's default as a number), from ``max_value`` and its
    :func:`per_band_full_scales` (None for one full scale)."""
    if per_band is None:
        one = full_scale(dtype, max_value)
        return (one, ) * count, (f'{one:g}' if max_value is None
                                 else _as_given(max_value), ) * count
    scales, given = per_band
    return scales, tuple(f'{s:g}' if g is None else _as_given(g)
                         for s, g in zip(scales, given))


def band_extremes(bands: np.ndarray) -> Tuple[List[Any], List[Any]]:
    """Each band's smallest and largest value (numpy scalars of the image's dtype; NaN
    where a float band holds NaN) of an ``H×W×C`` image."""
    dtype = _native(bands.dtype)
    return ([dtype.type(v) for v in np.min(bands, axis=(0, 1))],
            [dtype.type(v) for v in np.max(bands, axis=(0, 1))])


def out_of_range_note(lows: Sequence[Any], highs: Sequence[Any], limit: float,
                      names: Optional[Sequence[Optional[str]]] = None) -> str:
    """The sentence a one-full-scale range error ends with: which bands lie outside
    [0, ``limit``] (or hold NaN/inf), with their values, and the per-band remedies."""
    found = [f'{band_label(b, names)} in [{low!s}, {high!s}]'
             for b, (low, high) in enumerate(zip(lows, highs))
             if not (math.isfinite(float(low)) and math.isfinite(float(high)))
             or low < 0 or high > limit]
    if not found:
        return ''
    return (f'. Bands outside their range: {"; ".join(found)}. A band may have its own '
            'full scale (max_value as a list with one value per band, or a mapping by band '
            'name), and a corruption checks only the bands it acts on (bands=[...])')


def check_acted_bands(bands: np.ndarray, max_value: MaxValue,
                      per_band: Optional[Tuple[Tuple[float, ...], Tuple[Any, ...]]],
                      selected: Optional[Sequence[int]],
                      names: Optional[Sequence[Optional[str]]] = None
                      ) -> Tuple[Scale, List[int]]:
    """Check the bands of an ``H×W×C`` numpy image that a corruption acts on
    (``selected``; every band when None) against their full scales.

    Args:
        bands: the image as ``H×W×C``.
        max_value: as the caller gave it.
        per_band: :func:`per_band_full_scales` of it (None for one full scale).
        selected: the bands the corruption acts on, or None for every band.
        names: the band names, if known (for messages).

    Returns:
        ``(scale, blank)``: one full scale (a float) when every band has the same,
        otherwise one per band; and the bands outside ``selected`` that lie outside
        their range (see :func:`check_band_ranges`).
    """
    count = bands.shape[2]
    dtype = _native(bands.dtype)
    scales, shown = band_scales(dtype, max_value, per_band, count)
    acted = set(range(count)) if selected is None else set(selected)
    blank: List[int] = []
    if dtype != np.uint8 and bands.size and not (dtype == np.uint16
                                                 and min(scales) >= 65535):
        lows, highs = band_extremes(bands)
        limits = [float(dtype.type(scale)) for scale in scales]
        blank = check_band_ranges(lows, highs, limits, acted, shown, per_band is not None,
                                  names)
    single = scales[0] if all(s == scales[0] for s in scales) else scales
    return single, blank


def scaled_float32_bands(bands: np.ndarray, scale: Scale, blank: Sequence[int] = ()
                         ) -> np.ndarray:
    """The engine's float32 working copy of checked ``bands`` (``H×W×C``): each band
    divided by its full scale (the same values as one division of the whole image by a
    common full scale), zeros in the ``blank`` bands."""
    if not isinstance(scale, tuple) and not blank:
        return _scaled_float32(bands, scale)
    scales = scale if isinstance(scale, tuple) else (scale, ) * bands.shape[2]
    out = np.empty(bands.shape, np.float32)
    for band, value in enumerate(scales):
        if band in blank:
            out[..., band] = 0.0
        else:
            out[..., band] = _scaled_float32(bands[..., band:band + 1], value)[..., 0]
    return out


def from_float_bands(result: np.ndarray, like: np.ndarray, scale: Scale,
                     max_value: MaxValue) -> np.ndarray:
    """:func:`~reobench_corruptions.base.from_float` of the engine's float32 result, each
    band by its own full scale (``scale`` from :func:`check_acted_bands`); exactly
    ``from_float(result, like, max_value)`` for one number or None."""
    if max_value is None or isinstance(max_value, numbers.Real):
        return from_float(result, like, max_value)
    if not isinstance(scale, tuple):
        return from_float(result, like, scale)
    source = as_bands(like)
    out = np.empty(source.shape, like.dtype)
    for band, value in enumerate(scale):
        out[..., band:band + 1] = from_float(result[..., band:band + 1],
                                             source[..., band:band + 1], value)
    return out.reshape(like.shape)
