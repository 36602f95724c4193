"""What the package's dataset wrappers share."""
from __future__ import annotations

from typing import Any, Iterator, List, Optional, Union

from mmengine.dataset import BaseDataset
from mmengine.registry import DATASETS as MMENGINE_DATASETS

__all__ = ['build_inner_dataset', 'wrapped_datasets', 'innermost_datasets']


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


def _children(dataset: Any, configs_only: bool) -> Optional[List[Any]]:
    """What ``dataset`` (a config or a built dataset) wraps, as MMEngine's wrappers hold it:
    its ``dataset``, else its ``datasets`` (None: it wraps nothing). With
    ``configs_only``, only configs (dicts) are followed."""
    def get(key: str) -> Any:
        return dataset.get(key) if isinstance(dataset, dict) else getattr(dataset, key, None)

    def follows(item: Any) -> bool:
        return isinstance(item, dict) if configs_only else item is not None

    inner, many = get('dataset'), get('datasets')
    if follows(inner):
        return [inner]
    if isinstance(many, (list, tuple)) and many:
        return [item for item in many if follows(item)]
    return None


def wrapped_datasets(dataset: Any, configs_only: bool = False) -> Iterator[Any]:
    """``dataset`` and every dataset it wraps, outermost first (configs or built
    datasets; with ``configs_only``, configs only below ``dataset``)."""
    yield dataset
    for child in _children(dataset, configs_only) or []:
        yield from wrapped_datasets(child, configs_only)


def innermost_datasets(dataset: Any, configs_only: bool = False) -> List[Any]:
    """The datasets that list files: ``dataset`` itself when it wraps nothing, else those
    it wraps, recursively (see :func:`wrapped_datasets`)."""
    children = _children(dataset, configs_only)
    if children is None:
        return [dataset]
    return [leaf for child in children for leaf in innermost_datasets(child, configs_only)]
