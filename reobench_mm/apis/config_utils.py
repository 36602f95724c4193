"""Config preparation behind ``tools/train.py`` and ``tools/test.py``.

The tools only parse arguments; everything they do to a config lives here so that
it can be used (and tested) from Python:

- :func:`insert_corruption` puts one ``ApplyCorruption`` into the test pipelines
  of a config (or updates the one already there);
- :func:`corruption_settings` reads back what a config's test pipeline applies,
  :func:`corruption_tag` turns it into a file-name tag, :func:`tagged_path` adds
  that tag to a path;
- :func:`prepare_train_config` / :func:`prepare_test_config` apply the command-line
  options the way MMSegmentation's and MMRotate's own tools do;
- :func:`infer_task`, :func:`ensure_custom_imports`, :func:`dump_json_atomic`.
"""
from __future__ import annotations

import logging
import os.path as osp
import warnings
from typing import Iterator, List, NamedTuple, Optional, Tuple

from mmengine.config import Config, ConfigDict

from ..corruptions import PROTOCOLS, get_corruption
from ..corruptions.base import check_severity
from ..corruptions.geometric import BORDER_MODES
from ..fileio import dump_json_atomic

__all__ = [
    'CORRUPTION_DEFAULTS', 'CORRUPTION_META_KEYS', 'SEGMENTATION', 'ROTATED_DETECTION',
    'infer_task', 'ensure_custom_imports', 'default_work_dir', 'check_corruption_args',
    'insert_corruption', 'corruption_settings', 'sync_corruption_cfg', 'corruption_tag',
    'tagged_path', 'get_test_pipelines', 'corruption_position', 'dump_json_atomic',
    'prepare_train_config', 'prepare_test_config', 'PreparedTest'
]

SEGMENTATION = 'segmentation'
ROTATED_DETECTION = 'rotated_detection'
TASK_OF_SCOPE = {'mmseg': SEGMENTATION, 'mmrotate': ROTATED_DETECTION,
                 'mmdet': ROTATED_DETECTION}
#: Settings of a clean run; ``configs/_base_/corruptions.py`` holds the same as
#: ``corruption_cfg``, the key that ``--cfg-options corruption_cfg.<key>=...`` sets.
CORRUPTION_DEFAULTS = dict(corruption='clean', severity=0, seed=0, protocol='reobench',
                           border='reflect')
CORRUPTION_META_KEYS = ('corruption', 'severity')
CORRUPTION_TYPES = ('ApplyCorruption', 'reobench_mm.ApplyCorruption')
BOX_CONVERSIONS = ('ConvertBoxType', 'ConvertMask2BoxType')
PLUGIN = 'reobench_mm'


# ----------------------------------------------------------------------------- task, scope

def infer_task(cfg: Config) -> str:
    """``'segmentation'`` or ``'rotated_detection'``, from the config's ``default_scope``
    (``mmseg`` vs ``mmrotate``/``mmdet``), else from the test pipeline's packing step."""
    scope = cfg.get('default_scope')
    if scope in TASK_OF_SCOPE:
        return TASK_OF_SCOPE[scope]
    for _, pipeline in _dataset_pipelines(cfg.get('test_dataloader', {}).get('dataset')):
        for step in pipeline:
            name = _type_name(step)
            if name == 'PackSegInputs':
                return SEGMENTATION
            if name == 'PackDetInputs':
                return ROTATED_DETECTION
    raise ValueError(f'cannot tell the task of this config: default_scope is {scope!r} '
                     f'(expected one of {sorted(TASK_OF_SCOPE)}) and the test pipeline has '
                     'neither PackSegInputs nor PackDetInputs')


def ensure_custom_imports(cfg: Config, module: str = PLUGIN) -> Config:
    """Make sure ``cfg.custom_imports`` imports ``module`` (added when missing), so that
    a dumped config of the run works on its own."""
    custom = cfg.get('custom_imports')
    if custom is None:
        cfg.custom_imports = dict(imports=[module], allow_failed_imports=False)
        return cfg
    imports = custom.get('imports', [])
    imports = [imports] if isinstance(imports, str) else list(imports)
    if module not in imports:
        custom['imports'] = imports + [module]
    return cfg


