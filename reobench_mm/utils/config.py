"""Config preparation behind ``tools/train.py`` and ``tools/test.py``.

The tools only parse arguments; everything they do to a config lives here so that
it can be used (and tested) from Python:

- :func:`use_corruption_loop` sets the config's test loop to ``CorruptionTestLoop``
  with a condition, the one way to set a config's corruption that every test entry
  point honours (the loop places the ``ApplyCorruption`` step when it is built);
- :func:`insert_corruption` puts one ``ApplyCorruption`` into the test pipelines
  of a config at the right place (or updates, and if misplaced moves, the one there);
- :func:`applied_condition` reads back what a config's test run applies (a
  :class:`~reobench_corruptions.condition.Condition`, whose ``tag`` names its files),
  :func:`tagged_path` adds that tag to a path;
- :func:`prepare_train_config` / :func:`prepare_test_config` apply the command-line
  options the way MMSegmentation's and MMRotate's own tools do;
- :func:`infer_task` (a task name of :mod:`reobench_mm.evaluation.keys`),
  :func:`default_work_dir`;
- :func:`read_config`: every config the tools and drivers read (a YAML config that would
  run code is refused).

Every config the tools load gets ``custom_imports`` of the package
(:func:`reobench_mm.registry.ensure_custom_imports`).
"""
from __future__ import annotations

import copy
import logging
import os.path as osp
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Tuple, Union

from mmengine.config import Config, ConfigDict
from mmengine.logging import print_log

from reobench_corruptions.condition import CLEAN, CLEAN_NAME, CONDITION_FIELDS, Condition
from ..engine.loop_options import CORRUPTION_LOOP_OPTIONS, other_option_error
from ..evaluation.keys import SEGMENTATION, TASK_OF_PACKING, TASK_OF_SCOPE
from ..registry import ensure_custom_imports
from ..transforms.placement import (CORRUPTION_META_KEYS, Placement, check_condition_pair,
                                    dataset_pipelines, is_corruption_step,
                                    is_image_loading_name, place_condition, step_condition,
                                    transform_name)

__all__ = [
    'CORRUPTION_META_KEYS', 'CORRUPTION_LOOP', 'ROBUSTNESS_LOOP', 'infer_task', 'default_work_dir',
    'check_corruption_args', 'insert_corruption', 'use_corruption_loop',
    'corruption_loop_condition', 'applied_condition',
    'corruption_settings', 'check_no_corruption_cfg', 'corruption_tag', 'tagged_path',
    'get_test_pipelines', 'prepare_train_config', 'prepare_test_config', 'PreparedTest',
    'read_config', 'YAML_SUFFIXES'
]

#: The registered test loop that evaluates under a condition.
CORRUPTION_LOOP = 'CorruptionTestLoop'
#: The test loop that evaluates every selected condition in one run.
ROBUSTNESS_LOOP = 'RobustnessTestLoop'


# ----------------------------------------------------------------------------- task, work dir

def infer_task(cfg: Config) -> str:
    """``'segmentation'`` or ``'rotated_detection'``, from the config's ``default_scope``
    (``mmseg`` vs ``mmrotate``/``mmdet``), else from the test pipeline's packing step."""
    scope = cfg.get('default_scope')
    if scope in TASK_OF_SCOPE:
        return TASK_OF_SCOPE[scope]
    for _, pipeline in dataset_pipelines(cfg.get('test_dataloader', {}).get('dataset')):
        for step in pipeline:
            if transform_name(step) in TASK_OF_PACKING:
                return TASK_OF_PACKING[transform_name(step)]
    raise ValueError(f'cannot tell the task of this config: default_scope is {scope!r} '
                     f'(expected one of {sorted(TASK_OF_SCOPE)}) and the test pipeline has '
                     f'neither {" nor ".join(TASK_OF_PACKING)}')


def default_work_dir(config_path: str) -> str:
    """``work_dirs/<config file stem>``, as the toolboxes' own tools choose."""
    return osp.join('./work_dirs', osp.splitext(osp.basename(config_path))[0])


