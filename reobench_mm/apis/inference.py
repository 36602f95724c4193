"""Inference under conditions: what a model predicts for one image, clean and corrupted.

In the style of MMSegmentation's ``init_model``/``inference_model`` and MMDetection's
``inference_detector``, with the package's switchable corruption step placed in the
config's test pipeline exactly as the robustness loops place it::

    from reobench_mm.apis import init_model, predict_conditions, show_conditions

    model = init_model('configs/demo/upernet_r18-tiny_1xb4-600i_demo-potsdam-128x128.py',
                       'work_dirs/demo/iter_600.pth')
    result = predict_conditions(model, 'tile.png', ['clean', 'haze@3', 'rotate@2'],
                                label='tile_label.png')
    result['haze@3'].prediction.pred_sem_seg   # the model's SegDataSample
    show_conditions(result, 'grid.png')

The prediction for a condition is the one :class:`~reobench_mm.robustness.test_loop.
RobustnessTestLoop` makes for the same image under it: the same pipeline (the config's
test pipeline with the ``ApplyCorruption`` step placed by
:func:`~reobench_mm.transforms.placement.place_condition`, for geometric corruptions
whatever the conditions, as the loops place it) and the same random draws (keyed by the
image's file name, :meth:`~reobench_mm.transforms.corruption.ApplyCorruption.sample_key`).
An image given as an array has no file name: its draws are keyed by the ``key`` given
with it, which is therefore required.
"""
from __future__ import annotations

import copy
import os
import os.path as osp
from dataclasses import dataclass
from typing import Any, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from mmengine.config import Config
from mmengine.registry import DefaultScope

from reobench_corruptions import PROTOCOLS, list_corruptions
from reobench_corruptions.condition import Condition
from ..datasets.image_files import image_file_problem
from ..engine.checkpoint import check_checkpoint_classes, load_checkpoint_strict
from ..evaluation.evaluator_cfg import label_ignore_index
from ..errors import SweepError
from ..evaluation.keys import SEGMENTATION, get_task
from ..registry import DATASETS, MODELS, ensure_custom_imports
from ..robustness.conditions import CONDITION_KINDS, BatchContext, get_condition_kind
from ..transforms.corruption import ApplyCorruption
from ..transforms.placement import (dataset_pipelines, inner_steps,
                                    is_annotation_loading_name, is_image_loading_name,
                                    label_step_position, place_condition, transform_name)
from ..utils.config import infer_task, read_config

__all__ = ['ConditionPrediction', 'ConditionPredictions', 'init_model', 'predict_conditions',
           'parse_conditions', 'IMAGE_DTYPES']

#: The pixel types an image array may have (those the corruption engine takes).
IMAGE_DTYPES = (np.uint8, np.uint16, np.float16, np.float32, np.float64)
#: The from-array image loader of each task (the toolbox's own).
_ARRAY_LOADERS = {SEGMENTATION: 'mmseg.LoadImageFromNDArray'}
_DEFAULT_ARRAY_LOADER = 'mmdet.LoadImageFromNDArray'
ConditionLike = Union[str, Condition]


# ----------------------------------------------------------------------------- results

@dataclass(frozen=True)
class ConditionPrediction:
    """What the model did under one condition.

    Attributes:
        condition: the condition.
        image: the corrupted input as the model saw it before normalisation (``H×W×C``
            numpy array, the pipeline's dtype and channel order, after its resizing).
        prediction: the model's data sample (``SegDataSample`` with ``pred_sem_seg`` and
            ``seg_logits``; ``DetDataSample`` with ``pred_instances``, rotated boxes in
            the original image's coordinates).
        label: the label map moved as the image was (geometric corruptions; the label
            the metrics ignore where it has no source content), ``H×W`` at its original
            size; None without a label.
    """
    condition: Condition
    image: np.ndarray
    prediction: Any
    label: Optional[np.ndarray] = None

    @property
    def key(self) -> str:
        """``'clean'``, ``'<corruption>@<severity>'`` or an attack's ``'adv/pgd_eps4'``."""
        return self.condition.key


