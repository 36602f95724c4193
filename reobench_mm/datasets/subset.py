"""A fixed fraction of a training set, for data-budget experiments.

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
from mmengine.registry import DATASETS as MMENGINE_DATASETS

from ..registry import DATASETS, ensure_custom_imports

__all__ = ['FractionDataset', 'apply_data_fraction', 'check_fraction', 'subset_size',
           'subset_indices']

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
        if isinstance(dataset, dict):
            # built like MMEngine's wrappers do: in the config's default scope
            self.dataset = MMENGINE_DATASETS.build(dataset)
        elif isinstance(dataset, BaseDataset):
            self.dataset = dataset
        else:
            raise TypeError('dataset must be a config dict or a BaseDataset, got '
                            f'{type(dataset).__name__}')
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
    """Wrap ``cfg.train_dataloader.dataset`` in a :class:`FractionDataset` (in place;
    returns ``cfg``) and add this module to ``custom_imports`` so that a dumped config
    builds on its own.

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
    loader.dataset = dict(type='FractionDataset', dataset=loader.dataset, fraction=fraction,
                          seed=seed)
    ensure_custom_imports(cfg, SUBSET_MODULE)
    return cfg
