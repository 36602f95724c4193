"""What the package writes: file permissions under the umask, progress output on
terminals and in logs, and the layout of every plot (no overlapping text)."""
import io
import json
import os
import os.path as osp
import stat
import subprocess
import sys

import numpy as np
import pytest

import reobench_mm  # noqa: F401  (registration)
from helpers import PROJECT_ROOT, SEG_DEMO_CONFIG
from figure_checks import assert_no_text_overlap, checking_saved_figures, text_overlaps
from reobench_mm import fileio
from reobench_mm.analysis.compare import compare_models, write_cross_model
from reobench_mm.analysis.plotting import (DRIFT_LABELS, RELIABILITY_LABELS, agg_pyplot,
                                           atomic_savefig, plot_data_budget,
                                           plot_reliability_diagrams,
                                           plot_representation_drift)
from reobench_mm.analysis.report import make_provenance, write_report
from reobench_mm.analysis.results import REOBENCH_TABLE_ORDER, ConditionResult
from reobench_mm.engine import ProgressBarHook
from reobench_mm.engine.progress import Progress, format_duration
from reobench_mm.evaluation.functional.calibration import PixelCalibrationStats
from reobench_mm.evaluation.keys import ECE_KEY as CALIBRATION_KEY

VERSIONS = {'numpy': '0'}  # fixed: no package metadata look-ups
CORRUPTIONS = list(REOBENCH_TABLE_ORDER)
SEVERITIES = (1, 2, 3, 4, 5)
LONG_NAMES = ['SatMAE ViT-L/16 (fMoW-RGB pretrain, 800 epochs)',
              'Scale-MAE ViT-L/16 (fMoW-RGB, multiscale)',
              'CROMA ViT-B/8 (SSL4EO-S12 radar + optical)',
              'RVSA ViTAE-B (MillionAID, rotated varied-size attention)',
              'Prithvi-EO-2.0 600M TL (HLS)', 'DOFA ViT-L/14 (any-band)',
              'RemoteCLIP ViT-B/32', 'ResNet-50 (ImageNet-1k supervised)']


# ----------------------------------------------------------------------------- synthetic
def _calibration_details(rng, severity: int, num_pixels: int = 3000, classes: int = 6):
    """``{prefix: details}`` of one condition from pixels whose accuracy falls and
    whose overconfidence grows with ``severity``; the temperature-scaled prefix is
    softer."""
    labels = rng.integers(0, classes, num_pixels)
    logits = rng.normal(0.0, 1.0, (classes, num_pixels))
    logits[labels, np.arange(num_pixels)] += 3.2 - 0.35 * severity
    details = {}
    for prefix, sharpen in (('calib', 2.0 + 0.1 * severity), ('calib_ts', 1.5)):
        scaled = logits * sharpen
        probs = np.exp(scaled - scaled.max(axis=0))
        probs /= probs.sum(axis=0)
        stats = PixelCalibrationStats(classes, selective_bins=2000)
        stats.update(probs, labels)
        details[prefix] = {'metrics': {k: float(v) for k, v in stats.summary().items()},
                           'reliability': stats.reliability_diagram(),
                           'risk_coverage': stats.risk_coverage_curve(max_points=200)}
    return details


def realistic_sweep(seed: int = 0, corruptions=CORRUPTIONS, severities=SEVERITIES):
    """A segmentation sweep over ``corruptions`` x ``severities``: results with
    per-class IoU and ECE (as evaluated and temperature-scaled) and the calibration
    details of every condition."""
    rng = np.random.default_rng(seed)
    results, details = {}, {}
    for name, severity in [('clean', 0)] + [(c, s) for c in corruptions for s in severities]:
        slope = 0.0 if name == 'clean' else rng.uniform(0.5, 4.0)
        value = float(np.clip(78.0 - slope * severity + rng.normal(0, 0.5), 1, 100))
        details[(name, severity)] = _calibration_details(rng, severity)
        extra = {f'{p}/{k}': d['metrics'][k] for p, d in details[(name, severity)].items()
                 for k in ('ECE', 'NLL', 'AURC')}
        per_class = {c: float(np.clip(value + rng.normal(0, 8), 0, 100))
                     for c in ('impervious surface', 'building', 'low vegetation', 'tree',
                               'car', 'clutter')}
        results[(name, severity)] = ConditionResult(value, per_class, extra)
    return results, details