@dataclass(frozen=True)
class ConditionPredictions:
    """The predictions of one image under several conditions, in the order asked.

    Index it by position or by condition key (``result['haze@3']``); iterate over the
    :class:`ConditionPrediction` entries; ``keys()``, ``values()``, ``items()`` and ``in``
    as on a dict keyed by condition.

    Attributes:
        source: the image's path, or ``'<array>'``.
        key: the sample key the random draws were keyed by (the file name, or the key
            given with an array).
        task: ``'segmentation'`` or ``'rotated_detection'``.
        channel_order: the order of 3-band images in :attr:`ConditionPrediction.image`
            (the corruption step's, ``'bgr'`` as MMCV loads files).
        full_scale: the value that maps to full brightness (255 for uint8, 65535 for
            uint16, the corruption step's ``max_value`` or 1.0 for floats).
        dataset_meta: the model's ``dataset_meta`` (classes, palette).
        ignore_index: the label written where a moved label map has no source content.
        entries: one :class:`ConditionPrediction` per condition.
    """
    source: str
    key: Union[str, int]
    task: str
    channel_order: str
    full_scale: float
    dataset_meta: dict
    ignore_index: int
    entries: Tuple[ConditionPrediction, ...]

    def keys(self) -> List[str]:
        """The condition keys, in order (as a dict's ``keys()``)."""
        return [entry.key for entry in self.entries]

    def values(self) -> List[ConditionPrediction]:
        """The entries, in order."""
        return list(self.entries)

    def items(self) -> List[Tuple[str, ConditionPrediction]]:
        """``(condition key, entry)`` pairs, in order (as a dict's ``items()``)."""
        return [(entry.key, entry) for entry in self.entries]

    def __contains__(self, key: object) -> bool:
        return any(entry.key == key for entry in self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Iterator[ConditionPrediction]:
        return iter(self.entries)

    def __getitem__(self, index: Union[int, str]) -> ConditionPrediction:
        if isinstance(index, str):
            for entry in self.entries:
                if entry.key == index:
                    return entry
            raise KeyError(f'no condition {index!r} in this result; it has {self.keys()}')
        return self.entries[index]


# ----------------------------------------------------------------------------- the model

def _as_config(config: Union[str, os.PathLike, Config],
               cfg_options: Optional[dict]) -> Config:
    if isinstance(config, (str, os.PathLike)):
        config = read_config(os.fspath(config))
    elif isinstance(config, Config):
        config = copy.deepcopy(config)
    else:
        raise TypeError(f'config must be a file path or an mmengine Config, got '
                        f'{type(config).__name__}')
    if cfg_options:
        config.merge_from_dict(cfg_options)
    ensure_custom_imports(config)
    from mmengine.utils import import_modules_from_strings
    import_modules_from_strings(**config.custom_imports)
    return config


def _test_dataset(cfg: Config) -> Any:
    """The config's test dataset, built without reading its annotations (its metainfo and
    label settings only)."""
    dataset = copy.deepcopy(cfg.get('test_dataloader', {}).get('dataset'))
    if not isinstance(dataset, dict):
        raise ValueError('the config has no test_dataloader.dataset to take the test '
                         'pipeline, classes and label settings from')
    dataset['lazy_init'] = True
    with DefaultScope.overwrite_default_scope(cfg.get('default_scope')):
        return DATASETS.build(dataset)


def init_model(config: Union[str, os.PathLike, Config], checkpoint: Optional[str] = None,
               device: Union[str, torch.device] = 'cpu',
               cfg_options: Optional[dict] = None) -> torch.nn.Module:
    """Build a segmentor or rotated detector from a config and load its checkpoint.

    The model is built under the config's ``default_scope`` with the config's
    ``custom_imports`` (the package's among them), and the checkpoint is loaded strictly
    (:func:`~reobench_mm.engine.checkpoint.load_checkpoint_strict`: every key must fit).
    ``model.cfg`` keeps the config (with ``cfg_options`` merged) and ``model.dataset_meta``
    the classes and palette: the checkpoint's, else the test set's. A checkpoint trained on
    other classes than the config's test set is refused, as the test loops refuse it.

    Args:
        config: a config file path or an mmengine ``Config`` (copied, not changed).
        checkpoint: the checkpoint path or URL; None keeps the freshly built weights.
        device: where the model runs (``'cpu'``, ``'cuda:0'``).
        cfg_options: settings merged into the config (``{'model.test_cfg.mode': ...}``).

    Returns:
        The model, in eval mode.

    Raises:
        FileNotFoundError, ValueError: a missing or refused config.
        CheckpointError: an unusable checkpoint, or one that does not fit the model.
    """
    cfg = _as_config(config, cfg_options)
    test_meta = dict(_test_dataset(cfg).metainfo)
    with DefaultScope.overwrite_default_scope(cfg.get('default_scope')):
        model = MODELS.build(cfg.model)
    meta = test_meta
    if checkpoint is not None:
        loaded = load_checkpoint_strict(model, checkpoint,
                                        config=getattr(cfg, 'filename', None))
        check_checkpoint_classes(loaded, test_meta, checkpoint)
        saved = (loaded.get('meta') or {}).get('dataset_meta')
        if isinstance(saved, dict) and saved.get('classes'):
            meta = {**test_meta, **saved}
    model.dataset_meta = meta
    model.cfg = cfg
    model.to(device)
    model.eval()
    return model


# ----------------------------------------------------------------------------- conditions

def _attack_kind() -> Any:
    return get_condition_kind('attack')


def _attack_conditions(attacks: Optional[Mapping[str, Any]], task: str, label: Any,
                       clean: Condition) -> List[Any]:
    """The attack conditions of ``attacks`` (as the loops parse and check them).

    Raises:
        SweepError: a bad attack, a task without an objective for it, or no label."""
    if not attacks:
        return []
    if task != SEGMENTATION:
        raise SweepError(f'attacks on one image are taken for segmentation models, with '
                         f'label= (this model does {task}); evaluate them with '
                         'RobustnessTestLoop(attacks=...)')
    if label is None:
        raise SweepError('attacks need the image\'s label map (label=...): an attack '
                         'maximises the model\'s loss against it')
    kind = _attack_kind()
    entries = kind.parse(attacks, clean.protocol)
    kind.check_task(entries, task)
    return kind.conditions(entries, clean)


def _refuse_other_kinds(key: str) -> None:
    """Refuse the key of a condition of another kind than a corruption (a shift set's,
    an attack's), naming its kind: one image under it needs the run's data or model."""
    prefix = key.split('/', 1)[0] if '/' in key else None
    for kind in CONDITION_KINDS:
        if prefix is not None and kind.prefix == prefix:
            raise ValueError(f'{key!r} is a condition of kind {kind.name!r}: '
                             "predict_conditions takes corruption conditions ('clean', "
                             f"'haze@3'); evaluate {kind.name} conditions with "
                             f'RobustnessTestLoop({kind.option}=...)')


def parse_conditions(conditions: Union[ConditionLike, Sequence[ConditionLike]], *,
                     seed: int = 0, protocol: str = 'reobench',
                     border: str = 'reflect') -> List[Condition]:
    """Conditions from keys (``'clean'``, ``'haze@3'``, with ``seed``, ``protocol`` and
    ``border``) and :class:`~reobench_corruptions.condition.Condition` objects (kept as
    they are).

    Raises:
        ValueError: no condition, a key that is no condition of ``protocol`` (the message
            lists its corruptions), or one condition twice.
        TypeError: an entry that is neither a key nor a condition.
    """
    if isinstance(conditions, (str, Condition)):
        conditions = [conditions]
    out: List[Condition] = []
    for given in conditions:
        if isinstance(given, Condition):
            condition = given
        elif isinstance(given, str):
            _refuse_other_kinds(given)
            try:
                condition = Condition.from_key(given, protocol, seed, border)
            except (KeyError, ValueError) as error:
                text = error.args[0] if isinstance(error, KeyError) else str(error)
                if 'valid' not in text and protocol in PROTOCOLS:  # name the corruptions
                    text += (f'; the corruptions of protocol {protocol!r}: '
                             f'{", ".join(list_corruptions(protocol))}')
                raise ValueError(f'bad condition {given!r}: {text}') from None
        else:
            raise TypeError(f"a condition is a key ('clean', 'haze@3') or a Condition, got "
                            f'{given!r}')
        if any(c.key == condition.key for c in out):
            raise ValueError(f'condition {condition.key!r} is given twice; give each once')
        out.append(condition)
    if not out:
        raise ValueError("no condition given: give at least one, e.g. ['clean', 'haze@3']")
    return out


# ----------------------------------------------------------------------------- inputs

def _check_array(image: np.ndarray, what: str) -> None:
    if image.ndim not in (2, 3) or 0 in image.shape:
        raise ValueError(f'{what} must be an H×W×C (or H×W) array, got shape {image.shape}')
    if image.dtype.type not in IMAGE_DTYPES:
        raise ValueError(f'{what} has dtype {image.dtype}; the corruption engine takes '
                         f'{", ".join(np.dtype(t).name for t in IMAGE_DTYPES)}')


def _model_channels(model: torch.nn.Module) -> Optional[Tuple[int, str]]:
    """``(channels, where it is said)`` the model takes: its data preprocessor's mean
    (one value per channel), else its backbone's ``in_channels``; None when neither
    says."""
    mean = getattr(getattr(model, 'data_preprocessor', None), 'mean', None)
    if isinstance(mean, torch.Tensor) and mean.numel() > 1:
        return int(mean.numel()), "its data preprocessor's mean has one value per channel"
    channels = getattr(getattr(model, 'backbone', None), 'in_channels', None)
    if isinstance(channels, int) and not isinstance(channels, bool):
        return channels, "its backbone's in_channels"
    return None


def _check_bands(image: np.ndarray, model: torch.nn.Module) -> None:
    """Refuse an array whose band count is not the model's channel count (the model
    would fail deep inside with a tensor-size message)."""
    takes = _model_channels(model)
    bands = 1 if image.ndim == 2 else int(image.shape[2])
    if takes is not None and bands != takes[0]:
        raise ValueError(
            f'the image has {bands} band(s) but the model takes {takes[0]} channel(s) '
            f'({takes[1]}): select {takes[0]} of its bands in the order the model was '
            f'trained on (e.g. image[..., :{takes[0]}]), or use a model built for '
            f'{bands} bands')


def _image_input(image: Union[str, os.PathLike, np.ndarray],
                 key: Union[str, int, None]) -> Tuple[dict, str, Union[str, int]]:
    """``(results, source, sample key)`` of the image: a path or an array with its key."""
    if isinstance(image, np.ndarray):
        if key is None:
            raise ValueError(
                'an image array needs key= (the sample key its random draws are keyed by, '
                "e.g. its file name 'tile_0001.png'): the corruption step keys every random "
                'draw (noise, clouds, ...) by the image\'s file name, and an array has none, '
                'so without a key every image would get the same draws. Give the file name '
                'the image has in its dataset to get the draws the robustness loops give it')
        if isinstance(key, bool) or not isinstance(key, (str, int)) or key == '':
            raise ValueError(f'key must be a non-empty string or an integer, got {key!r}')
        _check_array(image, 'the image')
        return dict(img=image, sample_idx=key, img_id=key), '<array>', key
    path = _existing_file(image, 'image', 'a file path or a numpy array')
    name = osp.basename(path)
    if key is not None and key != name:
        raise ValueError(f'key={key!r} given with the image file {path!r}: a file\'s draws are '
                         f'keyed by its file name ({name!r}); give key only with an array')
    return dict(img_path=path, img_id=osp.splitext(name)[0], sample_idx=name), path, name


def _existing_file(value: Any, what: str, valid: str) -> str:
    """``value`` as the path of an existing file; a TypeError naming what is ``valid``
    for anything but a path, a FileNotFoundError for a missing file, a ValueError for
    one that cannot be decoded (empty, text, cut short: named)."""
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f'{what} must be {valid}, got {type(value).__name__}')
    path = os.fspath(value)
    if not osp.isfile(path):
        raise FileNotFoundError(f'{what} {path!r} does not exist')
    problem = image_file_problem(path)
    if problem is not None:  # OpenCV would raise a traceback, or decode it cut short
        raise ValueError(f'{what} {path!r} {problem}')
    return path


