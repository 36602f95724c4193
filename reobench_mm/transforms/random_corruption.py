"""``RandomCorruption``: corruption-aware training, one random condition per sample.

Per sample and epoch it draws whether to corrupt (``prob``), which corruption (uniformly
from the pool) and which severity (uniformly from ``severities``), then applies that
condition exactly as :class:`~.corruption.ApplyCorruption` does (it *is* an
``ApplyCorruption`` switched per sample: the same engine, the same placement checks, the
same label moving for geometric corruptions).

Every draw is a function of ``(seed, the sample's file name, the epoch)`` only (SHA-256
seeded generators, :func:`~reobench_corruptions.base.make_rng`), so a run gives the
same images whatever the number of workers, the batch size or the order. The epoch
comes from :class:`~reobench_mm.datasets.epoch.EpochIndexSampler` and
:class:`~reobench_mm.datasets.epoch.EpochIndexedDataset` (``data_epoch`` in the data
info); without them the transform refuses to run unless ``per_epoch=False`` (then each
sample gets the same condition in every epoch).
"""
from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Union

from reobench_corruptions import get_corruption
from reobench_corruptions.base import check_severity, make_rng, resolve_corruptions
from reobench_corruptions.condition import Condition
from ..registry import TRANSFORMS
from .corruption import ApplyCorruption, ApplyCorruptionToLabels
from .placement import (LABEL_STEP_TYPE, Placement, corruption_position, inner_steps,
                        is_corruption_step, place_label_step, transform_name)

__all__ = ['RandomCorruption', 'training_corruptions', 'RANDOM_CORRUPTION_TYPES', 'pool_of',
           'is_random_corruption', 'place_random_corruption']

#: ``type`` values that name :class:`RandomCorruption` in a config.
RANDOM_CORRUPTION_TYPES = ('RandomCorruption', 'reobench_mm.RandomCorruption')
#: The data-info key of the epoch (see :mod:`reobench_mm.datasets.epoch`).
_EPOCH_KEY = 'data_epoch'


def _check_probability(prob: Any) -> float:
    if isinstance(prob, bool) or not isinstance(prob, (int, float)) or not 0.0 <= prob <= 1.0:
        raise ValueError(f'prob must be a number in [0, 1] (the chance that a sample is '
                         f'corrupted), got {prob!r}')
    return float(prob)


