"""Entry points of the corruption engine."""
from __future__ import annotations

from typing import Optional, Tuple, Union

import numpy as np

from .base import as_bands, check_severity, from_float, get_corruption, make_rng, to_float
from .geometric import GeometricTransform, identity_transform

__all__ = ['corrupt', 'corrupt_geometric']


def _run(image: np.ndarray, name: str, severity: int, seed: int, key, protocol: str,
         max_value: Optional[float], options: dict):
    spec = get_corruption(name, protocol)
    severity = check_severity(severity)
    unknown = set(options) - set(spec.options)
    if unknown:
        raise TypeError(f'{name} got unknown options {sorted(unknown)}; '
                        f'valid: {list(spec.options) or "none"}')
    if max_value is not None and not max_value > 0:
        raise ValueError(f'max_value must be > 0, got {max_value}')
    if severity == 0:
        to_float(image, max_value)  # validates the image
        return spec, None
    rng = make_rng(seed, f'{protocol}/{name}', severity, key)
    parameter = spec.parameter_for(severity)
    if spec.uint8_func is not None and isinstance(image, np.ndarray) \
            and image.dtype == np.uint8:
        return spec, spec.uint8_func(as_bands(image), parameter, rng, **options)
    return spec, spec.func(to_float(image, max_value), parameter, rng, **options)


def corrupt(image: np.ndarray, name: str, severity: int, *, seed: int = 0,
            key: Union[None, int, str] = None, protocol: str = 'reobench',
            max_value: Optional[float] = None, **options) -> np.ndarray:
    """Apply corruption ``name`` at ``severity`` (0 = clean, 1..5).

    Args:
        image: ``H×W`` or ``H×W×C`` array, ``uint8``, ``uint16`` or float in [0, 1].
        name: a corruption of ``protocol`` (see :func:`list_corruptions`).
        severity: 0..5; 0 returns an unchanged copy.
        seed: global seed. Together with ``name``, ``severity`` and ``key`` it fixes
            every random draw.
        key: the sample's stable key (its path, or its index).
        protocol: ``'reobench'`` or ``'geofm_calibration'``.
        max_value: full scale of ``uint16`` input (default 65535).
        **options: the corruption's own options (e.g. ``channel_order`` for
            ``compression_artifacts``, ``border`` for geometric ones); anything else
            is an error.

    Returns:
        An array of the input's shape and dtype (geometric corruptions: the image
        alone; use :func:`corrupt_geometric` for the transform).
    """
    spec, result = _run(image, name, severity, seed, key, protocol, max_value, options)
    if result is None:
        return image.copy()
    if spec.moves_labels:
        result = result[0]
    if result.dtype == np.uint8 and image.dtype == np.uint8:  # from a uint8 kernel
        return result.reshape(image.shape)
    return from_float(result, image, max_value)


def corrupt_geometric(image: np.ndarray, name: str, severity: int, *, seed: int = 0,
                      key: Union[None, int, str] = None, protocol: str = 'reobench',
                      border: str = 'reflect', max_value: Optional[float] = None
                      ) -> Tuple[np.ndarray, GeometricTransform]:
    """Apply a geometric corruption and return ``(image, transform)``.

    ``transform`` holds the affine matrix, output shape, border mode and canvas used,
    so labels can be moved with the same numbers (see :class:`GeometricTransform`).
    """
    spec = get_corruption(name, protocol)
    if not spec.moves_labels:
        raise ValueError(f'{name} is not a geometric corruption; use corrupt()')
    spec, result = _run(image, name, severity, seed, key, protocol, max_value,
                        dict(border=border))
    if result is None:
        return image.copy(), identity_transform(*image.shape[:2])
    moved, transform = result
    if moved.dtype == np.uint8 and image.dtype == np.uint8:  # from a uint8 kernel
        return moved.reshape(image.shape), transform
    return from_float(moved, image, max_value), transform
