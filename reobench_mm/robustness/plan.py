"""What a robustness sweep evaluates: the selection of corruptions and severities, the
list of conditions (clean first) and its shards.

With ``corruption_seeds=S > 1`` every random corruption (``get_corruption(name).stochastic``:
noise, stripes, clouds, translations) is also evaluated at the seeds ``seed + 1 ..
seed + S - 1`` (:attr:`SweepPlan.seed_conditions`, after the conditions of the first seed
in :attr:`SweepPlan.all_conditions`); the report averages each such condition over its
seeds.

Conditions are :class:`~reobench_corruptions.condition.Condition`. A sharded sweep
(``shard=(i, n)``) evaluates the conditions ``i, i + n, i + 2n, ...`` of the full list
(:func:`shard_conditions`); the clean condition is the first, so it belongs to shard 0.
Nothing here reads or writes files.
"""
from __future__ import annotations

import os.path as osp
from dataclasses import dataclass
from typing import Any, ClassVar, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from reobench_corruptions import GROUPS, PROTOCOLS, get_corruption, list_corruptions
from reobench_corruptions import resolve_corruptions as _resolve_names
from reobench_corruptions.base import check_severity
from reobench_corruptions.condition import CLEAN, Condition
from ..errors import SweepError

__all__ = [
    'SweepPlan', 'ConditionOnBase', 'corruptions_on_top', 'select_corruptions',
    'select_severities', 'sweep_conditions', 'parse_shard', 'shard_conditions',
    'default_sweep_work_dir', 'check_corruption_seeds', 'MAX_CORRUPTION_SEEDS', 'SEED_KEY'
]

#: The most corruption seeds a run evaluates each random corruption with.
MAX_CORRUPTION_SEEDS = 100

#: What joins a further corruption seed's key: ``'cloud@3/seed1'`` (:meth:`SweepPlan.key`).
SEED_KEY = '/seed'


def corruptions_on_top(where: str, entry: Mapping[str, Any], protocol: str, purpose: str
                       ) -> Tuple[Tuple[str, ...], Tuple[int, ...]]:
    """The ``corruptions`` and ``severities`` of an option entry whose conditions are also
    evaluated on corrupted images (a shift set, an attack): ``((), ())`` without
    corruptions.

    Args:
        where: the entry, as messages name it (``"shifts['vaihingen']"``).
        purpose: what the corruptions are for, ending the message about severities
            given without them (``'to evaluate on top of the set'``).

    Raises:
        SweepError: bad corruptions or severities, or severities without corruptions.
    """
    if entry.get('corruptions') is None:
        if entry.get('severities') is not None:
            raise SweepError(f'{where}: severities without corruptions; name the '
                             f'corruptions {purpose}')
        return (), ()
    try:
        return (tuple(select_corruptions(entry['corruptions'], protocol)),
                tuple(select_severities(entry.get('severities'))))
    except SweepError as error:
        raise SweepError(f'{where}: {error}') from None


class ConditionOnBase:
    """A condition that is something else (a shift set, an attack) evaluated on the clean
    image or on top of a corruption condition, ``base``.

    It stands beside :class:`~reobench_corruptions.condition.Condition` wherever condition
    records are written and read: a :attr:`key` (``'<prefix>/<label>'``, with
    ``'/<base key>'`` on a corrupted image), a file :attr:`tag` (``'<prefix>-<label>'``,
    with ``'_<base tag>'``), :meth:`settings` (written into its record and checked when it
    is reused); it is never clean. Subclasses (frozen dataclasses with a ``base`` field)
    set :attr:`prefix` and give :attr:`label` and :meth:`own_settings`.
    """
    #: the first part of the key and tag (``'shift'``, ``'adv'``)
    prefix: ClassVar[str] = ''
    base: Condition

    @property
    def label(self) -> str:
        """What is evaluated, in the key (``'vaihingen'``, ``'pgd_eps8'``)."""
        raise NotImplementedError

    def own_settings(self) -> Dict[str, Any]:
        """The settings of what is evaluated, before the base condition's."""
        raise NotImplementedError

    @property
    def is_clean(self) -> bool:
        return False

    @property
    def key(self) -> str:
        key = f'{self.prefix}/{self.label}'
        return key if self.base.is_clean else f'{key}/{self.base.key}'

    @property
    def tag(self) -> str:
        """The ``-`` keeps it apart from every corruption tag."""
        tag = f'{self.prefix}-{self.label}'
        return tag if self.base.is_clean else f'{tag}_{self.base.tag}'

    @property
    def seed(self) -> int:
        return self.base.seed

    @property
    def base_key(self) -> str:
        """The base condition's key (``'clean'``, ``'cloud@3'``)."""
        return self.base.key

    def settings(self) -> Dict[str, Any]:
        """The own settings, then the base condition's."""
        return dict(**self.own_settings(), **self.base.settings())

    def _identity(self) -> tuple:
        return (repr(sorted(self.own_settings().items())), ) + \
            tuple(self.base.settings().values())

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, type(self)):
            return self._identity() == other._identity()
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.prefix, self.label, self.base.pair))

    def __str__(self) -> str:
        return self.key


