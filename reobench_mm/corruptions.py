"""The corruption engine under the plugin's name.

The engine is the package :mod:`reobench_corruptions` (numpy and OpenCV, no OpenMMLab,
no torch): ``import reobench_corruptions`` loads it alone, in a fraction of a second.
This module re-exports its public API for code that imports the plugin anyway
(``from reobench_mm.corruptions import corrupt``), which loads the OpenMMLab stack with
the plugin.
"""
from reobench_corruptions import *  # noqa: F401,F403  (the engine's public API)
from reobench_corruptions import __all__  # noqa: F401
