"""Decode each test image once for all the conditions of a sweep.

A sweep runs the same test pipeline once per condition; only the steps from
``ApplyCorruption`` on change between conditions. :class:`DecodedSampleCache` replaces
the loading steps in front of the corruption (image and annotation loading and box-type
conversions, which are deterministic) by a cache of their outputs, keyed by sample index
and image path.
:func:`cache_loading_steps` installs it in a built dataset and fills it once in the main
process, so that the dataloader workers forked for each condition inherit the decoded
images instead of decoding them again. The cache stops growing at ``max_bytes``; the
samples beyond are decoded as before.
"""
from __future__ import annotations

import copy
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..transforms.placement import is_loading_name

__all__ = ['DecodedSampleCache', 'cache_loading_steps', 'DEFAULT_MAX_BYTES']

#: The default memory bound of the cache (the ``decode_cache_bytes`` option).
DEFAULT_MAX_BYTES = 2 * 1024**3


def _nbytes(obj: Any) -> int:
    """Bytes of the arrays and tensors in a results dict (the rest is small)."""
    if isinstance(obj, np.ndarray):
        return obj.nbytes
    if isinstance(obj, dict):
        return sum(_nbytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_nbytes(v) for v in obj)
    tensor = getattr(obj, 'tensor', obj)  # box structures keep a tensor
    if hasattr(tensor, 'element_size') and hasattr(tensor, 'nelement'):
        return tensor.element_size() * tensor.nelement()
    return 0


class DecodedSampleCache:
    """The loading steps of a pipeline, with their outputs cached per sample.

    Args:
        steps: the loading transforms it replaces (run in order on a miss).
        max_bytes: stop adding samples beyond this many bytes of arrays.

    Each call returns a deep copy, so the steps after it may change the results
    in place.
    """

    def __init__(self, steps: Sequence[Callable], max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if not steps:
            raise ValueError('DecodedSampleCache needs at least one loading step')
        self.steps = list(steps)
        self.max_bytes = int(max_bytes)
        self.store: Dict[Tuple[Any, Any], dict] = {}
        self.nbytes = 0
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(results: dict) -> Tuple[Any, Any]:
        return results.get('sample_idx'), results.get('img_path')

    def __call__(self, results: dict) -> Optional[dict]:
        key = self.key(results)
        cached = self.store.get(key)
        if cached is not None:
            self.hits += 1
            return copy.deepcopy(cached)
        self.misses += 1
        for step in self.steps:
            results = step(results)
            if results is None:
                return None
        size = _nbytes(results)
        if key != (None, None) and self.nbytes + size <= self.max_bytes:
            self.store[key] = copy.deepcopy(results)
            self.nbytes += size
        return results

    def __repr__(self) -> str:
        return (f'{type(self).__name__}(steps={[type(s).__name__ for s in self.steps]}, '
                f'samples={len(self.store)}, nbytes={self.nbytes})')


def cache_loading_steps(dataset: Any, corruption_steps: Sequence[Any],
                        max_bytes: int = DEFAULT_MAX_BYTES, fill: bool = True
                        ) -> List[DecodedSampleCache]:
    """Replace the loading steps in front of each ``ApplyCorruption`` of ``dataset``'s
    pipeline by a :class:`DecodedSampleCache` and (with ``fill``) decode every sample
    once now, in this process. Returns the caches installed (none when the pipeline
    does not start with loading steps)."""
    pipeline = getattr(dataset, 'pipeline', None)
    transforms = getattr(pipeline, 'transforms', None)
    if not isinstance(transforms, list):
        return []
    wanted = {id(step) for step in corruption_steps}
    positions = [i for i, t in enumerate(transforms) if id(t) in wanted]
    if not positions:
        return []
    prefix = 0
    while prefix < positions[0] and is_loading_name(type(transforms[prefix]).__name__):
        prefix += 1
    if prefix == 0:
        return []
    cache = DecodedSampleCache(transforms[:prefix], max_bytes)
    transforms[:prefix] = [cache]
    if fill and hasattr(dataset, 'get_data_info'):
        for index in range(len(dataset)):
            if cache.nbytes >= cache.max_bytes:
                break
            cache(dataset.get_data_info(index))
    return [cache]
