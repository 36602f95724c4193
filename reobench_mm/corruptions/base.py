"""Shared pieces of the corruption engine: registry, dtype handling, seeding.

No OpenMMLab imports: the engine is usable on its own with numpy and OpenCV.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np

__all__ = [
    'CorruptionSpec', 'PROTOCOLS', 'CATEGORIES', 'GROUPS', 'register_corruption',
    'register_uint8_kernel', 'UINT8_RELATIONS', 'as_bands',
    'get_corruption', 'list_corruptions', 'resolve_corruptions', 'make_rng', 'to_float',
    'from_float', 'check_severity', 'check_protocol', 'sample_key'
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

    def parameter_for(self, severity: int):
        """The table value for ``severity`` (1..5)."""
        check_severity(severity, allow_zero=False)
        return self.severities[severity - 1]


_REGISTRY: Dict[Tuple[str, str], CorruptionSpec] = {}


def register_corruption(name: str, protocol: str, category: str, parameter: str,
                        severities: Sequence, options: Sequence[str] = ()) -> Callable:
    """Decorator registering ``func`` as corruption ``name`` of ``protocol``."""
    check_protocol(protocol)
    if category not in CATEGORIES:
        raise ValueError(f'unknown category {category!r}; valid: {CATEGORIES}')
    if len(severities) != 5:
        raise ValueError(f'{name}: a severity table has 5 entries, got {len(severities)}')

    def wrap(func: Callable) -> Callable:
        key = (protocol, name)
        if key in _REGISTRY:
            raise KeyError(f'corruption {name!r} is already registered for {protocol!r}')
        _REGISTRY[key] = CorruptionSpec(name, protocol, category, parameter, tuple(severities),
                                        category == 'geometric', func, tuple(options))
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


def get_corruption(name: str, protocol: str = 'reobench') -> CorruptionSpec:
    """The :class:`CorruptionSpec` of ``name`` in ``protocol``."""
    check_protocol(protocol)
    try:
        return _REGISTRY[(protocol, name)]
    except KeyError:
        valid = [n for p, n in _REGISTRY if p == protocol]
        raise KeyError(f'unknown corruption {name!r} for protocol {protocol!r}; '
                       f'valid: {valid}') from None


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
    keeping the order given."""
    if isinstance(names, str):
        names = [names]
    out: List[str] = []
    for name in names:
        if name == 'all':
            expanded = list_corruptions(protocol)
        elif name in CATEGORIES:
            expanded = list_corruptions(protocol, name)
        elif name == 'appearance':
            expanded = [n for n in list_corruptions(protocol)
                        if get_corruption(n, protocol).category != 'geometric']
        else:
            expanded = [get_corruption(name, protocol).name]
        out.extend(n for n in expanded if n not in out)
    return out


def check_severity(severity, allow_zero: bool = True) -> int:
    """Validate a severity: an integer in 0..5 (1..5 when ``allow_zero`` is False)."""
    low = 0 if allow_zero else 1
    if isinstance(severity, (bool, np.bool_)) or not isinstance(severity, (int, np.integer)) \
            or not low <= severity <= 5:
        raise ValueError(f'severity must be an integer in {low}..5 (0 = clean), '
                         f'got {severity!r}')
    return int(severity)


def sample_key(value: Union[None, int, str]) -> str:
    """A stable text key for a sample: its path or its index."""
    if value is None:
        return ''
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return f'index:{int(value)}'
    if isinstance(value, str):
        return f'path:{value}'
    raise TypeError(f'a sample key is a path (str) or an index (int), got {type(value)}')


def make_rng(seed: int, name: str, severity: int, key: Union[None, int, str] = None
             ) -> np.random.Generator:
    """The generator for one (seed, corruption, severity, sample) draw.

    SHA-256 of the four values seeds PCG64, so streams are independent and identical
    in every process, worker, batch size and order.
    """
    text = f'{int(seed)}|{name}|{int(severity)}|{sample_key(key)}'
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
        raise ValueError(f'image must be H×W or H×W×C with C >= 1, got shape {image.shape}')
    return image


def to_float(image: np.ndarray, max_value: Optional[float] = None) -> np.ndarray:
    """``H×W×C`` float32 in [0, 1] from ``uint8`` (/255), ``uint16`` (/``max_value``,
    default 65535) or float input (clipped to [0, 1]). 2-D input is one band."""
    image = as_bands(image)
    if image.dtype in (np.uint8, np.uint16):
        full_scale = 255 if image.dtype == np.uint8 else (65535 if max_value is None
                                                          else max_value)
        out = image.astype(np.float32)
        out *= np.float32(1.0 / full_scale)  # in place: one allocation per conversion
        return out
    if image.dtype in (np.float32, np.float64, np.float16):
        if not np.all(np.isfinite(image)):
            raise ValueError('float images must be finite (no NaN or inf)')
        return np.clip(image.astype(np.float32), 0.0, 1.0)
    raise TypeError(f'unsupported dtype {image.dtype}; valid: uint8, uint16, float16/32/64')


def from_float(image: np.ndarray, like: np.ndarray,
               max_value: Optional[float] = None) -> np.ndarray:
    """Back to the dtype and shape of ``like``: clip to [0, 1], round to nearest.

    ``image`` is a float32 scratch array of the engine and is modified in place.
    """
    np.clip(image, 0.0, 1.0, out=image)
    if like.dtype == np.uint8:
        image *= np.float32(255)
        out = np.rint(image, out=image).astype(np.uint8)
    elif like.dtype == np.uint16:
        image *= np.float32(65535 if max_value is None else max_value)
        out = np.rint(image, out=image).astype(np.uint16)
    else:
        out = image.astype(like.dtype, copy=False)
    return out.reshape(like.shape)