# ----------------------------------------------------------------------------- pipelines

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
    found = [(f'test_dataloader.{key}', p) for key, p in dataset_pipelines(loader.dataset)]
    if not found:
        raise ValueError('the config has no test pipeline: test_dataloader.dataset (and the '
                         'datasets it wraps) has no pipeline with an image-loading step '
                         '(e.g. LoadImageFromFile)')
    top = cfg.get('test_pipeline')
    if isinstance(top, list) and any(is_image_loading_name(transform_name(s)) for s in top):
        found.append(('test_pipeline', top))
    return found


def check_corruption_args(corruption: str, severity: int, seed: int = 0,
                          protocol: str = 'reobench', border: str = 'reflect'
                          ) -> Dict[str, Any]:
    """The settings of ``Condition(corruption, severity, seed, protocol, border)`` (a
    wrapper kept for callers of the loose settings; the checks are the
    :class:`~reobench_corruptions.condition.Condition`'s).

    Raises:
        KeyError: unknown corruption (the message lists the valid names).
        ValueError: unknown protocol or border, severity outside 0..5, bad seed.
    """
    return Condition(corruption, severity, seed, protocol, border).settings()


def insert_corruption(cfg: Config, corruption: Union[Condition, str],
                      severity: Optional[int] = None, seed: Optional[int] = None,
                      protocol: Optional[str] = None, border: Optional[str] = None,
                      geometric: Optional[bool] = None,
                      override: bool = True) -> List[Placement]:
    """Make the config's test pipelines apply one condition (in place): a
    :class:`~reobench_corruptions.condition.Condition`, or its settings
    (``insert_corruption(cfg, 'cloud', 3, seed=1)``; seed, protocol and border default to
    ``0``, ``'reobench'`` and ``'reflect'``).

    In every test pipeline (:func:`get_test_pipelines`) an ``ApplyCorruption`` step that is
    already there gets these settings (its other options are kept), or one is inserted
    where it belongs; a misplaced one is moved there and the move is logged (see
    :mod:`reobench_mm.transforms.placement`). ``corruption``/``severity`` are added to the
    packing transform's ``meta_keys``. ``corruption='clean'`` or ``severity=0`` makes the
    step a no-op. A ``CorruptionTestLoop`` in ``test_cfg`` gets the same condition (it
    would otherwise set its own when built); another test loop is left as it is (see
    :func:`use_corruption_loop`).

    Args:
        geometric: place the step for geometric corruptions (after the annotation
            loading) even when this condition is not one, e.g. for a sweep that switches
            to one later. Default: whether ``corruption`` is geometric.
        override: replace the condition of an ``ApplyCorruption`` step that names
            another one (default); otherwise that is a ``ValueError`` (two places of the
            config name different conditions).

    Returns:
        One :class:`~reobench_mm.transforms.placement.Placement` per pipeline.

    Raises:
        KeyError: unknown corruption. ValueError: bad severity/protocol/border, no test
        pipeline, or a pipeline with more than one ``ApplyCorruption``. TypeError: a
        condition together with settings.
    """
    condition = Condition.of(corruption, severity, seed, protocol, border)
    pipelines = get_test_pipelines(cfg)
    edited = [copy.deepcopy(list(pipeline)) for _, pipeline in pipelines]
    placements = [place_condition(dict(dataset=dict(pipeline=pipeline)), condition,
                                  cfg.get('default_scope'), geometric, override)[0]
                  for pipeline in edited]  # all checked before any is changed
    for (key, pipeline), new, placement in zip(pipelines, edited, placements):
        pipeline[:] = new
        if placement.moved_from is not None:
            print_log(f'{key}: {placement.describe()}', logger='current',
                      level=logging.WARNING)
    if corruption_loop_condition(cfg) is not None:
        cfg.test_cfg.update(condition.settings())
    return placements


