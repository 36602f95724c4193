"""What the numbers of a robustness condition depend on, as a comparable fingerprint.

A sweep reuses a finished condition only when the fingerprint recorded with it equals
the current one. The fingerprint is a flat JSON object whose keys fall into five parts
(:data:`FINGERPRINT_PARTS`), compared part by part so that a refusal names what changed:

``config``
    ``resolved_config_sha256``: SHA-256 of the fully resolved config, the one the
    Runner is built from (``_base_`` files merged, ``--cfg-options`` applied, the
    sweep's own changes made), as canonical JSON (sorted keys) of its flattened keys
    (``test_dataloader.dataset.data_root``, ...) without the cosmetic ones
    (:data:`COSMETIC_OPTIONS`: logging, hooks, visualiser, workers, work dir, ...);
    and the task.
``checkpoint``
    ``checkpoint_sha256``: SHA-256 of the checkpoint file.
``data``
    ``data``: ``{'sha256', 'samples', 'files'}`` of the built test dataset
    (:func:`dataset_fingerprint`): every sample's data info (paths, and for DOTA /
    DIOR-R the parsed boxes and labels), the dataset's metainfo, and the size and
    modification time of every file the samples name (images, label maps,
    annotation files); with temperature scaling also ``val``, the same of the
    validation data the temperature is fitted on; in the record of a shift set's
    condition also ``shift_set``, the same of that set with its name and the SHA-256 of
    its dataset config, and of a condition read from files ``file_set``, the same of
    those.
``code``
    ``code_sha256``: SHA-256 of the package sources that compute the numbers
    (:func:`code_sources`: the modules of the evaluation path, found by following
    the imports of :data:`CODE_ROOTS`); ``versions``: the versions of numpy, opencv, scipy,
    torch, mmcv, mmengine, mmseg, mmdet and mmrotate.
``options``
    the sweep's settings (``seed``, ``protocol``, ``border``, ``calibration``,
    ``temperature_scaling``) and the result-affecting ``cfg_options``.

Why size and modification time stand for the file contents: reading every test image
on every resume would cost as much as decoding the test set. Every ordinary way of
changing a file (an editor, ``cv2.imwrite``, ``cp``, ``tar -x`` or ``rsync`` of other
contents, a converter run again) writes it, and a write sets its modification time to
the time of the write, in nanoseconds on current file systems; ``make`` and ``rsync``
decide what changed on the same evidence. A change goes unnoticed only when the file
keeps its size and its old time is put back on purpose (``touch -d``, ``cp -p`` or
``rsync -t`` of a different file with the same time). The opposite error is harmless:
data copied to a new place without its times (plain ``cp``) counts as changed, and the
sweep asks for ``--force``.
"""
from __future__ import annotations

import copy
import functools
import hashlib
import json
import math
import os
import os.path as osp
import warnings
from fnmatch import fnmatchcase
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..fileio import json_round_trip
from ..version import package_versions

__all__ = [
    'COSMETIC_OPTIONS', 'FINGERPRINT_PARTS', 'CODE_ROOTS', 'CODE_LEAVES', 'code_sources',
    'is_cosmetic', 'result_options', 'canonical', 'canonical_json', 'flatten_config',
    'config_fingerprint', 'dataset_fingerprint', 'code_fingerprint', 'run_fingerprint',
    'differing_parts', 'SHIFT_SET_PART', 'FILE_SET_PART', 'OWN_DATA_PARTS', 'without_own_data'
]

#: Config keys (dotted, ``fnmatch`` patterns) that do not change the numbers: left out of
#: the resolved config's digest and of the recorded ``--cfg-options``.
COSMETIC_OPTIONS = ('log_level', 'log_processor*', 'default_hooks*', 'custom_hooks*',
                    'visualizer*', 'env_cfg*', 'work_dir', 'experiment_name',
                    '*num_workers', '*persistent_workers', '*pin_memory', 'launcher',
                    'model_wrapper_cfg*')

