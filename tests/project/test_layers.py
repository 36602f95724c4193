"""The package's layers: every module imports only from its own layer or lower ones, and
imports form no circle.

Layers, bottom up (the target layout of the package):

 1. ``version``, ``fileio``, ``registry``, ``errors``  (base)
 2. ``corruptions``                     (pure numpy/OpenCV)
 3. ``transforms``, ``datasets``
 4. ``models``, ``attacks``           (attacks reach models through their own methods)
 5. ``evaluation``                      (MMEngine metrics and their math)
 6. ``engine``                          (runner extensions: loops, hooks, checkpoints)
 7. ``utils``                           (config side of the tools)
 8. ``analysis``                        (offline: results in, tables and plots out)
 9. ``robustness``                      (the robustness loops and the experiment drivers
                                        over them), ``apis`` (inference: one image
                                        under conditions)
10. the package root                    (registration: it imports the modules that
                                        register something, of every layer)

Every import statement of every module is read with :mod:`ast`, at module level and inside
functions alike. An import names the module it loads: ``from .a import b`` is module
``a.b`` when that is a module of the package, else ``a``. ``apis`` is inference, as in
OpenMMLab, on top of the robustness layer; nothing else imports it, so the plugin line
(``import reobench_mm``) does not load it.
"""
import ast
import os
import os.path as osp
from typing import Dict, Iterator, List, Optional, Set, Tuple

import pytest

from helpers import PROJECT_ROOT

PACKAGE = 'reobench_mm'
PACKAGE_DIR = osp.join(PROJECT_ROOT, PACKAGE)

#: Module or package (dotted, without the ``reobench_mm.`` prefix) -> layer; the longest
#: matching prefix decides. ``''`` is the package root.
LAYERS: Dict[str, int] = {
    'version': 1, 'fileio': 1, 'registry': 1, 'errors': 1,
    'corruptions': 2, 'structures': 2,
    'transforms': 3, 'datasets': 3,
    'models': 4, 'attacks': 4,
    'evaluation': 5,
    'engine': 6,
    'utils': 7,
    'analysis': 8,
    'robustness': 9, 'apis': 9,
    '': 10,
}


# ----------------------------------------------------------------------------- reading

def _module_files() -> Dict[str, str]:
    """Dotted module name -> file, for every ``.py`` file of the package (a package is
    named by its ``__init__.py``)."""
    found = {}
    for root, dirs, files in os.walk(PACKAGE_DIR):
        dirs[:] = sorted(d for d in dirs if d != '__pycache__' and not d.startswith('.'))
        for name in sorted(files):
            if not name.endswith('.py'):
                continue
            path = osp.join(root, name)
            parts = osp.relpath(path, PROJECT_ROOT)[:-len('.py')].split(os.sep)
            if parts[-1] == '__init__':
                parts = parts[:-1]
            found['.'.join(parts)] = path
    return found


MODULES = _module_files()


def _is_package(module: str) -> bool:
    return MODULES.get(module, '').endswith('__init__.py')


def _is_type_checking(node: ast.AST) -> bool:
    """``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``): imports for annotations only."""
    test = getattr(node, 'test', None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == 'TYPE_CHECKING')
        or (isinstance(test, ast.Attribute) and test.attr == 'TYPE_CHECKING'))


