"""The options of a robustness run, defined once (``RobustnessOptions``): every entry point
maps onto it, none spells an option out again, and bad values and typos are refused with
the valid names."""
import argparse
import ast
import inspect
import json
import os.path as osp
import subprocess
import sys
from dataclasses import fields

import pytest

from reobench_corruptions import list_corruptions
from reobench_mm.errors import SweepError
from reobench_mm.robustness.data_budget import (DATA_BUDGET_DEFAULTS, DATA_BUDGET_OPTIONS,
                                                budget_options, run_data_budget)
from reobench_mm.robustness.fingerprint import FINGERPRINT_PARTS
from reobench_mm.robustness.options import (OPTION_NAMES, SWEEP_OPTIONS, VALIDATION_DEFAULTS,
                                            VALIDATION_OPTIONS, RobustnessOptions,
                                            add_option_arguments, options_from_args)
from reobench_mm.robustness.recipe import compare_recipes
from reobench_mm.robustness.sweep import RobustnessSweep, run_sweep
from reobench_mm.robustness.test_loop import RobustnessTestLoop
from reobench_mm.robustness.val_loop import RobustnessValLoop

from helpers import PROJECT_ROOT

#: Every entry point of a robustness run.
ENTRY_POINTS = [RobustnessTestLoop.__init__, RobustnessValLoop.__init__,
                RobustnessSweep.__init__, run_sweep, run_data_budget, compare_recipes]
#: Tools whose robustness flags come from the options.
TOOLS = ['tools/robustness_test.py', 'tools/analysis_tools/data_budget.py',
         'tools/analysis_tools/robust_recipe.py']


def test_no_entry_point_spells_an_option_out():
    """Each option is a parameter of one definition: the options object's field. The loops,
    the sweep and the drivers take the options as such (validated there)."""
    for function in ENTRY_POINTS:
        spelled = set(inspect.signature(function).parameters) & set(OPTION_NAMES)
        assert not spelled, f'{function.__qualname__} spells out {sorted(spelled)}'


@pytest.mark.parametrize('tool', TOOLS)
def test_no_tool_defines_an_option_flag_itself(tool):
    """No ``add_argument('--corruptions', ...)`` in the tools: their option flags are made
    by ``add_option_arguments`` from the fields' help texts."""
    with open(osp.join(PROJECT_ROOT, tool), encoding='utf-8') as handle:
        tree = ast.parse(handle.read())
    flags = {'--' + n.replace('_', '-') for n in OPTION_NAMES} | \
        {'--no-' + n.replace('_', '-') for n in OPTION_NAMES} | {'--partial-checkpoint'}
    written = [node.args[0].value for node in ast.walk(tree)
               if isinstance(node, ast.Call) and getattr(node.func, 'attr', '') == 'add_argument'
               and node.args and isinstance(node.args[0], ast.Constant)]
    assert not set(written) & flags


def test_sweep_tool_flags_are_the_options():
    sys.path.insert(0, osp.join(PROJECT_ROOT, 'tools'))
    try:
        import robustness_test
        args, parser = robustness_test.parse_args(['c.py', 'k.pth'])
    finally:
        sys.path.pop(0)
    helps = {a.dest: a.help for a in parser._actions}
    for item in fields(RobustnessOptions):
        if item.name in SWEEP_OPTIONS and item.metadata['cli'] is not None:
            # a flag that turns its option off says so in its own words (--no-plots)
            said = item.metadata['off'] if item.default is True else item.metadata['help']
            assert helps[item.name].startswith(said.replace('%', '%%')), item.name
    # nothing given: nothing set, the options' defaults apply
    assert options_from_args(args, SWEEP_OPTIONS) == {}
    args, _ = robustness_test.parse_args([
        'c.py', 'k.pth', '--corruptions', 'cloud', 'sensor', '--severities', '3', '1',
        '--no-plots', '--seen-corruptions', '--shard', '1/3', '--partial-checkpoint',
        '--decode-cache-bytes', '0', '--calibration'])
    values = options_from_args(args, SWEEP_OPTIONS)
    assert values == dict(corruptions=['cloud', 'sensor'], severities=[3, 1], plots=False,
                          seen_corruptions=None, shard='1/3', strict_checkpoint=False,
                          decode_cache_bytes=0, calibration=True)
    options = RobustnessOptions.create(values, allowed=SWEEP_OPTIONS)
    assert options.corruptions[0] == 'cloud' and 'gaussian_noise' in options.corruptions
    assert options.severities == (1, 3) and options.shard == (1, 3)


