"""Where ``ApplyCorruption`` goes in a data pipeline.

A corruption's severity table is defined on the original image, and a geometric
corruption must move the labels with the image. So the step belongs right after image
loading (and the loading steps that directly follow it: annotation loading, box-type
conversion), before anything that resizes, crops, pads or flips the image — for every
corruption. Where the annotations are loaded there too (this project's pipelines), a
geometric corruption (``rotate``, ``scale``, ``translate``) moves image and labels in
that one step.

The toolboxes' own test pipelines load the annotations *after* ``Resize`` (so that the
ground truth keeps its original resolution). There a geometric corruption is applied in
two parts, both at the original size: the image part right after the image loading
(``ApplyCorruption(labels_later=True)``, which records the transform it applied), and
:class:`~.corruption.ApplyCorruptionToLabels` right after the last annotation loading
(and box-type conversion), which moves the labels by that transform. So every corruption
works on the toolboxes' pipelines in their own order, with the labels scored at the size
the toolboxes score them. ``ApplyCorruption`` checks at run time that the image still has
its original size and refuses it otherwise, so a wrong placement cannot go unnoticed.

The functions here work on config lists (dicts with ``type``) and on built pipelines
(transform objects) alike; conditions come and go as
:class:`~reobench_corruptions.condition.Condition`.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple

from reobench_corruptions.condition import CLEAN, CLEAN_NAME, CONDITION_FIELDS, Condition
from .corruption import ApplyCorruption, ApplyCorruptionToLabels

__all__ = [
    'CORRUPTION_TYPE', 'LABEL_STEP_TYPE', 'BOX_CONVERSIONS', 'CORRUPTION_META_KEYS',
    'Placement', 'label_step_position', 'is_label_step', 'place_label_step',
    'transform_name', 'is_image_loading_name', 'is_annotation_loading_name',
    'is_loading_name', 'is_corruption_step', 'corruption_position', 'is_valid_position',
    'place_corruption', 'dataset_pipelines', 'built_dataset_pipelines',
    'add_corruption_meta_keys', 'place_condition', 'step_condition', 'condition_of',
    'check_no_nested_corruption', 'check_condition_pair', 'corruption_steps', 'inner_steps',
    'label_pipelines', 'stop_live_workers'
]

CORRUPTION_TYPE = 'ApplyCorruption'
#: The label part of a geometric corruption whose labels are loaded after the image step.
LABEL_STEP_TYPE = 'ApplyCorruptionToLabels'
#: ``ApplyCorruption``'s own ``ignore_index`` (the label written where a moved label map
#: has no source content).
DEFAULT_STEP_IGNORE_INDEX = inspect.signature(ApplyCorruption).parameters['ignore_index'].default
BOX_CONVERSIONS = ('ConvertBoxType', 'ConvertMask2BoxType')
#: What ``ApplyCorruption`` adds to the results; the packing step carries them into the
#: sample's metainfo.
CORRUPTION_META_KEYS = CONDITION_FIELDS[:2]


def check_condition_pair(corruption: Optional[str], severity: Optional[int],
                         where: str = 'the condition') -> None:
    """Refuse a corruption without a severity (or with severity 0) and a severity without
    a corruption: either would run clean under a corrupted label."""
    named = corruption is not None and corruption != CLEAN_NAME
    if named and (severity is None or severity == 0):
        raise ValueError(f'{where} names corruption {corruption!r} but severity '
                         f'{severity!r}: give a severity in 1..5 (0 would run it clean)')
    if not named and severity not in (None, 0):
        raise ValueError(f'{where} gives severity {severity!r} but corruption '
                         f'{corruption!r}: name a corruption (or severity 0 for clean)')


def transform_name(step: Any) -> str:
    """The class name of a transform, without a scope prefix: ``'Resize'`` for
    ``dict(type='mmdet.Resize')``, for ``dict(type=Resize)`` and for a built ``Resize``."""
    if isinstance(step, dict):
        kind = step.get('type')
        if isinstance(kind, str):
            return kind.rsplit('.', 1)[-1]
        return getattr(kind, '__name__', '')
    return type(step).__name__


def is_image_loading_name(name: str) -> bool:
    """``LoadImageFromFile``, ``LoadMultipleRSImageFromFile``, ``LoadImageFromNDArray``..."""
    return name.startswith('Load') and 'Image' in name


#: Steps that set how the loaded labels are scored; they belong to the loading, so a
#: corruption (a geometric one moving the labels) comes after them.
LABEL_RULE_STEPS = ('ErodeLabelBoundaries', 'IgnoreNodataLabels')


def is_annotation_loading_name(name: str) -> bool:
    """Annotation loading (``LoadAnnotations``...), box-type conversion steps and label
    rules (:data:`LABEL_RULE_STEPS`)."""
    return name.startswith('Load') and 'Annotation' in name or name in BOX_CONVERSIONS \
        or name in LABEL_RULE_STEPS


def is_loading_name(name: str) -> bool:
    """Whether a transform class name is image loading, annotation loading or box-type
    conversion (the deterministic steps that may come before a corruption)."""
    return is_image_loading_name(name) or is_annotation_loading_name(name)


def is_corruption_step(step: Any) -> bool:
    return transform_name(step) == CORRUPTION_TYPE


def inner_steps(step: Any) -> Iterator[Any]:
    """The transforms nested in a wrapper step (``TestTimeAug``, ``RandomChoice``,
    ``Compose``...): config lists under ``transforms``, built ones under ``transforms``
    or ``subroutines``; lists of lists flattened."""
    if isinstance(step, dict):
        nested = [step.get('transforms')]
    else:
        nested = [getattr(step, 'transforms', None), getattr(step, 'subroutines', None)]
    for inner in nested:
        if inner is None:
            continue
        if hasattr(inner, 'transforms') and not isinstance(inner, (list, tuple, dict)):
            inner = inner.transforms
        if isinstance(inner, dict):
            inner = [inner]
        for item in inner if isinstance(inner, (list, tuple)) else []:
            if isinstance(item, (list, tuple)):
                for sub in item:
                    yield sub
                    yield from inner_steps(sub)
            else:
                yield item
                yield from inner_steps(item)


def check_no_nested_corruption(pipeline: Sequence[Any]) -> None:
    """Refuse an ``ApplyCorruption`` nested in a wrapper step (e.g. inside
    ``TestTimeAug``): it would escape the placement rules and the checks of what a run
    applies."""
    for step in pipeline:
        if any(is_corruption_step(inner) for inner in inner_steps(step)):
            raise ValueError(f'{CORRUPTION_TYPE} inside {transform_name(step)} is not '
                             f'supported: put it before {transform_name(step)}, at the top '
                             'level of the pipeline, where it runs once on the original '
                             'image')


def _image_loader(names: Sequence[str]) -> int:
    found = [i for i, name in enumerate(names) if is_image_loading_name(name)]
    if not found:
        raise ValueError('the pipeline has no image-loading step (e.g. LoadImageFromFile); '
                         f'steps: {list(names)}')
    return found[0]


def _appearance_range(names: Sequence[str]) -> Tuple[int, int]:
    """Positions (insertion indices) right after image loading: from just after the image
    loader to the end of the loading steps that directly follow it."""
    first = _image_loader(names) + 1
    last = first
    while last < len(names) and is_loading_name(names[last]):
        last += 1
    return first, last


def label_step_position(names: Sequence[str]) -> Optional[int]:
    """Where the label part of a geometric corruption goes among ``names`` (a pipeline
    without corruption steps): right after the last annotation loading or box conversion
    when one comes after a step that is not loading (the toolboxes' ``Resize`` before
    ``LoadAnnotations``); None when every annotation loading directly follows the image
    loading (the image step moves the labels itself)."""
    last = _appearance_range(names)[1]
    later = [i for i in range(last, len(names)) if is_annotation_loading_name(names[i])]
    return max(later) + 1 if later else None


def corruption_position(names: Sequence[str]) -> int:
    """Where ``ApplyCorruption`` goes among the steps ``names`` (a pipeline without it),
    as an index to insert at: right after the image loading and the loading steps that
    directly follow it, for every corruption (a geometric one needs the label step of
    :func:`label_step_position` too when the annotations are loaded later).

    Args:
        names: transform class names (see :func:`transform_name`).

    Raises:
        ValueError: the pipeline has no image-loading step.
    """
    return _appearance_range(names)[1]


def is_valid_position(names: Sequence[str], index: int, geometric: bool) -> bool:
    """Whether inserting at ``index`` of ``names`` (a pipeline without the step) is a
    right place (see the module docstring): for a pixel-value corruption anywhere in the
    loading steps right after the image loading, for a geometric one after all of them."""
    first, last = _appearance_range(names)
    return index == last if geometric else first <= index <= last


def is_label_step(step: Any) -> bool:
    return transform_name(step) == LABEL_STEP_TYPE


def _set_labels_later(step: Any, value: bool) -> None:
    if isinstance(step, dict):
        if value or step.get('labels_later'):
            step['labels_later'] = value
    else:
        step.labels_later = value


def place_label_step(pipeline: list, image_step: Any,
                      make_label_step: Callable[[], Any]) -> Optional[int]:
    """Give a pipeline whose annotations load after the image step one label step right
    after the last annotation loading (moved there, or inserted), and tell the image step
    (``labels_later``); remove label steps from a pipeline that needs none. Returns the
    label step's index (None without one)."""
    steps = [s for s in pipeline if is_label_step(s)]
    for step in steps:
        pipeline.remove(step)
    names = [transform_name(s) for s in pipeline]
    plain = [n for n in names if n != CORRUPTION_TYPE]
    needed = label_step_position(plain) is not None
    _set_labels_later(image_step, needed)
    if not needed:
        return None
    index = max(i for i, n in enumerate(names) if is_annotation_loading_name(n)) + 1
    pipeline.insert(index, steps[0] if steps else make_label_step())
    return index


