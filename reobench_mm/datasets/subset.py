"""Deterministic subsets of a dataset: a fixed fraction of a training set, for
data-budget experiments (:class:`FractionDataset`), and a held-out split of an evaluation
set, for fitting a temperature on images that are then not evaluated
(:class:`HeldOutSplitDataset`).

:class:`FractionDataset` wraps any MMEngine dataset (segmentation or detection) and
keeps ``max(1, round(fraction * len(dataset)))`` of its samples::

    train_dataloader = dict(
        ...,
        dataset=dict(type='FractionDataset', dataset=<the original dataset cfg>,
                     fraction=0.1, seed=0))

The subset is chosen by drawing one permutation of all indices from
``numpy.random.default_rng(seed)`` and taking its first ``k`` entries (then sorted). The
permutation depends only on the seed and the dataset length, so for one seed the
subset of a smaller fraction is contained in the subset of every larger one: the
budgets of a sweep are nested, and the difference between two budgets is only the
added images. :func:`apply_data_fraction` wraps a config's training set in place.
"""
from __future__ import annotations

import copy
import logging
import math
import numbers
from typing import Any, List, Union

import numpy as np
from mmengine.config import Config
from mmengine.dataset import BaseDataset
from mmengine.dataset.base_dataset import force_full_init
from mmengine.logging import print_log

from ..registry import DATASETS, ensure_custom_imports
from .epoch import EPOCH_DATASET_TYPES
from .wrapping import build_inner_dataset

__all__ = ['FractionDataset', 'HeldOutSplitDataset', 'apply_data_fraction', 'check_fraction',
           'subset_size', 'subset_indices', 'held_out_indices', 'sample_stratum']

#: ``type`` values that name :class:`FractionDataset` in a config.
FRACTION_DATASET_TYPES = ('FractionDataset', 'reobench_mm.FractionDataset')
#: The module that registers :class:`FractionDataset` (added to ``custom_imports``).
SUBSET_MODULE = 'reobench_mm.datasets.subset'


def check_fraction(fraction: Any) -> float:
    """``fraction`` as a float in (0, 1].

    Raises:
        ValueError: not a real number (booleans included), not finite, or outside (0, 1].
    """
    if isinstance(fraction, bool) or not isinstance(fraction, numbers.Real):
        raise ValueError(f'fraction must be a number in (0, 1], got {fraction!r}')
    fraction = float(fraction)
    if not math.isfinite(fraction) or not 0.0 < fraction <= 1.0:
        raise ValueError(f'fraction must be in (0, 1] (e.g. 0.1 for 10% of the training '
                         f'set, 1 for all of it), got {fraction!r}')
    return fraction


def _check_seed(seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f'seed must be a non-negative integer, got {seed!r}')
    return int(seed)


def subset_size(num_items: int, fraction: float) -> int:
    """``max(1, round(fraction * num_items))`` (Python's ``round``: halves go to even).

    Raises:
        ValueError: ``num_items < 1`` or a bad fraction.
    """
    fraction = check_fraction(fraction)
    if num_items < 1:
        raise ValueError(f'cannot take a fraction of an empty dataset (length {num_items})')
    return max(1, round(fraction * num_items))


def subset_indices(num_items: int, fraction: float, seed: int = 0) -> List[int]:
    """The sorted indices kept by :class:`FractionDataset`: the first
    :func:`subset_size` entries of ``default_rng(seed).permutation(num_items)``."""
    size = subset_size(num_items, fraction)
    permutation = np.random.default_rng(_check_seed(seed)).permutation(num_items)
    return np.sort(permutation[:size]).tolist()


