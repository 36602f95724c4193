"""Registries of reobench_mm.

Every OpenMMLab 2.x toolbox (mmseg, mmdet, mmrotate, ...) builds modules from
registries whose ancestor is one of MMEngine's root registries, and a lookup
without a scope prefix walks up that chain. A :class:`PluginRegistry` is a child
of a root registry (scope ``reobench_mm``) that also registers each module in
that root, so after ``import reobench_mm``:

- ``type='ApplyCorruption'`` resolves from configs whose default scope is
  ``mmseg``, ``mmdet``, ``mmrotate`` (or any other OpenMMLab scope);
- ``type='reobench_mm.ApplyCorruption'`` names the module explicitly;
- ``default_scope='reobench_mm'`` works too.

A toolbox module of the same name shadows ours inside that toolbox's scope, so
every name registered here is checked against the three toolboxes in the tests.

:func:`ensure_custom_imports` makes a config import the package (:data:`PLUGIN`), so that
a dumped config of a run finds these registries on its own.

Configs of the package can be inherited by package scope, as the toolboxes' are
(``_base_ = ['reobench_mm::upernet/upernet_rvsa-b_sfp_1xb8-12e_potsdam-512x512.py']``,
once ``reobench_mm`` is imported: MMEngine resolves a scope only for packages it knows,
and importing the package tells it). MMEngine then marks the modules of those configs
with ``_scope_='reobench_mm'``, but they are mostly the toolboxes' modules (an mmseg
``EncoderDecoder``, an mmrotate dataset); so a name missing from these registries is
looked up in the registry of the scope that was current before (the config's
``default_scope``, e.g. ``mmseg``).
"""
from importlib import import_module
from typing import Optional, Type

from mmengine.config import Config
from mmengine.config.utils import MODULE2PACKAGE
from mmengine.registry import DATA_SAMPLERS as MMENGINE_DATA_SAMPLERS
from mmengine.registry import DATASETS as MMENGINE_DATASETS
from mmengine.registry import HOOKS as MMENGINE_HOOKS
from mmengine.registry import LOOPS as MMENGINE_LOOPS
from mmengine.registry import METRICS as MMENGINE_METRICS
from mmengine.registry import MODELS as MMENGINE_MODELS
from mmengine.registry import \
    OPTIM_WRAPPER_CONSTRUCTORS as MMENGINE_OPTIM_WRAPPER_CONSTRUCTORS
from mmengine.registry import TRANSFORMS as MMENGINE_TRANSFORMS
from mmengine.registry import DefaultScope, Registry

__all__ = [
    'PluginRegistry', 'MODELS', 'TRANSFORMS', 'DATASETS', 'DATA_SAMPLERS', 'METRICS', 'HOOKS',
    'LOOPS',
    'OPTIM_WRAPPER_CONSTRUCTORS', 'PLUGIN', 'ensure_custom_imports'
]

#: The module a config imports to register the package's modules.
PLUGIN = 'reobench_mm'


def enclosing_scope() -> Optional[str]:
    """The default scope that was current before the innermost switch to
    ``reobench_mm`` (MMEngine keeps the earlier default-scope instances while a build
    overrides the scope), or None."""
    for instance in reversed(list(DefaultScope._instance_dict.values())):
        if instance.scope_name != PLUGIN:
            return instance.scope_name
    return None


class PluginRegistry(Registry):
    """A ``reobench_mm``-scoped child registry that also registers into its root.

    A name it does not hold (nor its root) is looked up in the registry of the
    enclosing default scope (:func:`enclosing_scope`), so that toolbox modules of
    configs inherited through ``reobench_mm::`` build as they do from the toolbox's own
    scope."""

    def __init__(self, root: Registry, locations: Optional[list] = None) -> None:
        if root.parent is not None:
            raise ValueError(f'{root!r} is not a root registry')
        super().__init__(root.name, parent=root, scope='reobench_mm',
                         locations=locations or [])

    def _register_module(self, module: Type, module_name=None, force: bool = False) -> None:
        super()._register_module(module, module_name, force)
        self.parent._register_module(module, module_name, force)

    def get(self, key: str) -> Optional[Type]:
        found = super().get(key)
        if found is not None or '.' in key:  # a scoped name was looked up where it says
            return found
        scope = enclosing_scope()
        if scope is None:
            return None
        try:  # the toolbox's registries exist once its registry module is imported
            import_module(f'{scope}.registry')
        except ImportError:
            return None
        registry = self._get_root_registry()._search_child(scope)
        if registry is None or registry is self:
            return None
        return registry.get(key)


MODELS = PluginRegistry(MMENGINE_MODELS, locations=['reobench_mm.models'])
TRANSFORMS = PluginRegistry(MMENGINE_TRANSFORMS, locations=['reobench_mm.transforms'])
DATASETS = PluginRegistry(MMENGINE_DATASETS, locations=['reobench_mm.datasets'])
DATA_SAMPLERS = PluginRegistry(MMENGINE_DATA_SAMPLERS, locations=['reobench_mm.datasets'])
METRICS = PluginRegistry(MMENGINE_METRICS, locations=['reobench_mm.evaluation'])
HOOKS = PluginRegistry(MMENGINE_HOOKS, locations=['reobench_mm.engine'])
LOOPS = PluginRegistry(MMENGINE_LOOPS, locations=['reobench_mm.engine',
                                                  'reobench_mm.robustness.test_loop',
                                                  'reobench_mm.robustness.val_loop'])
OPTIM_WRAPPER_CONSTRUCTORS = PluginRegistry(MMENGINE_OPTIM_WRAPPER_CONSTRUCTORS,
                                            locations=['reobench_mm.engine'])


# ``reobench_mm::path`` in a config's _base_ resolves to this package's configs (installed
# with the package under reobench_mm/.mim/configs, as the toolboxes ship theirs)
MODULE2PACKAGE.setdefault(PLUGIN, PLUGIN)


def ensure_custom_imports(cfg: Config, module: str = PLUGIN) -> Config:
    """Make sure ``cfg.custom_imports`` imports ``module`` (added when missing), so that
    a dumped config of the run works on its own."""
    custom = cfg.get('custom_imports')
    if custom is None:
        cfg.custom_imports = dict(imports=[module], allow_failed_imports=False)
        return cfg
    imports = custom.get('imports', [])
    imports = [imports] if isinstance(imports, str) else list(imports)
    if module not in imports:
        custom['imports'] = imports + [module]
    return cfg