def select_corruptions(names: Optional[Sequence[str]], protocol: str = 'reobench') -> List[str]:
    """Corruption names and groups (``all``, ``environmental``, ``sensor``, ``geometric``,
    ``appearance``) expanded, in the order given; ``None`` is every corruption of the
    protocol.

    Raises:
        SweepError: unknown protocol or name (the message lists the valid ones), or an
            empty selection.
    """
    if protocol not in PROTOCOLS:
        raise SweepError(f'unknown protocol {protocol!r}; valid: {list(PROTOCOLS)}')
    if names is None:
        names = ['all']
    if isinstance(names, str):
        names = [names]
    names = list(names)
    valid = list_corruptions(protocol)
    unknown = [n for n in names if n not in valid and n not in GROUPS]
    if unknown:
        raise SweepError(f'unknown corruption name(s) {unknown} for protocol {protocol!r}; '
                         f'valid: {valid}; groups: {list(GROUPS)}')
    selected = _resolve_names(names, protocol) if names else []
    if not selected:
        raise SweepError('empty selection: no corruption to evaluate (give names or groups, '
                         f'e.g. {valid[:2]} or "all")')
    return selected


def select_severities(severities: Optional[Sequence[int]]) -> List[int]:
    """Severities 1..5, sorted and without duplicates (``None``: all five)."""
    if severities is None:
        return [1, 2, 3, 4, 5]
    out = []
    for severity in severities:
        try:
            severity = check_severity(severity, allow_zero=False)
        except ValueError as error:
            raise SweepError(f'{error}; the clean condition always runs') from None
        if severity not in out:
            out.append(severity)
    if not out:
        raise SweepError('empty selection: no severity to evaluate (give some of 1..5)')
    return sorted(out)


def sweep_conditions(corruptions: Sequence[str], severities: Sequence[int],
                     clean: Condition = CLEAN) -> List[Condition]:
    """The full condition list: ``clean`` first, then corruption by corruption, severity
    by severity, all with the seed, protocol and border of ``clean``."""
    return [clean] + [clean.with_corruption(c, s) for c in corruptions for s in severities]


def check_corruption_seeds(count: Any) -> int:
    """``count`` as the number of corruption seeds (1..:data:`MAX_CORRUPTION_SEEDS`)."""
    if isinstance(count, bool) or not isinstance(count, int) or \
            not 1 <= count <= MAX_CORRUPTION_SEEDS:
        raise SweepError(f'corruption_seeds must be an integer in 1..{MAX_CORRUPTION_SEEDS} '
                         f'(1: one draw of each random corruption), got {count!r}')
    return count


def parse_shard(shard: Union[None, str, Sequence[int]]) -> Optional[Tuple[int, int]]:
    """``'i/n'`` (or ``(i, n)``) -> ``(i, n)`` with ``0 <= i < n``; None stays None."""
    if shard is None:
        return None
    if isinstance(shard, str):
        index, sep, count = shard.partition('/')
        if not sep or not index.strip().isdigit() or not count.strip().isdigit():
            raise SweepError(f"a shard is 'i/n' (e.g. '0/4'), got {shard!r}")
        shard = (int(index), int(count))
    index, count = shard
    if count < 1 or not 0 <= index < count:
        raise SweepError(f'shard {index}/{count}: need n >= 1 and 0 <= i < n')
    return int(index), int(count)


def shard_conditions(conditions: Sequence[Condition],
                     shard: Optional[Tuple[int, int]]) -> List[Condition]:
    """Every n-th condition starting at i (all of them without a shard)."""
    if shard is None:
        return list(conditions)
    index, count = shard
    return list(conditions)[index::count]