def write_realistic_report(out_dir: str, seed: int = 0, **kwargs):
    results, details = realistic_sweep(seed, **kwargs)
    provenance = make_provenance(model=LONG_NAMES[0], backbone='ViT-L/16', task='segmentation',
                                 versions=VERSIONS)
    return write_report(out_dir, results, task='segmentation', provenance=provenance,
                        calibration_details=details)


def realistic_comparison(root: str, models=LONG_NAMES, n_bootstrap: int = 100):
    """A cross-model comparison of ``models`` over 12 corruptions x 5 severities with
    ECE, and a shifted dataset."""
    rng = np.random.default_rng(1)
    paths, shift_paths = [], []
    for index, model in enumerate(models):
        clean = 45.0 + 35.0 * index / max(len(models) - 1, 1) + rng.normal(0, 2)
        results = {('clean', 0): ConditionResult(
            clean, None, {CALIBRATION_KEY: float(rng.uniform(0.02, 0.06))})}
        for name in CORRUPTIONS:
            slope = rng.uniform(0.5, 4.0)
            for severity in SEVERITIES:
                value = float(np.clip(clean - slope * severity + rng.normal(0, 2), 0, 100))
                ece = float(rng.uniform(0.03, 0.05 + 0.03 * severity))
                results[(name, severity)] = ConditionResult(value, None, {CALIBRATION_KEY: ece})
        for folder, result_set in (('id', results),
                                   ('shift', {('clean', 0): 0.8 * clean + rng.normal(0, 1),
                                              ('cloud', 1): 0.6 * clean})):
            out_dir = osp.join(root, folder, f'model{index}')
            write_report(out_dir, result_set, task='segmentation', plots=False,
                         provenance=make_provenance(model=model, versions=VERSIONS))
            (paths if folder == 'id' else shift_paths).append(osp.join(out_dir,
                                                                       'results.json'))
    return compare_models(paths, shift_paths=shift_paths, n_bootstrap=n_bootstrap, seed=0)


def realistic_drift_document(blocks=('backbone.vit.blocks.5', 'backbone.vit.blocks.11',
                                     'backbone.vit.blocks.17', 'backbone.vit.blocks.23'),
                              floors=None):
    """A drift document; ``floors`` (default small values near 0, as the unbiased HSIC
    gives) is each block's ``cka_floor``, the same in every condition (None: absent)."""
    rng = np.random.default_rng(2)
    if floors is None:
        floors = [float(v) for v in np.random.default_rng(4).normal(0.0, 0.02, len(blocks))]
    conditions = [dict(condition='clean', corruption='clean', severity=0,
                       blocks={b: {'cka': 1.0} for b in blocks})]
    for name in CORRUPTIONS:
        decay = rng.uniform(0.01, 0.12)
        for severity in SEVERITIES:
            conditions.append(dict(
                condition=f'{name}@{severity}', corruption=name, severity=severity,
                blocks={b: {'cka': float(np.clip(1 - decay * severity * (1 + k / 3), 0, 1))}
                        for k, b in enumerate(blocks)}))
    for condition in conditions:
        for block, floor in zip(blocks, floors):
            condition['blocks'][block]['cka_floor'] = floor
    return dict(blocks=[dict(name=b) for b in blocks], conditions=conditions)


def realistic_budget_document(models=LONG_NAMES[:4],
                              fractions=(0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0)):
    rng = np.random.default_rng(3)
    rows = []
    for index, model in enumerate(models):
        for fraction in fractions:
            clean = 40 + 8 * index + 10 * np.log10(fraction * 100) + rng.normal(0, 1)
            rows.append(dict(model=model, fraction=fraction, clean=clean,
                             corrupted_avg=clean - rng.uniform(8, 20),
                             ece_clean=float(rng.uniform(0.02, 0.08)),
                             ece_corrupted_avg=float(rng.uniform(0.08, 0.2))))
    return dict(metric='mIoU', models=list(models), rows=rows)


