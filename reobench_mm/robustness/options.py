"""The options of a robustness run, defined once.

:class:`RobustnessOptions` is a frozen, validated dataclass: every option's name, default,
check and help text live in its field definitions, and everything that takes options maps
onto it:

- the loops: ``test_cfg = dict(type='RobustnessTestLoop', corruptions=..., ...)`` and
  ``val_cfg = dict(type='RobustnessValLoop', ...)`` (the validation loop takes the subset
  :data:`VALIDATION_OPTIONS`, with its own defaults);
- the driver :class:`~reobench_mm.robustness.sweep.RobustnessSweep` and
  ``tools/robustness_test.py`` (whose flags :func:`add_option_arguments` makes from the
  fields' help texts, and :func:`options_from_args` reads back);
- the fingerprint of the results (:meth:`RobustnessOptions.fingerprint_part`);
- the data-budget and recipe drivers and their tools (a subset, with their defaults).

Values are normalised when the options are made: corruption names and groups expanded in
the order given, severities sorted, the shard as ``(i, n)``, ``calibration`` set when
``temperature_scaling`` is. An unknown name is a :class:`~reobench_mm.errors.SweepError`
that lists the valid ones (and the closest, for a typo).
"""
from __future__ import annotations

import argparse
import difflib
import numbers
import textwrap
from dataclasses import MISSING, dataclass, field, fields, replace
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from reobench_corruptions import PROTOCOLS
from reobench_corruptions.condition import Condition
from reobench_corruptions.geometric import BORDER_MODES
from ..attacks.spec import ATTACK_KINDS
from ..engine.precision import PRECISIONS
from ..errors import SweepError
from ..evaluation.functional.bootstrap import (DEFAULT_LEVEL, DEFAULT_RESAMPLES, check_level,
                                               check_resamples)
from .decode_cache import DEFAULT_MAX_BYTES
from .flag_values import attack_argument, attacks_from_flag, shift_argument, shifts_from_flag
from .device_corruption import CORRUPTION_DEVICES
from .plan import SweepPlan, shard_conditions
from .conditions.released import parse_corruption_files
from .conditions.kinds import CONDITION_KINDS, ConditionKind

__all__ = ['RobustnessOptions', 'OPTION_NAMES', 'SWEEP_OPTIONS', 'CONFIG_ONLY_OPTIONS',
           'VALIDATION_OPTIONS',
           'VALIDATION_DEFAULTS', 'add_option_arguments', 'options_from_args',
           'describe_options', 'registered_kind_options', 'with_config_options',
           'robustness_options_given']


#: ``cli`` keys not for ``argparse``: ``flag`` (a name other than ``--<name>``), ``config``
#: (also read from ``test_cfg``), ``gather`` (the parsed value -> the option's value).
_CLI_OWN_KEYS = ('flag', 'config', 'gather')


def _option(default: Any, help: str, cli: Optional[Dict[str, Any]] = None,
            off: Optional[str] = None, default_text: Optional[str] = None) -> Any:
    """A field of :class:`RobustnessOptions`: its default, its help text (docstrings,
    ``--help``) and how the command line spells it (``cli``: the ``argparse`` keywords,
    and :data:`_CLI_OWN_KEYS`; None: not a flag). A boolean option's
    ``off`` is the help of its flag when the flag turns it off (``--no-plots``,
    ``--partial-checkpoint``, or ``--no-calibration`` where a tool defaults it on); an
    option whose default is None says in ``default_text`` what None means."""
    return field(default=default, metadata=dict(help=help, cli=cli, off=off,
                                                 default_text=default_text))


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