def default_work_dir(config_path: str) -> str:
    """``work_dirs/<config file stem>``, as the toolboxes' own tools choose."""
    return osp.join('./work_dirs', osp.splitext(osp.basename(config_path))[0])


# ----------------------------------------------------------------------------- pipelines

def _type_name(step) -> str:
    """The transform's class name without a scope prefix (``mmdet.Resize`` -> ``Resize``)."""
    kind = step.get('type') if isinstance(step, dict) else None
    if isinstance(kind, str):
        return kind.rsplit('.', 1)[-1]
    return getattr(kind, '__name__', '')


def _is_corruption(step) -> bool:
    return isinstance(step, dict) and (step.get('type') in CORRUPTION_TYPES
                                       or getattr(step.get('type'), '__name__', '')
                                       == 'ApplyCorruption')


def _is_image_loader(step) -> bool:
    name = _type_name(step)
    return name.startswith('Load') and 'Image' in name


def is_loading_name(name: str) -> bool:
    """Whether a transform class name is image loading, annotation loading or box-type
    conversion (the deterministic steps in front of a corruption)."""
    return name.startswith('Load') and ('Image' in name or 'Annotation' in name) \
        or name in BOX_CONVERSIONS


def _is_loader(step) -> bool:
    """Image loading, annotation loading or box-type conversion."""
    return is_loading_name(_type_name(step))


def _dataset_pipelines(dataset, path: str = 'dataset') -> Iterator[Tuple[str, list]]:
    """``(dotted path, pipeline)`` of every pipeline that loads images in ``dataset``
    and in the datasets it wraps (``dataset=`` and ``datasets=[...]``)."""
    if not isinstance(dataset, dict):
        return
    pipeline = dataset.get('pipeline')
    if isinstance(pipeline, list) and any(_is_image_loader(s) for s in pipeline):
        yield f'{path}.pipeline', pipeline
    yield from _dataset_pipelines(dataset.get('dataset'), f'{path}.dataset')
    for i, inner in enumerate(dataset.get('datasets') or []):
        yield from _dataset_pipelines(inner, f'{path}.datasets.{i}')


def get_test_pipelines(cfg: Config) -> List[Tuple[str, list]]:
    """The config's test pipelines as ``(key, pipeline list)``: every image-loading
    pipeline of ``test_dataloader.dataset`` (wrappers included) and, when present,
    the top-level ``test_pipeline``. The lists are the config's own (edit in place).

    Raises:
        ValueError: the config has no ``test_dataloader`` or no image-loading pipeline in it.
    """
    loader = cfg.get('test_dataloader')
    if not isinstance(loader, dict) or not isinstance(loader.get('dataset'), dict):
        raise ValueError('the config has no test_dataloader with a dataset; a test run '
                         'needs test_dataloader=dict(dataset=dict(..., pipeline=[...]))')
    found = [(f'test_dataloader.{key}', p) for key, p in _dataset_pipelines(loader.dataset)]
    if not found:
        raise ValueError('the config has no test pipeline: test_dataloader.dataset (and the '
                         'datasets it wraps) has no pipeline with an image-loading step '
                         '(e.g. LoadImageFromFile)')
    top = cfg.get('test_pipeline')
    if isinstance(top, list) and any(_is_image_loader(s) for s in top):
        found.append(('test_pipeline', top))
    return found


def corruption_position(pipeline: list) -> int:
    """Where ``ApplyCorruption`` goes in ``pipeline`` (an index to insert at).

    Right after the last loading step: image loading, annotation loading
    (``LoadAnnotations``, ``mmdet.LoadAnnotations``) and box-type conversion
    (``ConvertBoxType``), so that geometric corruptions move the labels too; hence
    before any resizing, normalisation and packing that follows them.

    Test pipelines of the toolboxes load annotations *after* ``Resize`` so that the
    ground truth keeps the original resolution; there the corruption comes after that
    resize, which is the same as corrupting the original image when the test images
    already have the test size (REOBench's 512² Potsdam tiles, 800² DIOR-R images,
    1024² DOTA patches).
    """
    loaders = [i for i, step in enumerate(pipeline) if _is_loader(step)]
    if not any(_is_image_loader(pipeline[i]) for i in loaders):
        raise ValueError('pipeline has no image-loading step (e.g. LoadImageFromFile); '
                         f'steps: {[_type_name(s) for s in pipeline]}')
    return loaders[-1] + 1


