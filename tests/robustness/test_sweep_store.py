"""What a robustness sweep trusts in its work dir: the fingerprint of the inputs (the
resolved config, the test data), the condition records, the lock, and errors while
writing; and the table the tools print. Real Runners on a tiny untrained UperNet and
two 128x128 test images."""
import errno
import importlib.util
import json
import os
import os.path as osp
import shutil
import subprocess
import sys
from glob import glob

import cv2
import pytest

import reobench_mm  # noqa: F401
from reobench_cli import run_tool
import reobench_mm.analysis.report as report_module
import reobench_mm.robustness.store as sweep_module
from helpers import PROJECT_ROOT, SEG_DEMO_CONFIG
from reobench_mm.engine.workdir import LOCK_FILE, WorkDirLock
from reobench_mm.errors import SweepError, WorkDirLockedError
from reobench_mm.robustness.shards import merge_sweeps
from reobench_mm.robustness.sweep import FingerprintMismatchError, RobustnessSweep
from reobench_mm.datasets.synthetic import make_demo_data
from sweep_helpers import listing, sweep_options

SWEEP_TOOL = osp.join(PROJECT_ROOT, 'tools', 'robustness_test.py')
MERGE_TOOL = osp.join(PROJECT_ROOT, 'tools', 'robustness_merge.py')
SELECTION = dict(corruptions=['haze'], severities=[1, 2, 3, 4])
CONDITIONS = [('clean', 0)] + [('haze', s) for s in (1, 2, 3, 4)]
TAGS = ['clean', 'haze_s1', 'haze_s2', 'haze_s3', 'haze_s4']


def _load_tool(path):
    spec = importlib.util.spec_from_file_location(f'tool_{osp.basename(path)[:-3]}', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope='module')
def small_data(tmp_path_factory):
    """Synthetic Potsdam tiles: two 128x128 test images."""
    root = str(tmp_path_factory.mktemp('sweep_store_data'))
    make_demo_data(root, seed=0, num_train=1, num_test=2, size=128, num_potsdam_test=2)
    return osp.join(root, 'potsdam')


@pytest.fixture(scope='module')
def reference(small_data, untrained_seg_checkpoint, tmp_path_factory):
    """A finished sweep (clean, haze at severities 1-4) that the tests copy."""
    work_dir = str(tmp_path_factory.mktemp('sweep_store_reference') / 'work')
    outcome = _sweep(untrained_seg_checkpoint, small_data, work_dir).run()
    assert outcome.evaluated == CONDITIONS
    return work_dir


def _sweep(checkpoint, data_root, work_dir, config=SEG_DEMO_CONFIG, **kwargs):
    return RobustnessSweep(config, checkpoint, work_dir=work_dir, plots=False,
                           cfg_options=sweep_options(data_root)[0], **SELECTION, **kwargs)


def _tool_arguments(checkpoint, data_root, work_dir):
    return [SEG_DEMO_CONFIG, checkpoint, '--corruptions', 'haze', '--severities', '1', '2',
            '3', '4', '--work-dir', work_dir, '--no-plots', '--cfg-options',
            *sweep_options(data_root)[1]]


def _copy(reference, tmp_path, name='work'):
    work_dir = str(tmp_path / name)
    shutil.copytree(reference, work_dir)
    return work_dir


def _condition_file(work_dir, tag):
    return osp.join(work_dir, 'conditions', f'{tag}.json')


def _read(path):
    with open(path, encoding='utf-8') as handle:
        return json.load(handle)


def _write(path, text):
    with open(path, 'w', encoding='utf-8') as handle:
        handle.write(text)


def _error_lines(text):
    return [line for line in text.splitlines() if line.startswith('error:')]


# ----------------------------------------------------------------------------- records