def default_sweep_work_dir(config: str) -> str:
    """``work_dirs/robustness/<config file stem>``."""
    return osp.join('work_dirs', 'robustness', osp.splitext(osp.basename(config))[0])


@dataclass(frozen=True)
class SweepPlan:
    """What a robustness run evaluates: the selected corruptions and severities, the clean
    condition (whose seed, protocol and border every condition shares), the shard, and
    how many corruption seeds each random corruption is evaluated with.

    Build it with :meth:`create`, which validates everything.
    """
    corruptions: Tuple[str, ...]
    severities: Tuple[int, ...]
    clean: Condition
    shard: Optional[Tuple[int, int]] = None
    corruption_seeds: int = 1

    @classmethod
    def create(cls, corruptions: Union[None, str, Sequence[str]] = None,
               severities: Optional[Sequence[int]] = None, protocol: str = 'reobench',
               seed: int = 0, border: str = 'reflect',
               shard: Union[None, str, Sequence[int]] = None,
               corruption_seeds: int = 1) -> 'SweepPlan':
        """Validate and expand a selection.

        Raises:
            SweepError: an unknown protocol, name or group, a severity outside 1..5, an
                empty selection, a bad seed, border, shard or seed count (the message
                says what is valid).
        """
        selected = select_corruptions(corruptions, protocol)
        chosen = select_severities(severities)
        try:
            clean = Condition(seed=seed, protocol=protocol, border=border)
        except ValueError as error:
            raise SweepError(str(error)) from None
        return cls(tuple(selected), tuple(chosen), clean, parse_shard(shard),
                   check_corruption_seeds(corruption_seeds))

    @property
    def protocol(self) -> str:
        return self.clean.protocol

    @property
    def seed(self) -> int:
        return self.clean.seed

    @property
    def border(self) -> str:
        return self.clean.border

    @property
    def seeds(self) -> Tuple[int, ...]:
        """The corruption seeds of the random corruptions: ``seed .. seed + S - 1``."""
        return tuple(range(self.seed, self.seed + self.corruption_seeds))

    @property
    def random_corruptions(self) -> Tuple[str, ...]:
        """The selected corruptions that draw random numbers."""
        return tuple(n for n in self.corruptions
                     if get_corruption(n, self.protocol).stochastic)

    @property
    def seed_conditions(self) -> List[Condition]:
        """The random corruptions' conditions at the seeds after the first (corruption
        by corruption, severity by severity, seed by seed; empty with one seed)."""
        return [Condition(name, severity, seed, self.protocol, self.border)
                for name in self.random_corruptions for severity in self.severities
                for seed in self.seeds[1:]]

    def is_extra_seed(self, condition: Condition) -> bool:
        """Whether ``condition`` is one of :attr:`seed_conditions`."""
        return condition.seed != self.seed

    @property
    def all_conditions(self) -> List[Condition]:
        """Clean first, then corruption by corruption, severity by severity; then the
        :attr:`seed_conditions`."""
        return sweep_conditions(self.corruptions, self.severities, self.clean) + \
            self.seed_conditions

    @property
    def conditions(self) -> List[Condition]:
        """The shard's conditions (all of them without a shard)."""
        return shard_conditions(self.all_conditions, self.shard)

    def condition(self, value: Any) -> Condition:
        """``value`` as a condition of this plan: a pair (``('cloud', 3)``) or key
        (``'cloud@3'``) gets the plan's seed, protocol and border, a further corruption
        seed's key (``'cloud@3/seed1'``, :meth:`key`) that seed; a condition is taken as
        it is."""
        if isinstance(value, str) and SEED_KEY in value:
            key, _, seed = value.rpartition(SEED_KEY)
            if not seed.isdigit():
                raise SweepError(f'bad condition key {value!r}: a further corruption seed\'s '
                                 "key is '<corruption>@<severity>/seed<n>', e.g. "
                                 "'cloud@3/seed1'")
            return Condition.from_key(key, self.protocol, int(seed), self.border)
        return Condition.coerce(value, self.protocol, self.seed, self.border)

    def key(self, condition: Any) -> str:
        """The key of ``condition`` in this run: its own (``'cloud@3'``, ``'shift/x'``),
        with the seed for a further corruption seed's condition (``'cloud@3/seed1'``), so
        that each condition of the run has a key of its own."""
        if self.is_extra_seed(condition):
            return f'{condition.key}{SEED_KEY}{condition.seed}'
        return condition.key
