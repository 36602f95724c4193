"""The condition records of a robustness run's output folder.

Each finished condition is one file, ``conditions/<tag>.json``
(:func:`condition_record_name`), sealed with a SHA-256 over its canonical JSON
(:func:`seal_record`, :func:`write_record`) and checked before reuse
(:func:`condition_record_problem`: :func:`record_identity_problem`,
:func:`record_consistency_problem`). Beside each record, ``conditions/<tag>.images.npz``
holds the condition's per-image statistics
(:class:`~reobench_mm.evaluation.functional.condition_stats.ImageStats`); the record names
it with its SHA-256 and size, and a record whose file is missing or altered is evaluated
again. Records of the first format (no per-image statistics) are still read, and have no
intervals. A record that is not an object, is of another
format or condition, or whose settings, metrics, result or digest disagree is evaluated
again rather than trusted; one written for other inputs is refused
(:class:`~reobench_mm.errors.FingerprintMismatchError`). :class:`ConditionStore` is the
records of one folder for one set of inputs.

The folder's lock and the clean-up of a refused run are
:mod:`reobench_mm.engine.workdir`; shard manifests and their merging are
:mod:`reobench_mm.robustness.shards`.
"""
from __future__ import annotations

import hashlib
import json
import os.path as osp
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ..analysis.results import condition_result_from_metrics, results_to_jsonable
from reobench_corruptions.condition import CLEAN, Condition
from ..engine.workdir import WorkDirLock, check_writable, write_error
from ..errors import FingerprintMismatchError, SweepError
from ..evaluation.functional.condition_stats import (IMAGE_STATS_FORMAT, ImageStats,
                                                    read_stats_file)
from ..evaluation.keys import ECE, Task, metric_key
from ..fileio import (atomic_write_bytes, dump_json_atomic, file_sha256, json_round_trip,
                      read_json, remove_stale_temporaries)
from .conditions.kinds import kind_of
from .fingerprint import differing_parts

__all__ = [
    'ConditionStore', 'condition_record_name', 'CONDITION_FORMAT', 'CONDITIONS_DIR',
    'record_digest', 'seal_record', 'condition_result_dict', 'record_identity_problem',
    'record_consistency_problem', 'condition_record_problem', 'write_record',
    'calibration_details', 'check_fingerprint', 'image_stats_name', 'image_stats_problem',
    'read_image_stats', 'LEGACY_CONDITION_FORMAT', 'image_stats_mismatch', 'image_files'
]

#: Records with per-image statistics (``images``).
CONDITION_FORMAT = 'reobench_mm.sweep_condition/2'
#: Records written before per-image statistics were kept: read, with no intervals.
LEGACY_CONDITION_FORMAT = 'reobench_mm.sweep_condition/1'
_FORMATS = (CONDITION_FORMAT, LEGACY_CONDITION_FORMAT)
#: Folder of the condition records under the work dir.
CONDITIONS_DIR = 'conditions'


def record_digest(record: Mapping[str, Any]) -> str:
    """SHA-256 of a record's canonical JSON (sorted keys), its ``digest`` field left out."""
    body = {k: v for k, v in record.items() if k != 'digest'}
    text = json.dumps(body, sort_keys=True, separators=(',', ':'), ensure_ascii=False)
    return hashlib.sha256(text.encode('utf-8')).hexdigest()


def seal_record(record: Dict[str, Any]) -> Dict[str, Any]:
    """Add ``digest`` (:func:`record_digest`) to a record (in place; returned)."""
    record['digest'] = record_digest(record)
    return record


def condition_result_dict(metrics: Mapping[str, Any], task: Task) -> Dict[str, Any]:
    """The JSON form of the condition result the metrics of ``task`` give
    (:func:`~reobench_mm.analysis.results.condition_result_from_metrics`, NaN as
    ``null``)."""
    result = condition_result_from_metrics(metrics, task.results_name)
    return results_to_jsonable({CLEAN: result})[CLEAN.key]