# ----------------------------------------------------------------------------- umask
@pytest.fixture(params=[0o022, 0o027], ids=['umask022', 'umask027'])
def umask(request):
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_current_umask(umask, monkeypatch):
    assert fileio.current_umask() == umask
    # without /proc: set-and-restore, which leaves the umask as it was
    monkeypatch.setattr(fileio, '_umask_from_proc', lambda: None)
    assert fileio.current_umask() == umask
    assert os.umask(umask) == umask


def test_atomic_writes_follow_the_umask(umask, tmp_path):
    expected = 0o666 & ~umask
    fig, ax = agg_pyplot().subplots()
    try:
        ax.plot([0, 1], [0, 1])
        paths = [fileio.atomic_write_text(str(tmp_path / 'a.md'), 'text\n'),
                 fileio.atomic_write_bytes(str(tmp_path / 'b.bin'), b'\x00\x01'),
                 atomic_savefig(fig, str(tmp_path / 'c.png'))]
    finally:
        agg_pyplot().close(fig)
    fileio.dump_json_atomic({'a': 1}, str(tmp_path / 'd.json'))
    paths.append(str(tmp_path / 'd.json'))
    with fileio.atomic_open(str(tmp_path / 'sub' / 'e.csv'), 'w') as handle:
        handle.write('a,b\n')
    paths.append(str(tmp_path / 'sub' / 'e.csv'))
    for path in paths:
        assert _mode(path) == expected, (path, oct(_mode(path)))
    assert not [n for n in os.listdir(tmp_path) if n.endswith('.tmp')]


def test_replacing_a_file_keeps_its_permissions(umask, tmp_path):
    path = tmp_path / 'results.json'
    for mode in (0o600, 0o664):
        path.write_text('old')
        os.chmod(path, mode)
        fileio.dump_json_atomic({'new': True}, str(path))
        assert _mode(path) == mode and json.loads(path.read_text()) == {'new': True}
    # a symlink to a file: the link is replaced by a file with the target's permissions
    target = tmp_path / 'target.txt'
    target.write_text('x')
    os.chmod(target, 0o640)
    link = tmp_path / 'link.txt'
    link.symlink_to(target)
    fileio.atomic_write_text(str(link), 'y')
    assert not link.is_symlink() and _mode(link) == 0o640 and target.read_text() == 'x'


def test_write_report_files_follow_the_umask(umask, tmp_path):
    report = write_realistic_report(str(tmp_path), corruptions=['cloud', 'rotate'],
                                    severities=(1, 3))
    expected = {'results.json', 'results.csv', 'report.md', 'severity_curves.png',
                'drop_by_corruption.png', 'ece_vs_severity.png', 'reliability_diagrams.png',
                'reliability_diagrams_ts.png', 'risk_coverage.png'}
    assert set(report.files) == expected == set(os.listdir(tmp_path))
    for path in report.files.values():
        assert _mode(path) == 0o666 & ~umask, (path, oct(_mode(path)))


@pytest.mark.slow
def test_corruption_grid_tool_follows_the_umask(tmp_path):
    import cv2
    image = tmp_path / 'tile.png'
    cv2.imwrite(str(image), np.random.default_rng(0).integers(0, 255, (96, 96, 3), np.uint8))
    out = tmp_path / 'grid.png'
    result = subprocess.run([sys.executable, 'tools/analysis_tools/visualize_corruptions.py',
                             str(image), '--corruptions', 'haze', '--out', str(out)],
                            cwd=PROJECT_ROOT,
                            capture_output=True, text=True, timeout=300, umask=0o027)
    assert result.returncode == 0, result.stderr
    assert _mode(out) == 0o640 and cv2.imread(str(out)) is not None


# ----------------------------------------------------------------------------- progress
class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class FakeClock:
    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        return self.now

    def tick(self) -> None:
        self.now += self.step