def _label_input(label: Union[str, os.PathLike, np.ndarray], task: str, cfg: Config,
                 results: dict) -> bool:
    """Put the label into ``results``; returns whether the pipeline's annotation loading
    stays (a label file) or goes (an array, put in as loaded)."""
    if task != SEGMENTATION:
        raise ValueError(f'label= is supported for segmentation only (this model does '
                         f'{task}); leave it out')
    if isinstance(label, np.ndarray):
        if label.ndim != 2 or not np.issubdtype(label.dtype, np.integer):
            raise ValueError(f'a label array is an H×W array of class indices, got shape '
                             f'{label.shape} and dtype {label.dtype}')
        results.update(gt_seg_map=label.copy(), seg_fields=[])
        return False
    path = _existing_file(label, 'label', 'a label-map file path or an H×W array')
    dataset = _test_dataset(cfg)  # the label conversions of the test set
    results.update(seg_map_path=path, seg_fields=[],
                   reduce_zero_label=getattr(dataset, 'reduce_zero_label', False),
                   label_map=getattr(dataset, 'label_map', None))
    return True


def _test_pipeline(cfg: Config) -> list:
    """A copy of the config's test pipeline (the first image-loading pipeline of
    ``test_dataloader.dataset``, wrappers included; ``test_pipeline`` without one)."""
    dataset = cfg.get('test_dataloader', {}).get('dataset')
    for _, pipeline in dataset_pipelines(dataset):
        return copy.deepcopy(list(pipeline))
    top = cfg.get('test_pipeline')
    if isinstance(top, list) and any(is_image_loading_name(transform_name(s)) for s in top):
        return copy.deepcopy(list(top))
    raise ValueError('the config has no test pipeline with an image-loading step '
                     '(test_dataloader.dataset.pipeline or test_pipeline)')


