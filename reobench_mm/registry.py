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
"""
from typing import Optional, Type

from mmengine.registry import DATASETS as MMENGINE_DATASETS
from mmengine.registry import HOOKS as MMENGINE_HOOKS
from mmengine.registry import LOOPS as MMENGINE_LOOPS
from mmengine.registry import METRICS as MMENGINE_METRICS
from mmengine.registry import MODELS as MMENGINE_MODELS
from mmengine.registry import \
    OPTIM_WRAPPER_CONSTRUCTORS as MMENGINE_OPTIM_WRAPPER_CONSTRUCTORS
from mmengine.registry import TRANSFORMS as MMENGINE_TRANSFORMS
from mmengine.registry import Registry

__all__ = [
    'PluginRegistry', 'MODELS', 'TRANSFORMS', 'DATASETS', 'METRICS', 'HOOKS', 'LOOPS',
    'OPTIM_WRAPPER_CONSTRUCTORS'
]


class PluginRegistry(Registry):
    """A ``reobench_mm``-scoped child registry that also registers into its root."""

    def __init__(self, root: Registry, locations: Optional[list] = None) -> None:
        if root.parent is not None:
            raise ValueError(f'{root!r} is not a root registry')
        super().__init__(root.name, parent=root, scope='reobench_mm',
                         locations=locations or [])

    def _register_module(self, module: Type, module_name=None, force: bool = False) -> None:
        super()._register_module(module, module_name, force)
        self.parent._register_module(module, module_name, force)


MODELS = PluginRegistry(MMENGINE_MODELS, locations=['reobench_mm.models'])
TRANSFORMS = PluginRegistry(MMENGINE_TRANSFORMS, locations=['reobench_mm.transforms'])
DATASETS = PluginRegistry(MMENGINE_DATASETS, locations=['reobench_mm.datasets'])
METRICS = PluginRegistry(MMENGINE_METRICS, locations=['reobench_mm.evaluation'])
HOOKS = PluginRegistry(MMENGINE_HOOKS, locations=['reobench_mm.engine'])
LOOPS = PluginRegistry(MMENGINE_LOOPS, locations=['reobench_mm.engine'])
OPTIM_WRAPPER_CONSTRUCTORS = PluginRegistry(MMENGINE_OPTIM_WRAPPER_CONSTRUCTORS,
                                            locations=['reobench_mm.engine'])