def test_defaults_of_a_driver_turn_boolean_flags_around():
    parser = argparse.ArgumentParser()
    added = add_option_arguments(parser, ('corruptions', 'calibration'), DATA_BUDGET_DEFAULTS)
    assert added == ['corruptions', 'calibration']
    assert options_from_args(parser.parse_args(['--no-calibration']), added) == \
        dict(calibration=False)
    assert budget_options(options_from_args(parser.parse_args([]), added)).calibration
    text = ' '.join(parser.format_help().split())
    assert '--no-calibration' in text and 'cloud gaussian_noise' in text


def test_values_are_normalised_and_checked():
    options = RobustnessOptions(corruptions='sensor', severities=[5, 1, 5],
                                temperature_scaling=True, shard=(0, 2))
    assert options.corruptions == tuple(list_corruptions('reobench', 'sensor'))
    assert options.severities == (1, 5) and options.calibration and options.shard == (0, 2)
    assert options.plan.conditions[0].is_clean
    assert set(options.fingerprint_part()) | {'cfg_options', 'precision',
                                               'corruption_device'} == \
        set(FINGERPRINT_PARTS['options'])
    # the precision joins the fingerprint when it is not fp32 (fp32 records keep theirs)
    assert options.replace(precision='bf16').fingerprint_part()['precision'] == 'bf16'
    assert options.to_dict()['shard'] == '0/2'
    assert RobustnessOptions.create(options.to_dict()) == options  # a config round trip
    bad = [
        (dict(force='yes'), 'force must be True or False'),
        (dict(corruptions=['clouds']), "unknown corruption name"),
        (dict(severities=[6]), 'severit'),
        (dict(protocol='imagenet_c'), 'unknown protocol'),
        (dict(shard='3/2'), 'shard'),
        (dict(decode_cache_bytes=-1), 'decode_cache_bytes must be an integer >= 0'),
        (dict(temperature_split=10), 'need temperature_scaling=True'),
        (dict(temperature_scaling=True, temperature_split=0), 'temperature_split must be'),
        (dict(temperature_scaling=True, temperature_split=5, temperature_on_test=True),
         'give one of them'),
        (dict(seen_corruptions=3), 'seen_corruptions must be'),
        (dict(out_dir=5), 'out_dir must be a folder path'),
    ]
    for values, message in bad:
        with pytest.raises(SweepError, match=message):
            RobustnessOptions.create(values)


def test_unknown_names_are_refused_with_the_closest():
    with pytest.raises(SweepError, match=r"'corruptionz' is not an option of "
                       r"RobustnessTestLoop \(did you mean 'corruptions'\?\); valid: "):
        RobustnessOptions.create(dict(corruptionz=['cloud']))
    with pytest.raises(SweepError, match=r"'severity' .*did you mean 'severities'"):
        RobustnessOptions.create(dict(severity=3))
    with pytest.raises(SweepError, match="'force' is an option of other runs, not of "
                       'RobustnessValLoop'):
        RobustnessOptions.create(dict(force=True), allowed=VALIDATION_OPTIONS,
                                 owner='RobustnessValLoop')
    with pytest.raises(SweepError, match="'shard' is an option of other runs"):
        budget_options(dict(shard='0/2'))
    assert set(DATA_BUDGET_OPTIONS) <= set(OPTION_NAMES)
    validation = RobustnessOptions.create({}, allowed=VALIDATION_OPTIONS,
                                          defaults=VALIDATION_DEFAULTS)
    assert validation.corruptions == ('cloud', 'gaussian_noise', 'haze')
    assert validation.severities == (3, ) and validation.decode_cache_bytes == 0


def test_the_sweep_takes_an_options_object_or_keywords(tmp_path):
    config = osp.join(PROJECT_ROOT, 'configs', 'demo',
                      'upernet_r18-tiny_1xb4-600i_demo-potsdam-128x128.py')
    with pytest.raises(SweepError, match='not both'):
        RobustnessSweep(config, config, options=RobustnessOptions(), corruptions=['cloud'])
    with pytest.raises(SweepError, match='give work_dir'):
        RobustnessSweep(config, config, options=RobustnessOptions(out_dir=str(tmp_path)))
    with pytest.raises(SweepError, match="'out_dir' is an option of other runs"):
        RobustnessSweep(config, config, out_dir=str(tmp_path))
    with pytest.raises(SweepError, match="did you mean 'severities'"):
        RobustnessSweep(config, config, severties=[3])