@DATASETS.register_module()
class FractionDataset:
    """A deterministic fraction of a dataset.

    Like MMEngine's own wrappers (``ClassBalancedDataset``, ``RepeatDataset``) it does
    not inherit from ``BaseDataset``; the inner dataset is built from its config with
    the ``DATASETS`` registry and the subset is chosen in :meth:`full_init` (at once,
    or when the data loader asks for it with ``lazy_init=True``).

    Args:
        dataset: the dataset to take the fraction of, or its config.
        fraction: share of the samples to keep, in (0, 1]; the subset has
            ``max(1, round(fraction * len(dataset)))`` samples.
        seed: seed of the permutation (non-negative int). One seed gives nested subsets:
            the samples of a smaller fraction are among those of a larger one.
        lazy_init: choose the subset (and fully initialise the inner dataset) only when
            first needed.

    Raises:
        ValueError: a fraction outside (0, 1], a bad seed, or an empty inner dataset.
        TypeError: ``dataset`` is neither a config dict nor a ``BaseDataset``.
    """

    def __init__(self, dataset: Union[BaseDataset, dict], fraction: float, seed: int = 0,
                 lazy_init: bool = False) -> None:
        self.fraction = check_fraction(fraction)
        self.seed = _check_seed(seed)
        self.dataset = build_inner_dataset(dataset)
        self._metainfo = self.dataset.metainfo
        self._indices: List[int] = []
        self._fully_initialized = False
        if not lazy_init:
            self.full_init()

    @property
    def metainfo(self) -> dict:
        """The meta information of the inner dataset (a copy)."""
        return copy.deepcopy(self._metainfo)

    def full_init(self) -> None:
        """Fully initialise the inner dataset and choose the subset."""
        if self._fully_initialized:
            return
        self.dataset.full_init()
        self._indices = subset_indices(len(self.dataset), self.fraction, self.seed)
        self._fully_initialized = True

    @property
    @force_full_init
    def indices(self) -> List[int]:
        """The kept indices of the inner dataset, sorted (a copy)."""
        return list(self._indices)

    @property
    @force_full_init
    def full_len(self) -> int:
        """The length of the inner dataset."""
        return len(self.dataset)

    def _inner_index(self, idx: int) -> int:
        return self._indices[idx]

    @force_full_init
    def get_data_info(self, idx: int) -> dict:
        """The data info of the ``idx``-th kept sample."""
        return self.dataset.get_data_info(self._inner_index(idx))

    @force_full_init
    def get_cat_ids(self, idx: int) -> List[int]:
        """The category ids of the ``idx``-th kept sample (for class-aware samplers)."""
        return self.dataset.get_cat_ids(self._inner_index(idx))

    def __getitem__(self, idx: int) -> Any:
        if not self._fully_initialized:
            print_log('Please call `full_init` method manually to accelerate the speed.',
                      logger='current', level=logging.WARNING)
            self.full_init()
        return self.dataset[self._inner_index(idx)]

    @force_full_init
    def __len__(self) -> int:
        return len(self._indices)

    def __repr__(self) -> str:
        size = len(self._indices) if self._fully_initialized else 'not initialised'
        return (f'{type(self).__name__}(fraction={self.fraction}, seed={self.seed}, '
                f'size={size}, dataset={type(self.dataset).__name__})')


def _is_fraction_dataset(dataset_cfg: Any) -> bool:
    kind = dataset_cfg.get('type') if isinstance(dataset_cfg, dict) else None
    return kind in FRACTION_DATASET_TYPES or kind is FractionDataset


def _contains_fraction_dataset(dataset_cfg: Any) -> bool:
    """Whether ``dataset_cfg`` or a dataset it wraps (``dataset=``/``datasets=``) is a
    :class:`FractionDataset`."""
    if not isinstance(dataset_cfg, dict):
        return False
    if _is_fraction_dataset(dataset_cfg):
        return True
    inner = [dataset_cfg.get('dataset')] + list(dataset_cfg.get('datasets') or [])
    return any(_contains_fraction_dataset(d) for d in inner)


def apply_data_fraction(cfg: Config, fraction: float, seed: int = 0) -> Config:
    """Wrap ``cfg.train_dataloader.dataset`` (the dataset inside it when it is an
    ``EpochIndexedDataset``) in a :class:`FractionDataset` (in place; returns ``cfg``)
    and add this module to ``custom_imports`` so that a dumped config builds on its own.

    Raises:
        ValueError: a bad fraction or seed, no ``train_dataloader.dataset``, or a training
            set that already holds a ``FractionDataset`` (no double wrapping).
    """
    fraction, seed = check_fraction(fraction), _check_seed(seed)
    loader = cfg.get('train_dataloader')
    if not isinstance(loader, dict) or not isinstance(loader.get('dataset'), dict):
        raise ValueError('the config has no train_dataloader.dataset to take a fraction of')
    if _contains_fraction_dataset(loader.dataset):
        raise ValueError('train_dataloader.dataset already holds a FractionDataset; '
                         'set its fraction instead of wrapping it again')
    # inside an EpochIndexedDataset, whose packed indices only it can read
    holder = loader.dataset if loader.dataset.get('type') in EPOCH_DATASET_TYPES else loader
    holder['dataset'] = dict(type='FractionDataset', dataset=holder['dataset'],
                             fraction=fraction, seed=seed)
    ensure_custom_imports(cfg, SUBSET_MODULE)
    return cfg


# ----------------------------------------------------------------------------- held-out split

#: The parts of a :class:`HeldOutSplitDataset`.
SPLIT_PARTS = ('held_out', 'rest')


def sample_stratum(info: dict) -> Any:
    """The stratum of a sample for a stratified split: the most frequent value of its
    label map (``seg_map_path``, read as stored; ties: the smallest value), else the most
    frequent label of its ``instances`` (ties: the smallest), else ``None`` (one stratum).

    Raises:
        ValueError: a label map that cannot be read.
    """
    path = info.get('seg_map_path')
    if isinstance(path, str):
        import cv2
        label = cv2.imread(path, cv2.IMREAD_UNCHANGED)
        if label is None:
            raise ValueError(f'cannot read the label map {path!r} to stratify the split')
        values, counts = np.unique(label, return_counts=True)
        return int(values[np.argmax(counts)])
    labels = [inst.get('bbox_label') for inst in info.get('instances') or []
              if isinstance(inst, dict) and inst.get('bbox_label') is not None]
    if labels:
        values, counts = np.unique(np.asarray(labels), return_counts=True)
        return int(values[np.argmax(counts)])
    return None


