"""The training epoch of each sample, carried from the sampler to the pipeline.

A random training transform that must draw differently in every epoch, yet give the same
draws whatever the number of data-loader workers, the batch size or the start method,
cannot use the workers' random state (it depends on the worker count) nor an epoch
attribute set by a hook (persistent workers and the iteration-based loop's infinite
iterator never see it). The sampler, which runs in the main process, knows the epoch;
these two wrappers carry it with the index:

- :class:`EpochIndexSampler` wraps any sampler and yields ``index + epoch · N`` (``N``
  the dataset length): with an epoch-based sampler (MMEngine's ``DefaultSampler``) the
  epoch is the one ``set_epoch`` was given; with an infinite sampler (``InfiniteSampler``
  of iteration-based training) it is the pass through this rank's share of the data.
- :class:`EpochIndexedDataset` wraps any dataset, splits the packed index and adds the
  epoch to the sample's data info as ``data_epoch`` before the pipeline runs.

Config (both are needed; ``RandomCorruption`` refuses samples without ``data_epoch``)::

    train_dataloader = dict(
        sampler=dict(type='EpochIndexSampler',
                     sampler=dict(type='DefaultSampler', shuffle=True)),
        dataset=dict(type='EpochIndexedDataset', dataset=<the original dataset cfg>,
                     corruption=dict(type='RandomCorruption', corruptions='sensor')))

``corruption`` (optional) is placed into the wrapped dataset's training pipeline by the
placement rules (:func:`~reobench_mm.transforms.random_corruption.place_random_corruption`:
right after the loading steps, after the annotation loading when its pool holds a
geometric corruption), whatever the pipeline's own step order, so a corruption-aware twin
of any config (the toolboxes' own included) needs no hand-placed step.
"""
from __future__ import annotations

import copy
import logging
from typing import Any, Iterator, List, Optional, Union

from mmengine.dataset import BaseDataset, InfiniteSampler
from mmengine.dataset.base_dataset import force_full_init
from mmengine.dist import get_dist_info
from mmengine.logging import print_log
from mmengine.registry import DATA_SAMPLERS as MMENGINE_DATA_SAMPLERS

from ..registry import DATA_SAMPLERS, DATASETS
from ..transforms.placement import Placement, built_dataset_pipelines, dataset_pipelines
from ..transforms.random_corruption import (RandomCorruption, is_random_corruption,
                                            place_random_corruption)
from .wrapping import build_inner_dataset

__all__ = ['EpochIndexSampler', 'EpochIndexedDataset', 'pack_index', 'unpack_index',
           'EPOCH_KEY', 'EPOCH_DATASET_TYPES']

#: The data-info key :class:`EpochIndexedDataset` adds.
EPOCH_KEY = 'data_epoch'
#: ``type`` values that name :class:`EpochIndexedDataset` in a config.
EPOCH_DATASET_TYPES = ('EpochIndexedDataset', 'reobench_mm.EpochIndexedDataset')


def _place_corruption(dataset: Any, corruption: Any) -> List[Placement]:
    """Put a ``RandomCorruption`` config into every image-loading pipeline of a dataset
    config (edited in place) or built dataset (the step is built then)."""
    if not (isinstance(corruption, dict) and is_random_corruption(corruption)):
        raise ValueError('EpochIndexedDataset: corruption must be a RandomCorruption config, '
                         "e.g. dict(type='RandomCorruption', corruptions='sensor'), got "
                         f'{corruption!r}')
    if isinstance(dataset, dict):
        pipelines = [p for _, p in dataset_pipelines(dataset)]
        make = lambda: copy.deepcopy(corruption)  # noqa: E731
    else:
        pipelines = [p for _, p in built_dataset_pipelines(dataset)]
        options = {k: v for k, v in corruption.items() if k != 'type'}
        make = lambda: RandomCorruption(**copy.deepcopy(options))  # noqa: E731
    if not pipelines:
        raise ValueError('EpochIndexedDataset: the wrapped dataset has no pipeline with an '
                         'image-loading step to put the corruption into')
    placements = [place_random_corruption(pipeline, make()) for pipeline in pipelines]
    for placement in placements:
        print_log(f'EpochIndexedDataset: {placement.describe()}', logger='current')
    return placements


def pack_index(index: int, epoch: int, size: int) -> int:
    """``index + epoch · size`` (see :func:`unpack_index`)."""
    return int(index) + int(epoch) * int(size)


def unpack_index(packed: int, size: int) -> tuple:
    """``(index, epoch)`` of a packed index.

    Raises:
        IndexError: a negative index or an empty dataset.
    """
    if size <= 0:
        raise IndexError('the dataset is empty')
    if packed < 0:
        raise IndexError(f'negative index {packed}')
    epoch, index = divmod(int(packed), int(size))
    return index, epoch