@pytest.mark.parametrize('seconds_per_step', [0.0, 0.05, 1.0])
def test_progress_off_a_terminal_prints_few_short_lines(seconds_per_step):
    stream, clock = io.StringIO(), FakeClock(seconds_per_step)
    progress = Progress(300, stream=stream, desc='train', clock=clock)
    assert not progress.is_tty
    for _ in range(300):
        clock.tick()
        progress.update()
    progress.close()
    progress.close()  # a second close writes nothing
    text = stream.getvalue()
    lines = text.splitlines(keepends=True)
    assert '\r' not in text and all(line.endswith('\n') for line in lines)
    # 10 % steps (and a line a minute: 300 s at 1 s a step) plus the final line
    assert len(lines) <= 12 + (5 if seconds_per_step == 1.0 else 0), text
    assert all(len(line) <= 100 for line in lines), text
    assert lines[-1].startswith('train: 300/300 (100%)') and 'done' in lines[-1]
    if seconds_per_step:
        assert lines[0].startswith('train: 30/300 (10%)') and 'ETA' in lines[0]


def test_progress_off_a_terminal_heartbeat_and_unknown_total():
    # slow steps: a line at least every `interval` seconds besides the 10 % steps
    stream, clock = io.StringIO(), FakeClock(7.0)
    progress = Progress(100, stream=stream, desc='val', interval=30, clock=clock)
    for _ in range(20):
        clock.tick()
        progress.update()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 4 and lines[0] == 'val: 5/100 (5%), 7.0 s/it, elapsed 0:00:35, ' \
        'ETA 0:11:05'
    # unknown total: periodic lines and the final count
    stream, clock = io.StringIO(), FakeClock(1.0)
    with Progress(None, stream=stream, interval=10, unit='image', clock=clock) as progress:
        for _ in range(25):
            clock.tick()
            progress.update()
    lines = stream.getvalue().splitlines()
    assert lines == ['10 image, 1.0 image/s, elapsed 0:00:10',
                     '20 image, 1.0 image/s, elapsed 0:00:20',
                     '25 image, 1.0 image/s, elapsed 0:00:25, done']
    assert format_duration(3725.4) == '1:02:05'


def test_progress_on_a_terminal_draws_the_bar(monkeypatch):
    monkeypatch.setenv('COLUMNS', '120')
    stream, clock = FakeTerminal(), FakeClock(0.1)
    progress = Progress(300, stream=stream, bar_width=20, clock=clock)
    assert progress.is_tty
    for _ in range(300):
        clock.tick()
        progress.update()
    progress.close()
    text = stream.getvalue()
    draws = text.split('\r')[1:]
    assert len(draws) == 302 and text.count('\n') == 1 and text.endswith('\n')
    assert draws[0].startswith('[' + ' ' * 20 + '] 0/300')
    assert draws[150].startswith('[' + '>' * 10 + ' ' * 10 + '] 150/300, 10.0 it/s, '
                                 'elapsed: 15s, ETA:    15s')
    assert draws[-1].rstrip('\n').startswith('[' + '>' * 20 + '] 300/300')
    # break_line ends the live line once; the next update draws on a new line
    stream = FakeTerminal()
    progress = Progress(4, stream=stream)
    progress.update()
    progress.break_line()
    progress.break_line()
    progress.update()
    first, second = stream.getvalue().split('\n')
    assert '1/4' in first and second.startswith('\r[') and '2/4' in second


def test_progress_rejects_bad_arguments():
    with pytest.raises(ValueError, match='total'):
        Progress(-1, stream=io.StringIO())
    with pytest.raises(ValueError, match='step_percent'):
        Progress(3, stream=io.StringIO(), step_percent=0)
    with pytest.raises(ValueError, match='interval'):
        ProgressBarHook(interval=0)


class _Loader:
    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size


class _Runner:
    rank, iter, max_iters = 0, 0, 300
    val_dataloader = _Loader(40)
    test_dataloader = _Loader(25)