def held_out_indices(strata: List[Any], size: int, seed: int = 0) -> List[int]:
    """The sorted indices of a seeded, stratified held-out split of ``size`` samples.

    Each stratum gets its share of ``size`` in proportion to its number of samples (the
    shares rounded down, the samples left over going to the strata with the largest
    remainders, ties to the larger and then the earlier stratum); within a stratum the
    samples are the first of a permutation drawn from ``default_rng(seed)``. The strata
    are visited in order of first appearance, each drawing its permutation in turn, so the
    split depends only on the seed and the strata of the samples in dataset order.

    Raises:
        ValueError: a bad seed, or a size outside ``1 .. len(strata) - 1``.
    """
    seed = _check_seed(seed)
    count = len(strata)
    if isinstance(size, bool) or not isinstance(size, numbers.Integral) or \
            not 1 <= size < count:
        raise ValueError(f'a held-out split needs 1 <= size < {count} (the number of samples '
                         f'of the dataset, which must keep at least one), got {size!r}')
    groups: dict = {}
    for index, stratum in enumerate(strata):
        groups.setdefault(stratum, []).append(index)
    members = list(groups.values())
    exact = [size * len(m) / count for m in members]
    shares = [math.floor(e) for e in exact]
    order = sorted(range(len(members)), key=lambda i: (-(exact[i] - shares[i]),
                                                       -len(members[i]), i))
    for i in order[:size - sum(shares)]:
        shares[i] += 1
    rng = np.random.default_rng(seed)
    chosen: List[int] = []
    for group, share in zip(members, shares):
        permutation = rng.permutation(len(group))
        chosen.extend(group[j] for j in permutation[:share])
    return sorted(chosen)


@DATASETS.register_module()
class HeldOutSplitDataset:
    """One part of a seeded, stratified split of a dataset into ``size`` held-out samples
    and the rest (:func:`held_out_indices` over :func:`sample_stratum`).

    With ``part='rest'`` for the evaluated set and ``part='held_out'`` for, e.g., fitting
    a temperature, the two parts are disjoint and together the whole dataset. The
    calibration study this package follows holds out 400 images of the evaluation set.

    Args:
        dataset: the dataset to split, or its config (built in the config's scope).
        size: the number of held-out samples (1 .. len - 1).
        seed: seed of the split.
        part: ``'rest'`` or ``'held_out'``.
        stratify: stratify by :func:`sample_stratum` (reads each sample's label map
            once); ``False`` draws from all samples at once.

    Raises:
        ValueError: a bad size, seed or part.
        TypeError: ``dataset`` is neither a config dict nor a ``BaseDataset``.
    """

    def __init__(self, dataset: Union[BaseDataset, dict], size: int, seed: int = 0,
                 part: str = 'rest', stratify: bool = True) -> None:
        if part not in SPLIT_PARTS:
            raise ValueError(f'part must be one of {SPLIT_PARTS}, got {part!r}')
        self.size, self.seed, self.part = size, _check_seed(seed), part
        self.stratify = bool(stratify)
        self.dataset = build_inner_dataset(dataset)
        self.dataset.full_init()
        count = len(self.dataset)
        strata = [sample_stratum(self.dataset.get_data_info(i)) if self.stratify else None
                  for i in range(count)]
        #: the held-out indices of the inner dataset, sorted
        self.held_out = held_out_indices(strata, size, self.seed)
        kept = set(self.held_out)
        self._indices = self.held_out if part == 'held_out' else \
            [i for i in range(count) if i not in kept]
        self._metainfo = self.dataset.metainfo

    @property
    def metainfo(self) -> dict:
        """The meta information of the inner dataset (a copy)."""
        return copy.deepcopy(self._metainfo)

    @property
    def pipeline(self):
        """The inner dataset's pipeline (the samples are the inner dataset's)."""
        return self.dataset.pipeline

    @property
    def indices(self) -> List[int]:
        """The indices of this part in the inner dataset, sorted (a copy)."""
        return list(self._indices)

    def full_init(self) -> None:
        """Nothing to do: the split is chosen on construction."""

    def get_data_info(self, idx: int) -> dict:
        return self.dataset.get_data_info(self._indices[idx])

    def __getitem__(self, idx: int) -> Any:
        return self.dataset[self._indices[idx]]

    def __len__(self) -> int:
        return len(self._indices)

    def __repr__(self) -> str:
        return (f'{type(self).__name__}(part={self.part!r}, size={self.size}, '
                f'seed={self.seed}, len={len(self)}, dataset={type(self.dataset).__name__})')