@DATA_SAMPLERS.register_module()
class EpochIndexSampler:
    """A sampler that yields its inner sampler's indices packed with the epoch.

    Args:
        dataset: the dataset (given by the runner).
        sampler: config of the inner sampler (e.g. ``dict(type='DefaultSampler',
            shuffle=True)`` or ``dict(type='InfiniteSampler', shuffle=True)``); it is
            built with the same ``dataset`` and ``seed``.
        seed: the runner's seed (given by the runner).
    """

    def __init__(self, dataset: Any, sampler: dict, seed: Optional[int] = None) -> None:
        if not isinstance(sampler, dict) or 'type' not in sampler:
            raise ValueError('EpochIndexSampler needs sampler=dict(type=...), the sampler it '
                             "wraps, e.g. dict(type='DefaultSampler', shuffle=True); got "
                             f'{sampler!r}')
        self.dataset = dataset
        self.sampler = MMENGINE_DATA_SAMPLERS.build(
            copy.deepcopy(sampler), default_args=dict(dataset=dataset, seed=seed))
        self.epoch = 0

    @property
    def infinite(self) -> bool:
        """Whether the inner sampler never ends (iteration-based training)."""
        return isinstance(self.sampler, InfiniteSampler)

    def __iter__(self) -> Iterator[int]:
        size = len(self.dataset)
        if self.infinite:
            # InfiniteSampler deals position p of rank r the element r + p·world of one
            # stream of permutations of the N indices: its epoch is that element's // N
            rank, world_size = get_dist_info()
            for position, index in enumerate(self.sampler):
                yield pack_index(index, self.epoch + (rank + world_size * position) // size,
                                 size)
            return
        for index in self.sampler:
            yield pack_index(index, self.epoch, size)

    def __len__(self) -> int:
        return len(self.sampler)

    def set_epoch(self, epoch: int) -> None:
        """Set the epoch (the runner calls this before each epoch) here and in the inner
        sampler."""
        self.epoch = int(epoch)
        if hasattr(self.sampler, 'set_epoch'):
            self.sampler.set_epoch(epoch)


@DATASETS.register_module()
class EpochIndexedDataset:
    """A dataset that takes :class:`EpochIndexSampler`'s packed indices and puts the
    epoch into each sample's data info (key :data:`EPOCH_KEY`) before the pipeline.

    Like MMEngine's own wrappers it does not inherit from ``BaseDataset``; plain indices
    (``< len``) are epoch 0, so with a sampler other than :class:`EpochIndexSampler`
    every epoch gets the draws of epoch 0. A pipeline that returns ``None`` in training
    (a sample all of whose boxes were filtered out, a broken image) is retried on the
    next index, then the one after (up to ``max_refetch`` times), the same in every
    worker, instead of MMEngine's random retry.

    Args:
        dataset: the dataset to wrap (a ``BaseDataset``, or a wrapper of one such as
            ``FractionDataset``), or its config.
        corruption: a ``RandomCorruption`` config to place into the wrapped dataset's
            pipelines (see the module docstring); None leaves them as they are.
        lazy_init: defer :meth:`full_init` of the inner dataset.

    Raises:
        ValueError: ``corruption`` is not a ``RandomCorruption`` config, a pipeline has a
            corruption step already, or none has an image-loading step.
    """

    def __init__(self, dataset: Union[BaseDataset, dict], corruption: Optional[dict] = None,
                 lazy_init: bool = False) -> None:
        #: where ``corruption`` went, one per pipeline
        self.placements: List[Placement] = []
        if corruption is not None:
            dataset = copy.deepcopy(dataset) if isinstance(dataset, dict) else dataset
            self.placements = _place_corruption(dataset, corruption)
        self.dataset = build_inner_dataset(dataset)
        self._metainfo = self.dataset.metainfo
        self._fully_initialized = False
        if not lazy_init:
            self.full_init()

    @property
    def metainfo(self) -> dict:
        """The meta information of the inner dataset (a copy)."""
        return copy.deepcopy(self._metainfo)

    @property
    def base_dataset(self) -> BaseDataset:
        """The innermost dataset (through wrappers such as ``FractionDataset``): its
        pipeline, ``test_mode`` and ``max_refetch`` apply."""
        dataset = self.dataset
        while not isinstance(dataset, BaseDataset) and hasattr(dataset, 'dataset'):
            dataset = dataset.dataset
        return dataset

    @property
    def pipeline(self):
        """The innermost dataset's pipeline."""
        return self.base_dataset.pipeline

    def full_init(self) -> None:
        if self._fully_initialized:
            return
        self.dataset.full_init()
        self._fully_initialized = True

    @force_full_init
    def get_data_info(self, idx: int) -> dict:
        index, epoch = unpack_index(idx, len(self.dataset))
        info = self.dataset.get_data_info(index)
        info[EPOCH_KEY] = epoch
        return info

    @force_full_init
    def get_cat_ids(self, idx: int) -> List[int]:
        return self.dataset.get_cat_ids(unpack_index(idx, len(self.dataset))[0])

    def __getitem__(self, idx: int) -> Any:
        if not self._fully_initialized:
            print_log('Please call `full_init` method manually to accelerate the speed.',
                      logger='current', level=logging.WARNING)
            self.full_init()
        size = len(self.dataset)
        index, epoch = unpack_index(idx, size)
        base = self.base_dataset
        tries = 1 if base.test_mode else base.max_refetch + 1
        for attempt in range(tries):
            data = base.pipeline(self.get_data_info(
                pack_index((index + attempt) % size, epoch, size)))
            if data is not None:
                return data
        raise RuntimeError(f'the pipeline returned None for sample {index} and the '
                           f'{tries - 1} samples after it (epoch {epoch})')

    @force_full_init
    def __len__(self) -> int:
        return len(self.dataset)

    def __repr__(self) -> str:
        return f'{type(self).__name__}(dataset={type(self.dataset).__name__})'