def test_progress_bar_hook_in_a_log(monkeypatch):
    """Training with validation every 100 iterations, then a test, into a non-terminal
    stdout: short lines only, each phase reported with its own label."""
    stdout = io.StringIO()
    monkeypatch.setattr(sys, 'stdout', stdout)
    hook, runner = ProgressBarHook(), _Runner()
    hook.before_train(runner)
    for i in range(300):
        hook.after_train_iter(runner, i)
        if (i + 1) % 100 == 0:
            hook.before_val_epoch(runner)
            for j in range(40):
                hook.after_val_iter(runner, j)
            hook.after_val_epoch(runner)
    hook.after_train(runner)
    hook.before_test_epoch(runner)
    for j in range(25):
        hook.after_test_iter(runner, j)
    hook.after_test_epoch(runner)
    lines = stdout.getvalue().splitlines()
    assert '\r' not in stdout.getvalue() and all(len(line) < 100 for line in lines)
    assert sum(line.startswith('train: ') for line in lines) == 10
    assert sum(line.startswith('val: ') for line in lines) == 3 * 10
    assert sum(line.startswith('test: ') for line in lines) == 10
    assert lines[-1].startswith('test: 25/25 (100%)')
    assert [line for line in lines if line.startswith('train: ')][-1].startswith(
        'train: 300/300 (100%)')


@pytest.mark.trains('the training log of tools/train.py is what it checks')
@pytest.mark.slow
def test_training_log_has_short_lines(demo_data, tmp_path):
    """A real training run (with validation) whose stdout is a file. (MMEngine's own
    INFO records are left out: its environment dump has lines of over 1000 characters.)"""
    data_root = osp.join(demo_data, 'potsdam')
    options = ['train_cfg.max_iters=20', 'train_cfg.val_interval=10',
               'train_dataloader.batch_size=2', 'log_level=WARNING']
    for split in ('train', 'val', 'test'):
        options += [f'{split}_dataloader.dataset.data_root={data_root}',
                    f'{split}_dataloader.num_workers=0',
                    f'{split}_dataloader.persistent_workers=False']
    log = tmp_path / 'stdout.txt'
    with open(log, 'w') as stdout:
        result = subprocess.run([sys.executable, 'tools/train.py', SEG_DEMO_CONFIG,
                                 '--work-dir', str(tmp_path / 'work'), '--cfg-options',
                                 *options], cwd=PROJECT_ROOT, stdout=stdout,
                                stderr=subprocess.PIPE, text=True, timeout=900)
    text = log.read_text()
    assert result.returncode == 0, result.stderr[-3000:]
    lines = text.splitlines()
    assert '\r' not in text
    assert max(len(line) for line in lines) <= 300, max(lines, key=len)
    progress = [line for line in lines if line.startswith('train: ')]
    assert 1 <= len(progress) <= 12 and progress[-1].startswith('train: 20/20 (100%)')
    assert any(line.startswith('val: 3/3 (100%)') for line in lines)