@dataclass(frozen=True)
class RobustnessOptions:
    """What a robustness run evaluates and how (see the field help texts; each is checked
    when the options are made, see :meth:`create`)."""

    corruptions: Tuple[str, ...] = _option(
        None, 'corruption names or groups (all, environmental, sensor, geometric, '
        'appearance)', dict(nargs='+', metavar='NAME'),
        default_text='every corruption of the protocol')
    severities: Tuple[int, ...] = _option(
        None, 'severities 1..5; the clean condition always runs',
        dict(nargs='+', type=int, metavar='K'), default_text='all five')
    protocol: str = _option('reobench', "corruption protocol ('reobench' or "
                            "'geofm_calibration')", dict(choices=PROTOCOLS))
    seed: int = _option(0, 'seed of the corruption draws', dict(type=int))
    corruption_seeds: int = _option(
        1, 'evaluate every random corruption (noise, stripes, clouds, translations) with '
        'this many corruption seeds (seed, seed + 1, ...): the report gives the mean over '
        'the seeds, and the intervals resample the seeds as well as the images',
        dict(type=int, metavar='S'))
    border: str = _option('reflect', "border of rotate/translate ('reflect' or 'constant')",
                          dict(choices=tuple(BORDER_MODES)))
    out_dir: Optional[str] = _option(
        None, "where the condition records and the report go (default: the runner's "
        'work_dir)')
    shard: Optional[Tuple[int, int]] = _option(
        None, "'i/n': evaluate only every n-th condition from i (clean is in shard 0) and "
        'write a shard manifest instead of the report (merge with '
        'tools/robustness_merge.py)', dict(metavar='i/n'))
    force: bool = _option(False, 'evaluate again the conditions already finished', {},
                          off='reuse the conditions already finished')
    calibration: bool = _option(
        False, 'also evaluate calibration in every condition (ECE, signed gap, NLL, Brier, '
        'classwise ECE, AURC, eAURC, accuracy at 90 % coverage; detection: D-ECE), with '
        'reliability diagrams and ECE against severity', {},
        off='do not evaluate calibration (the task metric only)')
    temperature_scaling: bool = _option(
        False, '(segmentation; implies calibration) fit one temperature on clean pixels of '
        'images that are not evaluated (temperature_split, or a val_dataloader of other '
        'images) and report every condition calibrated with it too (calib_ts/...)', {},
        off='no temperature scaling')
    temperature_split: Optional[int] = _option(
        None, 'hold out this many test images (seeded, stratified by their most frequent '
        'label) for the temperature and evaluate the rest (the calibration study holds out '
        '400)', dict(type=int, metavar='N'))
    temperature_split_seed: int = _option(0, 'seed of the held-out split',
                                          dict(type=int, metavar='S'))
    temperature_on_test: bool = _option(
        False, 'allow fitting the temperature on evaluated images (optimistic; recorded in '
        'the report)', {}, off='refuse to fit the temperature on evaluated images')
    plots: bool = _option(True, "write the report's plots", dict(flag='--no-plots'),
                          off="write no plots (the report's numbers and tables only)")
    decode_cache_bytes: int = _option(
        DEFAULT_MAX_BYTES, 'decode each test image once for all conditions, keeping up to '
        'this many bytes of decoded samples in memory (0: off)',
        dict(type=int, metavar='BYTES'))
    precision: str = _option(
        'fp32', "forward precision of the test step: 'fp32', or 'bf16'/'fp16' under "
        'torch.autocast on the model\'s device (the numbers change slightly; part of the '
        'fingerprint)', dict(choices=PRECISIONS))
    corruption_device: str = _option(
        'pipeline', "where the corruptions are applied: 'pipeline' (numpy/OpenCV in the data "
        "pipeline) or 'model' (the torch engine on the model's device, before the "
        'normalisation, for every corruption it implements, geometric ones moving the '
        'labels there; JPEG stays in the pipeline; part of the fingerprint)',
        dict(choices=CORRUPTION_DEVICES))
    fan_out: int = _option(
        0, 'evaluate the conditions of the test set this many at a time in one pass over '
        'the data (each image read and decoded once, each condition with its own '
        'evaluator; the same numbers); 0: one condition after another',
        dict(type=int, metavar='N'))
    fan_out_batch: int = _option(
        1, 'with fan_out: the conditions forwarded together in one test step (their '
        'batches joined into one of this many times the test batch; numbers equal up to '
        "the float rounding of batched kernels); 1: each condition's batch alone (the "
        'same bits)', dict(type=int, metavar='M'))
    strict_checkpoint: bool = _option(
        True, 'check that the checkpoint fits the model exactly (every key, every shape); '
        'off: evaluate what fits (logged)', dict(flag='--partial-checkpoint'),
        off='evaluate a checkpoint that does not fit the model exactly: what fits is '
        'loaded and what does not is logged (by default every key and shape must fit)')
    seen_corruptions: Union[None, str, Tuple[str, ...]] = _option(
        'auto', "the corruptions the model saw in training: 'auto' reads the pools of the "
        "RandomCorruption steps of the config's training pipeline, or names/groups, or "
        'none; marked in the report, which adds held-out scores over the others',
        dict(nargs='*', metavar='NAME', gather=lambda names: list(names) or None))
    held_out_only: bool = _option(False, 'refuse to evaluate corruptions seen in training',
                                  {}, off='evaluate corruptions seen in training too')
    bootstrap: int = _option(
        DEFAULT_RESAMPLES, 'bootstrap resamples of the test images for the intervals of '
        'every reported number (the same resamples for every condition; 0: no intervals)',
        dict(type=int, metavar='B'))
    interval_level: float = _option(DEFAULT_LEVEL, 'level of the bootstrap intervals',
                                    dict(type=float, metavar='P'))
    bootstrap_seed: int = _option(0, 'seed of the bootstrap resamples',
                                  dict(type=int, metavar='S'))
    shifts: Any = _option(
        None, 'other test sets evaluated as conditions of the run (real distribution '
        'shifts): {name: dict(shift_type=..., dataset=dict(...)[, corruptions=..., '
        'severities=...])} in the config; each is reported against the clean test set; '
        'on the command line NAME=CONFIG_FILE[:VARIABLE] each, the variable a shift set of '
        'that file (e.g. vaihingen=configs/_base_/shifts/vaihingen.py:vaihingen_shift)',
        dict(nargs='+', metavar='NAME=FILE[:VAR]', type=shift_argument, config=True,
             gather=shifts_from_flag))
    corruption_files: Any = _option(
        None, 'read corrupted conditions from files instead of synthesising them (the '
        "REOBench authors' released test sets): dict(dataset=dict(...) with {corruption}, "
        '{folder} and {severity} in its strings[, geometric=dict(...), folders=..., '
        'corruptions=...]) in the config')
    attacks: Any = _option(
        None, 'adversarial attacks evaluated as conditions of the run (worst-case '
        'robustness): {name: dict(eps=[...] in pixel units[, type=..., steps=..., '
        'alpha=..., random_start=..., losses=..., max_value=..., corruptions=..., '
        f'severities=...])}} in the config; names (or type) {", ".join(ATTACK_KINDS)}; on '
        'the command line NAME=EPS[,EPS...] each (e.g. fgsm=2,4 pgd=8: their defaults '
        'otherwise)', dict(nargs='+', metavar='NAME=EPS', type=attack_argument,
                           config=True, gather=attacks_from_flag))
    kind_options: Any = _option(
        None, 'the options of condition kinds a plugin registered (register_condition_kind), '
        'option -> value; given as their own options (e.g. flips=dict(...)), collected here')

    def __post_init__(self) -> None:
        for item in fields(self):
            if item.type == 'bool' and not isinstance(getattr(self, item.name), bool):
                raise SweepError(f'{item.name} must be True or False, got '
                                 f'{getattr(self, item.name)!r}')
        plan = SweepPlan.create(self.corruptions, self.severities, self.protocol, self.seed,
                                self.border, self.shard, self.corruption_seeds)
        set_ = object.__setattr__
        set_(self, 'corruptions', plan.corruptions)
        set_(self, 'severities', plan.severities)
        set_(self, 'shard', plan.shard)
        if self.out_dir is not None and not isinstance(self.out_dir, str):
            raise SweepError(f'out_dir must be a folder path, got {self.out_dir!r}')
        self._check_temperature()
        if self.temperature_scaling:
            set_(self, 'calibration', True)
        cache = self.decode_cache_bytes
        if not _is_int(cache) or cache < 0:
            raise SweepError(f'decode_cache_bytes must be an integer >= 0 (0: off), got '
                             f'{cache!r}')
        set_(self, 'decode_cache_bytes', int(cache))
        if self.precision not in PRECISIONS:
            raise SweepError(f'precision must be one of {list(PRECISIONS)}, got '
                             f'{self.precision!r}')
        if self.corruption_device not in CORRUPTION_DEVICES:
            raise SweepError(f'corruption_device must be one of {list(CORRUPTION_DEVICES)}, '
                             f'got {self.corruption_device!r}')
        if not _is_int(self.fan_out) or self.fan_out < 0:
            raise SweepError(f'fan_out must be a number of conditions per pass >= 0 (0: off), '
                             f'got {self.fan_out!r}')
        set_(self, 'fan_out', int(self.fan_out))
        if not _is_int(self.fan_out_batch) or self.fan_out_batch < 1:
            raise SweepError(f'fan_out_batch must be a number of conditions per forward '
                             f'>= 1, got {self.fan_out_batch!r}')
        if self.fan_out_batch > 1 and self.fan_out < 2:
            raise SweepError(f'fan_out_batch={self.fan_out_batch} joins the batches of the '
                             'conditions of a fan-out pass: set fan_out to 2 or more too')
        set_(self, 'fan_out_batch', int(self.fan_out_batch))
        try:
            set_(self, 'bootstrap', check_resamples(self.bootstrap))
            set_(self, 'interval_level', check_level(self.interval_level))
        except ValueError as error:
            raise SweepError(str(error)) from None
        if not _is_int(self.bootstrap_seed) or self.bootstrap_seed < 0:
            raise SweepError(f'bootstrap_seed must be an integer >= 0, got '
                             f'{self.bootstrap_seed!r}')
        self._parse_kinds()
        set_(self, 'corruption_files', parse_corruption_files(self.corruption_files,
                                                              self.protocol))
        if self.corruption_files is not None and self.corruption_seeds > 1:
            raise SweepError('corruption_files with corruption_seeds > 1: a condition read '
                             'from files has one draw, its files; evaluate the seeds of the '
                             'synthesised corruptions in a run without corruption_files')
        if self.corruption_files is not None and self.temperature_split is not None:
            raise SweepError('corruption_files with temperature_split: the files of a '
                             'geometric corruption would be split by their own labels; fit '
                             'the temperature on a val_dataloader of other images instead')
        seen = self.seen_corruptions
        if seen is not None and seen != 'auto':
            if isinstance(seen, str):
                seen = [seen]
            if not isinstance(seen, (list, tuple)) or \
                    not all(isinstance(n, str) for n in seen):
                raise SweepError("seen_corruptions must be 'auto', None or a list of "
                                 f'corruption names/groups, got {self.seen_corruptions!r}')
            set_(self, 'seen_corruptions', tuple(seen))

    def _parse_kinds(self) -> None:
        """Parse the option of every kind of condition but the corruptions (the shift
        sets, the attacks, a registered kind's): each kind's ``parse`` checks its value."""
        given = dict(self.kind_options or {})
        parsed = {}
        for kind in CONDITION_KINDS:
            if kind.parse is None:
                continue
            if kind.option in _FIELDS:
                object.__setattr__(self, kind.option,
                                   kind.parse(getattr(self, kind.option), self.protocol))
            else:
                parsed[kind.option] = kind.parse(given.pop(kind.option, None), self.protocol)
        if given:
            raise SweepError(f'kind_options: no registered condition kind takes '
                             f'{sorted(given)}; the kinds are '
                             f'{[k.name for k in CONDITION_KINDS]}')
        object.__setattr__(self, 'kind_options', parsed or None)

    def entries(self, kind: ConditionKind) -> Tuple[Any, ...]:
        """The parsed value of ``kind``'s option (empty: none)."""
        if kind.option in _FIELDS:
            return getattr(self, kind.option) or ()
        return (self.kind_options or {}).get(kind.option, ())

    def _check_temperature(self) -> None:
        split, seed = self.temperature_split, self.temperature_split_seed
        if not self.temperature_scaling and (split is not None or self.temperature_on_test):
            raise SweepError('temperature_split and temperature_on_test need '
                             'temperature_scaling=True')
        if split is not None and (not _is_int(split) or split < 1):
            raise SweepError(f'temperature_split must be a number of images >= 1 (the '
                             f'calibration study holds out 400), got {split!r}')
        if not _is_int(seed) or seed < 0:
            raise SweepError(f'temperature_split_seed must be an integer >= 0, got {seed!r}')
        if split is not None and self.temperature_on_test:
            raise SweepError('temperature_split holds images out of the evaluation; '
                             'temperature_on_test fits on evaluated ones: give one of them')

    # ------------------------------------------------------------------ making them
    @classmethod
    def create(cls, values: Optional[Mapping[str, Any]] = None, *,
               allowed: Optional[Iterable[str]] = None,
               defaults: Optional[Mapping[str, Any]] = None,
               owner: str = 'RobustnessTestLoop') -> 'RobustnessOptions':
        """Options from ``values`` (option name -> value), the others from ``defaults``
        and then the field defaults.

        Args:
            allowed: the option names ``owner`` takes (default: all).
            owner: who takes them, for the messages (``'RobustnessValLoop'``, ...).

        Raises:
            SweepError: an unknown name or one ``owner`` does not take (the valid ones
                are listed, with the closest for a typo), or a bad value.
        """
        values = dict(values or {})
        registered = registered_kind_options()
        allowed = [n for n in (OPTION_NAMES if allowed is None else allowed)
                   if n != 'kind_options'] + list(registered)
        unknown = [k for k in values if k not in allowed]
        if unknown:
            name = unknown[0]
            close = difflib.get_close_matches(name, allowed, n=1)
            what = ('an option of other runs, not of ' if name in OPTION_NAMES
                    else 'not an option of ')
            raise SweepError(f'{name!r} is {what}{owner}'
                             + (f' (did you mean {close[0]!r}?)' if close else '')
                             + f'; valid: {", ".join(allowed)}')
        routed = {name: values.pop(name) for name in registered if name in values}
        if routed:
            values['kind_options'] = routed
        merged = dict(defaults or {})
        merged.update(values)
        return cls(**merged)

    def replace(self, **changes: Any) -> 'RobustnessOptions':
        """A copy with some options changed (checked again)."""
        return replace(self, **changes)

    # ------------------------------------------------------------------ what they mean
    @property
    def plan(self) -> SweepPlan:
        """The conditions these options select."""
        return SweepPlan(self.corruptions, self.severities, self.clean, self.shard,
                         self.corruption_seeds)

    @property
    def clean(self) -> Condition:
        """The clean condition (its seed, protocol and border every condition shares)."""
        return Condition(seed=self.seed, protocol=self.protocol, border=self.border)

    def kind_conditions(self, kind: ConditionKind) -> List[Any]:
        """The conditions of ``kind`` these options declare (the corruptions: the plan's)."""
        if kind.conditions is None:
            return self.plan.all_conditions
        return kind.conditions(self.entries(kind), self.clean)

    @property
    def conditions(self) -> List[Any]:
        """The conditions of a run with these options: :attr:`all_conditions`, or with a
        shard ``(i, n)`` every n-th of them from i (every kind of condition is sharded;
        the plan's come first, so its conditions are split as the plan splits them)."""
        return shard_conditions(self.all_conditions, self.shard)

    @property
    def all_conditions(self) -> List[Any]:
        """Every condition of the run, all shards together."""
        return [c for kind in CONDITION_KINDS for c in self.kind_conditions(kind)]

    @property
    def temperature_fit(self) -> Dict[str, Any]:
        """The temperature-fit settings (empty without temperature scaling)."""
        if not self.temperature_scaling:
            return {}
        split = self.temperature_split
        return dict(split=split, split_seed=self.temperature_split_seed
                    if split is not None else None, on_test=self.temperature_on_test)

    @property
    def interval_settings(self) -> Dict[str, Any]:
        """The settings of the bootstrap intervals
        (:func:`~reobench_mm.analysis.intervals.summary_intervals`)."""
        return dict(resamples=self.bootstrap, level=self.interval_level,
                    seed=self.bootstrap_seed)

    def fingerprint_part(self) -> Dict[str, Any]:
        """The options part of the fingerprint: the settings that change the numbers."""
        part = dict(seed=self.seed, protocol=self.protocol, border=self.border,
                    calibration=self.calibration,
                    temperature_scaling=self.temperature_scaling,
                    temperature_fit=self.temperature_fit)
        # (the defaults leave the fingerprint as it was before these options)
        if self.precision != 'fp32':
            part['precision'] = self.precision
        if self.corruption_device != 'pipeline':
            part['corruption_device'] = self.corruption_device
        return part

    def to_dict(self, names: Optional[Iterable[str]] = None) -> Dict[str, Any]:
        """Option name -> value (tuples as lists), for a config (``test_cfg``)."""
        out = {}
        kinds = {k.option: k for k in CONDITION_KINDS if k.to_dict is not None}
        for name in names or OPTION_NAMES:
            if name == 'kind_options':  # each registered kind's option as its own
                out.update({option: kinds[option].to_dict(entries)
                            for option, entries in (self.kind_options or {}).items()})
                continue
            value = getattr(self, name)
            if name == 'shard' and value is not None:
                value = '{}/{}'.format(*value)
            if name in kinds:
                value = kinds[name].to_dict(value)
            if name == 'corruption_files' and value is not None:
                value = value.to_dict()
            out[name] = list(value) if isinstance(value, tuple) else value
        return out


