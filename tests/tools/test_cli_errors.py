"""The error convention of the command-line tools: a bad input or a refused run ends with
one line on stderr, ``error: ...``, and exit status 2, never a traceback
(``reobench_cli``); ``REOBENCH_DEBUG=1`` shows the traceback.

Every tool under ``tools/`` is run in this process with a bad input of its own (a missing,
empty or truncated file, a bad value), and a few cases end to end in subprocesses."""
import glob
import importlib.util
import json
import os
import os.path as osp
import subprocess
import sys

import pytest

from reobench_cli import DEBUG_ENV_VAR, run_tool

from helpers import PROJECT_ROOT, SEG_DEMO_CONFIG

TOOLS = sorted(osp.relpath(p, PROJECT_ROOT)
               for p in glob.glob(osp.join(PROJECT_ROOT, 'tools', '**', '*.py'), recursive=True))


def _load(tool):
    spec = importlib.util.spec_from_file_location(
        'cli_' + tool.replace('/', '_')[:-3], osp.join(PROJECT_ROOT, tool))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _bad_inputs(tmp):
    """tool -> (arguments, a piece of the expected message)."""
    empty = osp.join(tmp, 'empty.pth')
    truncated = osp.join(tmp, 'truncated.pth')
    null_results = osp.join(tmp, 'null', 'results.json')
    missing = osp.join(tmp, 'missing')
    return {
        'tools/condition_inference.py': ([SEG_DEMO_CONFIG, empty, missing + '.png', '--out',
                                          osp.join(tmp, 'grid.png')], 'does not exist'),
        'tools/demo.py': (['--corruptions', 'fog'], 'unknown corruption'),
        'tools/make_demo_data.py': (['--out', osp.join(tmp, 'demo'), '--size', '8'],
                                    'size must be >= 32'),
        'tools/robustness_merge.py': ([missing], 'does not exist'),
        'tools/robustness_test.py': ([SEG_DEMO_CONFIG, empty], 'empty'),
        'tools/test.py': ([SEG_DEMO_CONFIG, truncated], 'truncated'),
        'tools/train.py': ([missing + '.py'], 'does not exist'),
        'tools/analysis_tools/band_statistics.py': ([missing + '.tif'], 'does not exist'),
        'tools/analysis_tools/data_budget.py': ([missing + '.py'], 'does not exist'),
        'tools/analysis_tools/finetune_compare.py': ([missing + '.py'], 'does not exist'),
        'tools/analysis_tools/lr_sweep.py': ([missing + '.py'], 'does not exist'),
        'tools/analysis_tools/mechanism_tests.py': ([missing + '.json'], 'no such drift file'),
        'tools/analysis_tools/mitigation_table.py': ([null_results], 'null'),
        'tools/analysis_tools/representation_drift.py': (
            [SEG_DEMO_CONFIG, empty, '--corruptions', 'cloud'], 'empty'),
        'tools/analysis_tools/robust_recipe.py': ([missing + '.py', missing + '2.py'],
                                                  'does not exist'),
        'tools/analysis_tools/robustness_compare.py': ([null_results, null_results],
                                                       'null'),
        'tools/analysis_tools/robustness_table.py': ([null_results], 'null'),
        'tools/analysis_tools/shift_analysis.py': ([osp.join(tmp, 'pairs.csv')], 'null'),
        'tools/analysis_tools/visualize_corruptions.py': ([missing + '.png'], 'missing.png'),
        'tools/dataset_converters/dior_r.py': ([missing], 'missing'),
        'tools/dataset_converters/potsdam.py': ([missing], 'missing'),
        'tools/dataset_converters/reobench_released.py': (['dior', missing], 'missing'),
        'tools/model_converters/convert_checkpoint.py': (
            [empty, osp.join(tmp, 'out.pth'), '--arch', 'SatMAE'], 'empty'),
        'tools/model_converters/make_ensemble.py': (
            [SEG_DEMO_CONFIG, truncated, SEG_DEMO_CONFIG, truncated, '--out',
             osp.join(tmp, 'ensemble.pth')], 'truncated'),
    }


