"""The test tree mirrors the package: each test file sits in the folder of the layer it
tests, and every module of the three packages is named by a test file (a file named after
it, or one that imports it or a name it defines), or is listed below with the test files
that exercise it through another module."""
import ast
import os
import os.path as osp
from glob import glob
from typing import Dict, Set

from helpers import PROJECT_ROOT

TESTS = osp.join(PROJECT_ROOT, 'tests')
PACKAGES = ('reobench_mm', 'reobench_corruptions', 'reobench_cli')
# tests/<folder>/: the package layer each folder holds
FOLDERS = {
    'corruptions': 'reobench_corruptions/',
    'transforms': 'reobench_mm/transforms/',
    'datasets': 'reobench_mm/datasets/',
    'models': 'reobench_mm/models/',
    'evaluation': 'reobench_mm/evaluation/',
    'attacks': 'reobench_mm/attacks/',
    'engine': 'reobench_mm/engine/',
    'robustness': 'reobench_mm/robustness/',
    'analysis': 'reobench_mm/analysis/',
    'apis': 'reobench_mm/apis/',
    'configs': 'configs/',
    'tools': 'tools/ and reobench_cli/',
    'project': 'the package as a whole: layers, registry, docs, packaging, benchmarks, '
               "the suite's own rules",
}
# Modules exercised only through other modules: module -> (test file, how).
COVERED_ELSEWHERE = {
    'reobench_mm.datasets.empty_sets': ('tools/test_cli_errors.py',
                                        'an empty test set and one of another suffix'),
    'reobench_mm.engine.loop_options': ('tools/test_cli_errors.py',
                                        "test_cfg.force on CorruptionTestLoop"),
    'reobench_mm.evaluation': ('evaluation/test_calibration.py', 'the package namespace'),
    'reobench_mm.structures': ('transforms/test_class_map.py',
                               'the package namespace (ClassMap, through its module)'),
    'reobench_mm.evaluation.metrics': ('evaluation/test_calibration.py', 'the metrics registered'),
    'reobench_mm.models': ('configs/test_configs.py', 'every config builds its model'),
    'reobench_mm.utils': ('tools/test_train_test_tools.py', 'the tools read configs'),
    'reobench_mm.corruptions': ('project/test_registry.py', 'the legacy import path'),
    'reobench_mm.analysis.group_plots': ('analysis/test_groups.py', 'the comparison tool plots'),
    'reobench_mm.analysis.interval_report': ('analysis/test_robustness_report.py',
                                             'the report lines of every interval'),
    'reobench_mm.analysis.mitigation_plots': ('analysis/test_mitigation.py',
                                              'signed_ece.png of the tool'),
    'reobench_mm.analysis.rank_intervals': ('analysis/test_rank_statistics.py',
                                            'rank intervals of the comparison'),
    'reobench_mm.attacks.detection': ('robustness/test_attack_conditions.py',
                                      'attacks on Oriented R-CNN'),
    'reobench_mm.datasets.shift_types': ('robustness/test_shift_conditions.py',
                                         'the shift_type of every shift set'),
    'reobench_mm.datasets.wrapping': ('transforms/test_class_map.py',
                                      'ClassMappedDataset builds its inner set'),
    'reobench_mm.evaluation.metrics.base': ('evaluation/test_image_stats.py',
                                            'the metrics that keep per-image terms'),
    'reobench_mm.evaluation.metrics.classwise_iou': ('robustness/test_robustness_sweep.py',
                                                     'the per-class IoUs of a sweep'),
    'reobench_mm.robustness.decode_cache': ('robustness/test_robustness_sweep.py',
                                            'the decode cache of a sweep'),
    'reobench_mm.robustness.evaluators': ('robustness/test_robustness_loops.py',
                                          "the loops' evaluators"),
    'reobench_mm.analysis.worst_cases': ('robustness/test_robustness_sweep.py',
                                         "a sweep's worst images"),
    'reobench_mm.models.backbones.imagenet_vit': ('robustness/test_finetuning.py',
                                                  'ImageNetViT through the backbones package'),
    'reobench_mm.models.backbones.rvsa_attention': ('models/test_backbone_vitae_rvsa.py',
                                                    'the rotated window attention'),
    'reobench_mm.models.backbones.timm_vit': ('configs/test_configs.py',
                                              'the timm-based ViT backbones of the configs'),
    'reobench_mm.robustness.drift_layers': ('robustness/test_representation_drift.py',
                                            'the layers the drift tool hooks'),
    'reobench_mm.robustness.shifted_data': ('datasets/test_earthshift_pairs.py',
                                            'the data of a shift condition, through '
                                            'layout_helpers.as_shift_condition'),
}


