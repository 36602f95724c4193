"""Shared pieces of the corruption engine: registry, dtype handling, seeding, tiling.

No OpenMMLab imports: the engine is usable on its own with numpy and OpenCV.

Value contract (checked by :func:`check_image`, applied by :func:`to_float` and
:func:`from_float`): every corruption works on values in [0, 1], the image divided by
its *full scale* (see :func:`full_scale`):

- ``uint8``: always 255; ``max_value`` must be None or 255.
- ``uint16``: ``max_value`` (default 65535), a whole number in 1..65535 (a uint16 holds
  whole numbers only: with a fractional full scale results could round above it).
- ``float16/32/64``: ``max_value`` (default 1.0), any finite value > 0 up to the
  dtype's largest; results keep the float dtype and lie in [0, ``max_value``]. Floats
  in 0..255 (``LoadImageFromFile(to_float32=True)``) need ``max_value=255``. Full scales
  outside :data:`FLOAT32_SCALES` (near the ends of the float range) are divided in
  float64 before the float32 working copy is made.

Arrays in the other byte order (e.g. big-endian ``>u2`` on a little-endian machine) are
read as their native twin, and results are returned in the caller's byte order.

Values above the full scale, negative values and NaN/inf are errors (ValueError),
never clipped silently; other dtypes (int32, int64, bool, ...) are a TypeError.
Errors show the values as they were given (``repr``), never rounded for display.
"""
from __future__ import annotations

import difflib
import hashlib
import math
import numbers
from dataclasses import dataclass, replace
from typing import (Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple,
                    Union)

import numpy as np

from .bands import check_band_domain

__all__ = [
    'CorruptionSpec', 'PROTOCOLS', 'CATEGORIES', 'GROUPS', 'register_corruption',
    'register_uint8_kernel', 'UINT8_RELATIONS', 'as_bands', 'get_corruption',
    'list_corruptions', 'resolve_corruptions', 'make_rng', 'to_float', 'from_float',
    'check_severity', 'check_protocol', 'check_seed', 'check_max_value', 'check_image',
    'full_scale', 'sample_key', 'SUPPORTED_DTYPES', 'FLOAT32_SCALES', 'TILE_ELEMENTS',
    'row_tiles'
]

PROTOCOLS = ('reobench', 'geofm_calibration')
CATEGORIES = ('environmental', 'sensor', 'geometric')
GROUPS = ('all', 'environmental', 'sensor', 'geometric', 'appearance')


@dataclass(frozen=True)
class CorruptionSpec:
    """One corruption of one protocol.

    Attributes:
        name: e.g. ``'cloud'``.
        protocol: ``'reobench'`` or ``'geofm_calibration'``.
        category: ``'environmental'``, ``'sensor'`` or ``'geometric'``.
        parameter: what the severity table holds, in words.
        severities: the parameter for severities 1..5.
        moves_labels: True for geometric corruptions (labels must be moved too).
        func: ``func(image_float, parameter, rng, **options)``; geometric ones return
            ``(image, GeometricTransform)``.
        options: names of the keyword options ``func`` accepts.
        uint8_func: optional kernel with ``func``'s signature that works on ``uint8``
            images directly (no float round trip) and returns ``uint8``. It gives the
            result ``uint8_relation`` says how it relates to ``func`` followed by
            rounding (see :data:`UINT8_RELATIONS`).
        uint8_relation: ``'identical'``, ``'within_one_level'`` or
            ``'same_distribution'``; None without a kernel.
        stochastic: whether it draws random numbers (noise, stripes, clouds, shifts):
            then every call at severity 1..5 needs the sample's key (``corrupt`` refuses
            ``key=None``). The others are a function of the image alone.
        band_domain: the bands it acts on (:data:`~reobench_corruptions.bands.BAND_DOMAINS`):
            ``'optical'`` for atmospheric and illumination effects, ``'all'`` for the
            others. ``ApplyCorruption`` restricts an optical one to the optical bands of
            an image whose band names it knows.
    """
    name: str
    protocol: str
    category: str
    parameter: str
    severities: Tuple
    moves_labels: bool
    func: Callable
    options: Tuple[str, ...] = ()
    uint8_func: Optional[Callable] = None
    uint8_relation: Optional[str] = None
    stochastic: bool = False
    band_domain: str = 'all'

    @property
    def takes_bands(self) -> bool:
        """Whether it takes the ``bands`` option (every pixel-value corruption; the
        geometric ones move every band together and refuse it)."""
        return not self.moves_labels

    @property
    def accepted_options(self) -> Tuple[str, ...]:
        """Every option ``corrupt`` accepts for it: :attr:`options` and, for pixel-value
        corruptions, ``bands``."""
        if self.takes_bands and 'bands' not in self.options:
            return self.options + ('bands', )
        return self.options

    def parameter_for(self, severity: int):
        """The table value for ``severity`` (1..5)."""
        check_severity(severity, allow_zero=False)
        return self.severities[severity - 1]