#: Every option, in definition order.
OPTION_NAMES: Tuple[str, ...] = tuple(f.name for f in fields(RobustnessOptions))
_FIELDS = frozenset(OPTION_NAMES)
#: The options of ``RobustnessSweep`` and ``tools/robustness_test.py`` (the output folder
#: is their work dir).
SWEEP_OPTIONS = tuple(n for n in OPTION_NAMES if n != 'out_dir')
#: The sweep's options that a config gives (without a command-line flag, or with a flag of
#: a short form): the sweep takes them from the config's ``test_cfg`` when they are not
#: given (``shifts``, ``corruption_files``, ``attacks``).
CONFIG_ONLY_OPTIONS = tuple(
    f.name for f in fields(RobustnessOptions)
    if f.name in SWEEP_OPTIONS and f.name != 'kind_options'
    and (f.metadata['cli'] is None or f.metadata['cli'].get('config', False)))


def robustness_options_given(cfg_options: Optional[Mapping[str, Any]]) -> bool:
    """Whether ``--cfg-options`` selected conditions only the robustness loop evaluates
    (``test_cfg.attacks...``, ``test_cfg.shifts...``, ``test_cfg.corruptions=...``,
    ``test_cfg.severities=...``, ``test_cfg.corruption_files...``, a registered kind's):
    ``tools/test.py`` then runs that loop, as if ``test_cfg.type=RobustnessTestLoop`` had
    been given too. Its other options alone (``force``, ``calibration``) do not: they
    say how, not what, and stay refused by the single-condition loop with what to do."""
    own = {'corruptions', 'severities', 'corruption_seeds', 'attacks', 'shifts',
           'corruption_files', *registered_kind_options()}
    for key in cfg_options or {}:
        parts = str(key).split('.')
        if len(parts) > 1 and parts[0] == 'test_cfg' and parts[1] in own:
            return True
    return False