@pytest.mark.slow
def test_sweep_log_has_one_line_per_condition(demo_data, tmp_path):
    """A sweep at INFO logs each corrupted condition in one line: the per-class table the
    toolbox metric logs at every evaluation is kept for the clean condition only (it was
    13 lines per condition), and the metrics are not repeated per condition."""
    from sweep_helpers import sweep_options, untrained_checkpoint
    checkpoint = untrained_checkpoint(SEG_DEMO_CONFIG, str(tmp_path / 'model.pth'))
    _, options = sweep_options(osp.join(demo_data, 'potsdam'), log_level='INFO')
    result = subprocess.run(
        [sys.executable, 'tools/robustness_test.py', SEG_DEMO_CONFIG, checkpoint,
         '--corruptions', 'cloud', 'haze', 'gaussian_noise', '--severities', '1', '3',
         '--work-dir', str(tmp_path / 'sweep'), '--no-plots', '--cfg-options', *options],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    text = result.stdout + result.stderr
    assert text.count('per class results') == 1, text.count('per class results')
    for tag in ('cloud_s1', 'cloud_s3', 'haze_s1', 'haze_s3', 'gaussian_noise_s1',
                'gaussian_noise_s3'):
        assert len([line for line in text.splitlines() if f'] {tag}: mIoU' in line]) == 1, tag
    tables = [line for line in text.splitlines() if line.startswith('|') and 'IoU' in line]
    assert len(tables) == 1, tables  # the clean table's header only


# ----------------------------------------------------------------------------- plots
def test_overlap_check_finds_overlapping_text():
    plt = agg_pyplot()
    fig, axes = plt.subplots(2, 1, figsize=(3, 2.5))
    try:
        axes[0].set_xlabel('a long label of the upper panel')
        axes[1].set_title('the title of the lower panel, right under it')
        problems = text_overlaps(fig)
        assert any('lower panel' in p and 'axes 0' in p for p in problems), problems
        with pytest.raises(AssertionError, match='overlapping text'):
            assert_no_text_overlap(fig)
    finally:
        plt.close(fig)


@pytest.mark.slow  # 3 s or more: left out of make test-fast
def test_report_plots_have_no_overlapping_text(tmp_path):
    with checking_saved_figures() as checked:
        report = write_realistic_report(str(tmp_path))
    names = sorted(n for n in report.files if n.endswith('.png'))
    assert names == ['drop_by_corruption.png', 'ece_vs_severity.png',
                     'reliability_diagrams.png', 'reliability_diagrams_ts.png',
                     'risk_coverage.png', 'severity_curves.png']
    assert len(checked) == len(names)


@pytest.mark.parametrize('count', [1, 2, 3, 4, 5])
def test_reliability_diagrams_of_few_panels(tmp_path, count):
    _, details = realistic_sweep(corruptions=CORRUPTIONS[:count - 1], severities=(5, ))
    panels = {f'{n} @ {s}': d['calib'] for (n, s), d in details.items()}
    with checking_saved_figures() as checked:
        plot_reliability_diagrams(panels, str(tmp_path / 'r.png'),
                                  title='Reliability: clean vs the strongest severity '
                                  '(calib_ts, temperature-scaled)')
    assert len(checked) == 1


@pytest.fixture
def saved_figures(monkeypatch):
    """The figures the package saves (still inspectable after it closes them)."""
    from matplotlib.figure import Figure
    figures, original = [], Figure.savefig

    def savefig(fig, *args, **kwargs):
        figures.append(fig)
        return original(fig, *args, **kwargs)

    monkeypatch.setattr(Figure, 'savefig', savefig)
    return figures


def _legends(fig):
    return list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]


def _reliability_panel_data(accuracy, confidence):
    edges = np.linspace(0, 1, len(accuracy) + 1)
    return {'bin_edges': list(edges), 'accuracy': accuracy, 'mean_confidence': confidence,
            'ECE': 0.1}


@pytest.mark.parametrize('count', [1, 4, 5])
def test_reliability_diagram_legend_names_every_area(tmp_path, saved_figures, count):
    """Every shaded area of the diagram is one legend entry: the bars, the gap where the
    bin is underconfident, the gap where it is overconfident, and the diagonal; no two
    areas overlap (overlapping translucent areas made colours no entry named)."""
    mixed = _reliability_panel_data([None, 0.3, 0.7, 0.55, 0.9], [0.1, 0.35, 0.5, 0.55, 0.95])
    panels = {f'panel {i}': mixed for i in range(count)}
    plot_reliability_diagrams(panels, str(tmp_path / 'r.png'))
    fig, = saved_figures
    legend, = _legends(fig)
    labels = [t.get_text() for t in legend.get_texts()]
    assert labels == list(RELIABILITY_LABELS.values())
    assert 'accuracy of the bin' in labels[0] and 'underconfident' in labels[1]
    assert 'overconfident' in labels[2] and 'perfect calibration' in labels[3]
    styles = {(tuple(h.get_facecolor()), h.get_hatch()) for h in legend.legend_handles
              if hasattr(h, 'get_hatch')}
    panels_drawn = [ax for ax in fig.axes if ax.get_visible() and ax.patches]
    assert len(panels_drawn) == count
    for ax in panels_drawn:
        bars = [p for p in ax.patches if p.get_height() > 0]
        # 4 filled bins; 1 underconfident, 2 overconfident
        assert len(bars) == 4 + 1 + 2
        for bar in bars:
            assert (tuple(bar.get_facecolor()), bar.get_hatch()) in styles
        for i, a in enumerate(bars):
            for b in bars[i + 1:]:
                ea, eb = a.get_bbox(), b.get_bbox()
                width = min(ea.x1, eb.x1) - max(ea.x0, eb.x0)
                height = min(ea.y1, eb.y1) - max(ea.y0, eb.y0)
                assert width <= 1e-9 or height <= 1e-9, 'overlapping areas'
        assert [line.get_label() for line in ax.get_lines()] == [labels[3]]


