"""The data of the conditions with test data of their own (the shift sets, the corrupted
sets read from files): their dataloaders, checks and fingerprints.

A shift set (:class:`~reobench_mm.robustness.conditions.shifts.ShiftSet`) is built the way the
run's own test data is: the test dataloader's config with the set's dataset config in
place of the test dataset (a dataset config without ``pipeline`` gets the test
pipeline; a wrapper such as ``ClassMappedDataset`` gets it on the dataset it wraps), the
switchable ``ApplyCorruption`` step placed in it as in the test pipeline
(:func:`~reobench_mm.transforms.placement.place_condition`), and built by the runner
(``Runner.build_dataloader``, seeded as ``TestLoop`` seeds its own). The set must have
the test set's classes, in the same order: the evaluator scores the model's classes,
and a set labelled otherwise is mapped first
(:class:`~reobench_mm.datasets.class_mapped.ClassMappedDataset`).

:class:`ConditionSources` says, for any condition of a run, which feed (dataloader and
switchable steps) its images come from and what the pipeline applies to them there.

Each set is built once per run, when its first condition is evaluated; its decoded
samples are not cached (each of its conditions reads its files again).
"""
from __future__ import annotations

import copy
import hashlib
import logging
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from reobench_corruptions.condition import CLEAN, Condition
from ..datasets.class_mapped import CLASS_MAPPED_TYPE
from ..datasets.class_mapped import check_class_map_ignore as check_ignore
from ..datasets.empty_sets import empty_set_reason, is_empty_set_error
from ..datasets.image_files import describe_file_problems
from ..datasets.label_rules import check_label_rules as check_rules
from ..datasets.wrapping import innermost_datasets, wrapped_datasets
from ..errors import SweepError
from ..transforms.placement import corruption_steps, place_condition
from .conditions.kinds import CONDITION_KINDS, is_corruption, kind_of
from .fingerprint import FILE_SET_PART, SHIFT_SET_PART, canonical_json, dataset_fingerprint
from .conditions.released import files_dataset_cfg
from .switching import Feed

__all__ = ['ConditionData', 'ConditionSources', 'shift_dataloader_cfg',
           'check_class_map_ignore', 'check_label_rules']


def _test_pipeline(dataloader_cfg: Mapping[str, Any]) -> Optional[list]:
    for dataset in innermost_datasets(copy.deepcopy(dict(dataloader_cfg.get('dataset') or {})),
                                      configs_only=True):
        if isinstance(dataset.get('pipeline'), list):
            return dataset['pipeline']
    return None


def shift_dataloader_cfg(dataloader_cfg: Mapping[str, Any], dataset: Mapping[str, Any],
                         what: str) -> dict:
    """The dataloader config of a set of its own (a shift set; ``what`` names it): a copy
    of the test dataloader's ``dataloader_cfg`` (before the corruption step is placed)
    with the set's ``dataset`` config, which takes the test pipeline where it (or the
    dataset it wraps) has none.

    Raises:
        SweepError: the set has no pipeline and the test dataloader has none to give.
    """
    cfg = copy.deepcopy(dict(dataloader_cfg))
    dataset = copy.deepcopy(dict(dataset))
    pipeline = _test_pipeline(dataloader_cfg)
    for inner in innermost_datasets(dataset, configs_only=True):
        if inner.get('pipeline') is None:
            if pipeline is None:
                raise SweepError(f'{what}: its dataset has no pipeline and the test '
                                 'dataloader has none to take; give one')
            inner['pipeline'] = copy.deepcopy(pipeline)
    cfg['dataset'] = dataset
    if cfg.get('persistent_workers'):
        cfg['persistent_workers'] = False
    return cfg


def _class_map_cfgs(cfg: Any) -> List[Dict[str, Any]]:
    """The ``ClassMappedDataset`` configs in a dataset config (itself or wrapped)."""
    if not isinstance(cfg, dict):
        return []
    found = []
    for item in wrapped_datasets(cfg, configs_only=True):
        kind = item.get('type')
        name = kind if isinstance(kind, str) else getattr(kind, '__name__', '')
        if name.rsplit('.', 1)[-1] == CLASS_MAPPED_TYPE:
            found.append(item)
    return found