def _modules() -> Dict[str, str]:
    found = {}
    for package in PACKAGES:
        for path in glob(osp.join(PROJECT_ROOT, package, '**', '*.py'), recursive=True):
            name = osp.relpath(path, PROJECT_ROOT)[:-3].replace(os.sep, '.')
            found[name[:-len('.__init__')] if name.endswith('.__init__') else name] = path
    return found


def _public_names(path: str) -> Set[str]:
    with open(path, encoding='utf-8') as handle:
        tree = ast.parse(handle.read())
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return {n for n in names if not n.startswith('_')}


def _test_files():
    return sorted(glob(osp.join(TESTS, '**', 'test_*.py'), recursive=True))


def _named_modules() -> Set[str]:
    """Modules a test file is named after or imports (directly, or a name they define
    through their package)."""
    modules = _modules()
    defined = {m: _public_names(p) for m, p in modules.items()}
    named = set()
    for path in _test_files():
        stem = osp.basename(path)[len('test_'):-3]
        named.update(m for m in modules if m.rsplit('.', 1)[-1] == stem)
        with open(path, encoding='utf-8') as handle:
            tree = ast.parse(handle.read())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                named.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                named.add(node.module)
                for alias in node.names:
                    full = f'{node.module}.{alias.name}'
                    named.add(full)
                    named.update(m for m in modules if m.startswith(node.module + '.')
                                 and alias.name in defined[m])
    return named & set(modules)


def test_every_test_file_sits_in_a_layer_folder():
    misplaced = []
    for path in _test_files():
        folder = osp.relpath(osp.dirname(path), TESTS)
        if folder not in FOLDERS:
            misplaced.append(osp.relpath(path, TESTS))
    assert misplaced == [], f'test files outside the layer folders {sorted(FOLDERS)}'
    names = [osp.basename(p) for p in _test_files()]
    assert len(names) == len(set(names)), 'two test files share a name'


def test_every_module_is_named_by_a_test_file_or_listed():
    modules = set(_modules())
    named = _named_modules()
    missing = sorted(modules - named - set(COVERED_ELSEWHERE))
    assert missing == [], ('modules no test file names: add a test file for each, or list '
                           f'it in COVERED_ELSEWHERE with the tests that exercise it: {missing}')


def test_the_list_of_modules_covered_elsewhere_is_current():
    modules = set(_modules())
    named = _named_modules()
    unknown = sorted(set(COVERED_ELSEWHERE) - modules)
    assert unknown == [], f'COVERED_ELSEWHERE names modules that do not exist: {unknown}'
    stale = sorted(m for m in COVERED_ELSEWHERE if m in named)
    assert stale == [], f'now named by a test file, remove from COVERED_ELSEWHERE: {stale}'
    for module, (test_file, _) in COVERED_ELSEWHERE.items():
        assert osp.isfile(osp.join(TESTS, test_file)), (module, test_file)


def test_test_modules_import_test_modules_of_their_own_folder_only():
    """pytest puts a test file's folder on ``sys.path``: a test file importing one of
    another folder imports only when that folder was collected first (never when run
    alone)."""
    folder_of = {osp.basename(p)[:-3]: osp.dirname(p) for p in _test_files()}
    crossing = []
    for path in _test_files():
        with open(path, encoding='utf-8') as handle:
            tree = ast.parse(handle.read())
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            crossing += [f'{osp.relpath(path, TESTS)} imports {n}' for n in names
                         if n in folder_of and folder_of[n] != osp.dirname(path)]
    assert crossing == []


def test_the_robustness_layer_keeps_its_size_promises():
    """docs/development.md: no class over 350 lines and no file over 600 in the robustness
    layer; RobustnessTestLoop in mmengine's shape, at most 250 lines."""
    folder = osp.join(PROJECT_ROOT, 'reobench_mm', 'robustness')
    too_long = []
    for name in sorted(os.listdir(folder)):
        if not name.endswith('.py'):
            continue
        with open(osp.join(folder, name), encoding='utf-8') as handle:
            source = handle.read()
        if len(source.splitlines()) > 600:
            too_long.append(f'{name}: {len(source.splitlines())} lines')
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef):
                size = node.end_lineno - node.lineno + 1
                limit = 250 if node.name == 'RobustnessTestLoop' else 350
                if size > limit:
                    too_long.append(f'{name}: class {node.name} {size} lines (> {limit})')
    assert too_long == [], too_long