@dataclass(frozen=True)
class Placement:
    """Where the corruption step of one pipeline ended up.

    Attributes:
        index: its index in the pipeline.
        names: the pipeline's transform names, the step included.
        moved_from: its index before it was moved (None: inserted, or left in place).
        inserted: whether it was added.
        label_index: the index of the label step (:data:`LABEL_STEP_TYPE`) that moves
            the labels of a geometric corruption loaded after the image step (None: the
            image step moves them itself, or no geometric corruption is placed).
    """
    index: int
    names: Tuple[str, ...]
    moved_from: Optional[int] = None
    inserted: bool = False
    label_index: Optional[int] = None

    def describe(self) -> str:
        """``'ApplyCorruption after LoadAnnotations, before PackSegInputs (step 4 of 5)'``;
        says whether it was moved or inserted, and notes steps that changed the image
        before it."""
        before = self.names[self.index - 1] if self.index > 0 else None
        after = self.names[self.index + 1] if self.index + 1 < len(self.names) else None
        text = (f'{self.names[self.index]} after {before or "nothing"}'
                f'{f", before {after}" if after else ""} '
                f'(step {self.index + 1} of {len(self.names)})')
        if self.inserted:
            text += ', inserted'
        elif self.moved_from is not None:
            text += f', moved from step {self.moved_from + 1}'
        between = [n for n in self.names[:self.index]
                   if not is_loading_name(n) and n != CORRUPTION_TYPE]
        if between:
            text += (f'; it runs after {", ".join(between)}, so it checks at run time that the '
                     'image still has its original size')
        if self.label_index is not None:
            text += (f'; the labels of geometric corruptions are moved by {LABEL_STEP_TYPE} '
                     f'after {self.names[self.label_index - 1]} (step '
                     f'{self.label_index + 1}), at their original size')
        return text