def _adapt_pipeline(pipeline: list, task: str, array: bool, keep_annotations: bool,
                    label_array: bool = False) -> list:
    """The test pipeline for this input: an array is loaded by the toolbox's from-array
    loader (the file loader's ``to_float32`` kept); annotation loading (and box
    conversion) is dropped without a label file (a label array is put in as loaded,
    which needs a pipeline that loads the labels right after the image)."""
    names = [transform_name(step) for step in pipeline]
    if label_array and any(is_annotation_loading_name(n) for n in names) \
            and label_step_position(names) is not None:
        raise ValueError(
            'this test pipeline loads the labels after resizing the image (they keep their '
            'original size there), so a label array cannot be put in with the image: give '
            'the label as a file')
    out = []
    for step, name in zip(pipeline, names):
        if is_annotation_loading_name(name) and not keep_annotations:
            continue
        if array and is_image_loading_name(name):
            loader = dict(type=_ARRAY_LOADERS.get(task, _DEFAULT_ARRAY_LOADER))
            if step.get('to_float32'):
                loader['to_float32'] = True
            step = loader
        out.append(step)
    return out


# ----------------------------------------------------------------------------- prediction

def _to_numpy_image(inputs: torch.Tensor) -> np.ndarray:
    """A packed ``C×H×W`` input tensor as an ``H×W×C`` array."""
    return np.ascontiguousarray(inputs.detach().cpu().numpy().transpose(1, 2, 0))


