"""Corrupted test sets read from files: REOBench's released folders as conditions.

The REOBench authors released their corrupted test sets as folders, one per corruption
and severity (their detection configs read ``DIOR_corrupted/<folder>/<k>/`` with, for
the geometric corruptions, the moved annotations in ``DIOR_corrupted/<folder>/<k>labels/``;
their segmentation configs ``Potsdam_corrupted/<folder>/severity_<k>/val`` and
``.../label``). Their clouds and noise cannot be regenerated bit for bit, so matching a
published row on identical pixels means evaluating those files. The option
``corruption_files`` says where they are::

    test_cfg = dict(type='RobustnessTestLoop', corruptions='all', corruption_files=dict(
        dataset=dict(data_prefix=dict(
            img_path='Potsdam_corrupted/{folder}/severity_{severity}/val')),
        geometric=dict(data_prefix=dict(
            seg_map_path='Potsdam_corrupted/{folder}/severity_{severity}/label')),
        folders='reobench'))

- ``dataset``: changes of the test dataset config for a condition read from files
  (merged into it, nested dicts key by key; in a wrapper such as ``ClassMappedDataset``,
  into the dataset it wraps); every string in it is formatted with ``{corruption}`` (the
  package's name, ``salt_pepper_noise``), ``{folder}`` (the released folder's name,
  below) and ``{severity}``.
- ``geometric``: further changes for ``rotate``, ``scale`` and ``translate`` (the
  released annotations, moved with the images); without it those corruptions are
  synthesised.
- ``folders``: the package's corruption names -> folder names, or ``'reobench'`` for the
  names of the authors' released DIOR folders (:data:`REOBENCH_FOLDERS`); names not
  listed keep their own.
- ``corruptions``: which of the run's corruptions are read from files (default all).

A condition read from files keeps its key (``cloud@3``) and its place in the corruption
table; its record says ``source: files`` and its fingerprint covers the files (the
built set's samples, sizes and times, and the formatted dataset config). The report lists
which conditions were read from files and which were synthesised.
"""
from __future__ import annotations

import copy
import string
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Tuple

from reobench_corruptions import get_corruption
from reobench_corruptions.condition import Condition
from ...datasets.converters.reobench_released import REOBENCH_FOLDERS
from ...errors import SweepError
from .kinds import is_corruption

__all__ = ['CorruptionFiles', 'parse_corruption_files', 'REOBENCH_FOLDERS',
           'files_dataset_cfg', 'FILES_SOURCE']

#: ``REOBENCH_FOLDERS`` (imported above): the package's REOBench corruption names -> the
#: folder names of the authors' released DIOR test sets, where they differ; every name
#: their code uses is in ``reobench_mm.datasets.converters.reobench_released``.
#: The ``source`` of a condition read from files (synthesised ones have none).
FILES_SOURCE = 'files'
_KEYS = ('dataset', 'geometric', 'folders', 'corruptions')
_FIELDS = ('corruption', 'folder', 'severity')


def _check_template(value: Any, where: str) -> None:
    """Every string of ``value`` names only the known placeholders."""
    if isinstance(value, str):
        try:
            names = [f for _, f, _, _ in string.Formatter().parse(value) if f is not None]
        except ValueError as error:
            raise SweepError(f'{where}: {value!r} is not a valid template ({error})') from None
        unknown = [n for n in names if n not in _FIELDS]
        if unknown:
            raise SweepError(f'{where}: {value!r} names {unknown}; the placeholders are '
                             f'{{corruption}}, {{folder}} and {{severity}}')
    elif isinstance(value, Mapping):
        for key, item in value.items():
            _check_template(item, f'{where}.{key}')
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _check_template(item, f'{where}[{index}]')


def _format(value: Any, fields: Mapping[str, Any]) -> Any:
    if isinstance(value, str):
        return value.format(**fields)
    if isinstance(value, Mapping):
        return {k: _format(v, fields) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_format(v, fields) for v in value)
    return value


def _merge(base: Dict[str, Any], changes: Mapping[str, Any]) -> Dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in changes.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge(dict(out[key]), value)
        else:
            out[key] = copy.deepcopy(value)
    return out