_REGISTRY: Dict[Tuple[str, str], CorruptionSpec] = {}


def register_corruption(name: str, protocol: str, category: str, parameter: str,
                        severities: Sequence, options: Sequence[str] = (),
                        stochastic: bool = False, band_domain: str = 'all') -> Callable:
    """Decorator registering ``func`` as corruption ``name`` of ``protocol``;
    ``stochastic`` says whether it draws from its generator, ``band_domain`` which bands
    it acts on (see :class:`CorruptionSpec`)."""
    check_protocol(protocol)
    check_band_domain(band_domain)
    if category == 'geometric' and band_domain != 'all':
        raise ValueError(f'{name}: a geometric corruption moves every band, so its band '
                         f"domain is 'all', got {band_domain!r}")
    if category not in CATEGORIES:
        raise ValueError(f'unknown category {category!r}; valid: {CATEGORIES}')
    if len(severities) != 5:
        raise ValueError(f'{name}: a severity table has 5 entries, got {len(severities)}')

    def wrap(func: Callable) -> Callable:
        key = (protocol, name)
        if key in _REGISTRY:
            raise KeyError(f'corruption {name!r} is already registered for {protocol!r}')
        _REGISTRY[key] = CorruptionSpec(name, protocol, category, parameter, tuple(severities),
                                        category == 'geometric', func, tuple(options),
                                        stochastic=bool(stochastic),
                                        band_domain=band_domain)
        return func

    return wrap


UINT8_RELATIONS = {
    'identical': 'the same bits as the float path followed by rounding',
    'within_one_level': 'OpenCV integer arithmetic or one rounding step instead of two: '
                        'at most one grey level from the float path',
    'same_distribution': 'noise drawn directly on grey levels from the distribution the '
                         'float path has after rounding (different draws)',
}


def register_uint8_kernel(name: str, protocol: str, relation: str) -> Callable:
    """Decorator adding a ``uint8`` fast path to the registered corruption ``name``;
    ``relation`` (a key of :data:`UINT8_RELATIONS`) is the promise the tests check."""
    if relation not in UINT8_RELATIONS:
        raise ValueError(f'unknown uint8 relation {relation!r}; valid: {list(UINT8_RELATIONS)}')

    def wrap(func: Callable) -> Callable:
        spec = get_corruption(name, protocol)
        _REGISTRY[(protocol, name)] = replace(spec, uint8_func=func, uint8_relation=relation)
        return func

    return wrap


def check_protocol(protocol: str) -> None:
    """Raise a ValueError naming the valid protocols unless ``protocol`` is one."""
    if protocol not in PROTOCOLS:
        raise ValueError(f'unknown protocol {protocol!r}; valid: {list(PROTOCOLS)}')


def _unknown_name(name: str, protocol: str, groups: bool = False) -> KeyError:
    """The KeyError for a name that is not a corruption of ``protocol`` (nor a group
    when ``groups``): which protocol has it, or the closest names, then the valid ones."""
    valid = [n for p, n in _REGISTRY if p == protocol]
    message = f'unknown corruption {name!r} for protocol {protocol!r}'
    elsewhere = [p for p in PROTOCOLS if p != protocol and (p, name) in _REGISTRY]
    if elsewhere:
        other = elsewhere[0]
        message += (f'; {name!r} is a corruption of protocol {other!r}: select that '
                    f'protocol (protocol={other!r} in Python and configs, '
                    f'--protocol {other} on the command line)')
    else:
        candidates = valid + (list(GROUPS) if groups else [])
        close = difflib.get_close_matches(name, candidates, n=3, cutoff=0.6)
        close_elsewhere = [
            (n, p) for p in PROTOCOLS if p != protocol
            for n in difflib.get_close_matches(name, [m for q, m in _REGISTRY if q == p],
                                               n=2, cutoff=0.75) if n not in candidates
        ]
        hints = [repr(n) for n in close]
        hints += [f'{n!r} (protocol {p!r}: protocol={p!r}, --protocol {p})'
                  for n, p in close_elsewhere]
        if hints:
            message += f'; did you mean {" or ".join(hints)}?'
    message += f'; valid: {valid}'
    if groups:
        message += f'; groups: {list(GROUPS)}'
    return KeyError(message)