def check_class_map_ignore(dataset: Any, ignore_index: Optional[int], what: str) -> None:
    """:func:`~reobench_mm.datasets.class_mapped.check_class_map_ignore` as a refused run.

    Raises:
        SweepError: the class map writes ignored classes as another label than the
            evaluator ignores.
    """
    try:
        check_ignore(dataset, ignore_index, what)
    except ValueError as error:
        raise SweepError(str(error)) from None


def check_label_rules(test_set: Any, dataset: Any, ignore_index: Optional[int],
                      what: str) -> None:
    """:func:`~reobench_mm.datasets.label_rules.check_label_rules` as a refused run; a
    set without rules beside one with rules is logged (nothing can be checked).

    Raises:
        SweepError: the two sets are scored by other rules (the difference named, and how
            to bring both to the same rules), or bad rules.
    """
    try:
        note, _ = check_rules(test_set, dataset, ignore_index, what)
    except ValueError as error:
        raise SweepError(str(error)) from None
    if note is not None:
        from mmengine.logging import print_log
        print_log(note, logger='current', level=logging.WARNING)


def _compared_classes(meta: Mapping[str, Any]) -> Optional[Dict[str, list]]:
    """``{'names', 'indices'}`` of the model's classes a class-mapped set can hold (the
    targets its map sends a class to), or None when it can hold every class (or has no
    map): its ID side is then compared on those classes only."""
    mapping, classes = meta.get('class_map'), meta.get('classes')
    if not isinstance(mapping, Mapping) or not classes:
        return None
    targets = {t for t in mapping.values() if t is not None}
    indices = [i for i, name in enumerate(classes) if name in targets]
    if len(indices) == len(classes):
        return None
    return dict(names=[classes[i] for i in indices], indices=indices)


def _classes(dataset: Any) -> Optional[Tuple[str, ...]]:
    classes = (getattr(dataset, 'metainfo', None) or {}).get('classes')
    return None if classes is None else tuple(classes)