def corruption_loop_condition(cfg: Config) -> Optional[Condition]:
    """The condition of a ``CorruptionTestLoop`` test loop (defaults filled in), or None
    when ``test_cfg`` is another loop or a ``CorruptionTestLoop`` without a condition
    (which runs the pipeline as it is written).

    Raises:
        ValueError: unknown keys, a corruption without a severity (or the reverse),
            settings without a corruption, bad values.
    """
    loop = cfg.get('test_cfg') or {}
    if _loop_type(loop) != CORRUPTION_LOOP:
        return None
    unknown = set(loop) - {'type', *CORRUPTION_LOOP_OPTIONS}
    if unknown:
        raise other_option_error(unknown)
    check_condition_pair(loop.get('corruption'), loop.get('severity'), 'test_cfg')
    if loop.get('corruption') is None:
        given = [f'test_cfg.{k}' for k in CONDITION_FIELDS if loop.get(k) is not None]
        if given:
            raise ValueError(f'{", ".join(given)} given without test_cfg.corruption')
        return None
    return Condition.from_settings({k: loop[k] for k in CONDITION_FIELDS
                                    if loop.get(k) is not None})


def _loop_type(loop: dict) -> str:
    kind = loop.get('type', 'TestLoop')
    return kind.rsplit('.', 1)[-1] if isinstance(kind, str) else getattr(kind, '__name__', '')


def _test_loop_options(cfg: Config) -> dict:
    """``test_cfg`` without its type and condition, after checking that it is a
    ``TestLoop`` or a ``CorruptionTestLoop``."""
    loop = dict(cfg.get('test_cfg') or {})
    if _loop_type(loop) not in ('TestLoop', CORRUPTION_LOOP):
        raise ValueError(f'a corruption needs test_cfg of type TestLoop or {CORRUPTION_LOOP}; '
                         f'this config has test_cfg.type={loop.get("type")!r}')
    return {k: v for k, v in loop.items() if k != 'type' and k not in CONDITION_FIELDS}


def use_corruption_loop(cfg: Config, condition: Condition) -> None:
    """Make ``test_cfg`` a ``CorruptionTestLoop`` with ``condition``, keeping its other
    options (e.g. ``fp16``).

    Raises:
        ValueError: ``test_cfg`` is a loop other than ``TestLoop``/``CorruptionTestLoop``.
    """
    cfg.test_cfg = ConfigDict(type=CORRUPTION_LOOP, **_test_loop_options(cfg),
                              **condition.settings())


def applied_condition(cfg: Config) -> Condition:
    """What a test run of the config applies: the condition of its ``CorruptionTestLoop``,
    else that of the test pipeline's ``ApplyCorruption`` step;
    :data:`~reobench_corruptions.condition.CLEAN` when there is none or the step is a
    no-op."""
    condition = corruption_loop_condition(cfg)
    if condition is None:
        _, pipeline = get_test_pipelines(cfg)[0]
        steps = [step for step in pipeline if is_corruption_step(step)]
        condition = step_condition(steps[0]) if steps else CLEAN
    return CLEAN if condition.is_clean else condition


def corruption_settings(cfg: Config) -> Dict[str, Any]:
    """The settings of :func:`applied_condition` (a wrapper kept for callers that read
    them as a dict)."""
    return applied_condition(cfg).settings()


def check_no_corruption_cfg(cfg: Config) -> None:
    """Refuse configs that set ``corruption_cfg``: no entry point reads such a variable, so
    a run would report clean numbers while the config says otherwise."""
    if cfg.get('corruption_cfg') is not None:
        raise ValueError(
            'this config sets corruption_cfg, which nothing reads: set the condition as '
            f"test_cfg=dict(type='{CORRUPTION_LOOP}', corruption=..., severity=...) (or "
            '--cfg-options test_cfg.corruption=NAME test_cfg.severity=K, or --corruption '
            'NAME --severity K) and remove corruption_cfg')