def registered_kind_options() -> Tuple[str, ...]:
    """The options of the condition kinds a plugin registered (given as options of their
    own, kept in ``kind_options``)."""
    return tuple(k.option for k in CONDITION_KINDS if k.parse is not None
                 and k.option not in _FIELDS)
#: The options of ``RobustnessValLoop`` (nothing is written while validating).
VALIDATION_OPTIONS = ('corruptions', 'severities', 'protocol', 'seed', 'border',
                      'decode_cache_bytes', 'shifts', 'attacks')
#: The defaults of ``RobustnessValLoop`` where they differ (a few conditions, and no cache).
VALIDATION_DEFAULTS = dict(corruptions=('cloud', 'gaussian_noise', 'haze'), severities=(3, ),
                           decode_cache_bytes=0)


def with_config_options(options: RobustnessOptions, test_cfg: Mapping[str, Any]
                        ) -> RobustnessOptions:
    """``options``, with those a config gives only (no command-line flag: the shift sets,
    the files, the attacks, a registered kind's option) taken from ``test_cfg`` where
    they are not given in ``options``."""
    changes: Dict[str, Any] = {}
    kinds = dict(options.kind_options or {})
    for name in CONFIG_ONLY_OPTIONS + registered_kind_options():
        value = test_cfg.get(name)
        if not value:
            continue
        # a mapping as a plain dict; anything else as given, for the option's own check
        value = value.to_dict() if hasattr(value, 'to_dict') else value
        if name in _FIELDS:
            if not getattr(options, name):
                changes[name] = value
        elif not kinds.get(name):
            kinds[name] = value
    if kinds != dict(options.kind_options or {}):
        changes['kind_options'] = kinds
    return options.replace(**changes) if changes else options