class ConditionData:
    """The built test data of the conditions that have data of their own: the shift sets
    (keyed ``shift:<name>``) and the corrupted sets read from files (keyed
    ``files:<tag>``), each built when first needed.

    Args:
        build: builds a dataloader from a config (``lambda cfg:
            runner.build_dataloader(cfg, seed=runner.seed)``).
        reference: the run's own test dataset (its classes are the model's).
        scope: the config's default scope; ``ignore_index``: the evaluator's ignored label.
    """

    def __init__(self, build: Callable[[dict], Any], reference: Any, scope: Optional[str],
                 ignore_index: Optional[int]) -> None:
        self.build, self.reference = build, reference
        self.scope, self.ignore_index = scope, ignore_index
        self._built: Dict[str, Tuple[Any, list]] = {}
        self._fingerprints: Dict[str, Dict[str, Any]] = {}

    def place(self, cfg: dict, what: str) -> dict:
        """``cfg`` with the switchable corruption step placed (clean), and the
        evaluator's ignored label and the test set's classes given to a class map that
        names none."""
        classes = _classes(self.reference)
        for mapped in _class_map_cfgs(cfg.get('dataset')):
            if self.ignore_index is not None:
                mapped.setdefault('ignore_index', self.ignore_index)
            if mapped.get('classes') is None and classes is not None:
                mapped['classes'] = list(classes)
        try:
            place_condition(cfg, CLEAN, self.scope, geometric=True, override=True,
                            ignore_index=self.ignore_index)
        except ValueError as error:
            raise SweepError(f'{what}: {error}') from None
        return cfg

    def dataloader(self, key: str, make_cfg: Callable[[], dict], what: str
                   ) -> Tuple[Any, list]:
        """``(dataloader, ApplyCorruption steps)`` of ``key``, built once from
        ``make_cfg()`` (a placed dataloader config); ``what`` names it in errors.

        Raises:
            SweepError: it cannot be built, is empty, or has other classes than the test
                set (both lists named).
        """
        if key in self._built:
            return self._built[key]
        cfg = make_cfg()
        try:
            loader = self.build(cfg)
        except SweepError:
            raise
        except Exception as error:  # a bad dataset config: say which set
            if is_empty_set_error(error) or isinstance(error, FileNotFoundError):
                raise SweepError(f'{what} has no samples: '
                                 f'{empty_set_reason(cfg.get("dataset"))}') from None
            raise SweepError(f'{what} cannot be built: {type(error).__name__}: '
                             f'{error}') from None
        dataset = loader.dataset
        if len(dataset) == 0:
            raise SweepError(f'{what} has no samples: {empty_set_reason(dataset)}')
        check_class_map_ignore(dataset, self.ignore_index, what)
        check_label_rules(self.reference, dataset, self.ignore_index, what)
        ours, theirs = _classes(self.reference), _classes(dataset)
        if ours != theirs and _class_map_cfgs(cfg.get('dataset')):
            raise SweepError(
                f'{what}: its ClassMappedDataset maps onto the classes {list(theirs or [])}, '
                f'the test set (the model) has {list(ours or [])}: give it the model\'s '
                'classes, or leave classes out (a shift set\'s map then takes the test '
                "set's), with map_classes= the classes its map was written for")
        if ours != theirs:
            raise SweepError(
                f'{what} has the classes {list(theirs or [])}, the test set (the model) '
                f'{list(ours or [])}: wrap it in ClassMappedDataset with a class map onto '
                "the model's classes (docs/distribution_shifts.md)")
        steps = corruption_steps(dataset)
        if not steps:
            raise SweepError(f'{what}: no ApplyCorruption step in its built pipeline')
        self._built[key] = (loader, steps)
        self._fingerprints[key] = dict(
            dataset_config_sha256=hashlib.sha256(
                canonical_json(cfg.get('dataset')).encode('utf-8')).hexdigest(),
            **dataset_fingerprint(dataset))
        meta = getattr(dataset, 'metainfo', None) or {}
        if meta.get('class_map_notes'):  # what its map left unused or ignored: reported
            self._fingerprints[key]['class_map_notes'] = list(meta['class_map_notes'])
        compared = _compared_classes(meta)
        if compared is not None:  # a mapped set that can hold only some of the classes
            self._fingerprints[key]['compared_classes'] = compared
        return loader, steps

    def fingerprint(self, key: str, make_cfg: Callable[[], dict], what: str
                    ) -> Dict[str, Any]:
        """What the numbers of ``key`` depend on beyond the run's inputs: the SHA-256 of
        its dataset config and :func:`~reobench_mm.robustness.fingerprint.dataset_fingerprint`
        of the built set (every sample, and the size and time of its files)."""
        self.dataloader(key, make_cfg, what)
        return dict(self._fingerprints[key])


#: ``(key, make_cfg, what)``: the data of a condition with data of its own.
OwnData = Tuple[str, Callable[[], dict], str]