def _walk(node: ast.AST, context: str = 'module') -> Iterator[Tuple[ast.AST, str]]:
    """Every import node under ``node`` and when it runs: ``'module'`` (on import),
    ``'function'`` (when the function is called) or ``'annotations'`` (never: under
    ``if TYPE_CHECKING:``)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child, context
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            yield from _walk(child, 'function' if context == 'module' else context)
        elif _is_type_checking(child):
            for statements, kind in ((child.body, 'annotations'), (child.orelse, context)):
                for statement in statements:
                    if isinstance(statement, (ast.Import, ast.ImportFrom)):
                        yield statement, kind
                    yield from _walk(statement, kind)
        else:
            yield from _walk(child, context)


def _base_of(module: str, node: ast.ImportFrom) -> str:
    """The absolute module a ``from ... import`` statement reads from."""
    if not node.level:
        return node.module or ''
    package = module if _is_package(module) else module.rpartition('.')[0]
    parts = package.split('.')
    if node.level > 1:
        parts = parts[:len(parts) - (node.level - 1)]
    base = '.'.join(parts)
    return f'{base}.{node.module}' if node.module else base


def imports_of(module: str) -> List[Tuple[str, int, str]]:
    """``(imported module of the package, line, when it runs)`` of ``module`` (see
    :func:`_walk`)."""
    with open(MODULES[module], encoding='utf-8') as handle:
        tree = ast.parse(handle.read(), MODULES[module])
    out = []
    for node, context in _walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = _base_of(module, node)
            targets = [f'{base}.{alias.name}' if f'{base}.{alias.name}' in MODULES else base
                       for alias in node.names]
        for target in dict.fromkeys(targets):
            if target == PACKAGE or target.startswith(PACKAGE + '.'):
                out.append((target, node.lineno, context))
    return out


def layer_of(module: str) -> Optional[int]:
    """The layer of a module of the package (None: in no layer of the layout)."""
    name = module[len(PACKAGE) + 1:] if module != PACKAGE else ''
    candidates = [prefix for prefix in LAYERS
                  if name == prefix or (prefix and name.startswith(prefix + '.'))]
    return LAYERS[max(candidates, key=len)] if candidates else None


def _short(module: str) -> str:
    return module[len(PACKAGE) + 1:] if module != PACKAGE else PACKAGE


# ----------------------------------------------------------------------------- checks

def test_every_module_is_in_a_layer():
    outside = sorted(_short(m) for m in MODULES if layer_of(m) is None)
    assert not outside, 'modules in no layer of the layout:\n  ' + '\n  '.join(outside)


def test_no_module_imports_from_a_higher_layer():
    offenders = []
    for module in sorted(MODULES):
        layer = layer_of(module)
        if layer is None:
            continue
        for target, line, context in imports_of(module):
            target_layer = layer_of(target)
            where = f'{_short(module)} (layer {layer}), line {line}'
            if context != 'module':
                where += ', in a function' if context == 'function' else ', for annotations'
            if target_layer is None:
                offenders.append(f'{where}: imports {_short(target)}, which is in no layer')
            elif target_layer > layer:
                offenders.append(f'{where}: imports {_short(target)} (layer {target_layer})')
    assert not offenders, (f'{len(offenders)} imports from a higher layer:\n  '
                           + '\n  '.join(offenders))


def _ancestors(module: str) -> Set[str]:
    parts = module.split('.')
    return {'.'.join(parts[:i]) for i in range(1, len(parts))}


def test_no_import_cycles():
    """No circle of imports, module-level, inside functions or for annotations only
    (``if TYPE_CHECKING:``): an import inside a function or under ``TYPE_CHECKING``
    hides a circle from the interpreter, not from the design. Left out: an import of
    one's own enclosing package (Python runs a package's ``__init__`` before any of its
    modules, so that edge is implied and closes no circle of its own)."""
    graph: Dict[str, Dict[str, str]] = {}
    for module in MODULES:
        edges: Dict[str, str] = {}  # target -> 'module', else 'function' or 'annotations'
        for target, _, context in imports_of(module):
            if target in MODULES and target != module and target not in _ancestors(module):
                edges[target] = 'module' if 'module' in (edges.get(target), context) \
                    else edges.get(target, context)
        graph[module] = dict(sorted(edges.items()))
    cycles, state, stack = [], {}, []

    def visit(module: str) -> None:
        state[module] = 'open'
        stack.append(module)
        for target in graph[module]:
            if state.get(target) == 'open':
                cycles.append(stack[stack.index(target):] + [target])
            elif target not in state:
                visit(target)
        stack.pop()
        state[module] = 'done'

    def describe(cycle: List[str]) -> str:
        text = _short(cycle[0])
        arrows = {'module': ' -> ', 'function': ' -(in a function)-> ',
                  'annotations': ' -(for annotations)-> '}
        for source, target in zip(cycle, cycle[1:]):
            text += arrows[graph[source][target]] + _short(target)
        return text

    for module in sorted(graph):
        if module not in state:
            visit(module)
    assert not cycles, 'import cycles:\n  ' + '\n  '.join(describe(c) for c in cycles)


def test_nothing_imports_apis():
    """``apis`` (inference) is the top of the layout beside ``robustness``: no other module
    imports it, the package root included, so that the plugin line (``import reobench_mm``)
    registers the modules without loading it."""
    offenders = [f'{_short(module)}, line {line}' for module in sorted(MODULES)
                 if not (module + '.').startswith(f'{PACKAGE}.apis.')
                 for target, line, _ in imports_of(module)
                 if (target + '.').startswith(f'{PACKAGE}.apis.')]
    assert not offenders, 'modules importing apis:\n  ' + '\n  '.join(offenders)


def test_fingerprinted_sources_exist():
    """The sources a sweep's code fingerprint hashes are where the layout puts them (a path
    that no longer exists would silently drop out of the fingerprint)."""
    from reobench_mm.robustness.fingerprint import CODE_LEAVES, CODE_ROOTS, _module_file
    missing = [m for m in CODE_ROOTS + CODE_LEAVES if _module_file(PROJECT_ROOT, m) is None]
    assert not missing, f'fingerprint roots that are no module: {missing}'


ENGINE_DIR = osp.join(PROJECT_ROOT, 'reobench_corruptions')
#: What the corruption engine may import besides itself and the standard library.
ENGINE_DEPENDENCIES = ('numpy', 'cv2', 'scipy')


def _foreign_imports(directory: str, allowed: tuple) -> list:
    """Imports (at module level or in functions) of the ``.py`` files under ``directory``
    of anything but the standard library, ``allowed`` and the package itself."""
    import sys
    own = osp.basename(directory)
    offenders = []
    for root, _, files in os.walk(directory):
        for name in files:
            if not name.endswith('.py'):
                continue
            path = osp.join(root, name)
            with open(path, encoding='utf-8') as handle:
                tree = ast.parse(handle.read(), path)
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    targets = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and not node.level:
                    targets = [node.module or '']
                else:
                    continue
                for target in targets:
                    top = target.split('.')[0]
                    if top in sys.stdlib_module_names or top in allowed or top == own:
                        continue
                    offenders.append(f'{osp.relpath(path, PROJECT_ROOT)}:{node.lineno} '
                                     f'imports {target}')
    return offenders


#: The engine's optional torch implementation (imported only by whoever uses it).
TORCH_ENGINE_FILES = ('torch_engine.py', 'torch_checks.py', 'torch_kernels.py',
                      'torch_geometric.py')


def test_the_engine_imports_nothing_of_the_plugin_or_openmmlab():
    """``reobench_corruptions`` is pure numpy/OpenCV (scipy where used): no import of
    ``reobench_mm``, MMEngine, a toolbox or torch, at module level or in functions; its
    optional torch implementation (``torch_engine.py``, ``torch_kernels.py``,
    ``torch_geometric.py``, which the package never imports itself) may import torch,
    and torchvision's JPEG codec (``torchvision.io``), and nothing more."""
    offenders = _foreign_imports(ENGINE_DIR, ENGINE_DEPENDENCIES)
    torch_files = [osp.join('reobench_corruptions', n) for n in TORCH_ENGINE_FILES]
    offenders = [o for o in offenders
                 if not (o.split(':')[0] in torch_files
                         and (o.endswith('imports torch') or o.endswith('imports torchvision.io')))]
    assert not offenders, '\n'.join(offenders)


