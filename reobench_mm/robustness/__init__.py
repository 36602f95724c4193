"""The robustness loops and the experiment drivers over them (layer 9).

The loops (imported by the plugin line, ``import reobench_mm``, which registers them):

- :mod:`~reobench_mm.robustness.test_loop`: ``RobustnessTestLoop``;
- :mod:`~reobench_mm.robustness.val_loop`: ``RobustnessValLoop``;
- :mod:`~reobench_mm.robustness.switching`: what both do (switching the condition,
  what they return);
- :mod:`~reobench_mm.robustness.options`: their options, defined once;
- :mod:`~reobench_mm.robustness.plan`: which conditions a run evaluates, and its shards;
- :mod:`~reobench_mm.robustness.store`: the condition records of a run;
- :mod:`~reobench_mm.robustness.shards`: shard manifests and merging them;
- :mod:`~reobench_mm.robustness.temperature`: the fitted temperature of a run;
- :mod:`~reobench_mm.robustness.evaluators`: the evaluator of a run;
- :mod:`~reobench_mm.robustness.held_out`: what a model saw in training;
- :mod:`~reobench_mm.robustness.fingerprint`: what a condition's numbers depend on;
- :mod:`~reobench_mm.robustness.decode_cache`: decoding each test image once per run.

The drivers (imported when used):

- :mod:`~reobench_mm.robustness.sweep`: :class:`RobustnessSweep`, ``tools/robustness_test.py``;
- :mod:`~reobench_mm.robustness.data_budget`: robustness against the training-set size;
- :mod:`~reobench_mm.robustness.recipe`: plain against corruption-aware training;
- :mod:`~reobench_mm.robustness.finetuning`: a frozen encoder against full fine-tuning;
- :mod:`~reobench_mm.robustness.lr_sweep`: EarthShift's learning-rate sweep, then seeds;
- :mod:`~reobench_mm.robustness.drift`: how far a backbone's features move.

The names below are importable from this package; each loads its module on first use, so
that the plugin line does not import the drivers.
"""
import importlib
from typing import Any

#: public name -> the module that defines it
_EXPORTS = {
    'RobustnessTestLoop': 'test_loop', 'SweepOutcome': 'test_loop',
    'RobustnessValLoop': 'val_loop', 'RobustnessOptions': 'options',
    'RobustnessSweep': 'sweep', 'run_sweep': 'sweep', 'CheckpointMismatchError': 'sweep',
    'merge_sweeps': 'shards', 'run_data_budget': 'data_budget',
    'compare_recipes': 'recipe', 'representation_drift': 'drift',
    'compare_finetuning': 'finetuning', 'run_lr_sweep': 'lr_sweep',
}
_ERRORS = ('SweepError', 'FingerprintMismatchError', 'WorkDirLockedError')

__all__ = sorted(list(_EXPORTS) + list(_ERRORS))


def __getattr__(name: str) -> Any:
    if name in _ERRORS:
        from .. import errors
        return getattr(errors, name)
    if name in _EXPORTS:
        module = importlib.import_module(f'{__name__}.{_EXPORTS[name]}')
        return getattr(module, name)
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


def __dir__():
    return sorted(set(globals()) | set(__all__))
