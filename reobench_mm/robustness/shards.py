"""Sharded robustness runs: the manifest each shard writes and the merge of the shards.

A sharded run (``shard=(i, n)``) evaluates every n-th condition from i of every kind
(:attr:`~reobench_mm.robustness.options.RobustnessOptions.conditions`: the corruptions,
then the shift sets' and the attacks' conditions) and writes, beside its condition
records, a
manifest ``shard_<i>-of-<n>.json`` (:func:`write_shard_manifest`): what it evaluated (the
condition files) of how many conditions in all, with the run's fingerprint and
provenance. :func:`merge_sweeps` checks every shard's manifest and records as a resumed
run checks them and writes the report of the whole run (the shift sets' and attacks'
conditions rebuilt from the options the provenance holds, their blocks built from their
records as the unsharded run builds them:
:func:`~reobench_mm.robustness.conditions.blocks_of`).
"""
from __future__ import annotations

import os
import os.path as osp
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..analysis.report import Report, write_report
from ..analysis.results import ConditionResult, merge_results
from reobench_corruptions.condition import CONDITION_FIELDS, Condition
from ..engine.workdir import write_error
from ..errors import SweepError
from ..evaluation.keys import results_task
from ..fileio import atomic_write_bytes, dump_json_atomic, read_json
from .conditions.kinds import CONDITION_KINDS, blocks_of, records_by_block
from .fingerprint import differing_parts, without_own_data
from .store import (CONDITIONS_DIR, calibration_details, image_files, read_image_stats,
                    record_consistency_problem, record_identity_problem)

__all__ = ['SHARD_FORMAT', 'shard_manifest_path', 'write_shard_manifest', 'find_manifests',
           'merge_sweeps']

SHARD_FORMAT = 'reobench_mm.sweep_shard/1'
#: File names of shard manifests.
_MANIFEST_NAME = re.compile(r'shard_\d+-of-\d+\.json')


def shard_manifest_path(work_dir: str, shard: Tuple[int, int]) -> str:
    """``<work_dir>/shard_<i>-of-<n>.json``."""
    index, count = shard
    return osp.join(work_dir, f'shard_{index}-of-{count}.json')


def write_shard_manifest(work_dir: str, shard: Tuple[int, int], *, task: str,
                         protocol: str, corruptions: Sequence[str],
                         severities: Sequence[int], condition_files: Mapping[str, str],
                         num_conditions: int, fingerprint: Mapping[str, Any],
                         provenance: Mapping[str, Any],
                         seed_condition_files: Optional[Mapping[str, str]] = None) -> str:
    """Write the manifest of one shard (:func:`shard_manifest_path`): what it evaluated
    (``condition_files``: condition key -> record file, relative to ``work_dir``;
    ``seed_condition_files``: the same of the random corruptions' further corruption
    seeds, by condition tag) of how many conditions in all, with the sweep's fingerprint
    and provenance; returns its path.

    Raises:
        SweepError: the file cannot be written (:func:`write_error`).
    """
    index, count = shard
    path = shard_manifest_path(work_dir, shard)
    try:
        dump_json_atomic(dict(
            format=SHARD_FORMAT, shard=[index, count], task=task, protocol=protocol,
            corruptions=corruptions, severities=severities, conditions=condition_files,
            seed_conditions=dict(seed_condition_files or {}), num_conditions=num_conditions,
            fingerprint=fingerprint, provenance=provenance), path)
    except OSError as error:
        raise write_error(path, error) from None
    return path



def _read_manifest(path: str) -> Optional[dict]:
    """A shard manifest, None for a file of another format.

    Raises:
        SweepError: unreadable, not JSON, or lacking a field (the file named).
    """
    data, problem = read_json(path)
    if problem is not None:
        raise SweepError(f'shard manifest {path} {problem}')
    if not isinstance(data, dict) or not str(data.get('format', '')).startswith(
            'reobench_mm.sweep_shard/'):
        return None
    if data['format'] != SHARD_FORMAT:
        raise SweepError(f'shard manifest {path} has format {data["format"]!r}, expected '
                         f'{SHARD_FORMAT!r}; run that shard again')
    fields = {'shard': list, 'task': str, 'protocol': str, 'corruptions': list,
              'severities': list, 'conditions': dict, 'num_conditions': int,
              'fingerprint': dict, 'provenance': dict}
    bad = [k for k, kind in fields.items() if not isinstance(data.get(k), kind)]
    if bad or len(data['shard']) != 2 or not all(isinstance(v, int) for v in data['shard']):
        raise SweepError(f'shard manifest {path} is malformed (fields {bad or ["shard"]}); '
                         'run that shard again')
    return data