#: part -> the fingerprint keys it consists of.
FINGERPRINT_PARTS: Dict[str, Tuple[str, ...]] = {
    'config': ('resolved_config_sha256', 'task'),
    'checkpoint': ('checkpoint_sha256', ),
    'data': ('data', ),
    'code': ('code_sha256', 'versions'),
    'options': ('cfg_options', 'seed', 'protocol', 'border', 'calibration',
                'temperature_scaling', 'temperature_fit', 'precision', 'corruption_device'),
}
#: The entries of a record's ``data`` part that describe the condition's own test data
#: (a shift set's, the files a corruption is read from), added to the run's fingerprint
#: in that condition's record only.
SHIFT_SET_PART, FILE_SET_PART = 'shift_set', 'file_set'
OWN_DATA_PARTS = (SHIFT_SET_PART, FILE_SET_PART)

#: Where the code that computes a condition's numbers starts (modules, dotted): what a
#: config builds by name (the registering packages: datasets, transforms, models, metrics
#: and the corruption engine behind them), the evaluation of a condition of any kind,
#: the temperature fit, the single-condition loop and the forward precision. The code
#: part of the fingerprint covers these and every module they import, followed through
#: the sources (:func:`code_sources`), so a module added to the evaluation path is
#: covered by being imported. The robustness test loop's own file is covered without
#: following its imports: they reach the writing of records and reports, which read the
#: numbers and do not make them.
CODE_ROOTS = ('reobench_corruptions', 'reobench_mm.datasets', 'reobench_mm.transforms',
              'reobench_mm.models', 'reobench_mm.evaluation',
              'reobench_mm.robustness.condition_evaluation',
              'reobench_mm.robustness.temperature', 'reobench_mm.engine.corruption_loop',
              'reobench_mm.engine.precision')
#: Covered as files, their imports not followed (see :data:`CODE_ROOTS`).
CODE_LEAVES = ('reobench_mm.robustness.test_loop', 'reobench_mm.robustness.val_loop')
#: Never covered: they write data (the converters, the synthetic-data generators), which
#: the data part of the fingerprint covers.
_NOT_CODE = ('reobench_mm/datasets/converters', 'reobench_mm/datasets/synthetic.py',
             'reobench_mm/datasets/synthetic_shift.py')
_PACKAGES = ('reobench_mm', 'reobench_corruptions')

#: The folder that holds the two packages (a checkout, or site-packages).
SOURCE_ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


# ----------------------------------------------------------------------------- canonical form

def is_cosmetic(key: str) -> bool:
    """Whether a dotted config key matches one of :data:`COSMETIC_OPTIONS`."""
    return any(fnmatchcase(key, pattern) for pattern in COSMETIC_OPTIONS)


def result_options(options: Mapping[str, Any]) -> Dict[str, Any]:
    """The ``--cfg-options`` that can change the numbers (the cosmetic ones dropped)."""
    return {k: v for k, v in options.items() if not is_cosmetic(k)}