def test_drift_plot_draws_the_noise_floor(tmp_path, saved_figures):
    blocks = ['block.a', 'block.b', 'block.c']
    document = realistic_drift_document(blocks, floors=[0.04, -0.01, None])
    for condition in document['conditions'][1:4]:  # a floor that differs between conditions
        condition['blocks']['block.b']['cka_floor'] = 0.03
    plot_representation_drift(document, str(tmp_path / 'drift.png'))
    fig, = saved_figures
    axes = [ax for ax in fig.axes if ax.get_visible()]
    floor_label = DRIFT_LABELS['floor']
    assert 'split-half noise floor' in floor_label
    floor_a = [line for line in axes[0].get_lines() if line.get_label() == floor_label]
    assert len(floor_a) == 1 and np.allclose(floor_a[0].get_ydata(), 0.04)
    assert 'noise floor 0.040' in axes[0].get_title()
    band = [p for p in axes[1].patches if p.get_label() == DRIFT_LABELS['floor_range']]
    assert len(band) == 1
    low, height = band[0].get_y(), band[0].get_height()  # a Rectangle in data y
    assert np.allclose([low, low + height], [-0.01, 0.03])
    assert not any(line.get_label() == floor_label for line in axes[2].get_lines())
    legend, = _legends(fig)
    labels = [t.get_text() for t in legend.get_texts()]
    assert labels[:len(CORRUPTIONS) + 1] == ['clean'] + CORRUPTIONS
    assert labels[len(CORRUPTIONS) + 1:] == [DRIFT_LABELS['identity'], floor_label,
                                             DRIFT_LABELS['floor_range']]
    # every reference line on the panels is named in the legend
    for ax in axes:
        for line in ax.get_lines():
            assert line.get_label() in labels


@pytest.mark.slow  # 7 s or more: left out of make test-fast
@pytest.mark.parametrize('models', [LONG_NAMES, [f'M{i}' for i in range(30)]],
                         ids=['8-long-names', '30-models'])
def test_comparison_plots_have_no_overlapping_text(tmp_path, models):
    comparison = realistic_comparison(str(tmp_path), models, n_bootstrap=50)
    with checking_saved_figures() as checked:
        files = write_cross_model(comparison, str(tmp_path / 'out'))
    assert {'kendall_tau_vs_severity.png', 'effective_robustness.png',
            'rank_scatter.png'} <= set(files)
    # every figure written was checked for overlaps
    assert len(checked) == len([f for f in files if str(f).endswith('.png')])


@pytest.mark.slow  # 3 s or more: left out of make test-fast
def test_drift_and_data_budget_plots_have_no_overlapping_text(tmp_path):
    with checking_saved_figures() as checked:
        plot_representation_drift(realistic_drift_document(), str(tmp_path / 'drift.png'))
        plot_representation_drift(realistic_drift_document(
            [f'backbone.blocks.{i}' for i in range(6)]), str(tmp_path / 'drift6.png'))
        ranged = realistic_drift_document(['backbone.blocks.0', 'backbone.blocks.1'],
                                          floors=[0.01, None])
        ranged['conditions'][3]['blocks']['backbone.blocks.0']['cka_floor'] = -0.02
        plot_representation_drift(ranged, str(tmp_path / 'drift_range.png'))
        plot_data_budget(realistic_budget_document(), str(tmp_path / 'budget.png'))
        doc = realistic_budget_document(fractions=(0.05, 0.1, 0.5, 0.9, 1.0))
        for row in doc['rows']:
            row['ece_clean'] = row['ece_corrupted_avg'] = None
        plot_data_budget(doc, str(tmp_path / 'budget_no_ece.png'))
    assert len(checked) == 5