class ConditionSources:
    """Where each condition's images come from: the test set, a shift set's own data (under
    the shift condition's base), or the files of a corrupted set (read clean); an attack's
    images are its base condition's.

    Args:
        test: the test set's feed.
        options: the run's options (its ``shifts`` and ``corruption_files``).
        given: the dataloader the loop was given (its config, before placement; for a
            built one the runner config's ``cfg_key``): the shift sets are built from it.
        placed: the placed dataloader config (the files' sets are built from it), or None.
        runner: the runner (builds the dataloaders, seeded as ``TestLoop`` seeds its own).
        ignore_index: the label the evaluator ignores.
        cfg_key: the runner config's dataloader key (``'test_dataloader'``,
            ``'val_dataloader'``).

    Raises:
        SweepError: shift sets without a dataloader config to build them from, or
            ``corruption_files`` with a built test dataloader.
    """

    def __init__(self, test: Feed, options: Any, given: Any, placed: Any, runner: Any,
                 ignore_index: Optional[int], cfg_key: str = 'test_dataloader') -> None:
        self.test, self.options = test, options
        self._checked: set = set()
        if not isinstance(given, dict):  # a built dataloader: the runner config's
            given = runner.cfg.get(cfg_key)
        check_class_map_ignore(test.dataloader.dataset, ignore_index, 'the test set')
        check_label_rules(test.dataloader.dataset, test.dataloader.dataset, ignore_index,
                          'the test set')
        own = any(k.own_data is not None and options.entries(k) for k in CONDITION_KINDS)
        self.files = getattr(options, 'corruption_files', None)
        self.data: Optional[ConditionData] = None
        if not own and self.files is None:
            return
        if own and not isinstance(given, dict):
            raise SweepError(f'shift sets need the {cfg_key} config to build their '
                             'dataloaders from')
        if self.files is not None and not isinstance(placed, dict):
            raise SweepError('corruption_files needs the test dataloader as a config')
        self.given, self.placed = given, placed
        self.data = ConditionData(
            lambda cfg: runner.build_dataloader(cfg, seed=runner.seed),
            test.dataloader.dataset, runner.cfg.get('default_scope'), ignore_index)

    def own_data(self, condition: Condition) -> Optional[OwnData]:
        """``(key, make_cfg, what)`` of a condition with data of its own (a shift set, or
        a corruption read from files; an attack on one of them), else None."""
        if self.data is None:
            return None
        kind = kind_of(condition)
        if kind.transforms_batches:  # an attack reads its base's images
            return self.own_data(condition.base)
        data = self.data
        if kind.own_data is not None:
            name, dataset = kind.own_data(self.options.entries(kind), condition)
            what = f'{kind.name} set {name!r}'
            given = self.given
            return (f'{kind.name}:{name}',
                    lambda: data.place(shift_dataloader_cfg(given, dataset, what), what), what)
        files = self.files
        if files is not None and files.reads(condition):
            placed = self.placed
            return (f'files:{condition.tag}', lambda: dict(
                copy.deepcopy(placed), persistent_workers=False,
                dataset=files_dataset_cfg(placed['dataset'], files, condition)),
                f'the files of {condition.key}')
        return None

    def check(self, conditions: Sequence[Condition]) -> None:
        """Before the first of ``conditions`` is evaluated: build the data of each that has
        data of its own (a shift set's wrong ``data_root`` or classes refused now, not
        after the other conditions ran) and check that the image and label files they
        and the test set list can be decoded (size, signature, end marker:
        :func:`~reobench_mm.datasets.image_files.describe_file_problems`), each set once.

        Raises:
            SweepError: the set, the bad files and what is wrong with each.
        """
        sets: Dict[str, Tuple[Any, str]] = {}
        for condition in conditions:
            own = self.own_data(condition)
            if own is None:
                sets.setdefault('test', (self.test.dataloader.dataset, 'the test set'))
                continue
            loader, _ = self.data.dataloader(*own)
            sets.setdefault(own[0], (loader.dataset, own[2]))
        for key in sorted(sets):
            if key not in self._checked:
                problem = describe_file_problems(sets[key][1], sets[key][0])
                if problem is not None:
                    raise SweepError(problem)
                self._checked.add(key)

    def feed(self, condition: Condition) -> Tuple[Feed, Condition]:
        """``(feed, applied)``: where ``condition``'s images come from and what the
        pipeline applies there (a shift set's base condition on the set, clean on the
        files of a corruption, the condition itself on the test set); for an attack, its
        base condition's."""
        kind = kind_of(condition)
        if kind.transforms_batches:
            return self.feed(condition.base)
        own = self.own_data(condition)
        if own is None:
            return self.test, condition
        loader, steps = self.data.dataloader(*own)
        return Feed(loader, steps), \
            condition.base if kind.own_data is not None else condition.clean()

    def fans_out(self, condition: Condition) -> bool:
        """Whether ``condition`` can join a fan-out pass over the test set: a corruption
        condition of the test set (not a shift set's, an attack's or one read from
        files)."""
        return is_corruption(condition) and self.own_data(condition) is None

    def fingerprint(self, run: Mapping[str, Any], condition: Condition) -> Dict[str, Any]:
        """The fingerprint of ``condition``'s record: the run's (``run``), with the data of
        a shift set (``data.shift_set``) or of the files read (``data.file_set``)."""
        own = self.own_data(condition)
        if own is None:
            return dict(run)
        out = copy.deepcopy(dict(run))
        shift = kind_of(condition).own_data is not None
        part = SHIFT_SET_PART if shift else FILE_SET_PART
        name = condition.label if shift else getattr(condition, 'base', condition).key
        out['data'] = dict(out.get('data') or {},
                           **{part: dict(name=name, **self.data.fingerprint(*own))})
        return out