def test_the_tools_error_convention_is_standard_library_only():
    """``reobench_cli`` (the tools' argument parser and error convention) imports only the
    standard library, so that a tool's ``--help`` loads no OpenMMLab."""
    offenders = _foreign_imports(osp.join(PROJECT_ROOT, 'reobench_cli'), ())
    assert not offenders, '\n'.join(offenders)


@pytest.mark.slow
def test_the_engine_imports_alone_in_a_fraction_of_a_second():
    """A fresh interpreter importing the engine and corrupting an image loads no torch,
    MMEngine or toolbox, and no module of the plugin."""
    import json
    import subprocess
    import sys
    code = ('import json, sys, time\n'
            'start = time.perf_counter()\n'
            'from reobench_corruptions import corrupt\n'
            'seconds = time.perf_counter() - start\n'
            'import numpy as np\n'
            "corrupt(np.zeros((8, 8, 3), np.uint8), 'gaussian_noise', 3, key='a')\n"
            'print(json.dumps(dict(seconds=seconds, modules=sorted(sys.modules))))')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                         check=True, cwd=PROJECT_ROOT).stdout
    result = json.loads(out.strip().splitlines()[-1])
    heavy = [m for m in result['modules'] if m.split('.')[0] in
             ('torch', 'mmengine', 'mmcv', 'mmdet', 'mmseg', 'mmrotate', 'timm', 'reobench_mm')]
    assert not heavy, heavy
    assert result['seconds'] < 3.0, result['seconds']