def place_corruption(pipeline: list, geometric: bool, make_step: Callable[[], Any],
                     move_misplaced: bool = True,
                     make_label_step: Optional[Callable[[], Any]] = None
                     ) -> Tuple[Any, Placement]:
    """Make sure ``pipeline`` (a config list or a built transform list, edited in place)
    has one ``ApplyCorruption`` step at a right place, and, for geometric corruptions
    where the annotations are loaded after it, a label step after the annotation loading.

    A missing step is made with ``make_step()`` and inserted at
    :func:`corruption_position`; an existing one at a wrong place is moved there (with
    ``move_misplaced``; otherwise left where it is). With ``geometric`` and
    ``make_label_step``, the label step (:func:`label_step_position`) is inserted (or
    moved) where the pipeline needs one and the image step gets ``labels_later``.

    Returns:
        ``(step, placement)``.

    Raises:
        ValueError: more than one ``ApplyCorruption`` step, one nested in a wrapper step,
            or no image loading.
    """
    check_no_nested_corruption(pipeline)
    found = [i for i, step in enumerate(pipeline) if is_corruption_step(step)]
    if len(found) > 1:
        raise ValueError(f'the pipeline has {len(found)} {CORRUPTION_TYPE} steps '
                         f'(at steps {[i + 1 for i in found]}); keep one')
    names = [transform_name(step) for step in pipeline]
    if not found:
        step, moved_from, inserted = make_step(), None, True
    else:
        current = found[0]
        step, inserted = pipeline[current], False
        plain = [n for i, n in enumerate(names) if i != current]
        moved_from = None if not move_misplaced or is_valid_position(
            plain, current, geometric) else current
    if inserted or moved_from is not None:
        if not inserted:
            pipeline.pop(moved_from)
        # label steps are not loading steps: they do not shift the image step's place
        pipeline.insert(corruption_position([transform_name(s) for s in pipeline]), step)
    label_index = None
    if geometric and make_label_step is not None:
        label_index = place_label_step(pipeline, step, make_label_step)
    index = next(i for i, s in enumerate(pipeline) if s is step)
    return step, Placement(index, tuple(transform_name(s) for s in pipeline),
                           moved_from=moved_from, inserted=inserted, label_index=label_index)


