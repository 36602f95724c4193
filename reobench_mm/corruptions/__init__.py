"""Corruption engine (numpy/OpenCV only, no OpenMMLab imports).

The 12 corruptions of REOBench (``protocol='reobench'``) and the 3 shifts of the
calibration study (``protocol='geofm_calibration'``), at severities 1..5, for any
band count and for uint8 / uint16 / float images, deterministic per sample.
"""
from . import appearance, geometric  # noqa: F401  (registers the corruptions)
from .api import corrupt, corrupt_geometric
from .base import (CATEGORIES, GROUPS, PROTOCOLS, CorruptionSpec, get_corruption,
                   list_corruptions, make_rng, resolve_corruptions)
from .geometric import GeometricTransform

__all__ = [
    'corrupt', 'corrupt_geometric', 'list_corruptions', 'get_corruption',
    'resolve_corruptions', 'make_rng', 'CorruptionSpec', 'GeometricTransform', 'PROTOCOLS',
    'CATEGORIES', 'GROUPS'
]