def canonical(obj: Any) -> Any:
    """A JSON-able, deterministic form of a config value or data info: mappings with
    string keys, tuples and sets as lists (sets sorted), numpy arrays and scalars as
    lists and numbers, classes and functions as their qualified names, NaN and
    infinities as strings; anything else as its type name and ``str``."""
    if obj is None or isinstance(obj, (bool, str, int)):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else repr(obj)
    if isinstance(obj, Mapping):
        return {str(k): canonical(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [canonical(v) for v in obj]
    if isinstance(obj, (set, frozenset)):
        return sorted((canonical(v) for v in obj), key=lambda v: json.dumps(v, sort_keys=True))
    if hasattr(obj, 'tolist') and hasattr(obj, 'dtype'):  # numpy arrays and scalars, tensors
        return canonical(obj.tolist())
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    if isinstance(obj, type) or callable(obj):
        module = getattr(obj, '__module__', None) or ''
        return f'{module}.{getattr(obj, "__qualname__", getattr(obj, "__name__", ""))}'
    return f'{type(obj).__module__}.{type(obj).__qualname__}:{obj}'


def canonical_json(obj: Any) -> str:
    """Compact canonical JSON (sorted keys) of :func:`canonical` of ``obj``."""
    return json.dumps(canonical(obj), sort_keys=True, separators=(',', ':'),
                      ensure_ascii=False)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode('utf-8')).hexdigest()


def flatten_config(obj: Any, prefix: str = '') -> Dict[str, Any]:
    """Dotted key -> leaf value of a nested config (list items by index:
    ``test_dataloader.dataset.pipeline.0.type``); empty mappings and lists are leaves."""
    if isinstance(obj, Mapping) and obj:
        out: Dict[str, Any] = {}
        for key, value in obj.items():
            out.update(flatten_config(value, f'{prefix}{key}.'))
        return out
    if isinstance(obj, (list, tuple)) and obj:
        out = {}
        for index, value in enumerate(obj):
            out.update(flatten_config(value, f'{prefix}{index}.'))
        return out
    return {prefix[:-1]: canonical(obj)}


def config_fingerprint(cfg: Any) -> str:
    """SHA-256 of the resolved config without its cosmetic keys (:func:`is_cosmetic` of
    each flattened key). ``cfg``: an MMEngine ``Config`` or a plain dict."""
    data = cfg.to_dict() if hasattr(cfg, 'to_dict') else dict(cfg)
    kept = {k: v for k, v in flatten_config(data).items() if not is_cosmetic(k)}
    return _sha256(canonical_json(kept))


# ----------------------------------------------------------------------------- data

def _strings(obj: Any):
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, Mapping):
        for value in obj.values():
            yield from _strings(value)
    elif isinstance(obj, (list, tuple)):
        for value in obj:
            yield from _strings(value)


def dataset_fingerprint(dataset: Any) -> Dict[str, Any]:
    """``{'sha256', 'samples', 'files'}`` of a built dataset (MMEngine ``BaseDataset``
    or a wrapper with ``get_data_info``): the digest of every sample's data info (in
    order), the dataset's metainfo, and ``(path, size, mtime_ns)`` of every existing
    file that a data info names (any string value that is a file: image, label map,
    annotation file) and of the dataset's ``ann_file``. See the module notes on why size
    and modification time stand for the contents.

    A dataset without ``get_data_info`` gets ``sha256: None`` and a warning (its data
    cannot be checked).
    """
    if not hasattr(dataset, 'get_data_info'):
        warnings.warn(f'the test dataset ({type(dataset).__name__}) has no get_data_info(); '
                      'changes of the test data cannot be detected on resume')
        return dict(sha256=None, samples=len(dataset), files=0)
    digest = hashlib.sha256()
    digest.update(canonical_json(getattr(dataset, 'metainfo', None)).encode('utf-8'))
    checked: Dict[str, Optional[Tuple[int, int]]] = {}
    ann_file = getattr(dataset, 'ann_file', None)
    candidates = [ann_file] if isinstance(ann_file, str) and ann_file else []
    count = len(dataset)
    for index in range(count):
        info = dataset.get_data_info(index)
        digest.update(b'\n' + canonical_json(info).encode('utf-8'))
        candidates.extend(_strings(info))
    for text in candidates:
        if text in checked:
            continue
        try:
            stat = os.stat(text) if text and osp.isfile(text) else None
        except (OSError, ValueError):  # unreadable, or not a path at all
            stat = None
        checked[text] = None if stat is None else (stat.st_size, stat.st_mtime_ns)
    files = sorted((path, *value) for path, value in checked.items() if value is not None)
    digest.update(b'\n' + canonical_json(files).encode('utf-8'))
    return dict(sha256=digest.hexdigest(), samples=count, files=len(files))


# ----------------------------------------------------------------------------- code