# ----------------------------------------------------------------------------- command line

def _field(name: str):
    return next(f for f in fields(RobustnessOptions) if f.name == name)


def _default(name: str, defaults: Optional[Mapping[str, Any]]) -> Any:
    if defaults and name in defaults:
        return defaults[name]
    item = _field(name)
    return None if item.default is MISSING else item.default


def _flag(name: str, defaults: Optional[Mapping[str, Any]]) -> str:
    cli = _field(name).metadata['cli']
    if 'flag' in cli:
        return cli['flag']
    if _field(name).type == 'bool' and _default(name, defaults) is True:
        return '--no-' + name.replace('_', '-')
    return '--' + name.replace('_', '-')


def add_option_arguments(parser: argparse.ArgumentParser,
                         names: Optional[Sequence[str]] = None,
                         defaults: Optional[Mapping[str, Any]] = None) -> List[str]:
    """Add a flag for each option of ``names`` that has one (default: all), with the
    field's help text; a boolean option is ``--<name>`` when it defaults to False and
    ``--no-<name>`` when it defaults to True. Returns the option names added.
    :func:`options_from_args` reads them back."""
    added = []
    for name in names or OPTION_NAMES:
        item = _field(name)
        cli = item.metadata['cli']
        if cli is None:
            continue
        default = _default(name, defaults)
        help_text = item.metadata['help']
        kwargs = {k: v for k, v in cli.items() if k not in _CLI_OWN_KEYS}
        kwargs['default'] = None  # not given: left out, so that the caller's defaults apply
        if item.type == 'bool':
            kwargs['action'] = 'store_false' if default else 'store_true'
            if default:  # the flag turns the option off: its own help, not the option's
                help_text = item.metadata['off']
        elif default is not None and name != 'seen_corruptions':
            help_text += f' (default: {_format(default)})'
        elif item.metadata['default_text']:
            help_text += f' (default: {item.metadata["default_text"]})'
        if name == 'seen_corruptions':
            help_text += '; give the flag without names for none (default: auto)'
        parser.add_argument(_flag(name, defaults), dest=name,
                            help=help_text.replace('%', '%%'), **kwargs)
        added.append(name)
    return added