def _default_meta_keys(type_name: str, scope: Optional[str]) -> Optional[tuple]:
    """The ``meta_keys`` default of a packing transform, looked up in the registries."""
    import inspect

    from mmengine.registry import TRANSFORMS
    bare = type_name.rsplit('.', 1)[-1]
    candidates = [type_name] if '.' in type_name else []
    candidates += [f'{s}.{bare}' for s in (scope, 'mmseg', 'mmdet') if s]
    for name in candidates:
        try:
            cls = TRANSFORMS.get(name)
        except Exception:  # an uninstalled scope
            cls = None
        if cls is not None:
            default = inspect.signature(cls.__init__).parameters.get('meta_keys')
            if default is not None and isinstance(default.default, (tuple, list)):
                return tuple(default.default)
    return None


def _add_meta_keys(pipeline: list, scope: Optional[str]) -> None:
    for step in pipeline:
        if not _type_name(step).startswith('Pack'):
            continue
        keys = step.get('meta_keys')
        if keys is None:
            keys = _default_meta_keys(step['type'], scope)
            if keys is None:
                warnings.warn(f'cannot find the default meta_keys of {step["type"]}; '
                              'corruption/severity will not be in the metainfo')
                continue
        keys = tuple(keys)
        step['meta_keys'] = keys + tuple(k for k in CORRUPTION_META_KEYS if k not in keys)