def _module_file(root: str, module: str) -> Optional[str]:
    """The source file of dotted ``module`` under ``root`` (a package's ``__init__.py``),
    or None when it is not one of the two packages' modules."""
    if module.split('.')[0] not in _PACKAGES:
        return None
    path = osp.join(root, *module.split('.'))
    if osp.isfile(osp.join(path, '__init__.py')):
        return osp.join(path, '__init__.py')
    return path + '.py' if osp.isfile(path + '.py') else None


def _imported_modules(root: str, module: str, path: str) -> List[str]:
    """The modules of the two packages that ``module`` (its source at ``path``) imports,
    at the top or inside functions, absolute or relative: ``from a.b import c`` gives
    ``a.b.c`` when that is a module, else ``a.b``."""
    import ast
    with open(path, 'rb') as handle:
        tree = ast.parse(handle.read(), path)
    package = module if path.endswith('__init__.py') else module.rpartition('.')[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split('.')
                base = '.'.join(parts[:len(parts) - node.level + 1])
                name = f'{base}.{node.module}' if node.module else base
            else:
                name = node.module or ''
            for alias in node.names:
                child = f'{name}.{alias.name}'
                found.append(child if _module_file(root, child) else name)
    return [m for m in found if _module_file(root, m)]


def code_sources(root: Optional[str] = None) -> List[str]:
    """The source files the code part of the fingerprint covers (sorted paths under
    ``root``, default :data:`SOURCE_ROOT`): the modules of :data:`CODE_ROOTS` and every
    module of the two packages they import, transitively; the files of
    :data:`CODE_LEAVES`; none under :data:`_NOT_CODE`."""
    root = SOURCE_ROOT if root is None else root
    skipped = tuple(osp.join(root, s) for s in _NOT_CODE)
    files = {_module_file(root, m) for m in CODE_LEAVES} - {None}
    todo, seen = list(CODE_ROOTS), set()
    while todo:
        module = todo.pop()
        path = _module_file(root, module)
        if module in seen or path is None:
            continue
        seen.add(module)
        files.add(path)
        todo.extend(m for m in _imported_modules(root, module, path) if m not in seen)
    return sorted(p for p in files if not p.startswith(skipped))


def code_fingerprint() -> Dict[str, Any]:
    """``{'code_sha256', 'versions'}``: SHA-256 over the relative path and bytes of each
    file of :func:`code_sources`, and the versions of :func:`reobench_mm.version.package_versions`.

    Computed once per process (a copy is returned): the numbers come from the code this
    process imported, not from files edited on disk since.
    """
    return copy.deepcopy(_code_fingerprint())


@functools.lru_cache(maxsize=1)
def _code_fingerprint() -> Dict[str, Any]:
    digest = hashlib.sha256()
    for path in code_sources():
        digest.update(osp.relpath(path, SOURCE_ROOT).replace(os.sep, '/').encode('utf-8'))
        digest.update(b'\0')
        with open(path, 'rb') as handle:
            digest.update(hashlib.sha256(handle.read()).digest())
    versions = package_versions()
    return dict(code_sha256=digest.hexdigest(), versions=versions)


def run_fingerprint(config: Mapping[str, Any], *, task: str, checkpoint_sha256: Optional[str],
                    cfg_options: Mapping[str, Any], options: Mapping[str, Any],
                    data: Mapping[str, Any]) -> Dict[str, Any]:
    """The fingerprint of a run's inputs, as records hold it (:data:`FINGERPRINT_PARTS`):
    the resolved config (:func:`config_fingerprint` of ``config``) and the task, the
    checkpoint's SHA-256, the code (:func:`code_fingerprint`), the result-affecting
    ``cfg_options`` and the options part (``RobustnessOptions.fingerprint_part()``), and
    the data (:func:`dataset_fingerprint`)."""
    return json_round_trip(dict(
        resolved_config_sha256=config_fingerprint(config), task=task,
        checkpoint_sha256=checkpoint_sha256, **code_fingerprint(),
        cfg_options=result_options(cfg_options), **options, data=dict(data)))


# ----------------------------------------------------------------------------- comparison

def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True) if not isinstance(value, str) else value
    if isinstance(value, str) and len(value) == 64:  # a digest
        return value[:12]
    return text if len(text) <= 60 else text[:57] + '...'


