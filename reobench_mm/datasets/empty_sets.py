"""Why a dataset found no samples, in words: where it looked and what is there.

MMEngine fails to build a dataset whose file listing is empty with NumPy's ``need at
least one array to concatenate`` (``BaseDataset._serialize_data``), which says neither
that the set is empty nor why. :func:`empty_set_reason` builds the dataset config again
without loading it (``lazy_init=True``) to read the folder it lists and the suffix it
wants, and looks there: a folder that does not exist, an empty one, or one holding files
of another suffix (``.jpg`` where the dataset reads ``.png``) is said so, with the option
to change.
"""
from __future__ import annotations

import collections
import os
import os.path as osp
from typing import Any, Dict, Optional

from .wrapping import innermost_datasets

__all__ = ['empty_set_reason', 'is_empty_set_error', 'EMPTY_SET_ERROR']

#: What NumPy (through MMEngine's ``BaseDataset``) says of a dataset without samples.
EMPTY_SET_ERROR = 'need at least one array to concatenate'


def is_empty_set_error(error: BaseException) -> bool:
    """Whether ``error`` is MMEngine's failure to build a dataset without samples."""
    return EMPTY_SET_ERROR in str(error)


def _lazy(cfg: Any) -> Any:
    """The dataset of ``cfg`` built without listing its files (a built one as it is),
    or None when it cannot be."""
    if not isinstance(cfg, dict):
        return cfg
    from mmengine.registry import DATASETS
    try:
        return DATASETS.build(dict(cfg, lazy_init=True))
    except Exception:  # the reason stays generic: the caller's message is kept
        return None


def _suffix_counts(folder: str, limit: int = 20000) -> Dict[str, int]:
    """``{suffix: files}`` under ``folder`` (recursively, as MMSeg lists it; the first
    ``limit`` files)."""
    counts: Dict[str, int] = collections.Counter()
    seen = 0
    for _, _, names in os.walk(folder):
        for name in names:
            counts[osp.splitext(name)[1].lower() or '(no suffix)'] += 1
            seen += 1
            if seen >= limit:
                return dict(counts)
    return dict(counts)


def _folder_reason(folder: str, suffix: Optional[str], option: str) -> Optional[str]:
    if not osp.isdir(folder):
        return f'its image folder {folder} does not exist'
    counts = _suffix_counts(folder)
    if not counts:
        return f'its image folder {folder} is empty'
    if suffix is None or counts.get(suffix.lower()):
        return None
    found = ', '.join(f'{n} {s!r}' for s, n in sorted(counts.items(), key=lambda i: -i[1]))
    usual = max(counts, key=counts.get)
    return (f"its image folder {folder} holds no {suffix!r} files ({found} files): set "
            f"{option}={usual!r}?")


def _dataset_reason(dataset: Any) -> Optional[str]:
    prefix = getattr(dataset, 'data_prefix', None) or {}
    folder = prefix.get('img_path') if isinstance(prefix, dict) else None
    ann_file = getattr(dataset, 'ann_file', None)
    if ann_file and not osp.exists(ann_file):
        return f'its ann_file {ann_file} does not exist'
    if ann_file and osp.isfile(ann_file) and osp.getsize(ann_file) == 0:
        return f'its ann_file {ann_file} is empty'
    if isinstance(folder, str) and '://' not in folder:
        suffix = getattr(dataset, 'img_suffix', None)
        return _folder_reason(folder, suffix if isinstance(suffix, str) else None,
                              'img_suffix')
    return None


def empty_set_reason(dataset: Any) -> str:
    """Where ``dataset`` (a config, wrappers included, or a built dataset) looked for
    samples and what is there, as the end of a sentence: ``'its image folder
    data/x/img_dir/val holds no '.png' files (6 '.jpg' files): set img_suffix='.jpg'?'``;
    a generic hint when nothing more can be said."""
    reasons = []
    for cfg in innermost_datasets(dataset):
        built = _lazy(cfg)
        reason = _dataset_reason(built) if built is not None else None
        if reason is not None and reason not in reasons:
            reasons.append(reason)
    return '; '.join(reasons) if reasons else \
        'check its data_root, data_prefix and ann_file'