@pytest.mark.slow
def test_the_plugin_line_does_not_import_the_drivers():
    """``import reobench_mm`` registers the loops without importing the experiment drivers
    (sweep, data budget, recipe, drift) or the cross-model analysis; the loops resolve from
    the registry."""
    code = ('import json, sys, reobench_mm\n'
            'from mmengine.registry import LOOPS\n'
            "assert LOOPS.get('RobustnessTestLoop') and LOOPS.get('RobustnessValLoop')\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('reobench_mm.'))))")
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                         check=True, cwd=PROJECT_ROOT).stdout
    loaded = set(json.loads(out.strip().splitlines()[-1]))
    for module in ('robustness.sweep', 'robustness.data_budget', 'robustness.recipe',
                   'robustness.drift', 'analysis.compare', 'analysis.model_set',
                   'analysis.rank_stability', 'analysis.effective_robustness',
                   'analysis.data_budget'):
        assert f'reobench_mm.{module}' not in loaded, module
    assert {'reobench_mm.robustness.test_loop', 'reobench_mm.robustness.val_loop'} <= loaded


def test_the_loops_docstrings_list_every_option_they_take():
    """The option lists of the loops' docstrings are made from the options table."""
    for name in OPTION_NAMES:
        assert f'``{name}``' in RobustnessTestLoop.__doc__, name
    for name in VALIDATION_OPTIONS:
        assert f'``{name}``' in RobustnessValLoop.__doc__, name
    assert '``out_dir``' not in RobustnessValLoop.__doc__


@pytest.mark.parametrize('name, message', [
    ('shifts', 'shifts must be a dict'), ('attacks', 'attacks must be a dict'),
    ('corruption_files', 'corruption_files must be a dict')])
def test_a_config_option_of_the_wrong_form_is_named(name, message):
    """Options a config gives (shifts, attacks, corruption_files) as a list: the option's
    own message with its expected form, not Python's 'dictionary update sequence'."""
    from reobench_mm.robustness.options import with_config_options
    with pytest.raises(SweepError, match=message):
        with_config_options(RobustnessOptions.create(), {name: ['a', 'b']})


def test_the_flag_forms_of_attacks_and_shift_sets(tmp_path):
    """reobench_mm.robustness.flag_values: ``--attacks`` and ``--shifts`` values parsed
    and gathered into the mappings a config gives; a file of several sets needs the
    variable, a file without the named one is refused naming its sets."""
    import argparse

    from reobench_mm.errors import SweepError
    from reobench_mm.robustness.flag_values import (attack_argument, attacks_from_flag,
                                                    shift_argument, shifts_from_flag)
    assert attacks_from_flag([attack_argument('pgd=4,8'), attack_argument('fgsm=2.5')]) == \
        dict(pgd=dict(eps=[4, 8]), fgsm=dict(eps=[2.5]))
    with pytest.raises(argparse.ArgumentTypeError, match='NAME=EPS'):
        attack_argument('pgd')
    sets = tmp_path / 'sets.py'
    sets.write_text("a_shift = dict(shift_type='sensor', dataset=dict(type='X'))\n"
                    "b_shift = dict(shift_type='source', dataset=dict(type='Y'))\n"
                    "classes = ('x', 'y')\n")
    one = tmp_path / 'one.py'
    one.write_text("only_shift = dict(shift_type='scale', dataset=dict(type='Z'))\n")
    assert shift_argument(f'b={sets}:b_shift') == ('b', str(sets), 'b_shift')
    assert shift_argument(f'o={one}') == ('o', str(one), None)
    assert shifts_from_flag([shift_argument(f'b={sets}:b_shift'),
                             shift_argument(f'o={one}')]) == dict(
        b=dict(shift_type='source', dataset=dict(type='Y')),
        o=dict(shift_type='scale', dataset=dict(type='Z')))
    with pytest.raises(SweepError, match=r'defines 2 shift sets \(a_shift, b_shift\)'):
        shifts_from_flag([shift_argument(f'a={sets}')])
    with pytest.raises(SweepError, match="has no shift set 'classes'"):
        shifts_from_flag([shift_argument(f'a={sets}:classes')])
    with pytest.raises(SweepError, match="names 'a' twice"):
        shifts_from_flag([shift_argument(f'a={one}'), shift_argument(f'a={one}')])
    with pytest.raises(argparse.ArgumentTypeError, match='NAME=CONFIG_FILE'):
        shift_argument(str(one))