def _run(transforms: Sequence[Any], results: dict, what: str) -> dict:
    for transform in transforms:
        results = transform(results)
        if results is None:
            raise RuntimeError(f'{transform_name(transform)} dropped the sample ({what})')
    return results


def predict_conditions(model: torch.nn.Module,
                       image: Union[str, os.PathLike, np.ndarray],
                       conditions: Union[ConditionLike, Sequence[ConditionLike]], *,
                       key: Union[str, int, None] = None,
                       label: Union[str, os.PathLike, np.ndarray, None] = None,
                       seed: int = 0, protocol: str = 'reobench', border: str = 'reflect',
                       ignore_index: Optional[int] = None,
                       attacks: Optional[Mapping[str, Any]] = None) -> ConditionPredictions:
    """What ``model`` predicts for one image under each condition.

    The config's test pipeline (``model.cfg``, as :func:`init_model` keeps it) gets the
    package's corruption step where the robustness loops place it; it is built once and
    switched per condition (``ApplyCorruption.set_condition``); the image is decoded once.
    Each condition's prediction is the one ``RobustnessTestLoop`` makes for the image.

    Args:
        model: a model from :func:`init_model` (it needs ``model.cfg``).
        image: an image file, or an ``H×W×C`` array (any band count; uint8, uint16 or
            float, as the corruption engine takes; 3-band arrays in BGR order, as OpenCV
            and MMCV load files).
        conditions: keys (``'clean'``, ``'haze@3'``, ``'rotate@2'``) or
            :class:`~reobench_corruptions.condition.Condition` objects.
        key: the sample key of an array (required with one): its random draws are keyed
            by it, as a file's are by its file name. The file name the image has in its
            dataset gives the draws the robustness loops give it.
        label: segmentation only: a label-map file (loaded as the test set loads its
            labels, e.g. with ``reduce_zero_label``) or an ``H×W`` array of class indices
            as loaded (the model's classes, ``ignore_index`` for ignored pixels). It is
            moved with the image by geometric corruptions.
        seed, protocol, border: the settings of conditions given as keys.
        ignore_index: the label written where a moved label map has no source content
            (default: the one the config's test evaluator ignores, as the loops use).
        attacks: adversarial attacks after the conditions, as ``RobustnessTestLoop``
            takes them (``dict(pgd=dict(eps=[4], steps=10))``; with ``corruptions`` and
            ``severities`` an attack on a corrupted image): each budget's prediction is
            the loop's for this image (the same attack, its draws keyed by the sample
            key), keyed ``'adv/pgd_eps4'``; its image is the adversarial input (float32,
            the pipeline's units). Segmentation, with ``label``: the attack maximises the
            model's loss against it.

    Returns:
        A :class:`ConditionPredictions`.

    Raises:
        ValueError: an array without a key, a bad condition, a bad image or label.
        SweepError (a ValueError): a bad attack, or attacks without what they need (a
            segmentation model and its label).
        FileNotFoundError: a missing image or label file.
    """
    cfg = getattr(model, 'cfg', None)
    if not isinstance(cfg, Config):
        raise ValueError('the model has no config (model.cfg): build it with init_model')
    task = infer_task(cfg)
    wanted = parse_conditions(conditions, seed=seed, protocol=protocol, border=border)
    attacked = _attack_conditions(attacks, task, label, Condition(
        seed=seed, protocol=protocol, border=border))
    results, source, sample_key = _image_input(image, key)
    if isinstance(image, np.ndarray):
        _check_bands(image, model)
    keep_annotations = label is not None and _label_input(label, task, cfg, results)
    pipeline = _adapt_pipeline(_test_pipeline(cfg), task, isinstance(image, np.ndarray),
                               keep_annotations, isinstance(label, np.ndarray))
    if ignore_index is None:
        ignore_index = label_ignore_index(cfg.get('test_evaluator'))
    scope = cfg.get('default_scope')
    # placed as the robustness loops place it: for geometric corruptions, whatever the
    # conditions, so that one pipeline serves them all
    place_condition(dict(dataset=dict(pipeline=pipeline)), wanted[0].clean(), scope,
                    geometric=True, override=True, ignore_index=ignore_index)
    from mmengine.dataset import Compose, pseudo_collate
    with DefaultScope.overwrite_default_scope(scope):
        transforms = list(Compose(pipeline).transforms)
    first = next(i for i, t in enumerate(transforms) if isinstance(t, ApplyCorruption))
    steps = [s for t in transforms for s in (t, *inner_steps(t))
             if isinstance(s, ApplyCorruption)]
    loaded = _run(transforms[:first], results, source)  # decoded once
    step = transforms[first]
    from reobench_corruptions.band_values import per_band_full_scales
    from reobench_corruptions.base import full_scale

    def batch_under(condition: Condition) -> dict:
        for one in steps:
            one.set_condition(condition)
        return pseudo_collate([_run(transforms[first:], copy.deepcopy(loaded),
                                    f'{source}, {condition.key}')])

    entries = []
    classes = len((getattr(model, 'dataset_meta', None) or {}).get('classes') or ())
    for condition, attack in [(c, False) for c in wanted] + [(c, True) for c in attacked]:
        if attack:  # the loop's attack of this kind, on its base condition's batch
            batch = _attack_kind().batches(condition, BatchContext(
                model, get_task(task), ignore_index, classes)).apply(
                    batch_under(condition.base))
        else:
            batch = batch_under(condition)
        with torch.no_grad():
            prediction = model.test_step(batch)[0]
        gt = getattr(batch['data_samples'][0], 'gt_sem_seg', None)
        entries.append(ConditionPrediction(
            condition=condition, image=_to_numpy_image(batch['inputs'][0]),
            prediction=prediction,
            label=None if gt is None or label is None else gt.data[0].cpu().numpy()))
    image_dtype = entries[0].image.dtype
    # a per-band max_value: the display (its first three bands) takes their largest
    bands = 1 if entries[0].image.ndim == 2 else entries[0].image.shape[-1]
    per_band = per_band_full_scales(image_dtype, step.max_value, bands,
                                    loaded.get('band_names'))
    scale = max(per_band[0][:3]) if per_band else full_scale(image_dtype, step.max_value)
    return ConditionPredictions(
        source=source, key=sample_key, task=task, channel_order=step.channel_order,
        full_scale=float(scale),
        dataset_meta=dict(getattr(model, 'dataset_meta', None) or {}),
        ignore_index=int(step.ignore_index), entries=tuple(entries))