def find_manifests(work_dir: str) -> List[str]:
    """The shard manifests in ``work_dir``, sorted (file names are matched literally, so
    folders whose names hold glob characters such as ``[`` are found too)."""
    return sorted(osp.join(work_dir, name) for name in os.listdir(work_dir)
                  if _MANIFEST_NAME.fullmatch(name))


def _gather_image_files(files: Mapping[Condition, Tuple[str, str]], out_dir: str
                        ) -> Dict[Condition, Tuple[str, str]]:
    """The shards' per-image statistics files copied into ``out_dir/conditions`` (each
    atomically, unless it is there already), so that the merged results name files of
    their own folder: ``condition -> (path of the copy, SHA-256)``."""
    target = osp.join(out_dir, CONDITIONS_DIR)
    out = {}
    for condition, (path, sha256) in files.items():
        copy = osp.join(target, osp.basename(path))
        if osp.abspath(copy) != osp.abspath(path):
            os.makedirs(target, exist_ok=True)
            with open(path, 'rb') as handle:
                data = handle.read()
            try:
                atomic_write_bytes(copy, data)
            except OSError as error:
                raise write_error(copy, error) from None
        out[condition] = (copy, sha256)
    return out


def prefixed_conditions(manifest: Mapping[str, Any]) -> Dict[str, Any]:
    """key -> condition of the conditions of every kind but the corruptions (the shift
    sets', the attacks', a registered kind's) of the run a shard manifest belongs to, in
    run order, rebuilt from the options its provenance holds."""
    provenance = manifest['provenance']
    extra = provenance.get('extra') or {}
    protocol = manifest['protocol']
    clean = Condition(seed=int(provenance.get('seed') or 0), protocol=protocol,
                      border=extra.get('border') or 'reflect')
    conditions = [c for kind in CONDITION_KINDS if kind.conditions is not None
                  for c in kind.conditions(kind.parse(extra.get(kind.option), protocol),
                                           clean)]
    return {c.key: c for c in conditions}


def _shard_record(manifest: str, file: str, name: str, is_seed: bool, data: Mapping[str, Any],
                  first: Mapping[str, Any], prefixed: Mapping[str, Any]
                  ) -> Tuple[Any, Optional[Any], Optional[str]]:
    """``(record, condition, problem)`` of a record a manifest lists under ``name`` (a
    condition key, or the tag of a further corruption seed's condition; ``prefixed``:
    the run's shift and attack conditions by key): checked as a resumed sweep checks it,
    and against the manifest's fingerprint."""
    if osp.islink(file):
        raise SweepError(f'{manifest} lists {file}, a symbolic link: a shard\'s records '
                         'must be its own files; run that shard again')
    if not osp.isfile(file):
        raise SweepError(f'{manifest} lists {file}, which does not exist')
    record, problem = read_json(file)
    condition = None
    if problem is None and is_seed:
        try:
            condition = Condition.from_settings({k: record.get(k) for k in CONDITION_FIELDS})
        except (AttributeError, KeyError, TypeError, ValueError) as error:
            problem = f'is not the record of a condition ({error})'
        else:
            if condition.tag != name:
                problem = f'is the record of {condition.tag!r}, not {name!r}'
    elif problem is None and name in prefixed:
        condition = prefixed[name]
    elif problem is None:
        try:
            condition = Condition.from_key(name, first['protocol'])
        except ValueError as error:
            problem = f'is listed as {name!r}, which is no condition of the run ({error})'
    if problem is None:
        problem = record_identity_problem(record, condition.key)
    # a shift set's or a file-read condition's record adds its own data to the run's
    # fingerprint, which every record of the shard shares
    if problem is None and without_own_data(record['fingerprint']) != data['fingerprint']:
        parts = [part for part, _ in differing_parts(without_own_data(record['fingerprint']),
                                                     data['fingerprint'])]
        problem = f'was written for other inputs than its shard (differs in {parts})'
    if problem is None:
        problem = record_consistency_problem(record, {}, results_task(first['task']))
    return record, condition, problem


