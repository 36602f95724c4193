"""Per-band parameters of the calibration study's sensor noise (``poisson_gaussian_noise``).

The shift is ``x̃ = Poisson(η·x)/η + σ·ε``, ε ~ N(0, 1), on every band; the severity
table gives one pair (η, σ) per severity. The ``band_noise`` option scales that pair band
by band: band ``b`` gets ``η_b = η·a_b`` and ``σ_b = σ·c_b`` with its multipliers
``(a_b, c_b)``. Forms of ``band_noise``:

- None (the default): the severity's (η, σ) on every band, the same bits as without
  the option.
- a sequence with one ``(η multiplier, σ multiplier)`` pair per band of the image;
- a mapping from band name to its pair (names matched without regard to case and
  surrounding spaces; bands it does not name keep (1, 1); a name that is no band of the
  image is an error);
- ``'sensor'``: the pair :data:`SENSOR_NOISE` gives each band's kind
  (:func:`~reobench_corruptions.bands.band_kind`: Sentinel-2 and colour bands optical,
  Sentinel-1 polarisations SAR).

The mapping and ``'sensor'`` need the image's band names (``band_names=`` of
:func:`~reobench_corruptions.corrupt`; ``ApplyCorruption`` passes the sample's). An η
multiplier is a finite number > 0, a σ multiplier a finite number >= 0 (0: no read
noise), and the resulting η_b at most :data:`MAX_PHOTON_SCALE` (photon counts are kept
exactly in float32). Pure data and checks: no OpenMMLab, no torch.
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from .bands import band_kinds
from .band_values import band_label, by_band_name

__all__ = ['SENSOR_NOISE', 'SENSOR', 'MAX_PHOTON_SCALE', 'BandNoise', 'check_band_noise',
           'resolve_band_noise', 'band_noise_parameters']

#: ``band_noise='sensor'``: the (η multiplier, σ multiplier) of each band kind. The
#: calibration study publishes no η or σ values (its severity table is this package's
#: choice), and none per band; this table is this package's choice too:
#:
#: - optical bands (photon-counting detectors, which the study's model describes): the
#:   severity's own (η, σ);
#: - SAR bands: a radar records the echo of its own pulse rather than a count of
#:   photons, so the signal-dependent term is made 100 times weaker in variance (η × 100:
#:   its standard deviation a tenth), and the additive term, the receiver's thermal
#:   noise, keeps the severity's σ;
#: - bands of unknown kind: the severity's own (η, σ).
SENSOR_NOISE: Dict[str, Tuple[float, float]] = {
    'optical': (1.0, 1.0),
    'sar': (100.0, 1.0),
    'unknown': (1.0, 1.0),
}
#: The ``band_noise`` value that selects :data:`SENSOR_NOISE`.
SENSOR = 'sensor'
#: The largest η a band may get: Poisson(η) then stays far below 2**24, the largest
#: count float32 holds exactly.
MAX_PHOTON_SCALE = float(2**22)

Pair = Tuple[float, float]
#: What ``band_noise`` may be (see the module docstring).
BandNoise = Union[None, str, Sequence[Sequence[float]], Mapping[str, Sequence[float]]]

_FORMS = ("None (the severity's η and σ on every band), 'sensor' (SENSOR_NOISE by band "
          'kind), a list with one (η multiplier, σ multiplier) pair per band, or a mapping '
          'from band name to such a pair')


def _real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _pair(value: Any, where: str) -> Pair:
    """One ``(η multiplier, σ multiplier)``, checked."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple, np.ndarray)) \
            or len(value) != 2 or not all(_real(v) for v in value):
        raise ValueError(f'{where} must be an (η multiplier, σ multiplier) pair of numbers, '
                         f'e.g. (2.0, 0.5), got {value!r}')
    eta, sigma = float(value[0]), float(value[1])
    if not (math.isfinite(eta) and eta > 0):
        raise ValueError(f'{where}: the η multiplier must be a finite number > 0, got '
                         f'{value[0]!r}')
    if not (math.isfinite(sigma) and sigma >= 0):
        raise ValueError(f'{where}: the σ multiplier must be a finite number >= 0 (0: no '
                         f'read noise), got {value[1]!r}')
    return eta, sigma