# ----------------------------------------------------------------------------- datasets

def dataset_pipelines(dataset: Any, path: str = 'dataset') -> Iterator[Tuple[str, list]]:
    """``(dotted path, pipeline list)`` of every image-loading pipeline in a dataset
    config and in the datasets it wraps (``dataset=`` and ``datasets=[...]``)."""
    if not isinstance(dataset, dict):
        return
    pipeline = dataset.get('pipeline')
    if isinstance(pipeline, list) and any(is_image_loading_name(transform_name(s))
                                          for s in pipeline):
        yield f'{path}.pipeline', pipeline
    yield from dataset_pipelines(dataset.get('dataset'), f'{path}.dataset')
    for i, inner in enumerate(dataset.get('datasets') or []):
        yield from dataset_pipelines(inner, f'{path}.datasets.{i}')


def built_dataset_pipelines(dataset: Any, path: str = 'dataset'
                            ) -> Iterator[Tuple[str, list]]:
    """The same for a built dataset: ``(path, transforms list)`` of every pipeline
    (``Compose``) with an image-loading step, wrappers included."""
    transforms = getattr(getattr(dataset, 'pipeline', None), 'transforms', None)
    inner = getattr(dataset, 'dataset', None)
    if isinstance(transforms, list) and any(is_image_loading_name(transform_name(t))
                                            for t in transforms):
        # a wrapper that shows its inner dataset's pipeline yields it once, as the inner's
        if inner is None or getattr(getattr(inner, 'pipeline', None), 'transforms',
                                    None) is not transforms:
            yield f'{path}.pipeline', transforms
    if inner is not None:
        yield from built_dataset_pipelines(inner, f'{path}.dataset')
    for i, inner in enumerate(getattr(dataset, 'datasets', None) or []):
        yield from built_dataset_pipelines(inner, f'{path}.datasets.{i}')


def corruption_steps(dataset: Any) -> list:
    """Every ``ApplyCorruption`` instance in the pipelines of a built ``dataset`` and of
    the datasets it wraps (``dataset``, ``datasets``), those nested in wrapper steps
    (``TestTimeAug``...) included.

    Raises:
        RuntimeError: one of them is a ``RandomCorruption`` (a training transform).
    """
    found, seen = [], set()
    for _, pipeline in built_dataset_pipelines(dataset):
        for step in pipeline:
            for candidate in [step, *inner_steps(step)]:
                if isinstance(candidate, ApplyCorruption) and id(candidate) not in seen:
                    if type(candidate).__name__ == 'RandomCorruption':
                        raise RuntimeError(
                            'the evaluation pipeline holds RandomCorruption, a training '
                            'transform that corrupts each sample at random: remove it from '
                            'the val/test pipelines (evaluate conditions with '
                            'CorruptionTestLoop or RobustnessTestLoop)')
                    seen.add(id(candidate))
                    found.append(candidate)
    return found


def _default_meta_keys(type_name: str, scope: Optional[str]) -> Optional[tuple]:
    """The ``meta_keys`` default of a packing transform, looked up in the registries."""
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