def test_malformed_or_edited_condition_files_are_evaluated_again(reference, small_data,
                                                                untrained_seg_checkpoint, tmp_path):
    work_dir = _copy(reference, tmp_path)
    files = {tag: _condition_file(work_dir, tag) for tag in TAGS}
    edited = _read(files['clean'])  # a well-formed record with a hand-edited value
    correct = edited['result']['value']
    edited['result']['value'] = 99.0
    _write(files['clean'], json.dumps(edited, indent=2))
    _write(files['haze_s1'], 'null')
    _write(files['haze_s2'], '[1, 2, 3]')
    no_result = _read(files['haze_s3'])
    del no_result['result']
    _write(files['haze_s3'], json.dumps(no_result))
    with open(files['haze_s4'], encoding='utf-8') as handle:
        text = handle.read()
    _write(files['haze_s4'], text[:len(text) // 2])  # cut short

    sweep = _sweep(untrained_seg_checkpoint, small_data, work_dir)
    # the report never uses such files
    with pytest.raises(SweepError, match=r'clean\.json its result \(value 99\.0\) does not '
                       r'match its metrics'):
        sweep.write_report()
    outcome = sweep.run()
    assert outcome.evaluated == CONDITIONS and outcome.skipped == []
    reasons = outcome.reevaluated
    assert f'its result (value 99.0) does not match its metrics (value {correct!r})' in \
        reasons['clean']
    assert 'holds a JSON null, not a condition record' in reasons['haze@1']
    assert 'holds a JSON list, not a condition record' in reasons['haze@2']
    assert 'its result (value None) does not match its metrics' in reasons['haze@3']
    assert 'is not valid JSON' in reasons['haze@4']
    # the numbers are those of the reference: the correct value, not the edited one
    for tag in TAGS:
        assert _read(files[tag])['metrics'] == \
            _read(_condition_file(reference, tag))['metrics'], tag
    assert _read(files['clean'])['result']['value'] == correct
    with open(osp.join(work_dir, 'results.json'), 'rb') as a, \
            open(osp.join(reference, 'results.json'), 'rb') as b:
        assert a.read() == b.read()


def test_merge_refuses_malformed_files_and_manifests(reference, small_data, untrained_seg_checkpoint,
                                                     tmp_path, capsys):
    work_dir = _copy(reference, tmp_path)
    outcome = _sweep(untrained_seg_checkpoint, small_data, work_dir, shard='0/1').run()
    assert outcome.evaluated == [] and outcome.manifest
    merge = _load_tool(MERGE_TOOL)
    out = str(tmp_path / 'merged')
    assert run_tool(merge.main, [work_dir, '--out', out, '--no-plots']) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[-2].split() == ['Clean', 'Haze', 'Avg', 'ΔTP']  # the table comes last
    assert printed[-1].split()[0] == 'mIoU'

    _write(_condition_file(work_dir, 'haze_s2'), 'null')
    with pytest.raises(SweepError, match=r'haze_s2\.json holds a JSON null, not a condition '
                       r'record; run shard 0 again'):
        merge_sweeps([work_dir], out, plots=False)
    assert run_tool(merge.main, [work_dir, '--out', out]) == 2
    assert len(_error_lines(capsys.readouterr().err)) == 1

    _write(outcome.manifest, '{"format": "reobench_mm.sweep_shard/1", "shard": [0')
    with pytest.raises(SweepError, match=r'shard manifest .*shard_0-of-1\.json is not valid '
                       'JSON'):
        merge_sweeps([work_dir], out, plots=False)


# ----------------------------------------------------------------------------- fingerprint

def test_changed_base_config_is_refused_naming_the_config(reference, small_data, untrained_seg_checkpoint,
                                                           tmp_path):
    base = tmp_path / 'base.py'
    child = tmp_path / 'child.py'
    base.write_text(f'_base_ = [{SEG_DEMO_CONFIG!r}]\n')
    child.write_text("_base_ = ['./base.py']\n")
    work_dir = _copy(reference, tmp_path)
    # the same resolved config through other files: the finished conditions are reused
    assert _sweep(untrained_seg_checkpoint, small_data, work_dir, config=str(child)).run().evaluated == []

    # an inherited base file changes a setting the numbers depend on
    base.write_text(f'_base_ = [{SEG_DEMO_CONFIG!r}]\n'
                    'model = dict(data_preprocessor=dict(mean=[0.0, 0.0, 0.0]))\n')
    before = listing(work_dir)
    with pytest.raises(FingerprintMismatchError,
                       match=r'clean\.json was written for other inputs: the config differs '
                       r'\(config: the resolved config .*--force') as info:
        _sweep(untrained_seg_checkpoint, small_data, work_dir, config=str(child)).run()
    assert info.value.parts == ['config']
    assert listing(work_dir) == before


def test_rewritten_test_image_is_refused_naming_the_data(reference, small_data, untrained_seg_checkpoint,
                                                         tmp_path):
    work_dir = _copy(reference, tmp_path)
    image = sorted(glob(osp.join(small_data, 'img_dir', 'val', '*.png')))[0]
    stat = os.stat(image)
    with open(image, 'rb') as handle:
        original = handle.read()
    try:
        pixels = cv2.imread(image)
        pixels[:16] = 255 - pixels[:16]
        assert cv2.imwrite(image, pixels)
        before = listing(work_dir)
        with pytest.raises(FingerprintMismatchError,
                           match=r'was written for other inputs: the data differs \(data: '
                           r'test images, annotations or their listing changed') as info:
            _sweep(untrained_seg_checkpoint, small_data, work_dir).run()
        assert info.value.parts == ['data']
        assert listing(work_dir) == before
    finally:
        with open(image, 'wb') as handle:
            handle.write(original)
        os.utime(image, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert _sweep(untrained_seg_checkpoint, small_data, work_dir).run().evaluated == []  # as before


# ----------------------------------------------------------------------------- the lock

def test_a_second_sweep_into_a_busy_work_dir_is_refused(reference, small_data, untrained_seg_checkpoint,
                                                        tmp_path):
    work_dir = _copy(reference, tmp_path)
    os.remove(_condition_file(work_dir, 'haze_s4'))
    refusals = []

    def start_another(condition, record):
        before = listing(work_dir)
        assert LOCK_FILE in before
        with pytest.raises(WorkDirLockedError,
                           match=rf'is in use by another sweep \(pid {os.getpid()}, host '):
            _sweep(untrained_seg_checkpoint, small_data, work_dir).run()
        assert listing(work_dir) == before  # nothing written, the lock file untouched
        refusals.append(condition)

    outcome = _sweep(untrained_seg_checkpoint, small_data, work_dir).run(on_condition=start_another)
    assert outcome.evaluated == [('haze', 4)] and refusals == [('haze', 4)]
    assert not osp.exists(osp.join(work_dir, LOCK_FILE))


@pytest.mark.slow
def test_the_lock_of_a_killed_sweep_does_not_block(reference, small_data, untrained_seg_checkpoint,
                                                   tmp_path):
    work_dir = _copy(reference, tmp_path)
    lock_file = osp.join(work_dir, LOCK_FILE)
    holder = subprocess.Popen([sys.executable, '-c', f'''
import fcntl, json, os, time
fd = os.open({lock_file!r}, os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
os.write(fd, json.dumps(dict(pid=os.getpid(), host='elsewhere', started='then')).encode())
print('locked', flush=True)
time.sleep(300)
'''], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == 'locked'
        with pytest.raises(WorkDirLockedError,
                           match=rf'in use by another sweep \(pid {holder.pid}, host elsewhere'
                           r', started then\)'):
            _sweep(untrained_seg_checkpoint, small_data, work_dir).run()
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    assert osp.exists(lock_file)  # left behind by the killed sweep
    # and the temporary files of its atomic writes (a complete one among them), beside a
    # file of the user's that only ends in .tmp
    left = [osp.join(work_dir, 'conditions', '.haze_s3.images.npz.k2j9x_1.tmp'),
            osp.join(work_dir, 'conditions', '.haze_s3.json.a8w1q.tmp'),
            osp.join(work_dir, '.results.json.zz81.tmp')]
    shutil.copy(osp.join(work_dir, 'conditions', 'haze_s3.images.npz'), left[0])
    for path in left[1:]:
        _write(path, '{"format"')
    _write(osp.join(work_dir, 'conditions', 'notes.tmp'), 'mine')
    outcome = _sweep(untrained_seg_checkpoint, small_data, work_dir).run()
    assert outcome.skipped == CONDITIONS and osp.isfile(osp.join(work_dir, 'results.json'))
    assert not osp.exists(lock_file)
    assert not any(osp.exists(path) for path in left)
    assert osp.isfile(osp.join(work_dir, 'conditions', 'notes.tmp'))

    lock = WorkDirLock(work_dir)  # and the lock itself: taken, refused, released
    with lock:
        with pytest.raises(WorkDirLockedError):
            WorkDirLock(work_dir).acquire()
        assert lock.holder()['pid'] == os.getpid()
    assert not osp.exists(lock_file)


# ----------------------------------------------------------------------------- write errors

@pytest.mark.slow  # 3 s or more: left out of make test-fast
def test_a_full_disk_is_a_clean_error_and_the_rerun_resumes(reference, small_data, untrained_seg_checkpoint,
                                                            tmp_path, monkeypatch, capsys):
    work_dir = _copy(reference, tmp_path)
    for tag in ('haze_s3', 'haze_s4'):
        os.remove(_condition_file(work_dir, tag))
    kept = {name: data for name, data in listing(work_dir).items()
            if name.startswith('conditions')}
    write_json, write_text = sweep_module.dump_json_atomic, report_module.atomic_write_text
    full = _condition_file(work_dir, 'haze_s4')

    def fill_up(obj, path):
        if path == full:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        write_json(obj, path)

    monkeypatch.setattr(sweep_module, 'dump_json_atomic', fill_up)
    tool = _load_tool(SWEEP_TOOL)
    assert tool.main(_tool_arguments(untrained_seg_checkpoint, small_data, work_dir)) == 2
    err = capsys.readouterr().err
    assert 'Traceback' not in err
    assert _error_lines(err) == [f'error: cannot write {full}: No space left on device '
                                 '(finished conditions are kept; rerun to resume)']
    after = listing(work_dir)
    assert {k: v for k, v in after.items() if k in kept} == kept  # nothing lost
    assert 'conditions/haze_s3.json' in after and 'conditions/haze_s4.json' not in after
    assert not [name for name in after if name.endswith('.tmp')] and LOCK_FILE not in after
    assert _read(_condition_file(work_dir, 'haze_s3'))['metrics'] == \
        _read(_condition_file(reference, 'haze_s3'))['metrics']

    # the rerun resumes; now the report cannot be written
    monkeypatch.setattr(sweep_module, 'dump_json_atomic', write_json)

    def no_space(path, text):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(report_module, 'atomic_write_text', no_space)
    os.remove(osp.join(work_dir, 'results.json'))
    assert tool.main(_tool_arguments(untrained_seg_checkpoint, small_data, work_dir)) == 2
    assert _error_lines(capsys.readouterr().err) == [
        f'error: cannot write the report in {work_dir}: No space left on device (finished '
        'conditions are kept; rerun to resume)']
    assert osp.isfile(_condition_file(work_dir, 'haze_s4'))
    assert not osp.exists(osp.join(work_dir, 'results.json'))

    monkeypatch.setattr(report_module, 'atomic_write_text', write_text)
    outcome = _sweep(untrained_seg_checkpoint, small_data, work_dir).run()
    assert outcome.evaluated == [] and outcome.skipped == CONDITIONS
    with open(osp.join(work_dir, 'results.json'), 'rb') as a, \
            open(osp.join(reference, 'results.json'), 'rb') as b:
        assert a.read() == b.read()


def test_a_log_file_on_a_full_disk_is_one_warning_line(reference, small_data,
                                                      untrained_seg_checkpoint, tmp_path,
                                                      monkeypatch, capsys):
    """Python's logging prints a traceback for every record it cannot write, naming no
    file: the tools and the loops make it one warning naming the log file."""
    import logging

    class FullDisk:
        def write(self, text):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        def flush(self):
            pass

        def close(self):
            pass

    monkeypatch.setattr(logging.FileHandler, '_open', lambda self: FullDisk())
    monkeypatch.setattr(logging.FileHandler, 'handleError', logging.Handler.handleError)
    work_dir = _copy(reference, tmp_path)
    tool = _load_tool(SWEEP_TOOL)
    assert run_tool(tool.main, _tool_arguments(untrained_seg_checkpoint, small_data,
                                               work_dir)) == 0
    err = capsys.readouterr().err
    assert 'Logging error' not in err and 'Traceback' not in err
    warnings = [line for line in err.splitlines() if line.startswith('warning: cannot write')]
    assert len(warnings) == 1 and warnings[0].startswith(
        f'warning: cannot write the log file {work_dir}/') and warnings[0].endswith(
        '.log: No space left on device; logging to the console only from here')
    # a runner used directly (a notebook, the toolboxes' tools/test.py): the loop's
    # logger gets the same, from the loop on
    from reobench_mm.engine.workdir import quiet_log_write_errors
    logger = logging.getLogger('full_disk_check')
    handler = logging.FileHandler(str(tmp_path / 'x.log'))
    logger.addHandler(handler)
    quiet_log_write_errors(logger)
    logger.warning('one')
    logger.warning('two')
    err = capsys.readouterr().err
    assert err.count('warning: cannot write the log file') == 1 and 'Logging error' not in err
    # what MMEngine writes into the stream itself (the initialisation table) still goes
    handler.stream.write('Name of parameter - Initialization information\n')
    logger.removeHandler(handler)


def test_an_unwritable_work_dir_is_a_clean_error(reference, small_data, untrained_seg_checkpoint, tmp_path,
                                                 monkeypatch, capsys):
    """Permission lost while the sweep writes (simulated, so that it runs as root too)."""
    work_dir = _copy(reference, tmp_path)
    before = listing(work_dir)

    def denied(path, text):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)

    monkeypatch.setattr(report_module, 'atomic_write_text', denied)
    tool = _load_tool(SWEEP_TOOL)
    assert tool.main(_tool_arguments(untrained_seg_checkpoint, small_data, work_dir)) == 2
    err = capsys.readouterr().err
    results = osp.join(work_dir, 'results.json')
    assert 'Traceback' not in err
    assert _error_lines(err) == [f'error: cannot write {results}: Permission denied '
                                 '(finished conditions are kept; rerun to resume)']
    assert listing(work_dir) == before


@pytest.mark.skipif(os.geteuid() == 0, reason='root ignores file permissions')
def test_a_read_only_work_dir_is_refused_before_anything_runs(reference, small_data,
                                                              untrained_seg_checkpoint, tmp_path, capsys):
    work_dir = _copy(reference, tmp_path)
    os.remove(_condition_file(work_dir, 'haze_s4'))
    os.chmod(osp.join(work_dir, 'conditions'), 0o500)
    try:
        before = listing(work_dir)
        with pytest.raises(SystemExit) as exit_info:
            _load_tool(SWEEP_TOOL).main(_tool_arguments(untrained_seg_checkpoint, small_data, work_dir))
        assert exit_info.value.code == 2
        assert 'is not writable' in capsys.readouterr().err
        assert listing(work_dir) == before
    finally:
        os.chmod(osp.join(work_dir, 'conditions'), 0o700)


# ----------------------------------------------------------------------------- the table

def test_the_sweep_tool_prints_the_paper_table_at_the_end(reference, small_data, untrained_seg_checkpoint,
                                                          tmp_path, capsys):
    work_dir = _copy(reference, tmp_path)
    tool = _load_tool(SWEEP_TOOL)
    assert tool.main(_tool_arguments(untrained_seg_checkpoint, small_data, work_dir)) == 0
    lines = capsys.readouterr().out.rstrip('\n').splitlines()
    numbers = _read(osp.join(work_dir, 'results.json'))['numbers']
    assert lines[-3] == ('paper-layout table (mIoU mean over severities 1, 2, 3, 4; '
                         'ΔTP = Clean - Avg):')
    assert lines[-2].split() == ['Clean', 'Haze', 'Avg', 'ΔTP']
    assert lines[-1].split() == ['mIoU'] + [f'{v:.2f}' for v in (
        numbers['clean'], numbers['per_corruption']['haze']['mean'], numbers['avg'],
        numbers['delta_tp'])]
    assert '0 conditions evaluated, 5 skipped' in '\n'.join(lines[:-3])


def test_every_run_gets_a_log_folder_of_its_own(tmp_path):
    """MMEngine names a run's log folder by its second: a run started in the same second as
    the previous one waits for the next second, so a refused run never writes into (and
    cannot restore) another run's folder."""
    import time

    from reobench_mm.engine.workdir import wait_for_fresh_log_folder
    now = time.strftime('%Y%m%d_%H%M%S')
    (tmp_path / now).mkdir()
    start = time.perf_counter()
    wait_for_fresh_log_folder(str(tmp_path))
    assert time.strftime('%Y%m%d_%H%M%S') != now
    assert time.perf_counter() - start < 1.5
    start = time.perf_counter()
    wait_for_fresh_log_folder(str(tmp_path / 'empty'))  # nothing to wait for
    assert time.perf_counter() - start < 0.05
