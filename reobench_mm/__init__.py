"""reobench_mm: robustness evaluation of Earth-observation models for OpenMMLab.

``import reobench_mm`` (or ``custom_imports=dict(imports=['reobench_mm'])`` in a
config) registers every module of the package so that ``type=`` finds it from
configs whose default scope is ``mmseg``, ``mmdet`` or ``mmrotate``, and installs
the compatibility fixes for the pinned stack (see ``reobench_mm.engine``).
"""
from . import datasets, engine, evaluation, models, transforms  # noqa: F401  (registration)
from .robustness import test_loop, val_loop  # noqa: F401  (registration: the loops)
from .registry import (DATASETS, HOOKS, METRICS, MODELS, OPTIM_WRAPPER_CONSTRUCTORS,
                       TRANSFORMS)
from .version import __version__, version_info

__all__ = [
    '__version__', 'version_info', 'MODELS', 'TRANSFORMS', 'DATASETS', 'METRICS', 'HOOKS',
    'OPTIM_WRAPPER_CONSTRUCTORS'
]