def add_corruption_meta_keys(pipeline: list, scope: Optional[str] = None) -> None:
    """Add :data:`CORRUPTION_META_KEYS` to the ``meta_keys`` of the packing steps
    (``Pack*``) of a config list or a built pipeline, so that every sample's metainfo says
    which condition it was evaluated under.

    Raises:
        ValueError: a packing step of a config whose default ``meta_keys`` cannot be found.
    """
    for step in pipeline:
        name = transform_name(step)
        if not name.startswith('Pack'):
            continue
        if isinstance(step, dict):
            keys = step.get('meta_keys')
            if keys is None:
                keys = _default_meta_keys(step['type'] if isinstance(step['type'], str)
                                          else name, scope)
                if keys is None:
                    raise ValueError(f'cannot find the default meta_keys of {step["type"]}; '
                                     'give the packing step meta_keys=(...) explicitly')
            keys = tuple(keys)
            step['meta_keys'] = keys + tuple(k for k in CORRUPTION_META_KEYS
                                             if k not in keys)
        elif hasattr(step, 'meta_keys'):
            keys = tuple(step.meta_keys)
            step.meta_keys = keys + tuple(k for k in CORRUPTION_META_KEYS if k not in keys)


def step_condition(step: Any) -> Condition:
    """The condition of an ``ApplyCorruption`` step: a config dict (settings it leaves
    out take their defaults) or a built one.

    Raises:
        KeyError, ValueError: a config step with an invalid condition.
    """
    if isinstance(step, dict):
        return Condition.from_settings({k: step[k] for k in CONDITION_FIELDS if k in step})
    return step.condition


def _describe(condition: Condition) -> str:
    return condition.key if condition.is_clean else \
        f'{condition.corruption} severity {condition.severity}'


def stop_live_workers(dataloader: Any) -> None:
    """Shut down the persistent workers of a built ``DataLoader`` that was iterated
    already: they hold a copy of the pipeline taken when they started and would not see
    a changed condition. The next iteration starts fresh workers from the edited
    dataset (torch keeps the iterator of persistent workers in ``_iterator``)."""
    iterator = getattr(dataloader, '_iterator', None)
    if iterator is not None:
        shutdown = getattr(iterator, '_shutdown_workers', None)
        if shutdown is not None:
            shutdown()
        dataloader._iterator = None


def _check_ignore_index(path: str, step: Any, ignore_index: int) -> None:
    """Refuse a written ``ApplyCorruption`` step whose ``ignore_index`` (the label a moved
    label map gets where it has no source content) is not the one the metrics ignore."""
    if isinstance(step, dict):
        current = step.get('ignore_index', DEFAULT_STEP_IGNORE_INDEX)
    else:
        current = getattr(step, 'ignore_index', DEFAULT_STEP_IGNORE_INDEX)
    if current != ignore_index:
        raise ValueError(
            f'the {CORRUPTION_TYPE} step of {path} pads moved label maps with '
            f'ignore_index={current!r}, but the test evaluator ignores label '
            f'{ignore_index!r}: the padding of rotate, scale and translate would be scored '
            f'as a class. Set the step\'s ignore_index={ignore_index!r} (or remove the step: '
            'the loops insert one with the evaluator\'s label)')