def get_corruption(name: str, protocol: str = 'reobench') -> CorruptionSpec:
    """The :class:`CorruptionSpec` of ``name`` in ``protocol``.

    Raises:
        ValueError: ``protocol`` is not one of :data:`PROTOCOLS`.
        TypeError: ``name`` is not a string.
        KeyError: ``name`` is not a corruption of ``protocol``; the message says which
            protocol has it (and how to select that protocol), or suggests close
            matches of misspelt names, and lists the valid names.
    """
    check_protocol(protocol)
    if not isinstance(name, str):
        raise TypeError(f'a corruption name is a string, got {name!r} of type '
                        f'{type(name).__name__}')
    try:
        return _REGISTRY[(protocol, name)]
    except KeyError:
        raise _unknown_name(name, protocol) from None


def list_corruptions(protocol: str = 'reobench', category: Optional[str] = None) -> List[str]:
    """Names of the corruptions of ``protocol`` (optionally of one ``category``),
    in registration order (the order of the spec's table)."""
    check_protocol(protocol)
    if category is not None and category not in CATEGORIES:
        raise ValueError(f'unknown category {category!r}; valid: {list(CATEGORIES)}')
    return [spec.name for (p, _), spec in _REGISTRY.items()
            if p == protocol and (category is None or spec.category == category)]


def resolve_corruptions(names: Union[str, Iterable[str]],
                        protocol: str = 'reobench') -> List[str]:
    """Expand names and groups (``all``, ``environmental``, ``sensor``, ``geometric``,
    ``appearance`` = non-geometric) into corruption names, without duplicates,
    keeping the order given.

    Raises:
        KeyError: a name is neither a corruption of ``protocol`` nor a group (the
            message is :func:`get_corruption`'s, with the groups added).
    """
    check_protocol(protocol)
    if isinstance(names, str):
        names = [names]
    out: List[str] = []
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f'corruption names and groups are strings, got {name!r} of type '
                            f'{type(name).__name__}')
        if name == 'all':
            expanded = list_corruptions(protocol)
        elif name in CATEGORIES:
            expanded = list_corruptions(protocol, name)
        elif name == 'appearance':
            expanded = [n for n in list_corruptions(protocol)
                        if get_corruption(n, protocol).category != 'geometric']
        elif (protocol, name) in _REGISTRY:
            expanded = [name]
        else:
            raise _unknown_name(name, protocol, groups=True)
        out.extend(n for n in expanded if n not in out)
    return out


def check_severity(severity, allow_zero: bool = True) -> int:
    """Validate a severity: an integer in 0..5 (1..5 when ``allow_zero`` is False).

    Raises:
        ValueError: anything else (bools, floats such as 2.5, strings such as '3').
    """
    low = 0 if allow_zero else 1
    if isinstance(severity, (bool, np.bool_)) or not isinstance(severity, (int, np.integer)) \
            or not low <= severity <= 5:
        raise ValueError(f'severity must be an integer in {low}..5 (0 = clean), '
                         f'got {severity!r}')
    return int(severity)


def check_seed(seed) -> int:
    """Validate a global seed: a Python ``int`` or numpy integer >= 0 (not a bool).

    Returns:
        The seed as a Python ``int``.

    Raises:
        ValueError: anything else; floats such as 1.7, strings such as '1' and bools
            are rejected rather than truncated or converted.
    """
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f'seed must be an integer >= 0 (a Python int or numpy integer, not '
                         f'a bool, float or string), got {seed!r} of type '
                         f'{type(seed).__name__}')
    if seed < 0:
        raise ValueError(f'seed must be an integer >= 0, got {int(seed)}')
    return int(seed)