@TRANSFORMS.register_module()
class RandomCorruption(ApplyCorruption):
    """Corrupt each training sample with a condition drawn from a pool.

    Place it where :class:`~.corruption.ApplyCorruption` goes: right after image loading
    (after ``LoadAnnotations`` when the pool holds a geometric corruption), before any
    resizing, cropping or photometric step.

    Required Keys: those of :class:`~.corruption.ApplyCorruption`, plus ``data_epoch``
    (added by :class:`~reobench_mm.datasets.epoch.EpochIndexedDataset`) unless
    ``per_epoch=False``.

    Modified Keys / Added Keys: as :class:`~.corruption.ApplyCorruption` (``corruption``
    and ``severity`` say what this sample got, ``'clean'`` and 0 when it was left clean).

    Args:
        corruptions: names and groups (``'all'``, ``'environmental'``, ``'sensor'``,
            ``'geometric'``, ``'appearance'``) of ``protocol`` forming the pool.
        severities: the severities to draw from (each in 1..5).
        prob: chance that a sample is corrupted at all (else it stays clean).
        seed: seed of every draw (an integer >= 0).
        per_epoch: draw anew in every epoch (needs the epoch wrappers, see the module
            docstring); False keeps each sample's condition fixed for the whole run.
        protocol, border, box_policy, angle_version, ignore_index, channel_order,
        max_value, allow_resized, corruption_options: as
            :class:`~.corruption.ApplyCorruption`.
    """

    def __init__(self, corruptions: Union[str, Sequence[str]] = 'all',
                 severities: Sequence[int] = (1, 2, 3, 4, 5), prob: float = 0.5,
                 seed: int = 0, per_epoch: bool = True, protocol: str = 'reobench',
                 border: str = 'reflect', box_policy: str = 'reference',
                 angle_version: str = 'le90', ignore_index: int = 255,
                 channel_order: str = 'bgr', max_value: Optional[float] = None,
                 allow_resized: bool = False,
                 corruption_options: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__(seed=seed, protocol=protocol, border=border, box_policy=box_policy,
                         angle_version=angle_version, ignore_index=ignore_index,
                         channel_order=channel_order, max_value=max_value,
                         allow_resized=allow_resized, corruption_options=corruption_options)
        self.pool: List[str] = resolve_corruptions(corruptions, protocol)
        if not self.pool:
            raise ValueError(f'corruptions {corruptions!r} select no corruption of protocol '
                             f'{protocol!r}')
        if isinstance(severities, int) or not isinstance(severities, Iterable):
            raise ValueError(f'severities must be a list of severities in 1..5, got '
                             f'{severities!r}')
        self.severities: List[int] = sorted({check_severity(s, allow_zero=False)
                                             for s in severities})
        if not self.severities:
            raise ValueError('severities is empty; give at least one of 1..5')
        self.prob = _check_probability(prob)
        if not isinstance(per_epoch, bool):
            raise ValueError(f'per_epoch must be True or False, got {per_epoch!r}')
        self.per_epoch = per_epoch
        self._base = Condition(seed=seed, protocol=protocol, border=border)

    def epoch_of(self, results: dict) -> int:
        """The sample's epoch (0 with ``per_epoch=False``).

        Raises:
            RuntimeError: ``per_epoch`` and no ``data_epoch`` in the sample.
        """
        if not self.per_epoch:
            return 0
        if _EPOCH_KEY not in results:
            raise RuntimeError(
                'RandomCorruption draws per sample and epoch, but the sample has no '
                f"{_EPOCH_KEY!r}: wrap the training set as dict(type='EpochIndexedDataset', "
                "dataset=...) and its sampler as dict(type='EpochIndexSampler', "
                "sampler=dict(type='DefaultSampler', shuffle=True)) (InfiniteSampler for "
                'iteration-based training), or set per_epoch=False to keep one condition '
                'per sample for the whole run')
        return int(results[_EPOCH_KEY])

    def draw_key(self, results: dict) -> str:
        """``'<file name>|epoch=<e>'``: keys both the condition drawn and the
        corruption's own random draws."""
        return f'{self.sample_key(results)}|epoch={self.epoch_of(results)}'

    def draw(self, results: dict) -> Condition:
        """The condition of this sample in this epoch (a pure function of the seed, the
        sample's key and the epoch)."""
        if self.sample_key(results) is None:
            self.set_condition(self._base)  # check_sample names the missing key
            raise RuntimeError('RandomCorruption: the sample has neither img_path nor '
                               'sample_idx, which key its random draws')
        rng = make_rng(self.seed, 'random_corruption', 0, self.draw_key(results))
        corrupt, which, level = rng.random(), rng.integers(len(self.pool)), \
            rng.integers(len(self.severities))
        if corrupt >= self.prob:
            return self._base
        return Condition(self.pool[which], self.severities[level], self.seed, self.protocol,
                         self.border)

    def transform(self, results: dict) -> dict:
        self.set_condition(self.draw(results))
        return super().transform(results)

    def _what(self) -> str:
        return f'RandomCorruption (drawn: {self.corruption!r}, severity {self.severity})'

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(corruptions={self.pool!r}, '
                f'severities={self.severities}, prob={self.prob}, seed={self.seed}, '
                f'per_epoch={self.per_epoch}, protocol={self.protocol!r}, '
                f'border={self.border!r}, box_policy={self.box_policy!r}, '
                f'corruption_options={self.corruption_options!r})')


def _pipelines(dataset_cfg: Any) -> Iterable[list]:
    """Every pipeline of a dataset config and the datasets it wraps (the corruption step
    a wrapper places, ``EpochIndexedDataset(corruption=...)``, as a pipeline of its own)."""
    if not isinstance(dataset_cfg, Mapping):
        return
    if isinstance(dataset_cfg.get('pipeline'), (list, tuple)):
        yield list(dataset_cfg['pipeline'])
    if isinstance(dataset_cfg.get('corruption'), Mapping):
        yield [dataset_cfg['corruption']]
    inner = [dataset_cfg.get('dataset')] + list(dataset_cfg.get('datasets') or [])
    for child in inner:
        yield from _pipelines(child)


def _steps(steps: Any) -> Iterable[Mapping]:
    """Every step config of a pipeline, those inside wrapper steps (``RandomApply``,
    ``RandomChoice``: ``transforms``, possibly a list of lists) included."""
    if isinstance(steps, Mapping):
        yield steps
        yield from _steps(steps.get('transforms'))
    elif isinstance(steps, (list, tuple)):
        for step in steps:
            yield from _steps(step)


def pool_of(step: Any) -> List[str]:
    """The corruption pool of a ``RandomCorruption`` step (a config dict or built)."""
    if isinstance(step, RandomCorruption):
        return list(step.pool)
    return resolve_corruptions(step.get('corruptions', 'all'), step.get('protocol', 'reobench'))


def is_random_corruption(step: Any) -> bool:
    """Whether ``step`` (a config dict or a transform) is a ``RandomCorruption``."""
    if isinstance(step, Mapping):
        return step.get('type') in RANDOM_CORRUPTION_TYPES + (RandomCorruption, )
    return isinstance(step, RandomCorruption)


def training_corruptions(cfg: Any) -> Dict[str, List[str]]:
    """The corruptions a config's training pipeline can apply, by protocol: the pools
    of its :class:`RandomCorruption` steps (``{}`` when it has none), read from
    ``cfg['train_dataloader']['dataset']`` and the datasets it wraps (``cfg``: an
    MMEngine ``Config`` or a dict)."""
    loader = cfg.get('train_dataloader') if hasattr(cfg, 'get') else None  # Config too
    pools: Dict[str, List[str]] = {}
    if not isinstance(loader, Mapping):
        return pools
    for pipeline in _pipelines(loader.get('dataset')):
        for step in _steps(pipeline):
            if not is_random_corruption(step):
                continue
            protocol = step.get('protocol', 'reobench')
            names = pool_of(step)
            known = pools.setdefault(protocol, [])
            known.extend(n for n in names if n not in known)
    return pools


def place_random_corruption(pipeline: list, step: Any) -> Placement:
    """Insert a ``RandomCorruption`` step (config or built) into a training pipeline
    (config list or built transform list, edited in place) where the placement rules of
    :mod:`~reobench_mm.transforms.placement` put a corruption step: right after the image
    loading and the loading steps that directly follow it, before any resize, crop, flip
    or photometric step, in the pipeline's own order (with a pool holding a geometric
    corruption and annotations loaded later, with the label step after them too).

    Raises:
        ValueError: the pipeline has a corruption step already (``RandomCorruption`` or
            ``ApplyCorruption``, nested ones included) or no image loading.
    """
    found = [transform_name(s) for s in pipeline
             if is_random_corruption(s) or is_corruption_step(s)
             or any(is_random_corruption(i) or is_corruption_step(i)
                    for i in inner_steps(s))]
    if found:
        raise ValueError(f'the training pipeline already has a corruption step '
                         f'({", ".join(found)}): give the corruption either in the pipeline '
                         'or to the dataset wrapper, not both')
    protocol = step.get('protocol', 'reobench') if isinstance(step, Mapping) \
        else step.protocol
    geometric = any(get_corruption(n, protocol).moves_labels for n in pool_of(step))
    names = [transform_name(s) for s in pipeline]
    index = corruption_position(names)
    pipeline.insert(index, step)
    label_index = None
    if geometric:
        label_index = place_label_step(pipeline, step, (
            (lambda: dict(type=LABEL_STEP_TYPE)) if isinstance(step, Mapping)
            else ApplyCorruptionToLabels))
    return Placement(index, tuple(transform_name(s) for s in pipeline), inserted=True,
                     label_index=label_index)