def place_condition(dataloader: Any, condition: Condition,
                    scope: Optional[str] = None, geometric: Optional[bool] = None,
                    override: bool = True,
                    ignore_index: Optional[int] = None) -> List[Placement]:
    """Put ``condition`` into every test pipeline of ``dataloader`` (a config dict, edited
    in place, or a built ``DataLoader``): the ``ApplyCorruption`` step there gets the
    condition (its other options are kept), or one is inserted; a misplaced one is moved
    (see :mod:`reobench_mm.transforms.placement`); the packing steps carry
    ``corruption``/``severity`` into the metainfo. The persistent workers of a built
    ``DataLoader`` that already ran are shut down, so that new ones see the condition.

    Args:
        condition: the condition to apply.
        scope: default scope of the config (to find the packing steps' ``meta_keys``).
        geometric: place for geometric corruptions (default: whether ``condition`` is one):
            where the annotations are loaded after the image step, a label step
            (:data:`LABEL_STEP_TYPE`) goes after them. The robustness loops place for
            geometric corruptions whatever they select, so that the pipeline, and with it
            the fingerprint of their records, does not depend on the selection.
        override: replace the condition of a step that applies another one (what
            explicit requests do: ``--corruption``, ``insert_corruption``). Otherwise such
            a step is a conflict: two places of the config name different conditions.
        ignore_index: the label the test evaluator ignores (segmentation): an inserted
            step pads moved label maps with it, a written step must already do so.

    Returns:
        One :class:`Placement` per pipeline.

    Raises:
        ValueError: no image-loading pipeline, two corruption steps, a nested one,
            (without ``override``) a step with another condition, or a written step with
            another ``ignore_index``.
    """
    settings = condition.settings()
    options = {} if ignore_index is None else dict(ignore_index=int(ignore_index))
    move_misplaced = not condition.is_clean or geometric is not None
    if geometric is None:
        geometric = condition.geometric
    if isinstance(dataloader, dict):
        dataset = dataloader.get('dataset')
        pipelines = list(dataset_pipelines(dataset))

        def make_step():
            return dict(type=CORRUPTION_TYPE, **settings, **options)

        def make_label_step():
            return dict(type=LABEL_STEP_TYPE)
    else:
        dataset = dataloader.dataset
        pipelines = list(built_dataset_pipelines(dataset))

        def make_step():
            return ApplyCorruption(**settings, **options)

        make_label_step = ApplyCorruptionToLabels
    if not pipelines:
        raise ValueError('the test dataset has no pipeline with an image-loading step (e.g. '
                         'LoadImageFromFile) to put ApplyCorruption into')
    if not override:
        for path, pipeline in pipelines:
            for step in pipeline:
                written = step_condition(step) if is_corruption_step(step) else None
                if written is not None and not written.is_clean and written != condition:
                    raise ValueError(
                        f'two conditions in one config: the test loop says '
                        f'{_describe(condition)}, the ApplyCorruption step of {path} says '
                        f'{_describe(written)}. Set it in one place (test_cfg, or '
                        'the step with a test loop that leaves it as it is)')
    if ignore_index is not None:
        for path, pipeline in pipelines:
            for step in pipeline:
                if is_corruption_step(step):
                    _check_ignore_index(path, step, int(ignore_index))
    placements = []
    for _, pipeline in pipelines:
        step, placement = place_corruption(pipeline, geometric, make_step, move_misplaced,
                                           make_label_step)
        if isinstance(step, dict):
            step.update(settings)
        else:
            step.set_condition(condition)
        add_corruption_meta_keys(pipeline, scope)
        placements.append(placement)
    if not isinstance(dataloader, dict):
        stop_live_workers(dataloader)
    return placements


def label_pipelines(dataloader: Any, scope: Optional[str] = None,
                    ignore_index: Optional[int] = None) -> List[Placement]:
    """Make every test pipeline of ``dataloader`` (config dict or built ``DataLoader``)
    say what it applies, without changing what it applies: a pipeline without an
    ``ApplyCorruption`` step gets a clean (no-op) one, so that every sample's metainfo
    carries ``corruption``/``severity``; written steps are left as they are (with
    ``ignore_index``, the label the evaluator ignores, they must pad moved label maps
    with it). Pipelines without a recognisable image-loading step are left alone.

    Raises:
        ValueError: a written step with another ``ignore_index``.
    """
    built = not isinstance(dataloader, dict)
    if built:
        pipelines = list(built_dataset_pipelines(dataloader.dataset))
    else:
        dataset = dataloader.get('dataset')
        pipelines = list(dataset_pipelines(dataset)) if isinstance(dataset, dict) else []
    options = {} if ignore_index is None else dict(ignore_index=int(ignore_index))
    placements = []
    for path, pipeline in pipelines:
        if ignore_index is not None:
            for step in pipeline:
                if is_corruption_step(step) and not step_condition(step).is_clean:
                    _check_ignore_index(path, step, int(ignore_index))
        _, placement = place_corruption(
            pipeline, False, (lambda: ApplyCorruption(**options)) if built else
            (lambda: dict(type=CORRUPTION_TYPE, **CLEAN.settings(), **options)),
            move_misplaced=False)
        add_corruption_meta_keys(pipeline, scope)
        placements.append(placement)
    if built and placements:
        stop_live_workers(dataloader)
    return placements


def condition_of(steps: Sequence[Any]) -> Condition:
    """The condition that ``steps`` (the corruption steps of a built pipeline) apply:
    :data:`~reobench_corruptions.condition.CLEAN` without any (and for no-op steps).
    Raises a ``RuntimeError`` when they disagree."""
    found = {CLEAN if s.is_noop else s.condition for s in steps}
    if len(found) > 1:
        raise RuntimeError('the test pipelines apply different conditions: '
                           f'{[c.settings() for c in sorted(found)]}')
    return found.pop() if found else CLEAN