def _as_given(value) -> str:
    """``value`` for an error message, exactly as the caller gave it: ``repr`` of Python
    numbers (``255.0000001``, not ``255``), ``str`` of numpy scalars (``4095.5``, not
    ``np.float32(4095.5)``)."""
    return str(value) if isinstance(value, np.generic) else repr(value)


def check_max_value(max_value) -> Optional[float]:
    """Validate a full scale: None (the dtype's default) or a finite real number > 0.

    Returns:
        None, or ``max_value`` as a Python ``float``.

    Raises:
        ValueError: a bool, a non-number (e.g. a string), NaN, inf, or a value <= 0.
            Whether the value suits an image's dtype is checked by :func:`full_scale`.
    """
    if max_value is None:
        return None
    if isinstance(max_value, (bool, np.bool_)) or not isinstance(max_value, numbers.Real):
        raise ValueError(f'max_value must be None or a finite number > 0 (the full scale '
                         f'of the images), got {_as_given(max_value)} of type '
                         f'{type(max_value).__name__}')
    value = float(max_value)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f'max_value must be None or a finite number > 0 (the full scale '
                         f'of the images), got {_as_given(max_value)}')
    return value


def sample_key(value: Union[None, int, str]) -> str:
    """A stable text key for a sample: its path or its index."""
    if value is None:
        return ''
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return f'index:{int(value)}'
    if isinstance(value, str):
        return f'path:{value}'
    raise TypeError(f'a sample key is a path (str) or an index (int), got {type(value)}')


def make_rng(seed: int, name: str, severity: int, key: Union[None, int, str] = None
             ) -> np.random.Generator:
    """The generator for one (seed, corruption, severity, sample) draw.

    SHA-256 of the four values seeds PCG64, so streams are independent and identical
    in every process, worker, batch size and order.

    Raises:
        ValueError: ``seed`` is not an integer >= 0 (see :func:`check_seed`) or
            ``severity`` not an integer in 0..5.
        TypeError: ``key`` is neither None, a str nor an int.
    """
    text = f'{check_seed(seed)}|{name}|{check_severity(severity)}|{sample_key(key)}'
    words = np.frombuffer(hashlib.sha256(text.encode()).digest(), dtype='<u4')
    return np.random.Generator(np.random.PCG64(words.tolist()))


def as_bands(image: np.ndarray) -> np.ndarray:
    """``image`` as an ``H×W×C`` view (2-D input is one band), after checking it is a
    numpy array of a usable shape."""
    if not isinstance(image, np.ndarray):
        raise TypeError(f'image must be a numpy array, got {type(image)}')
    if image.ndim == 2:
        image = image[..., None]
    if image.ndim != 3 or image.shape[2] < 1 or image.shape[0] < 1 or image.shape[1] < 1:
        raise ValueError(f'image must be H×W or H×W×C with H, W, C >= 1, got shape '
                         f'{image.shape}')
    return image


SUPPORTED_DTYPES = ('uint8', 'uint16', 'float16', 'float32', 'float64')

# Full scales for which the float32 working copy is made in float32 (``x · (1/scale)``):
# float32 holds the scale, its reciprocal and every value down to 2⁻²⁴ of the scale as
# normal numbers. Outside (float32/float64 images only), ``x / scale`` is computed in
# float64 and then rounded to float32, and the result is scaled back in float64.
FLOAT32_SCALES = (2.0**-100, 2.0**126)


def _native(dtype: np.dtype) -> np.dtype:
    """``dtype`` in this machine's byte order (the same dtype when it has none)."""
    return dtype.newbyteorder('=') if dtype.byteorder not in ('=', '|') else dtype


def _describe_dtype(dtype: np.dtype) -> str:
    """A dtype's name, with its byte order when that is not the machine's."""
    if dtype.byteorder not in ('=', '|'):
        order = 'big' if dtype.byteorder == '>' else 'little'
        return f'{dtype.name} ({dtype.str}, {order}-endian)'
    return str(dtype)


