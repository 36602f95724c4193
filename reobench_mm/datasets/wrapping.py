"""What the package's dataset wrappers share."""
from __future__ import annotations

from typing import Union

from mmengine.dataset import BaseDataset
from mmengine.registry import DATASETS as MMENGINE_DATASETS

__all__ = ['build_inner_dataset']


def build_inner_dataset(dataset: Union[BaseDataset, dict]) -> BaseDataset:
    """The dataset a wrapper wraps: built from its config as MMEngine's wrappers build
    theirs (in the config's default scope), or taken as it is.

    Raises:
        TypeError: neither a config dict nor a ``BaseDataset``.
    """
    if isinstance(dataset, dict):
        return MMENGINE_DATASETS.build(dataset)
    if isinstance(dataset, BaseDataset):
        return dataset
    raise TypeError('dataset must be a config dict or a BaseDataset, got '
                    f'{type(dataset).__name__}')