def merge_sweeps(work_dirs: Sequence[str], out_dir: str, plots: bool = True) -> Report:
    """Merge the outputs of the shards of one sweep (``shard_<i>-of-<n>.json`` and their
    condition files, in one or several work dirs) and write the report into ``out_dir``.

    Every condition file is checked as a resumed sweep checks it (a record of its
    condition, consistent with its metrics and digest, of the manifest's fingerprint).

    Raises:
        SweepError: no manifest, shards of different sweeps, missing shards, a missing,
            malformed or inconsistent file (named, with why), or a report file that
            cannot be written.
    """
    manifests = []
    for work_dir in work_dirs:
        if not osp.isdir(work_dir):
            raise SweepError(f'work dir {work_dir!r} does not exist')
        for path in find_manifests(work_dir):
            data = _read_manifest(path)
            if data is not None:
                manifests.append((work_dir, path, data))
    if not manifests:
        raise SweepError(f'no shard manifest (shard_<i>-of-<n>.json) in {list(work_dirs)}')
    first = manifests[0][2]
    same = ('task', 'protocol', 'corruptions', 'severities', 'num_conditions')
    for _, path, data in manifests[1:]:
        differing = [k for k in same if data.get(k) != first.get(k)]
        differing += [f'fingerprint ({part})' for part, _ in
                      differing_parts(data['fingerprint'], first['fingerprint'])]
        if data['shard'][1] != first['shard'][1]:
            differing.append('shard count')
        if differing:
            raise SweepError(f'{path} belongs to another sweep than {manifests[0][1]} '
                             f'(differs in {differing})')
    count = first['shard'][1]
    present = {data['shard'][0] for _, _, data in manifests}
    missing = sorted(set(range(count)) - present)
    if missing:
        raise SweepError(f'shards {missing} of {count} have no manifest; run them first')
    prefixed = prefixed_conditions(first)
    partials, seen, records, stats, folders = [], set(), {}, {}, {}
    further: Dict[Condition, dict] = {}
    others: Dict[Any, dict] = {}  # the shift sets' and attacks' records
    for work_dir, path, data in manifests:
        if data['shard'][0] in seen:
            continue  # the same shard in two work dirs: take the first
        seen.add(data['shard'][0])
        partial = {}
        entries = [(key, relative, False) for key, relative in data['conditions'].items()]
        entries += [(tag, relative, True)
                    for tag, relative in (data.get('seed_conditions') or {}).items()]
        for name, relative, is_seed in entries:
            file = osp.join(work_dir, str(relative))
            record, condition, problem = _shard_record(path, file, name, is_seed, data,
                                                       first, prefixed)
            if problem is None:
                try:
                    stats[condition] = read_image_stats(record, osp.dirname(file))
                except SweepError as error:
                    problem = f'cannot be merged ({error})'
            if problem is not None:
                raise SweepError(f'{file} {problem}; run shard {data["shard"][0]} again '
                                 '(it evaluates that condition again)')
            if is_seed:
                further[condition] = record
            elif name in prefixed:
                others[condition] = record
            else:
                partial[name] = ConditionResult.from_dict(record['result'])
                records[condition] = record
            folders[condition] = osp.dirname(file)
        partials.append(partial)
    merged = merge_results(partials, protocol=first['protocol'], task=first['task'])
    held = len(merged) + len(further) + len(others)
    if held != first['num_conditions']:
        raise SweepError(f'the shards hold {held} conditions, the sweep has '
                         f'{first["num_conditions"]}')
    extra = first['provenance'].get('extra') or {}
    clean = next(c for c in records if c.is_clean)
    _, by_block = records_by_block({c: others[c] for c in prefixed.values() if c in others})
    blocks = blocks_of(by_block, records[clean], stats[clean], stats,
                       results_task(first['task']).metric_name, extra.get('intervals'))
    files = _gather_image_files(image_files(records, folders.get), out_dir)
    seed_files = _gather_image_files(image_files(further, folders.get), out_dir)
    try:
        return write_report(out_dir, merged, protocol=first['protocol'], task=first['task'],
                            expected_severities=first['severities'],
                            provenance=first['provenance'], plots=plots,
                            calibration_details=calibration_details(records),
                            seen_in_training=extra.get('seen_in_training'),
                            image_stats={c: stats[c] for c in records},
                            intervals=extra.get('intervals'), image_files=files,
                            seed_results={c: ConditionResult.from_dict(r['result'])
                                          for c, r in further.items()},
                            corruption_seed=int(first['provenance'].get('seed') or 0),
                            seed_image_stats={c: stats[c] for c in further},
                            seed_image_files=seed_files, blocks=blocks)
    except OSError as error:
        raise write_error(error.filename or f'the report in {out_dir}', error) from None