def full_scale(dtype, max_value: Optional[float] = None) -> float:
    """The value that maps to 1.0 for images of ``dtype`` (see the module's table).
    ``dtype`` may be in either byte order.

    Raises:
        TypeError: ``dtype`` is not one of :data:`SUPPORTED_DTYPES`.
        ValueError: ``max_value`` is invalid (see :func:`check_max_value`), is not
            None/255 for uint8, is not a whole number in 1..65535 for uint16, or
            exceeds the largest finite value of a float dtype. Messages show
            ``max_value`` as given.
    """
    given = np.dtype(dtype)
    dtype = _native(given)
    value = check_max_value(max_value)
    if dtype == np.uint8:
        if value not in (None, 255.0):
            raise ValueError(f'uint8 images always have full scale 255, got max_value='
                             f'{_as_given(max_value)}; leave max_value unset (None) or 255 '
                             'for uint8 images (max_value is for uint16 and float images)')
        return 255.0
    if dtype == np.uint16:
        if value is None:
            return 65535.0
        if value > 65535:
            raise ValueError(f'max_value for uint16 images must be in (0, 65535] (a uint16 '
                             f'holds at most 65535), got {_as_given(max_value)}; set it to '
                             "the sensor's full scale, e.g. 4095 for 12-bit data")
        if not value.is_integer():
            raise ValueError(f'max_value for uint16 images must be a whole number in '
                             f'1..65535 (a uint16 holds whole numbers only, so results '
                             f'would round above a fractional full scale), got '
                             f"{_as_given(max_value)}; set it to the sensor's full scale, "
                             'the largest value it can record, e.g. 4095 for 12-bit data')
        return value
    if dtype.kind == 'f' and dtype.name in SUPPORTED_DTYPES:
        if value is None:
            return 1.0
        largest = float(np.finfo(dtype).max)
        if value > largest:
            raise ValueError(f'max_value for {dtype.name} images must be at most {largest!r} '
                             f'(the largest {dtype.name}), got {_as_given(max_value)}')
        return value
    raise TypeError(f'unsupported dtype {_describe_dtype(given)}; valid: '
                    f'{", ".join(SUPPORTED_DTYPES)} (in either byte order)')


def check_image(image: np.ndarray, max_value: Optional[float] = None) -> float:
    """Check that ``image`` can be corrupted and return its full scale.

    ``image`` must be an ``H×W`` or ``H×W×C`` numpy array of a supported dtype (either
    byte order) whose values lie in [0, full scale]: float images must be finite, and
    neither uint16 nor float values may exceed ``max_value`` (nothing is clipped
    silently). Costs one pass over uint16 images with ``max_value`` < 65535 and two
    (min, max) over float images; none over uint8 images.

    Raises:
        TypeError: not a numpy array, or an unsupported dtype.
        ValueError: a bad shape, a bad ``max_value`` for the dtype, or values out of
            range; the message names the values found, the full scale in force (as
            given) and what to change.
    """
    bands = as_bands(image)
    scale = full_scale(bands.dtype, max_value)
    dtype = _native(bands.dtype)
    shown = f'{scale:g}' if max_value is None else _as_given(max_value)
    if dtype == np.uint8 or bands.size == 0:
        return scale
    if dtype == np.uint16:
        if scale < 65535:
            largest = int(bands.max())
            if largest > scale:
                raise ValueError(
                    f'the uint16 image has values up to {largest}, above max_value='
                    f'{shown} (the full scale in force); they would be clipped. Set '
                    f"max_value to the sensor's full scale (the largest value it can "
                    f'record, at least {largest}), or leave it unset for 65535')
        return scale
    low, high = np.min(bands), np.max(bands)
    if np.isnan(low) or np.isnan(high):
        raise ValueError('float images must be finite (no NaN or inf); found NaN')
    if np.isinf(low) or np.isinf(high):
        raise ValueError('float images must be finite (no NaN or inf); found inf')
    limit = float(dtype.type(scale))  # the full scale as the dtype holds it
    if low < 0 or high > limit:
        found = f'[{dtype.type(low)}, {dtype.type(high)}]'  # each exactly, in its dtype
        raise ValueError(
            f'float images must lie in [0, max_value] = [0, {shown}] (max_value is the '
            f'full scale, 1.0 unless set); found values in {found}. Floats in '
            '0..255 (e.g. LoadImageFromFile(to_float32=True)) need max_value=255; '
            'negative values mean the corruption runs after normalisation: put it before '
            'Normalize / the data preprocessor')
    return scale


