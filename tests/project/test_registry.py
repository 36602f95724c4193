"""Every module of the package resolves by ``type=`` from the three toolboxes' scopes."""
import importlib
import subprocess
import sys
import textwrap

import pytest
from mmengine.registry import DefaultScope

import reobench_mm
from reobench_mm import registry

TOOLBOX_SCOPES = ('mmseg', 'mmdet', 'mmrotate')
KINDS = ('MODELS', 'TRANSFORMS', 'DATASETS', 'METRICS', 'HOOKS', 'OPTIM_WRAPPER_CONSTRUCTORS')


def registered_modules():
    return [(kind, name, cls) for kind in KINDS
            for name, cls in getattr(registry, kind).module_dict.items()]


def test_package_registers_its_modules():
    names = {name for _, name, _ in registered_modules()}
    assert 'ProgressBarHook' in names
    assert reobench_mm.__version__


@pytest.mark.parametrize('scope', TOOLBOX_SCOPES)
@pytest.mark.parametrize('kind,name,cls', registered_modules(),
                         ids=[f'{k}.{n}' for k, n, _ in registered_modules()])
def test_module_resolves_from_toolbox_scope(scope, kind, name, cls):
    toolbox_registry = getattr(importlib.import_module(f'{scope}.registry'), kind)
    with DefaultScope.overwrite_default_scope(scope):
        # a toolbox module of the same name would shadow ours here
        assert toolbox_registry.get(name) is cls
        assert toolbox_registry.get(f'reobench_mm.{name}') is cls


def test_plugin_registry_requires_a_root():
    child = registry.MODELS
    with pytest.raises(ValueError, match='not a root registry'):
        registry.PluginRegistry(child)


@pytest.mark.slow
@pytest.mark.parametrize('scope', TOOLBOX_SCOPES)
def test_custom_imports_in_a_fresh_process(scope, tmp_path):
    """``custom_imports`` alone (no prior import) makes the modules buildable."""
    config = tmp_path / f'{scope}_cfg.py'
    config.write_text(textwrap.dedent(f"""
        default_scope = '{scope}'
        custom_imports = dict(imports=['reobench_mm'], allow_failed_imports=False)
        custom_hooks = [dict(type='ProgressBarHook', phases=['test'])]
    """))
    script = textwrap.dedent(f"""
        import sys
        from mmengine.config import Config
        from mmengine.registry import init_default_scope
        assert 'reobench_mm' not in sys.modules
        cfg = Config.fromfile({str(config)!r})
        init_default_scope(cfg.default_scope)
        from {scope}.registry import HOOKS
        hook = HOOKS.build(cfg.custom_hooks[0])
        assert type(hook).__module__ == 'reobench_mm.engine.hooks', type(hook)
        assert hook.phases == ('test',)
        print('built', type(hook).__name__)
    """)
    result = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert 'built ProgressBarHook' in result.stdout
