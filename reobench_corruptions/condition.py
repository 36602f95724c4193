"""The evaluation condition: clean, or one corruption at one severity, with the seed,
protocol and border that fix its random draws and borders.

One :class:`Condition` is what travels through the package: the test loop applies it,
the sweep evaluates a list of them, condition files and reports are keyed by it. It
validates itself once, on construction, and knows its names:

- :attr:`Condition.key`: ``'clean'`` or ``'cloud@3'`` (the keys of ``results.json``);
- :attr:`Condition.tag`: a file-name tag, ``'clean'`` or ``'cloud_s3'`` (a non-default
  protocol prefixed, a constant border of a geometric corruption and a non-zero seed
  appended: ``'geofm_calibration_motion_blur_s3'``, ``'rotate_s2_constant_seed1'``);
- :meth:`Condition.settings`: the keyword arguments of ``ApplyCorruption``.

A clean condition is normalised: ``Condition('cloud', 0)``, ``Condition('clean', 3)`` and
``Condition()`` are the same clean condition (nothing is applied); its seed, protocol and
border are kept, since the conditions of one sweep share them. (Configs are stricter:
``CorruptionTestLoop`` refuses a corruption without a severity, which would otherwise run
clean under a corruption's name.)

A condition also stands in for the ``(corruption, severity)`` pair that results are keyed
by, so that code written for pairs keeps working:

- it unpacks and indexes as the pair (``name, severity = condition``, ``condition[0]``);
  a field name indexes its settings (``condition['seed']``);
- it equals a 2-tuple with its pair, ``Condition('cloud', 3, seed=1) == ('cloud', 3)``,
  and hashes as that pair, so a dict keyed by conditions is read with pairs and the
  reverse;
- between conditions every field counts: ``Condition('cloud', 3, seed=1)`` and
  ``Condition('cloud', 3)`` are different conditions (their draws differ), although each
  equals ``('cloud', 3)``. Equality is therefore not transitive across a pair: a dict or
  set holding both keeps both, and a pair looks up whichever it meets first. Code that
  keys one protocol's results by pair (the analysis) builds its conditions with the
  default seed and border for that reason;
- conditions sort by their pair, then seed, protocol and border; a pair sorts among
  them by its own values.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, fields
from typing import Any, Dict, Iterator, Mapping, Optional, Tuple, Union

from .base import check_protocol, check_seed, check_severity, get_corruption
from .geometric import check_border

__all__ = ['Condition', 'CLEAN', 'CLEAN_NAME', 'CONDITION_FIELDS']

CLEAN_NAME = 'clean'
#: The fields of a condition, in ``ApplyCorruption``'s argument order.
CONDITION_FIELDS = ('corruption', 'severity', 'seed', 'protocol', 'border')
_DEFAULTS = dict(seed=0, protocol='reobench', border='reflect')


@functools.total_ordering
@dataclass(frozen=True, eq=False)
class Condition:
    """Clean, or one corruption of a protocol at one severity.

    Args:
        corruption: a corruption of ``protocol`` (see ``list_corruptions``), or
            ``'clean'``.
        severity: 1..5 with a corruption; 0 means clean.
        seed: seed of the random draws (an integer >= 0).
        protocol: ``'reobench'`` or ``'geofm_calibration'``.
        border: ``'reflect'`` or ``'constant'`` (rotate and translate).

    Raises:
        KeyError: unknown corruption (the message says which protocol has it, or lists
            close matches and the valid names).
        ValueError: bad severity, seed, protocol or border.
        TypeError: a corruption name that is not a string.

    Unpacking gives the pair ``(corruption, severity)``: ``name, severity = condition``;
    a condition equals, hashes and sorts with that pair (see the module docstring).
    """
    corruption: str = CLEAN_NAME
    severity: int = 0
    seed: int = 0
    protocol: str = 'reobench'
    border: str = 'reflect'

    def __post_init__(self) -> None:
        check_protocol(self.protocol)
        check_border(self.border)
        object.__setattr__(self, 'seed', check_seed(self.seed))
        severity = check_severity(self.severity)
        if not isinstance(self.corruption, str):
            raise TypeError(f'a corruption name is a string, got {self.corruption!r}')
        if self.corruption != CLEAN_NAME:
            get_corruption(self.corruption, self.protocol)  # a clear error for bad names
        if severity == 0 or self.corruption == CLEAN_NAME:
            object.__setattr__(self, 'corruption', CLEAN_NAME)
            severity = 0
        object.__setattr__(self, 'severity', severity)

    # ------------------------------------------------------------------ names
    @property
    def is_clean(self) -> bool:
        return self.corruption == CLEAN_NAME

    @property
    def geometric(self) -> bool:
        """Whether it moves the image (and so the labels)."""
        return not self.is_clean and get_corruption(self.corruption,
                                                    self.protocol).moves_labels

    @property
    def category(self) -> str:
        """``'environmental'``, ``'sensor'`` or ``'geometric'`` (``'clean'`` when clean)."""
        return CLEAN_NAME if self.is_clean else get_corruption(self.corruption,
                                                               self.protocol).category

    @property
    def key(self) -> str:
        """``'clean'`` or ``'<corruption>@<severity>'``."""
        return CLEAN_NAME if self.is_clean else f'{self.corruption}@{self.severity}'

    @property
    def tag(self) -> str:
        """A file-name tag: ``'clean'`` or ``'<corruption>_s<severity>'``, with a
        non-default protocol prefixed and a constant border (geometric corruptions only)
        and a non-zero seed appended."""
        if self.is_clean:
            return CLEAN_NAME
        tag = f'{self.corruption}_s{self.severity}'
        if self.protocol != _DEFAULTS['protocol']:
            tag = f'{self.protocol}_{tag}'
        if self.border != _DEFAULTS['border'] and self.geometric:
            tag = f'{tag}_{self.border}'
        if self.seed != _DEFAULTS['seed']:
            tag = f'{tag}_seed{self.seed}'
        return tag

    @property
    def pair(self) -> Tuple[str, int]:
        """``(corruption, severity)``."""
        return self.corruption, self.severity

    def __iter__(self) -> Iterator[Union[str, int]]:
        return iter(self.pair)

    def __getitem__(self, index: Union[int, slice, str]) -> Any:
        """``condition[0]``, ``condition[1]``: the pair's items; ``condition['seed']``: a
        field (any of :data:`CONDITION_FIELDS`)."""
        if isinstance(index, str):
            if index not in CONDITION_FIELDS:
                raise KeyError(f'{index!r} is not a condition field; valid: '
                               f'{list(CONDITION_FIELDS)}')
            return getattr(self, index)
        return self.pair[index]

    def _fields(self) -> Tuple[Any, ...]:
        return tuple(getattr(self, f.name) for f in fields(self))

    def __eq__(self, other: Any) -> bool:
        """Every field against a condition, the pair against a 2-tuple."""
        if isinstance(other, Condition):
            return self._fields() == other._fields()
        if isinstance(other, tuple) and len(other) == 2:
            return self.pair == other
        return NotImplemented

    def __lt__(self, other: Any) -> bool:
        if isinstance(other, Condition):
            return self._fields() < other._fields()
        if isinstance(other, tuple) and len(other) == 2:
            return self.pair < other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.pair)

    def __str__(self) -> str:
        return self.key

    # ------------------------------------------------------------------ conversions
    def settings(self) -> Dict[str, Any]:
        """The keyword arguments of ``ApplyCorruption`` (and of ``CorruptionTestLoop``)."""
        return dict(corruption=self.corruption, severity=self.severity, seed=self.seed,
                    protocol=self.protocol, border=self.border)

    def with_corruption(self, corruption: str, severity: int) -> 'Condition':
        """The same seed, protocol and border, another corruption and severity."""
        return Condition(corruption, severity, self.seed, self.protocol, self.border)

    def clean(self) -> 'Condition':
        """The clean condition with the same seed, protocol and border."""
        return self.with_corruption(CLEAN_NAME, 0)

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> 'Condition':
        """From ``ApplyCorruption``-style settings; missing keys take their defaults and
        unknown keys are an error."""
        unknown = set(settings) - set(CONDITION_FIELDS)
        if unknown:
            raise ValueError(f'unknown condition settings {sorted(unknown)}; valid: '
                             f'{list(CONDITION_FIELDS)}')
        return cls(**settings)

    @classmethod
    def of(cls, corruption: Union['Condition', str], severity: Optional[int] = None,
           seed: Optional[int] = None, protocol: Optional[str] = None,
           border: Optional[str] = None) -> 'Condition':
        """A condition given whole or by its settings, the two ways the package's
        functions take one: ``of(condition)`` returns it, ``of('cloud', 3, seed=1)``
        builds one (settings left None take their defaults).

        Raises:
            TypeError: a condition together with settings.
            KeyError, ValueError: invalid settings (as the constructor; a name needs a
                severity).
        """
        settings = dict(seed=seed, protocol=protocol, border=border)
        if isinstance(corruption, Condition):
            given = [k for k, v in dict(severity=severity, **settings).items()
                     if v is not None]
            if given:
                raise TypeError(f'a Condition was given together with {given}: give the '
                                'condition or its settings, not both')
            return corruption
        return cls(corruption, severity, **{k: v for k, v in settings.items()
                                            if v is not None})

    @classmethod
    def from_key(cls, key: str, protocol: str = 'reobench', seed: int = 0,
                 border: str = 'reflect') -> 'Condition':
        """From ``'clean'`` or ``'<corruption>@<severity>'``."""
        if key == CLEAN_NAME:
            return cls(CLEAN_NAME, 0, seed, protocol, border)
        name, sep, severity = str(key).partition('@')
        if not sep or not severity.strip().isdigit():
            raise ValueError(f"a condition key is 'clean' or '<corruption>@<severity>', "
                             f'got {key!r}')
        return cls(name, int(severity), seed, protocol, border)

    @classmethod
    def coerce(cls, value: Any, protocol: str = 'reobench', seed: int = 0,
               border: str = 'reflect') -> 'Condition':
        """A :class:`Condition` from a condition, a key (``'cloud@3'``) or a pair
        (``('cloud', 3)``, ``('clean', 0)``); pairs and keys take the other settings
        given here."""
        if isinstance(value, Condition):
            return value
        if isinstance(value, str):
            return cls.from_key(value, protocol, seed, border)
        if isinstance(value, (tuple, list)) and len(value) == 2:
            return cls(value[0], value[1], seed, protocol, border)
        raise TypeError(f"a condition is a Condition, a key ('clean', 'cloud@3') or a pair "
                        f"(('cloud', 3)), got {value!r}")


#: The clean condition with the default seed, protocol and border.
CLEAN = Condition()