def _detail(part: str, recorded: Mapping[str, Any], current: Mapping[str, Any]) -> str:
    keys = [k for k in FINGERPRINT_PARTS[part] if recorded.get(k) != current.get(k)]
    if part == 'config':
        return ('the resolved config (its _base_ files, the file itself or --cfg-options) '
                'differs' + (f'; task {recorded.get("task")} vs {current.get("task")}'
                             if 'task' in keys else ''))
    if part == 'checkpoint':
        return (f'checkpoint SHA-256 {_short(recorded.get("checkpoint_sha256"))}... '
                f'recorded, {_short(current.get("checkpoint_sha256"))}... now')
    if part == 'data':
        old, new = recorded.get('data') or {}, current.get('data') or {}
        if old.get('file_set') != new.get('file_set'):
            before, after = old.get('file_set') or {}, new.get('file_set') or {}
            return (f'the files read for {after.get("name", before.get("name"))}: their '
                    'images, annotations, listing or dataset config changed, or they were '
                    'synthesised before ('
                    f'{before.get("samples")} samples / {before.get("files")} files '
                    f'recorded, {after.get("samples")} / {after.get("files")} now)')
        if old.get('shift_set') != new.get('shift_set'):
            before, after = old.get('shift_set') or {}, new.get('shift_set') or {}
            return (f'shift set {after.get("name", before.get("name"))!r}: its images, '
                    'annotations, listing or dataset config changed ('
                    f'{before.get("samples")} samples / {before.get("files")} files '
                    f'recorded, {after.get("samples")} / {after.get("files")} now)')
        which = 'test' if old.get('val') == new.get('val') else 'test or validation'
        return (f'{which} images, annotations or their listing changed '
                f'({old.get("samples")} samples / {old.get("files")} files recorded, '
                f'{new.get("samples")} / {new.get("files")} now)')
    if part == 'code':
        old, new = recorded.get('versions') or {}, current.get('versions') or {}
        changed = [f'{name} {old.get(name)} -> {new.get(name)}'
                   for name in sorted(set(old) | set(new)) if old.get(name) != new.get(name)]
        if recorded.get('code_sha256') != current.get('code_sha256'):
            changed.insert(0, 'the reobench_mm sources that compute the numbers')
        return ', '.join(changed)
    return '; '.join(f'{key} {_short(recorded.get(key))} -> {_short(current.get(key))}'
                     for key in keys)


def differing_parts(recorded: Any, current: Mapping[str, Any],
                    parts: Optional[Sequence[str]] = None) -> List[Tuple[str, str]]:
    """``(part, what differs)`` for each part (of ``parts``, default all) whose keys differ
    between a recorded fingerprint and the current one. Keys of ``recorded`` outside every
    part count as a difference of part ``'format'``."""
    if not isinstance(recorded, Mapping):
        return [('format', f'the recorded fingerprint is a {type(recorded).__name__}, '
                 'not an object')]
    out = []
    for part in parts or FINGERPRINT_PARTS:
        if any(recorded.get(k) != current.get(k) for k in FINGERPRINT_PARTS[part]):
            out.append((part, _detail(part, recorded, current)))
    if parts is None:
        known = {k for keys in FINGERPRINT_PARTS.values() for k in keys}
        unknown = sorted(set(recorded) - known)
        if unknown:
            out.append(('format', f'unknown keys {unknown} (written by another version)'))
    return out


def without_own_data(fingerprint: Any) -> Any:
    """A record's fingerprint as the run's: without the entries of
    :data:`OWN_DATA_PARTS` in its ``data`` part (anything that is not a fingerprint object
    is returned as it is)."""
    if not isinstance(fingerprint, Mapping) or not isinstance(fingerprint.get('data'),
                                                              Mapping):
        return fingerprint
    data = {k: v for k, v in fingerprint['data'].items() if k not in OWN_DATA_PARTS}
    return dict(fingerprint, data=data)
