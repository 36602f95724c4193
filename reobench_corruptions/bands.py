"""Band kinds by band name, and the band domains of the corruptions.

A corruption's *band domain* (:attr:`~reobench_corruptions.base.CorruptionSpec.band_domain`)
says which bands of a multi-sensor image it makes sense on:

- ``'optical'``: atmospheric and illumination effects (clouds, haze, their shadows, a
  brightness and contrast change) are effects of sunlight in the optical bands; a radar
  image (its own illumination, wavelengths that pass through clouds) does not show them.
- ``'all'``: sensor and processing effects (noise, blur, compression, data gaps) and the
  geometric corruptions, which act on every band alike.

:data:`BAND_KINDS` names the kind of each band by its name, as the loaders give them
(``results['band_names']`` of ``LoadMultiBandImageFromFile``). Sources:

- Sentinel-2 MultiSpectral Instrument: 13 bands ``B01`` ... ``B12`` and ``B8A``, from
  443 nm (B01) to 2190 nm (B12), visible, near and short-wave infrared: all optical
  (ESA, *Sentinel-2 User Handbook*, table of the MSI spectral bands).
- Sentinel-1 C-band SAR: the polarisations ``VV``, ``VH`` (the usual dual-polarisation
  products over land) and ``HH``, ``HV`` (over polar regions): radar (ESA,
  *Sentinel-1 User Handbook*, polarisation modes).
- The colour and near-infrared names of RGB and RGB-NIR imagery (``R``, ``G``, ``B``,
  ``NIR``, ``RED``, ``GREEN``, ``BLUE``): optical.
- WorldView-3's eight multispectral (VNIR) bands, from 400 nm to 1040 nm: ``COASTAL``,
  ``BLUE``, ``GREEN``, ``YELLOW``, ``RED``, ``RED_EDGE``, ``NIR1``, ``NIR2``: optical
  (DigitalGlobe/Maxar, *WorldView-3* data sheet, spectral bands).

Names are matched without regard to case and surrounding spaces; any other name (and an
unnamed band, None) is ``'unknown'``. Pure data and lookups: no OpenMMLab imports.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

__all__ = ['BAND_DOMAINS', 'BAND_KIND_NAMES', 'BAND_KINDS', 'SENTINEL2_MSI_BANDS',
           'SENTINEL1_POLARISATIONS', 'WORLDVIEW3_MS_BANDS', 'check_band_domain',
           'band_kind', 'band_kinds', 'optical_bands', 'bands_in_domain']

#: The band domains a corruption may declare, and what each means.
BAND_DOMAINS: Dict[str, str] = {
    'all': 'every band (sensor and processing effects, geometric corruptions)',
    'optical': 'optical bands only (atmospheric and illumination effects)',
}

#: The kinds :func:`band_kind` returns.
BAND_KIND_NAMES = ('optical', 'sar', 'unknown')

#: Sentinel-2 MSI band names (ESA Sentinel-2 User Handbook), in product order.
SENTINEL2_MSI_BANDS = ('B01', 'B02', 'B03', 'B04', 'B05', 'B06', 'B07', 'B08', 'B8A',
                       'B09', 'B10', 'B11', 'B12')
#: Sentinel-1 polarisation channels (ESA Sentinel-1 User Handbook).
SENTINEL1_POLARISATIONS = ('VV', 'VH', 'HH', 'HV')
_COLOUR_BANDS = ('R', 'G', 'B', 'NIR', 'RED', 'GREEN', 'BLUE')
#: WorldView-3 multispectral band names (the SpaceNet releases' 8-band chips).
WORLDVIEW3_MS_BANDS = ('COASTAL', 'BLUE', 'GREEN', 'YELLOW', 'RED', 'RED_EDGE', 'NIR1',
                       'NIR2')

#: Band kind by (upper-case) band name; names not listed are ``'unknown'``.
BAND_KINDS: Dict[str, str] = {
    **{name: 'optical' for name in SENTINEL2_MSI_BANDS},
    **{name: 'sar' for name in SENTINEL1_POLARISATIONS},
    **{name: 'optical' for name in _COLOUR_BANDS},
    **{name: 'optical' for name in WORLDVIEW3_MS_BANDS},
}


def check_band_domain(domain: str) -> str:
    """Return ``domain`` if it is one of :data:`BAND_DOMAINS`.

    Raises:
        ValueError: anything else; the message lists the valid domains.
    """
    if not isinstance(domain, str) or domain not in BAND_DOMAINS:
        raise ValueError(f'unknown band domain {domain!r}; valid: {list(BAND_DOMAINS)}')
    return domain


def band_kind(name: Optional[str]) -> str:
    """The kind of the band called ``name`` (:data:`BAND_KINDS`): ``'optical'``,
    ``'sar'`` or ``'unknown'`` (an unlisted name, or None for an unnamed band).

    Raises:
        TypeError: ``name`` is neither a string nor None.
    """
    if name is None:
        return 'unknown'
    if not isinstance(name, str):
        raise TypeError(f'a band name is a string (or None for an unnamed band), got '
                        f'{name!r} of type {type(name).__name__}')
    return BAND_KINDS.get(name.strip().upper(), 'unknown')


def band_kinds(names: Sequence[Optional[str]]) -> Tuple[str, ...]:
    """The kind of every band of ``names`` (see :func:`band_kind`), in order.

    Raises:
        TypeError: ``names`` is a single string rather than a sequence of names, or an
            entry is neither a string nor None.
    """
    if isinstance(names, (str, bytes)):
        raise TypeError(f'band names are a list of names (one per band), got the single '
                        f'string {names!r}; e.g. ["B02", "B03", "B04"]')
    return tuple(band_kind(name) for name in names)


def optical_bands(names: Sequence[Optional[str]]) -> List[int]:
    """Positions (from 0) of the optical bands of ``names``, in order."""
    return [i for i, kind in enumerate(band_kinds(names)) if kind == 'optical']


def bands_in_domain(names: Sequence[Optional[str]], domain: str) -> List[int]:
    """Positions (from 0) of the bands of ``names`` that ``domain`` covers: every band
    for ``'all'``, :func:`optical_bands` for ``'optical'``."""
    if check_band_domain(domain) == 'all':
        return list(range(len(band_kinds(names))))
    return optical_bands(names)