def record_identity_problem(record: Any, condition_key: str) -> Optional[str]:
    """Why ``record`` is not a condition record of this condition (None when it is): not
    a JSON object, another format, another condition."""
    if not isinstance(record, dict):
        kind = 'null' if record is None else type(record).__name__
        return f'holds a JSON {kind}, not a condition record'
    if record.get('format') not in _FORMATS:
        return (f'has format {record.get("format")!r}, expected {CONDITION_FORMAT!r} (or '
                f'the earlier {LEGACY_CONDITION_FORMAT!r})')
    if record.get('condition') != condition_key:
        return f'is the record of condition {record.get("condition")!r}, not {condition_key!r}'
    if not isinstance(record.get('fingerprint'), dict):
        return 'has no fingerprint object'
    return None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _same_json(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def record_consistency_problem(record: Mapping[str, Any], expected: Mapping[str, Any],
                               task: Task, calibration: Optional[bool] = None) -> Optional[str]:
    """Why a condition record (of the right identity) cannot be reused, or None.

    Checked: the ``expected`` fields (tag, task, settings); ``metrics`` is a mapping of
    numbers; ``result`` equals what :func:`condition_result_dict` gives for them; with
    ``calibration`` True the calibration details are there; ``seconds`` is a number; the
    ``digest`` matches the contents.
    """
    for key, value in expected.items():
        if record.get(key) != value:
            return f'has {key} {record.get(key)!r}, expected {value!r}'
    metrics = record.get('metrics')
    if not isinstance(metrics, dict) or not metrics or \
            not all(isinstance(k, str) and _is_number(v) for k, v in metrics.items()):
        return '"metrics" is not a mapping of metric names to numbers'
    try:
        result = condition_result_dict(metrics, task)
    except (KeyError, TypeError, ValueError) as error:
        return f'its metrics give no {task.results_name} result ({error})'
    recorded = record.get('result')
    if not _same_json(recorded, result):
        value = recorded.get('value') if isinstance(recorded, dict) else recorded
        return (f'its result (value {value!r}) does not match its metrics (value '
                f'{result["value"]!r})')
    if calibration and not isinstance(record.get('calibration'), dict):
        return 'it has no calibration details'
    if not _is_number(record.get('seconds')):
        return '"seconds" is not a number'
    if record.get('format') == CONDITION_FORMAT and 'images' not in record:
        return 'it has no "images" entry (its per-image statistics)'
    if record.get('digest') != record_digest(record):
        return ('its digest does not match its contents (edited by hand?)'
                if 'digest' in record else 'it has no digest')
    return None


def condition_record_problem(path: str, condition_key: str, expected: Mapping[str, Any],
                             task: Task, calibration: Optional[bool] = None,
                             check_fingerprint: Optional[Callable[[Any, str], None]] = None
                             ) -> Optional[str]:
    """Why the condition record at ``path`` cannot be reused (None when it can): missing,
    unreadable, not a record of ``condition_key`` (:func:`record_identity_problem`) or
    inconsistent (:func:`record_consistency_problem`); the message starts with ``path``.

    ``check_fingerprint(fingerprint, path)`` is called with the fingerprint of a record of
    the right identity, before its consistency is checked; it raises when the record was
    written for other inputs.
    """
    if osp.islink(path):  # never read (nor trusted) through a link
        return f'{path} is a symbolic link, not a record written here'
    if not osp.isfile(path):
        return f'{path} does not exist'
    record, problem = read_json(path)
    if problem is None:
        problem = record_identity_problem(record, condition_key)
    if problem is None:
        if check_fingerprint is not None:
            check_fingerprint(record['fingerprint'], path)
        problem = record_consistency_problem(record, expected, task, calibration)
    if problem is None:
        problem = image_stats_problem(record, osp.dirname(path))
    return None if problem is None else f'{path} {problem}'


def image_stats_name(condition: Condition) -> str:
    """The file of a condition's per-image statistics, beside its record:
    ``<tag>.images.npz``."""
    return f'{condition.tag}.images.npz'


def _names_stats_file(entry: Any) -> bool:
    """Whether a record's ``images`` entry names a file beside the record."""
    return isinstance(entry, dict) and isinstance(entry.get('file'), str) \
        and osp.basename(entry['file']) == entry['file']


def image_stats_problem(record: Mapping[str, Any], folder: str) -> Optional[str]:
    """Why the per-image statistics a record names cannot be used (None when they can,
    or when the record has none)."""
    entry = record.get('images')
    if entry is None:
        return None
    if not _names_stats_file(entry):
        return '"images" does not name a statistics file beside it'
    path = osp.join(folder, entry['file'])
    if osp.islink(path) or not osp.isfile(path):
        return f'names per-image statistics {entry["file"]} that are not there'
    if file_sha256(path) != entry.get('sha256'):
        return f'names per-image statistics {entry["file"]} whose SHA-256 differs (altered?)'
    return None


def read_image_stats(record: Mapping[str, Any], folder: str) -> Optional[ImageStats]:
    """The per-image statistics a record names (read once, its SHA-256 checked), or None
    for a record without.

    Raises:
        SweepError: the entry names no file beside the record, or the file is missing,
            altered or not a statistics file.
    """
    entry = record.get('images')
    if entry is None:
        return None
    if not _names_stats_file(entry):
        raise SweepError(f'the record of {record.get("condition")} has an "images" entry '
                         'that names no statistics file beside it')
    try:
        return read_stats_file(osp.join(folder, entry['file']), entry.get('sha256'))
    except ValueError as error:
        raise SweepError(f'the per-image statistics of {record.get("condition")}: '
                         f'{error}') from None


def image_files(records: Mapping[Condition, dict], folder: Callable[[Condition], str]
                ) -> Dict[Condition, Tuple[str, str]]:
    """``condition -> (path, SHA-256)`` of the statistics files the records name
    (``folder``: where a condition's record is)."""
    return {c: (osp.join(folder(c), r['images']['file']), r['images']['sha256'])
            for c, r in records.items() if isinstance(r.get('images'), dict)}


def image_stats_mismatch(stats: ImageStats, result: Mapping[str, Any]) -> Optional[str]:
    """Why per-image statistics do not give the condition's recorded task metric and ECE
    (None when those recomputed from all images equal them to 1e-9)."""
    from ..evaluation.metrics.rotated_map import float32_shortest
    value = stats.task.recorded_value()
    if stats.task.kind == 'rotated_detection':
        value = float32_shortest(value) * 100.0
    recorded = result.get('value')
    if not isinstance(recorded, (int, float)) or abs(value - recorded) > 1e-9:
        return (f'the per-image statistics give {value!r}, the metric recorded '
                f'{recorded!r}')
    extra = result.get('extra') or {}
    for prefix, calibration in stats.calibration.items():
        key = metric_key(prefix, ECE)
        ece = float(calibration.values()[ECE][0])
        if key in extra and extra[key] is not None and abs(ece - extra[key]) > 1e-9:
            return (f'the per-image statistics give {key} {ece!r}, the metric recorded '
                    f'{extra[key]!r}')
    return None


def write_record(path: str, record: Mapping[str, Any]) -> Dict[str, Any]:
    """Write a condition record, as it reads back from JSON and sealed
    (:func:`seal_record`), to ``path`` atomically; returns what was written.

    Raises:
        SweepError: the file cannot be written (:func:`write_error`).
    """
    record = seal_record(json.loads(json.dumps(record)))
    try:
        dump_json_atomic(record, path)
    except OSError as error:
        raise write_error(path, error) from None
    return record


def calibration_details(records: Mapping[Condition, dict]) -> Optional[dict]:
    """``condition -> {prefix: details}`` when every record has calibration details."""
    details = {c: r.get('calibration') for c, r in records.items()}
    if not details or any(not d for d in details.values()):
        return None
    return details


def condition_record_name(condition: Condition) -> str:
    """Where a condition's record lives, relative to the work dir:
    ``conditions/<tag>.json``."""
    return osp.join(CONDITIONS_DIR, f'{condition.tag}.json')


def check_fingerprint(recorded: Any, current: Mapping[str, Any], path: str) -> None:
    """Raise :class:`~reobench_mm.errors.FingerprintMismatchError` naming the parts of
    the fingerprint ``recorded`` in the file at ``path`` that differ from ``current``."""
    differing = differing_parts(recorded, current)
    if differing:
        names = [part for part, _ in differing]
        raise FingerprintMismatchError(
            f'{path} was written for other inputs: the {", ".join(names)} '
            f'differ{"s" if len(names) == 1 else ""} ('
            + '; '.join(f'{part}: {detail}' for part, detail in differing)
            + '); use --force (test_cfg.force=True) to evaluate again, or another '
            'work dir', names)


class ConditionStore:
    """The condition records of one output folder (``<work_dir>/conditions/<tag>.json``),
    for one set of inputs: where a condition's record is, whether it can be reused, writing
    one, reading them all, and (rank 0, under the folder's lock) deciding which conditions
    are left to evaluate.

    Args:
        work_dir: the output folder.
        coerce: turns a pair (``('cloud', 3)``), key or condition into a condition of the
            run (``SweepPlan.condition``).
        task: the task of the records (its name is written in them).
        calibration: whether records must carry calibration details.
        fingerprint: returns the fingerprint of the current inputs of a condition
            (``fingerprint(condition)``, called when its record is checked or written:
            the data part may be costly to list; a shift set's condition has its set's
            data in it).
        source: where a condition's images come from when not synthesised
            (``source(condition)``: ``'files'`` for a corrupted set read from files, else
            None); written into its record and expected there.
        key: a condition's key in the run (``SweepPlan.key``: a further corruption
            seed's has its seed; default: the condition's own key).
    """

    def __init__(self, work_dir: str, coerce: Callable[[Any], Condition], task: Task,
                 calibration: bool, fingerprint: Callable[[Any], Mapping[str, Any]],
                 source: Optional[Callable[[Any], Optional[str]]] = None,
                 key: Optional[Callable[[Any], str]] = None) -> None:
        self.work_dir = work_dir
        self.conditions_dir = osp.join(work_dir, CONDITIONS_DIR)
        self.coerce, self.task = coerce, task
        self.calibration = calibration
        self.fingerprint = fingerprint
        self.source = source or (lambda condition: None)
        self.key = key or (lambda condition: condition.key)
        #: SHA-256 of a statistics file written by this store -> its statistics (the
        #: report then reads back only those of reused records)
        self._written: Dict[str, ImageStats] = {}

    def condition_file(self, condition: Any) -> str:
        return osp.join(self.work_dir, condition_record_name(self.coerce(condition)))

    def check_fingerprint(self, condition: Any, recorded: Any, path: str) -> None:
        """Raise :class:`~reobench_mm.errors.FingerprintMismatchError` naming the parts
        of ``recorded`` that differ from the current inputs of ``condition``."""
        check_fingerprint(recorded, self.fingerprint(condition), path)

    def reuse_problem(self, condition: Any) -> Optional[str]:
        """Why the condition's record cannot be reused (None when it can): missing,
        unreadable, malformed or inconsistent.

        Raises:
            FingerprintMismatchError: a well-formed record written for other inputs.
        """
        condition = self.coerce(condition)
        expected = dict(tag=condition.tag, task=self.task.name, **condition.settings())
        if self.source(condition) is not None:
            expected['source'] = self.source(condition)
        return condition_record_problem(
            self.condition_file(condition), condition.key, expected, self.task,
            self.calibration,
            check_fingerprint=lambda recorded, path: self.check_fingerprint(condition,
                                                                            recorded, path))

    def write(self, condition: Condition, metrics: Mapping[str, float], seconds: float,
              calibration: Optional[Mapping[str, Any]] = None,
              image_stats: Optional[ImageStats] = None,
              transformed: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
        """Write the record of a finished condition (sealed, atomically) and, before it,
        its per-image statistics; returns the record. ``transformed``: what the batch
        transform of the condition's kind recorded beside its metrics (an attack's cost,
        largest perturbation and per-step curve), kept under the kind's
        ``record_field`` (``attack_run``).

        Raises:
            SweepError: a file cannot be written (:func:`write_error`), or the per-image
                statistics do not give the recorded metric.
        """
        result = condition_result_dict(metrics, self.task)
        record = dict(format=CONDITION_FORMAT, condition=condition.key,
                      tag=condition.tag, task=self.task.name, **condition.settings(),
                      metrics=dict(metrics), result=result,
                      seconds=round(seconds, 3), fingerprint=self.fingerprint(condition))
        if self.source(condition) is not None:
            record['source'] = self.source(condition)
        if self.calibration:
            record['calibration'] = json_round_trip(calibration or {})
        if transformed is not None:
            record[kind_of(condition).record_field] = json_round_trip(dict(transformed))
        record['images'] = None
        if image_stats is not None:
            mismatch = image_stats_mismatch(image_stats, result)
            if mismatch is not None:
                raise SweepError(f'condition {condition.key}: {mismatch}; the statistics '
                                 'are not written')
            name = image_stats_name(condition)
            path = osp.join(self.conditions_dir, name)
            data = image_stats.to_bytes()
            try:
                atomic_write_bytes(path, data)
            except OSError as error:
                raise write_error(path, error) from None
            digest = hashlib.sha256(data).hexdigest()
            record['images'] = dict(file=name, format=IMAGE_STATS_FORMAT, sha256=digest,
                                    bytes=len(data), num_images=image_stats.num_images)
            self._written[digest] = image_stats
        return write_record(self.condition_file(condition), record)

    def image_stats(self, records: Mapping[Condition, dict]
                    ) -> Dict[Condition, Optional[ImageStats]]:
        """``condition -> per-image statistics`` (None for a record without) of records
        :meth:`load` returned."""
        out = {}
        for condition, record in records.items():
            entry = record.get('images')
            cached = self._written.get(entry.get('sha256')) if isinstance(entry, dict) \
                else None
            # the records were checked when loaded (their files' SHA-256 included)
            out[condition] = cached if cached is not None else \
                read_image_stats(record, self.conditions_dir)
        return out

    def image_files(self, records: Mapping[Condition, dict]
                    ) -> Dict[Condition, Tuple[str, str]]:
        """``condition -> (path, SHA-256)`` of the per-image statistics of the records
        that have them."""
        return image_files(records, lambda condition: self.conditions_dir)

    def load(self, conditions: Sequence[Any]) -> Dict[Condition, dict]:
        """``condition -> record`` of the given conditions.

        Raises:
            SweepError: a record is missing, malformed or inconsistent (named, with why).
        """
        out = {}
        for condition in map(self.coerce, conditions):
            problem = self.reuse_problem(condition)
            if problem is not None:
                raise SweepError(f'condition {condition.key}: {problem}; run the '
                                 'sweep again to evaluate it')
            out[condition] = read_json(self.condition_file(condition))[0]
        return out

    def todo(self, conditions: Sequence[Condition], lock: WorkDirLock,
             force: bool = False) -> Tuple[List[Condition], Dict[str, str]]:
        """Rank 0 takes ``lock`` and decides which ``conditions`` are left (all with
        ``force``), and ``condition key -> reason`` for records not reused (the run's
        keys, :attr:`key`: a further corruption seed's has its seed); every rank
        gets the decision, or the error that refused the run."""
        from mmengine.dist import broadcast_object_list, get_world_size, is_main_process
        todo, reasons, error = None, {}, None
        if is_main_process():
            try:
                check_writable(self.conditions_dir)
                lock.acquire()
                # what a killed run was writing (never a record: records are found by name)
                for folder in (self.work_dir, self.conditions_dir):
                    remove_stale_temporaries(folder)
                todo = []
                for condition in conditions:
                    problem = None if force else self.reuse_problem(condition)
                    if force or problem is not None:
                        todo.append(condition)
                    if problem is not None and osp.isfile(self.condition_file(condition)):
                        reasons[self.key(condition)] = problem
            except Exception as caught:  # told to the other ranks, raised below
                error = caught
        if get_world_size() > 1:
            box = [(todo, reasons, None if error is None else str(error))]
            broadcast_object_list(box)
            todo, reasons, message = box[0]
            if error is None and message is not None:
                raise SweepError(f'the main process refused the run: {message}')
        if error is not None:
            raise error
        return todo, reasons