def _write_inputs(tmp):
    with open(osp.join(tmp, 'empty.pth'), 'wb'):
        pass
    import torch
    torch.save({'state_dict': {'w': torch.zeros(64)}}, osp.join(tmp, 'full.pth'))
    with open(osp.join(tmp, 'full.pth'), 'rb') as handle:
        data = handle.read()
    with open(osp.join(tmp, 'truncated.pth'), 'wb') as handle:
        handle.write(data[:len(data) // 2])
    # a results file whose condition value is null
    from reobench_mm.analysis.report import write_report
    from reobench_mm.analysis.results import ConditionResult
    write_report(osp.join(tmp, 'null'), {('clean', 0): ConditionResult(60.0),
                                         ('cloud', 3): ConditionResult(50.0)},
                 task='segmentation', plots=False)
    path = osp.join(tmp, 'null', 'results.json')
    with open(path, encoding='utf-8') as handle:
        doc = json.load(handle)
    doc['numbers']['conditions'][1]['value'] = None
    with open(path, 'w', encoding='utf-8') as handle:
        json.dump(doc, handle)
    with open(osp.join(tmp, 'pairs.csv'), 'w') as handle:
        handle.write('model,group,dataset,shift_type,id_results,ood_results\n'
                     'a,,x->y,geographic,null/results.json,null/results.json\n')


def test_every_tool_is_covered():
    assert set(_bad_inputs('/x')) == set(TOOLS), 'a tool without a bad-input case'


@pytest.mark.parametrize('tool', TOOLS)
def test_a_bad_input_is_one_error_line(tool, tmp_path, monkeypatch, capsys):
    tmp = str(tmp_path)
    _write_inputs(tmp)
    arguments, message = _bad_inputs(tmp)[tool]
    module = _load(tool)
    monkeypatch.setattr(sys, 'argv', [osp.basename(tool)] + arguments)
    monkeypatch.delenv(DEBUG_ENV_VAR, raising=False)
    try:
        status = run_tool(module.main)
    except SystemExit as exit_:  # argparse's refusal of an argument
        status = exit_.code
    assert status == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines and lines[-1].startswith('error: '), err
    assert message in lines[-1], lines[-1]
    assert 'Traceback' not in err
    assert sum(line.startswith('error: ') for line in lines) == 1, err


def test_debug_shows_the_traceback(tmp_path, monkeypatch):
    module = _load('tools/robustness_merge.py')
    monkeypatch.setattr(sys, 'argv', ['robustness_merge.py', str(tmp_path / 'missing')])
    monkeypatch.setenv(DEBUG_ENV_VAR, '1')
    with pytest.raises(ValueError, match='does not exist'):
        run_tool(module.main)


@pytest.mark.trains("tools/train.py's refusals are part of what it checks")
@pytest.mark.slow
def test_refused_runs_end_to_end(tmp_path, demo_data):
    """In subprocesses: a truncated ``load_from`` in tools/train.py, ``--launcher pytorch``
    without the launcher's environment, and a temperature split as large as the test set:
    exit status 2, one error line, no traceback."""
    _write_inputs(str(tmp_path))
    data = osp.join(demo_data, 'potsdam')
    loader = [f'{s}_dataloader.{k}' for s in ('train', 'val', 'test')
              for k in ('dataset.data_root=' + data, 'num_workers=0',
                        'persistent_workers=False')]
    env = {k: v for k, v in os.environ.items()
           if k not in ('RANK', 'WORLD_SIZE', 'MASTER_ADDR', 'MASTER_PORT', DEBUG_ENV_VAR)}
    cases = [
        ([osp.join('tools', 'train.py'), SEG_DEMO_CONFIG, '--work-dir', str(tmp_path / 't'),
          '--cfg-options', f'load_from={tmp_path / "truncated.pth"}',
          'train_cfg.max_iters=1', *loader], 'truncated'),
        ([osp.join('tools', 'test.py'), SEG_DEMO_CONFIG, str(tmp_path / 'full.pth'),
          '--launcher', 'pytorch', '--work-dir', str(tmp_path / 'l'), '--cfg-options',
          *loader], 'RANK'),
        ([osp.join('tools', 'robustness_test.py'), SEG_DEMO_CONFIG,
          str(tmp_path / 'full.pth'), '--work-dir', str(tmp_path / 's'),
          '--corruptions', 'cloud', '--severities', '1', '--temperature-scaling',
          '--temperature-split', '3', '--cfg-options', *loader], 'temperature_split=3'),
    ]
    processes = [subprocess.Popen([sys.executable, *command], cwd=PROJECT_ROOT, env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for command, _ in cases]
    for process, (command, message) in zip(processes, cases):
        _, err = process.communicate()
        lines = [line for line in err.splitlines() if line.strip()]
        assert process.returncode == 2, (command, err[-3000:])
        assert 'Traceback' not in err, err[-3000:]
        assert lines[-1].startswith('error: ') and message in lines[-1], lines[-1]


def _in_process(tool, arguments, monkeypatch, capsys):
    """``(exit status, the last stderr line)`` of a tool run here under the convention."""
    module = _load(tool)
    monkeypatch.setattr(sys, 'argv', [osp.basename(tool)] + arguments)
    try:
        status = run_tool(module.main)
    except SystemExit as exit_:
        status = exit_.code
    err = capsys.readouterr().err
    assert 'Traceback' not in err, err
    return status, [line for line in err.splitlines() if line.strip()][-1]


def test_refusals_through_the_test_tools(demo_data, tmp_path, monkeypatch, capsys):
    """A folder given as the checkpoint, an option of the robustness loop given to the
    single-condition loop, an empty test set."""
    from sweep_helpers import sweep_options, untrained_checkpoint
    _, arguments = sweep_options(osp.join(demo_data, 'potsdam'))
    checkpoint = untrained_checkpoint(SEG_DEMO_CONFIG, str(tmp_path / 'model.pth'))
    status, line = _in_process('tools/test.py', [SEG_DEMO_CONFIG, str(tmp_path)],
                               monkeypatch, capsys)
    assert status == 2 and 'is a folder, not a checkpoint file' in line
    status, line = _in_process(
        'tools/test.py', [SEG_DEMO_CONFIG, checkpoint, '--work-dir', str(tmp_path / 'f'),
                          '--cfg-options', *arguments, 'test_cfg.force=True'],
        monkeypatch, capsys)
    assert status == 2 and "'force' is not an option of CorruptionTestLoop" in line
    # a checkpoint trained on other classes: named by its file
    import torch
    foreign = tmp_path / 'other_classes.pth'
    state = torch.load(checkpoint, weights_only=False)
    state.setdefault('meta', {})['dataset_meta'] = dict(classes=list('abcdef'))
    torch.save(state, foreign)
    for extra in ([], ['test_cfg.type=RobustnessTestLoop', 'test_cfg.corruptions=[haze]']):
        status, other = _in_process(
            'tools/test.py', [SEG_DEMO_CONFIG, str(foreign), '--work-dir', str(tmp_path / 'g'),
                              '--cfg-options', *arguments, *extra], monkeypatch, capsys)
        assert status == 2 and f"error: '{foreign}' was trained on the classes ['a', " in other

    assert 'keeps no condition records' in line and 'tools/robustness_test.py ... --force' \
        in line and "test_cfg.type='RobustnessTestLoop' with test_cfg.force=True" in line
    empty = tmp_path / 'empty'
    for part in ('img_dir/val', 'ann_dir/val'):
        (empty / part).mkdir(parents=True)
    status, line = _in_process(
        'tools/robustness_test.py',
        [SEG_DEMO_CONFIG, checkpoint, '--work-dir', str(tmp_path / 'e'), '--corruptions',
         'cloud', '--severities', '1', '--cfg-options', *arguments,
         f'test_dataloader.dataset.data_root={empty}'], monkeypatch, capsys)
    assert status == 2 and line.endswith(f'the test dataset has no samples: its image '
                                         f'folder {empty}/img_dir/val is empty')
    # images of another suffix than the dataset reads: said, with the option to set
    for name in ('a.jpg', 'b.jpg'):
        (empty / 'img_dir' / 'val' / name).write_bytes(b'\xff\xd8\xff')
    status, line = _in_process(
        'tools/robustness_test.py',
        [SEG_DEMO_CONFIG, checkpoint, '--work-dir', str(tmp_path / 'e'), '--corruptions',
         'cloud', '--severities', '1', '--cfg-options', *arguments,
         f'test_dataloader.dataset.data_root={empty}'], monkeypatch, capsys)
    assert status == 2 and line.endswith(
        f"its image folder {empty}/img_dir/val holds no '.png' files (2 '.jpg' files): set "
        "img_suffix='.jpg'?"), line


@pytest.mark.trains("a refusal inside tools/train.py's data-loader workers is what it checks")
@pytest.mark.slow
def test_a_misplaced_training_corruption_in_a_worker_is_one_line(demo_data, tmp_path):
    """RandomCorruption written after the crop of a training pipeline, in tools/train.py
    with two data-loader workers: the refusal comes from a worker and is still one line."""
    config = tmp_path / 'misplaced.py'
    config.write_text(
        f"_base_ = ['{SEG_DEMO_CONFIG}']\n"
        "train_pipeline = _base_.train_pipeline[:3] + [dict(type='RandomCorruption', "
        "corruptions='sensor', prob=1.0)] + _base_.train_pipeline[3:]\n"
        "train_dataloader = dict(sampler=dict(_delete_=True, type='EpochIndexSampler', "
        "sampler=_base_.train_dataloader.sampler), dataset=dict(_delete_=True, "
        "type='EpochIndexedDataset', dataset=dict(_base_.train_dataloader.dataset, "
        "pipeline=train_pipeline)))\n")
    data = osp.join(demo_data, 'potsdam')
    result = subprocess.run(
        [sys.executable, osp.join('tools', 'train.py'), str(config), '--work-dir',
         str(tmp_path / 'w'), '--cfg-options', 'train_cfg.max_iters=1',
         f'train_dataloader.dataset.dataset.data_root={data}', 'train_dataloader.num_workers=2',
         'val_cfg=None', 'val_dataloader=None', 'val_evaluator=None'],
        capture_output=True, text=True, cwd=PROJECT_ROOT,
        env={k: v for k, v in os.environ.items() if k != DEBUG_ENV_VAR})
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, result.stderr[-3000:]
    assert 'Traceback' not in result.stderr
    assert lines[-1].startswith('error: in a data-loader worker: RandomCorruption (drawn: ')
    assert 'resized, cropped or padded' in lines[-1]


#: Tools whose --help needs no OpenMMLab: their options are plain arguments. (The sweep,
#: data-budget, recipe, drift and fine-tuning tools build their options from the package's
#: option definitions, and the demo is a driver: their --help imports the plugin.)
LIGHT_HELP_TOOLS = ('test.py', 'train.py', 'robustness_merge.py', 'make_demo_data.py',
                    'condition_inference.py',
                    'analysis_tools/robustness_table.py',
                    'analysis_tools/robustness_compare.py', 'analysis_tools/shift_analysis.py',
                    'analysis_tools/mitigation_table.py', 'analysis_tools/band_statistics.py',
                    'analysis_tools/visualize_corruptions.py',
                    'dataset_converters/potsdam.py', 'dataset_converters/dior_r.py',
                    'model_converters/convert_checkpoint.py',
                    'model_converters/make_ensemble.py')


@pytest.mark.slow
def test_help_of_the_plain_tools_imports_no_openmmlab():
    """``--help`` answers in about a second: no torch, no OpenMMLab, no plugin import
    (mmseg's own tools/test.py --help imports torch and takes about 3 s)."""
    script = (
        'import runpy, sys\n'
        'tool = sys.argv[1]\n'
        'sys.argv = [tool, "--help"]\n'
        'try:\n'
        '    runpy.run_path(tool, run_name="__main__")\n'
        'except SystemExit as stop:\n'
        '    assert stop.code in (0, None), stop.code\n'
        'heavy = [m for m in ("torch", "mmengine.runner", "mmcv", "mmseg", "mmdet", '
        '"mmrotate", "reobench_mm", "scipy", "matplotlib") if m in sys.modules]\n'
        'print("HEAVY", heavy)\n')
    for tool in LIGHT_HELP_TOOLS:
        result = subprocess.run(
            [sys.executable, '-c', script, osp.join(PROJECT_ROOT, 'tools', tool)],
            cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, (tool, result.stderr[-2000:])
        assert 'usage:' in result.stdout, tool
        assert 'HEAVY []' in result.stdout, (tool, result.stdout.splitlines()[-1])


class _Parsed(Exception):
    def __init__(self, parser):
        super().__init__('parser captured')
        self.parser = parser


def _parser_of(tool, monkeypatch):
    """The argument parser a tool's ``main`` builds (captured where it parses)."""
    import argparse

    def capture(self, *args, **kwargs):
        raise _Parsed(self)

    monkeypatch.setattr(argparse.ArgumentParser, 'parse_args', capture)
    monkeypatch.setattr(argparse.ArgumentParser, 'parse_known_args', capture)
    module = _load(tool)
    monkeypatch.setattr(sys, 'argv', [tool, '--help'])
    try:
        try:
            module.main(['--help'])
        except TypeError:  # a main that reads sys.argv
            module.main()
    except _Parsed as parsed:
        return parsed.parser
    raise AssertionError(f'{tool} did not parse its arguments')


def test_every_flag_says_what_it_does(monkeypatch):
    """A flag that turns an option off carries its own help (``--no-plots`` once showed
    "write the report's plots"), and no help states two defaults."""
    import argparse
    from dataclasses import fields

    from reobench_mm.robustness.options import RobustnessOptions
    option_help = {f.name: f.metadata['help'] for f in fields(RobustnessOptions)}
    checked = 0
    for tool in TOOLS:
        for action in _parser_of(tool, monkeypatch)._actions:
            text = action.help or ''
            assert text.count('default:') + text.count('default %(') <= 1, \
                (tool, action.option_strings, text)
            if isinstance(action, argparse._StoreFalseAction):
                checked += 1
                assert text and text != option_help.get(action.dest), \
                    (tool, action.option_strings, text)
                if action.dest in option_help:
                    field = next(f for f in fields(RobustnessOptions) if f.name == action.dest)
                    assert text == field.metadata['off'], (tool, action.option_strings)
    assert checked >= 6  # --no-plots, --partial-checkpoint, --no-calibration, ...
    for field in fields(RobustnessOptions):
        if field.type == 'bool' and field.metadata['cli'] is not None:
            assert field.metadata['off'], f'{field.name} has no help for its off flag'


def test_the_light_tools_help_names_the_constants_it_cannot_import(monkeypatch):
    """robustness_compare.py's --help cannot import the analysis modules (they load torch):
    the values its help states are those modules' own."""
    from reobench_mm.analysis.effective_robustness import FIT_SPACES
    from reobench_mm.analysis.groups import DEFAULT_DRAWS
    actions = {a.dest: a for a in _parser_of('tools/analysis_tools/robustness_compare.py',
                                             monkeypatch)._actions}
    assert all(f"'{space}'" in actions['space'].help for space in FIT_SPACES)
    assert f'(default {DEFAULT_DRAWS})' in actions['drift_permutations'].help