def _format(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ' '.join(str(v) for v in value)
    return str(value)


def options_from_args(args: argparse.Namespace,
                      names: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """The option values of the flags :func:`add_option_arguments` added (those not
    given on the command line are left out, so that the caller's defaults apply)."""
    values = {}
    for name in names or OPTION_NAMES:
        if _field(name).metadata['cli'] is None or not hasattr(args, name):
            continue
        value = getattr(args, name)
        if value is None:
            continue
        gather = _field(name).metadata['cli'].get('gather')
        values[name] = value if gather is None else gather(value)
    return values


def describe_options(names: Optional[Sequence[str]] = None,
                     defaults: Optional[Mapping[str, Any]] = None, indent: int = 8) -> str:
    """The options of ``names`` (default: all) as docstring lines, one entry per option:
    its name, its help text and its default (``defaults`` where they differ). The loops'
    docstrings end with it, so that they list every option the options table has."""
    lines = []
    for name in names or OPTION_NAMES:
        default = _default(name, defaults)
        said = _field(name).metadata['default_text']
        shown = f' (default: {_format(default)})' if default is not None else \
            f' (default: {said})' if said else ''
        text = f'``{name}``: {_field(name).metadata["help"]}{shown}'
        lines.extend(textwrap.wrap(text, 92 - indent, break_on_hyphens=False,
                                   initial_indent=' ' * indent,
                                   subsequent_indent=' ' * (indent + 4)))
    return '\n'.join(lines)