def _is_pairs(value: Any) -> bool:
    """A non-empty list or tuple (of pairs), or an ``N×2`` array."""
    if isinstance(value, np.ndarray):
        return value.ndim == 2 and value.shape[0] > 0
    return isinstance(value, (list, tuple)) and len(value) > 0


def check_band_noise(band_noise: Any) -> BandNoise:
    """Validate ``band_noise`` without an image: its form and every pair.

    Returns:
        ``band_noise`` unchanged.

    Raises:
        ValueError: anything but the forms of the module docstring, an empty sequence or
            mapping, a key that is not a string, a bad pair (the message names it).
    """
    if band_noise is None or (isinstance(band_noise, str) and band_noise == SENSOR):
        return band_noise
    if isinstance(band_noise, Mapping):
        if not band_noise:
            raise ValueError(f'band_noise maps no band name; valid: {_FORMS}')
        for name, value in band_noise.items():
            if not isinstance(name, str):
                raise ValueError(f'band_noise by band name maps band names (strings) to '
                                 f'pairs, got the key {name!r}')
            _pair(value, f'band_noise[{name!r}]')
        return band_noise
    if _is_pairs(band_noise):
        for index, value in enumerate(band_noise):
            _pair(value, f'band_noise[{index}]')
        return band_noise
    raise ValueError(f'band_noise must be {_FORMS}; got {band_noise!r}')


def resolve_band_noise(band_noise: BandNoise, num_bands: int,
                       names: Optional[Sequence[Optional[str]]] = None
                       ) -> Optional[Tuple[Pair, ...]]:
    """The multipliers of every band of a ``num_bands``-band image (None for None).

    Args:
        band_noise: see the module docstring.
        num_bands: the image's band count.
        names: its band names (needed by a mapping and by ``'sensor'``).

    Raises:
        ValueError: a bad form or pair, a sequence of another length than the band
            count, a mapping or ``'sensor'`` without band names, a name that is no band
            of the image.
    """
    check_band_noise(band_noise)
    if band_noise is None:
        return None
    if isinstance(band_noise, str):  # 'sensor' (check_band_noise refuses any other)
        if names is None:
            raise ValueError("band_noise='sensor' looks each band's kind up by its name, so "
                             "it needs the image's band names: pass band_names=[...] (one "
                             "per band, in order; ApplyCorruption passes the sample's "
                             'band_names)')
        return tuple(SENSOR_NOISE[kind] for kind in band_kinds(names))
    if isinstance(band_noise, Mapping):
        entries = by_band_name(band_noise, names, 'band_noise')
        return tuple((1.0, 1.0) if value is None else _pair(value, 'band_noise')
                     for value in entries)
    if len(band_noise) != num_bands:
        raise ValueError(f'band_noise lists {len(band_noise)} pairs but the image has '
                         f'{num_bands} bands; give one (η multiplier, σ multiplier) pair per '
                         'band, in order')
    return tuple(_pair(value, f'band_noise[{i}]') for i, value in enumerate(band_noise))


def band_noise_parameters(eta_and_sigma: Sequence[float], band_noise: BandNoise,
                          num_bands: int):
    """The (η, σ) a kernel uses: the severity's pair unchanged without ``band_noise``;
    otherwise two float64 arrays of ``num_bands`` values, η·a_b and σ·c_b.

    ``band_noise`` may be a resolved sequence of pairs (as
    :func:`resolve_band_noise` returns it); name-keyed forms need
    :func:`resolve_band_noise` with the band names first.

    Raises:
        ValueError: see :func:`resolve_band_noise`; an η_b above
            :data:`MAX_PHOTON_SCALE` (the message names the band).
    """
    eta, sigma = eta_and_sigma
    pairs = resolve_band_noise(band_noise, num_bands)
    if pairs is None:
        return eta, sigma
    multipliers = np.asarray(pairs, np.float64)
    etas = float(eta) * multipliers[:, 0]
    sigmas = float(sigma) * multipliers[:, 1]
    if etas.max() > MAX_PHOTON_SCALE:
        band = int(np.argmax(etas))
        raise ValueError(f'band_noise gives {band_label(band)} η = {float(etas[band])!r} '
                         f"(the severity's η {eta} × {float(multipliers[band, 0])!r}), above "
                         f'{MAX_PHOTON_SCALE:g}, the largest photon scale the engine keeps '
                         'exactly; use a smaller η multiplier')
    return etas, sigmas