@dataclass(frozen=True)
class CorruptionFiles:
    """Where the corrupted test sets are (see the module docstring)."""
    dataset: Dict[str, Any]
    geometric: Optional[Dict[str, Any]]
    folders: Dict[str, str]
    corruptions: Optional[Tuple[str, ...]]

    def reads(self, condition: Any) -> bool:
        """Whether ``condition`` (a corruption condition) is read from files."""
        if not is_corruption(condition) or condition.is_clean:
            return False
        if self.corruptions is not None and condition.corruption not in self.corruptions:
            return False
        return self.geometric is not None or not condition.geometric

    def changes(self, condition: Condition) -> Dict[str, Any]:
        """The formatted changes of the test dataset config for ``condition``."""
        fields = dict(corruption=condition.corruption, severity=condition.severity,
                      folder=self.folders.get(condition.corruption, condition.corruption))
        changes = _format(self.dataset, fields)
        if condition.geometric:
            changes = _merge(changes, _format(self.geometric, fields))
        return changes

    def to_dict(self) -> Dict[str, Any]:
        out: Dict[str, Any] = dict(dataset=copy.deepcopy(self.dataset),
                                   folders=dict(self.folders))
        if self.geometric is not None:
            out['geometric'] = copy.deepcopy(self.geometric)
        if self.corruptions is not None:
            out['corruptions'] = list(self.corruptions)
        return out


def parse_corruption_files(value: Any, protocol: str = 'reobench'
                           ) -> Optional[CorruptionFiles]:
    """The ``corruption_files`` option as :class:`CorruptionFiles` (None stays None).

    Raises:
        SweepError: not a dict, an unknown key, a template with unknown placeholders, a
            folder map or corruption list naming unknown corruptions.
    """
    if value is None or isinstance(value, CorruptionFiles):
        return value
    if not isinstance(value, Mapping):
        raise SweepError('corruption_files must be a dict(dataset=dict(...)[, geometric=..., '
                         f'folders=..., corruptions=...]), got {type(value).__name__}')
    unknown = [k for k in value if k not in _KEYS]
    if unknown:
        raise SweepError(f'corruption_files: unknown key(s) {unknown}; valid: {list(_KEYS)}')
    dataset, geometric = value.get('dataset'), value.get('geometric')
    if not isinstance(dataset, Mapping) or not dataset:
        raise SweepError('corruption_files.dataset must be the changes of the test dataset '
                         "config, e.g. dict(data_prefix=dict(img_path='corrupted/{folder}/"
                         "{severity}')), got " + repr(dataset))
    if geometric is not None and not isinstance(geometric, Mapping):
        raise SweepError(f'corruption_files.geometric must be a dict, got {geometric!r}')
    _check_template(dict(dataset), 'corruption_files.dataset')
    _check_template(dict(geometric or {}), 'corruption_files.geometric')
    folders = value.get('folders') or {}
    if folders == 'reobench':
        folders = dict(REOBENCH_FOLDERS)
    if not isinstance(folders, Mapping) or \
            not all(isinstance(v, str) and v for v in folders.values()):
        raise SweepError("corruption_files.folders must be 'reobench' or a dict of "
                         f'corruption names to folder names, got {folders!r}')
    corruptions = value.get('corruptions')
    if isinstance(corruptions, str):
        corruptions = [corruptions]
    named = list(folders) + list(corruptions or [])
    for name in named:
        try:
            get_corruption(name, protocol)
        except (KeyError, TypeError) as error:
            raise SweepError(f'corruption_files: {error}') from None
    return CorruptionFiles(copy.deepcopy(dict(dataset)),
                           None if geometric is None else copy.deepcopy(dict(geometric)),
                           dict(folders), None if corruptions is None else tuple(corruptions))


def files_dataset_cfg(dataset: Mapping[str, Any], files: CorruptionFiles,
                      condition: Condition) -> Dict[str, Any]:
    """The test dataset config with ``condition``'s files: the changes merged into the
    dataset that loads files (the innermost of wrappers)."""
    cfg = copy.deepcopy(dict(dataset))
    inner = cfg
    parents = []
    while isinstance(inner.get('dataset'), dict):
        parents.append(inner)
        inner = inner['dataset']
    merged = _merge(inner, files.changes(condition))
    if parents:
        parents[-1]['dataset'] = merged
        return cfg
    return merged
