"""Corruption engine (numpy/OpenCV only, no OpenMMLab imports).

The 12 corruptions of REOBench (``protocol='reobench'``) and the 3 shifts of the
calibration study (``protocol='geofm_calibration'``), at severities 1..5, for any
band count and for uint8 / uint16 / float images, deterministic per sample.

:class:`Condition` is one evaluation condition (clean, or a corruption at a severity, with
its seed, protocol and border); :data:`CLEAN` the clean one.

Argument checks usable before any image is seen (e.g. when a pipeline is built):
:func:`check_seed`, :func:`check_max_value`, :func:`check_severity`,
:func:`check_protocol`, :func:`full_scale` (``max_value`` against a dtype),
:func:`check_ignore_index` (label maps), :func:`check_bands` (the ``bands`` option of
every pixel-value corruption), :func:`check_canvas` (the ``canvas`` option of ``scale``);
:func:`check_image` checks an image.

Band kinds by band name (:func:`band_kinds`, :func:`optical_bands`) and the bands each
corruption acts on (``get_corruption(name).band_domain``): :mod:`.bands`. Full scales per
band and the range check of the bands a corruption acts on: :mod:`.band_values`; the
(η, σ) of ``poisson_gaussian_noise`` per band (``band_noise``): :mod:`.band_noise`.
"""
from . import appearance, geometric  # noqa: F401  (registers the corruptions)
from .api import corrupt, corrupt_geometric
from .appearance import check_bands
from .bands import BAND_DOMAINS, band_kinds, optical_bands
from .condition import CLEAN, CLEAN_NAME, CONDITION_FIELDS, Condition
from .base import (CATEGORIES, GROUPS, PROTOCOLS, CorruptionSpec, check_image,
                   check_max_value, check_protocol, check_seed, check_severity, full_scale,
                   get_corruption, list_corruptions, make_rng, resolve_corruptions)
from .geometric import (DEFAULT_SCALE_CANVAS, SCALE_CANVASES, GeometricTransform, check_canvas,
                        check_ignore_index)

__all__ = [
    'corrupt', 'corrupt_geometric', 'list_corruptions', 'get_corruption',
    'resolve_corruptions', 'make_rng', 'CorruptionSpec', 'GeometricTransform', 'PROTOCOLS',
    'CATEGORIES', 'GROUPS', 'check_seed', 'check_max_value', 'check_severity',
    'check_protocol', 'check_image', 'full_scale', 'check_ignore_index', 'Condition',
    'CLEAN', 'CLEAN_NAME', 'CONDITION_FIELDS', 'check_bands', 'check_canvas', 'SCALE_CANVASES',
    'DEFAULT_SCALE_CANVAS', 'BAND_DOMAINS', 'band_kinds', 'optical_bands'
]