def _float32_holds(scale: float) -> bool:
    """Whether the full scale lies in :data:`FLOAT32_SCALES`."""
    return FLOAT32_SCALES[0] <= scale <= FLOAT32_SCALES[1]


def _scaled_float32(bands: np.ndarray, scale: float) -> np.ndarray:
    """A new C-contiguous float32 copy of checked ``bands`` divided by ``scale``."""
    if not _float32_holds(scale):
        # float32 cannot hold the scale (or its reciprocal, or the values): divide in
        # float64, a row tile at a time (bounded memory), then round to float32
        out = np.empty(bands.shape, np.float32)
        for start, stop in row_tiles(bands.shape[0], bands[0].size):
            tile = bands[start:stop].astype(np.float64)
            tile /= scale
            out[start:stop] = tile
        return out
    out = bands.astype(np.float32, order='C')
    if bands.dtype.kind == 'u' or scale != 1.0:
        out *= np.float32(1.0 / scale)  # in place: one allocation per conversion
    return out


def to_float(image: np.ndarray, max_value: Optional[float] = None) -> np.ndarray:
    """``H×W×C`` float32 in [0, 1] (a new C-contiguous array): ``image`` divided by its
    full scale: 255 for ``uint8``; ``max_value`` (default 65535) for ``uint16``;
    ``max_value`` (default 1.0) for float input. 2-D input is one band.

    Raises:
        TypeError, ValueError: see :func:`check_image` (values outside [0, full
        scale], NaN/inf, a ``max_value`` the dtype cannot use).
    """
    bands = as_bands(image)
    return _scaled_float32(bands, check_image(bands, max_value))


def from_float(image: np.ndarray, like: np.ndarray,
               max_value: Optional[float] = None) -> np.ndarray:
    """Back to the dtype (byte order included) and shape of ``like``: clip to [0, 1],
    multiply by the full scale (see :func:`full_scale`); integer dtypes are rounded to
    nearest, float dtypes keep their values (in [0, full scale]).

    ``image`` is a float32 scratch array of the engine and is modified in place.
    """
    scale = full_scale(like.dtype, max_value)
    dtype = _native(like.dtype)
    np.clip(image, 0.0, 1.0, out=image)
    if dtype == np.uint8:
        image *= np.float32(255)
        out = np.rint(image, out=image).astype(np.uint8)
    elif dtype == np.uint16:
        image *= np.float32(scale)
        out = np.rint(image, out=image).astype(np.uint16)
    elif scale == 1.0:
        out = image.astype(dtype, copy=False)
    else:
        if dtype == np.float64:
            out = image.astype(np.float64)
            out *= scale
        elif not _float32_holds(scale):  # float32 cannot hold the scale: float64 tiles
            out = np.empty(image.shape, dtype)
            for start, stop in row_tiles(image.shape[0], image[0].size):
                tile = image[start:stop].astype(np.float64)
                tile *= scale
                out[start:stop] = tile
        else:
            image *= np.float32(scale)
            out = image.astype(dtype, copy=False)
        # never above the full scale as ``like``'s dtype holds it (rounding of the scale)
        np.minimum(out, dtype.type(scale), out=out)
    return out.astype(like.dtype, copy=False).reshape(like.shape)


# Kernels that would otherwise hold several full-size temporaries work in row tiles of
# about this many elements (1 MiB of float32: the tiles' temporaries stay in cache, and
# they are faster than larger tiles). A module constant so that tests can make tiles
# tiny and check that tiling does not change any result.
TILE_ELEMENTS = 1 << 18


def row_tiles(height: int, row_elements: int, even: bool = False
              ) -> Iterator[Tuple[int, int]]:
    """``(start, stop)`` row ranges covering ``height`` rows, each about
    :data:`TILE_ELEMENTS` elements of ``row_elements`` per row.

    With ``even`` every tile but the last holds an even number of elements (needed
    where random words are drawn two per 64-bit output, so that drawing tile by tile
    consumes the generator exactly as one draw over the whole image).
    """
    rows = max(1, TILE_ELEMENTS // max(1, row_elements))
    if even and row_elements % 2 and rows % 2:
        rows += 1
    for start in range(0, height, rows):
        yield start, min(height, start + rows)