def corruption_tag(corruption: str = CLEAN_NAME, severity: int = 0, seed: int = 0,
                   protocol: str = 'reobench', border: str = 'reflect') -> str:
    """``Condition(corruption, severity, seed, protocol, border).tag`` (a wrapper kept for
    callers of the loose settings): ``clean`` or ``{corruption}_s{severity}``, with a
    non-default protocol prefixed and a non-zero seed and a constant border (geometric
    ones) appended: ``geofm_calibration_motion_blur_s3``, ``rotate_s2_constant_seed1``."""
    return Condition(corruption, severity, seed, protocol, border).tag


def tagged_path(path: str, tag: str, is_dir: bool = False) -> str:
    """``preds.pkl`` -> ``preds_{tag}.pkl``; a folder ``out/`` -> ``out_{tag}``."""
    path = path.rstrip('/\\') or path
    stem, ext = (path, '') if is_dir else osp.splitext(path)
    return f'{stem}_{tag}{ext}'


# ----------------------------------------------------------------------------- reading

#: Config file suffixes MMEngine reads with its YAML loader.
YAML_SUFFIXES = ('.yml', '.yaml')


def _check_yaml_config(path: str, seen: Tuple[str, ...] = ()) -> None:
    """Refuse a YAML config (or YAML ``_base_`` of one) that holds a tag which would run
    code while MMEngine reads it (``!!python/...``: MMEngine loads YAML with PyYAML's
    unsafe loader); a YAML config is data. Its YAML bases are checked too."""
    import yaml
    try:
        with open(path, encoding='utf-8') as handle:
            data = yaml.safe_load(handle)
    except yaml.constructor.ConstructorError as error:
        tag = getattr(error, 'problem', '') or str(error)
        raise ValueError(f'config {path!r} is refused: it holds a YAML tag that would run '
                         f'code while it is read ({" ".join(tag.split())}). A YAML config is '
                         'data; write a .py config where code is meant') from None
    except yaml.YAMLError as error:
        raise ValueError(f'config {path!r} is not valid YAML: {" ".join(str(error).split())}'
                         ) from None
    bases = data.get('_base_') if isinstance(data, dict) else None
    for base in [bases] if isinstance(bases, str) else list(bases or []):
        if not isinstance(base, str) or '::' in base:
            continue
        full = osp.normpath(osp.join(osp.dirname(path), base))
        if full.lower().endswith(YAML_SUFFIXES) and osp.isfile(full) and full not in seen:
            _check_yaml_config(full, seen + (path, ))


def read_config(path: str) -> Config:
    """``Config.fromfile(path)`` for the package's tools and drivers, with two checks
    first: ``path`` is an existing file (a folder or a missing path is named as such), and
    a YAML config holds no tag that runs code (:func:`_check_yaml_config`). ``.py``
    configs are code by design and are read as MMEngine reads them.

    Raises:
        FileNotFoundError: no such file.
        ValueError: a folder, or a refused or invalid YAML config.
    """
    if osp.isdir(path):
        raise ValueError(f'config {path!r} is a folder, not a config file')
    if not osp.isfile(path):
        raise FileNotFoundError(f'config {path!r} does not exist')
    if path.lower().endswith(YAML_SUFFIXES):
        _check_yaml_config(osp.abspath(path))
    return Config.fromfile(path)


# ----------------------------------------------------------------------------- the tools

def _load(config: str, cfg_options: Optional[dict], launcher: str) -> Config:
    cfg = read_config(config)
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
    if '://' in path:
        return
    if osp.isdir(path):
        raise ValueError(f'{what} {path!r} is a folder, not a checkpoint file')
    if not osp.isfile(path):
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
    task: str  # SEGMENTATION or ROTATED_DETECTION (reobench_mm.evaluation.keys)
    condition: Condition  # what the test pipeline applies
    metrics_file: str  # {work_dir}/metrics_{tag}.json
    dump_file: Optional[str]  # detection --out: the tagged .pkl for DumpResults
    placements: Tuple[Placement, ...] = ()  # where the corruption step is, per pipeline
    robustness: bool = False  # test_cfg is a RobustnessTestLoop (every condition, one run)

    @property
    def tag(self) -> str:
        """The condition's file-name tag (``'clean'``, ``'cloud_s3'``, ...)."""
        return self.condition.tag

    @property
    def corruption(self) -> Dict[str, Any]:
        """The condition's settings, as the metrics file records them."""
        return self.condition.settings()