def check_corruption_args(corruption: str, severity: int, seed: int = 0,
                          protocol: str = 'reobench', border: str = 'reflect') -> dict:
    """Validate corruption settings; return them as a dict (the keys of
    ``ApplyCorruption`` / ``corruption_cfg``).

    Raises:
        KeyError: unknown corruption (the message lists the valid names).
        ValueError: unknown protocol or border, severity outside 0..5, seed not an int.
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f'unknown protocol {protocol!r}; valid: {list(PROTOCOLS)}')
    if corruption != 'clean':
        get_corruption(corruption, protocol)
    severity = check_severity(severity)
    if border not in BORDER_MODES:
        raise ValueError(f'border must be one of {list(BORDER_MODES)}, got {border!r}')
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f'seed must be an integer, got {seed!r}')
    return dict(corruption=corruption, severity=severity, seed=seed, protocol=protocol,
                border=border)


def insert_corruption(cfg: Config, corruption: str, severity: int, seed: int = 0,
                      protocol: str = 'reobench', border: str = 'reflect') -> Config:
    """Make the config's test pipelines apply one corruption (in place; returns ``cfg``).

    In every test pipeline (:func:`get_test_pipelines`) an ``ApplyCorruption`` step that is
    already there gets these settings (its other options are kept); otherwise one is
    inserted at :func:`corruption_position`. ``corruption``/``severity`` are added to
    the packing transform's ``meta_keys`` and ``cfg.corruption_cfg`` records the settings.
    ``corruption='clean'`` or ``severity=0`` makes the step a no-op.

    Raises:
        KeyError: unknown corruption. ValueError: bad severity/protocol/border, no test
        pipeline, or a pipeline with more than one ``ApplyCorruption``.
    """
    settings = check_corruption_args(corruption, severity, seed, protocol, border)
    scope = cfg.get('default_scope')
    for key, pipeline in get_test_pipelines(cfg):
        existing = [i for i, step in enumerate(pipeline) if _is_corruption(step)]
        if len(existing) > 1:
            raise ValueError(f'{key} has {len(existing)} ApplyCorruption steps; '
                             'insert_corruption expects at most one')
        if existing:
            pipeline[existing[0]].update(settings)
        else:
            pipeline.insert(corruption_position(pipeline),
                            ConfigDict(type='ApplyCorruption', **settings))
        _add_meta_keys(pipeline, scope)
    cfg.corruption_cfg = ConfigDict(settings)
    return cfg


def corruption_settings(cfg: Config) -> dict:
    """What the config's test pipeline applies: the settings of its ``ApplyCorruption``
    step, with ``corruption='clean', severity=0`` when it has none or the step is a no-op."""
    _, pipeline = get_test_pipelines(cfg)[0]
    steps = [step for step in pipeline if _is_corruption(step)]
    settings = dict(CORRUPTION_DEFAULTS)
    if steps:
        settings.update({k: steps[0][k] for k in CORRUPTION_DEFAULTS if k in steps[0]})
    if settings['corruption'] == 'clean' or settings['severity'] == 0:
        settings.update(corruption='clean', severity=0)
    return settings


def sync_corruption_cfg(cfg: Config) -> Config:
    """Apply ``cfg.corruption_cfg`` (as changed by ``--cfg-options corruption_cfg.*``)
    to the test pipelines with :func:`insert_corruption`."""
    settings = dict(CORRUPTION_DEFAULTS)
    unknown = set(cfg.corruption_cfg) - set(settings)
    if unknown:
        raise ValueError(f'unknown corruption_cfg keys {sorted(unknown)}; '
                         f'valid: {list(settings)}')
    settings.update(cfg.corruption_cfg)
    return insert_corruption(cfg, **settings)


def corruption_tag(corruption: str = 'clean', severity: int = 0, seed: int = 0,
                   protocol: str = 'reobench', border: str = 'reflect') -> str:
    """A file-name tag: ``clean`` or ``{corruption}_s{severity}``; a non-default protocol
    is prefixed, a non-zero seed and a constant border (geometric ones) are appended:
    ``geofm_calibration_motion_blur_s3``, ``rotate_s2_constant_seed1``."""
    if corruption == 'clean' or severity == 0:
        return 'clean'
    tag = f'{corruption}_s{severity}'
    if protocol != CORRUPTION_DEFAULTS['protocol']:
        tag = f'{protocol}_{tag}'
    if border != CORRUPTION_DEFAULTS['border'] and get_corruption(corruption,
                                                                  protocol).moves_labels:
        tag = f'{tag}_{border}'
    if seed != 0:
        tag = f'{tag}_seed{seed}'
    return tag


def tagged_path(path: str, tag: str, is_dir: bool = False) -> str:
    """``preds.pkl`` -> ``preds_{tag}.pkl``; a folder ``out/`` -> ``out_{tag}``."""
    path = path.rstrip('/\\') or path
    stem, ext = (path, '') if is_dir else osp.splitext(path)
    return f'{stem}_{tag}{ext}'


# ----------------------------------------------------------------------------- the tools

def _load(config: str, cfg_options: Optional[dict], launcher: str) -> Config:
    cfg = Config.fromfile(config)
    cfg.launcher = launcher
    if cfg_options:
        cfg.merge_from_dict(cfg_options)
    ensure_custom_imports(cfg)
    return cfg


def _set_work_dir(cfg: Config, config: str, work_dir: Optional[str]) -> None:
    # CLI > the config's own work_dir > work_dirs/<config stem>
    if work_dir is not None:
        cfg.work_dir = work_dir
    elif cfg.get('work_dir') is None:
        cfg.work_dir = default_work_dir(config)


def _check_checkpoint(path: str, what: str) -> None:
    if '://' not in path and not osp.isfile(path):
        raise FileNotFoundError(f'{what} {path!r} does not exist')


def prepare_train_config(config: str, work_dir: Optional[str] = None,
                         resume: Optional[str] = None, amp: bool = False,
                         auto_scale_lr: bool = False, cfg_options: Optional[dict] = None,
                         launcher: str = 'none') -> Config:
    """The training config as ``tools/train.py`` runs it.

    Args:
        resume: None (start anew), ``'auto'`` (the latest checkpoint in the work dir)
            or a checkpoint path.
        amp: switch an ``OptimWrapper`` to ``AmpOptimWrapper`` with dynamic loss scale.
        auto_scale_lr: enable the config's ``auto_scale_lr``.
    """
    cfg = _load(config, cfg_options, launcher)
    _set_work_dir(cfg, config, work_dir)
    if amp:
        wrapper = cfg.optim_wrapper.get('type', 'OptimWrapper')
        if wrapper == 'AmpOptimWrapper':
            logging.getLogger(__name__).warning('AMP training is already enabled in the config')
        elif wrapper != 'OptimWrapper':
            raise ValueError(f'--amp needs optim_wrapper.type="OptimWrapper", got {wrapper!r}')
        else:
            cfg.optim_wrapper.type = 'AmpOptimWrapper'
            cfg.optim_wrapper.loss_scale = 'dynamic'
    if auto_scale_lr:
        if not {'enable', 'base_batch_size'} <= set(cfg.get('auto_scale_lr') or {}):
            raise ValueError('--auto-scale-lr needs auto_scale_lr=dict(enable=..., '
                             'base_batch_size=...) in the config')
        cfg.auto_scale_lr.enable = True
    if resume is None:
        cfg.resume = False
    elif resume == 'auto':
        cfg.resume = True
        cfg.load_from = None
    else:
        _check_checkpoint(resume, 'checkpoint to resume from')
        cfg.resume = True
        cfg.load_from = resume
    return cfg


class PreparedTest(NamedTuple):
    """What :func:`prepare_test_config` returns."""
    cfg: Config
    task: str  # 'segmentation' or 'rotated_detection'
    corruption: dict  # the settings the test pipeline applies
    tag: str  # corruption_tag(**corruption)
    metrics_file: str  # {work_dir}/metrics_{tag}.json
    dump_file: Optional[str]  # detection --out: the tagged .pkl for DumpResults


def prepare_test_config(config: str, checkpoint: str, work_dir: Optional[str] = None,
                        out: Optional[str] = None, show: bool = False,
                        show_dir: Optional[str] = None, wait_time: float = 2,
                        cfg_options: Optional[dict] = None, launcher: str = 'none',
                        corruption: Optional[dict] = None) -> PreparedTest:
    """The test config as ``tools/test.py`` runs it, with the corruption it applies.

    The corruption comes from ``corruption`` (the command-line flags) if given, else
    from ``corruption_cfg`` when ``--cfg-options`` changed it, else from the config's
    test pipeline as it is. ``out`` and ``show_dir`` get the corruption tag as suffix.
    ``out``: segmentation, a folder for the predicted label maps (IoUMetric
    ``output_dir``); detection, a ``.pkl`` file of the raw predictions (MMRotate's
    ``DumpResults``, added by the tool). Metrics go to ``{work_dir}/metrics_{tag}.json``.
    """
    _check_checkpoint(checkpoint, 'checkpoint')
    cfg = _load(config, cfg_options, launcher)
    get_test_pipelines(cfg)  # a clear error for configs that cannot be tested
    task = infer_task(cfg)
    _set_work_dir(cfg, config, work_dir)
    cfg.load_from = checkpoint
    if corruption is not None:
        insert_corruption(cfg, **corruption)
    elif any(key == 'corruption_cfg' or key.startswith('corruption_cfg.')
             for key in (cfg_options or {})):
        sync_corruption_cfg(cfg)
    settings = corruption_settings(cfg)
    tag = corruption_tag(**settings)
    cfg.corruption_cfg = ConfigDict(settings)

    if show or show_dir:
        hooks = cfg.get('default_hooks', {})
        if 'visualization' not in hooks:
            raise ValueError('--show/--show-dir need default_hooks.visualization '
                             '(dict(type="SegVisualizationHook") or '
                             'dict(type="mmdet.DetVisualizationHook"))')
        hooks.visualization.draw = True
        if show:
            hooks.visualization.show = True
            hooks.visualization.wait_time = wait_time
        if show_dir:
            show_dir = tagged_path(show_dir, tag, is_dir=True)
            if task == SEGMENTATION:
                cfg.visualizer.save_dir = show_dir
            else:
                hooks.visualization.test_out_dir = show_dir
    dump_file = None
    if out is not None:
        if task == SEGMENTATION:
            evaluators = cfg.test_evaluator if isinstance(cfg.test_evaluator, list) \
                else [cfg.test_evaluator]
            for evaluator in evaluators:
                evaluator['output_dir'] = tagged_path(out, tag, is_dir=True)
                evaluator['keep_results'] = True
        else:
            if not out.endswith(('.pkl', '.pickle')):
                raise ValueError(f'--out for detection must be a .pkl file, got {out!r}')
            dump_file = tagged_path(out, tag)
    metrics_file = osp.join(cfg.work_dir, f'metrics_{tag}.json')
    return PreparedTest(cfg, task, settings, tag, metrics_file, dump_file)


