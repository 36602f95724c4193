"""Experiment drivers (layer 9): they build MMEngine Runners, evaluate models and hand
the numbers to :mod:`reobench_mm.analysis`.

- :mod:`~reobench_mm.robustness.plan`: which conditions a sweep evaluates, and its
  shards;
- :mod:`~reobench_mm.robustness.store`: the sweep's work dir (condition records, lock,
  shard manifests, merging, putting a refused run's work dir back);
- :mod:`~reobench_mm.robustness.fingerprint`: what a condition's numbers depend on;
- :mod:`~reobench_mm.robustness.sweep`: :class:`RobustnessSweep`, the sweep itself;
- :mod:`~reobench_mm.robustness.decode_cache`: decoding each test image once per sweep;
- :mod:`~reobench_mm.robustness.data_budget`: robustness against the training-set size;
- :mod:`~reobench_mm.robustness.drift`: how far a backbone's features move.

The top layer of the package: may import every other layer.
"""
from .data_budget import run_data_budget
from .drift import representation_drift
from .store import SweepError, WorkDirLockedError, merge_sweeps
from .sweep import (CheckpointMismatchError, FingerprintMismatchError, RobustnessSweep,
                    SweepOutcome, run_sweep)

__all__ = [
    'RobustnessSweep', 'SweepOutcome', 'SweepError', 'CheckpointMismatchError',
    'FingerprintMismatchError', 'WorkDirLockedError', 'run_sweep', 'merge_sweeps',
    'run_data_budget', 'representation_drift'
]