def prepare_test_config(config: str, checkpoint: str, work_dir: Optional[str] = None,
                        out: Optional[str] = None, show: bool = False,
                        show_dir: Optional[str] = None, wait_time: float = 2,
                        cfg_options: Optional[dict] = None, launcher: str = 'none',
                        corruption: Union[Condition, Mapping[str, Any], None] = None,
                        geometric: Optional[bool] = None,
                        robustness: bool = False) -> PreparedTest:
    """The test config as ``tools/test.py`` runs it, with the condition it applies.

    The condition comes from ``corruption`` (the command-line flags: a
    :class:`~reobench_corruptions.condition.Condition`, or its settings, those left out
    taking their defaults) if given, else
    from the config's ``CorruptionTestLoop`` (``test_cfg``, which ``--cfg-options
    test_cfg.corruption=... test_cfg.severity=...`` may have set; a plain ``TestLoop`` given
    a condition that way becomes a ``CorruptionTestLoop``), else from the config's test
    pipeline as it is. With a condition, ``test_cfg`` becomes a ``CorruptionTestLoop`` and
    the ``ApplyCorruption`` step is placed in the test pipelines (a misplaced one is
    moved; ``geometric=True`` places it for geometric corruptions whatever the condition,
    as :func:`insert_corruption`). ``out`` and ``show_dir`` get the corruption tag as
    suffix.
    ``out``: segmentation, a folder for the predicted label maps (IoUMetric
    ``output_dir``); detection, a ``.pkl`` file of the raw predictions (MMRotate's
    ``DumpResults``, added by the tool). Metrics go to ``{work_dir}/metrics_{tag}.json``.
    With ``robustness`` (the robustness tools, or options of the robustness loop given in
    ``--cfg-options test_cfg....``) a ``CorruptionTestLoop`` or ``TestLoop`` without a
    condition becomes a ``RobustnessTestLoop`` keeping its options.
    """
    _check_checkpoint(checkpoint, 'checkpoint')
    cfg = _load(config, cfg_options, launcher)
    get_test_pipelines(cfg)  # a clear error for configs that cannot be tested
    task = infer_task(cfg)
    _set_work_dir(cfg, config, work_dir)
    cfg.load_from = checkpoint
    check_no_corruption_cfg(cfg)
    condition = corruption if corruption is None or isinstance(corruption, Condition) \
        else Condition.from_settings(corruption)
    override = condition is not None  # the command line wins over the config
    loop = cfg.get('test_cfg') or {}
    if robustness and corruption is None and _loop_type(loop) in ('TestLoop', CORRUPTION_LOOP) \
            and not any(loop.get(key) is not None for key in CONDITION_FIELDS):
        loop['type'] = ROBUSTNESS_LOOP  # its options are the robustness loop's
    if _loop_type(loop) == 'TestLoop' and any(key in loop for key in CONDITION_FIELDS):
        # --cfg-options test_cfg.corruption=... on a config with MMEngine's TestLoop
        loop['type'] = CORRUPTION_LOOP
    if condition is None:
        condition = corruption_loop_condition(cfg)
    if condition is None:  # the condition the test pipeline's own step names, if any
        written = applied_condition(cfg)
        if not written.is_clean:
            condition = written
    placements: List[Placement] = []
    if condition is not None:
        placements = insert_corruption(cfg, condition, geometric=geometric,
                                       override=override)
        use_corruption_loop(cfg, condition)
    condition = applied_condition(cfg)
    tag = condition.tag

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
    robustness = _loop_type(cfg.get('test_cfg') or {}) == ROBUSTNESS_LOOP
    metrics_file = osp.join(cfg.work_dir,
                            f'metrics_{"robustness" if robustness else tag}.json')
    return PreparedTest(cfg, task, condition, metrics_file, dump_file, tuple(placements),
                        robustness)
