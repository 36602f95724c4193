"""The package ships its configs and tools the OpenMMLab way: ``reobench_mm::<config>``
resolves in ``_base_`` lists, from the editable install of the project environment and
from a wheel installed into a fresh environment, run outside the checkout."""
import json
import os
import os.path as osp
import shutil
import subprocess
import sys
import sysconfig

import pytest
from mmengine.config import Config
from mmengine.utils import get_installed_path

import reobench_mm
from helpers import PROJECT_ROOT

SEG_CONFIG = 'upernet/upernet_rvsa-b_sfp_1xb8-12e_potsdam-512x512.py'
#: a user's config: a shipped task config as its base, one setting changed
USER_CONFIG = f"""
_base_ = ['reobench_mm::{SEG_CONFIG}']
model = dict(decode_head=dict(num_classes=5), auxiliary_head=dict(num_classes=5))
"""
#: what a wheel build needs is copied, without what a checkout accumulates
NOT_COPIED = {'.git', '.venv', 'build', 'dist', 'data', 'work_dirs', 'checkpoints'}

#: run by the fresh environment's interpreter: prints what it found as JSON
PROBE = r'''
import copy, json, sys
import reobench_mm
from mmengine.config import Config
from mmengine.registry import MODELS, init_default_scope
from mmengine.utils import get_installed_path

found = dict(package_file=reobench_mm.__file__, sys_path=sys.path,
             installed_path=get_installed_path('reobench_mm'))
cfg = Config.fromfile(sys.argv[1])
found.update(
    default_scope=cfg.default_scope,
    backbone=cfg.model.backbone.to_dict(), neck_channels=cfg.model.neck.in_channels,
    mean=cfg.model.data_preprocessor.mean, num_classes=cfg.model.decode_head.num_classes,
    lr=cfg.optim_wrapper.optimizer.lr, test_loop=cfg.test_cfg.type,
    dataset=cfg.test_dataloader.dataset.type,
    pipeline=[step['type'] for step in cfg.test_dataloader.dataset.pipeline])
init_default_scope(cfg.default_scope)
# as inherited: MMEngine marks the model _scope_='reobench_mm'; the package's registries
# look up the toolbox's modules in the config's default scope
found['model_scope'] = cfg.model.get('_scope_')
model = MODELS.build(copy.deepcopy(cfg.model))
found['model'] = [type(model).__name__, type(model.backbone).__name__,
                  type(model.decode_head).__name__, model.decode_head.num_classes]
print('PROBE ' + json.dumps(found))
'''


def _user_config(folder: str) -> str:
    path = osp.join(folder, 'user_config.py')
    with open(path, 'w', encoding='utf-8') as f:
        f.write(USER_CONFIG)
    return path


def _run(command, cwd, timeout=300):
    done = subprocess.run(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=timeout)
    assert done.returncode == 0, f'{" ".join(map(str, command))} failed:\n{done.stdout[-4000:]}'
    return done.stdout


def _copy_sources(target: str) -> None:
    def ignored(folder, names):
        skip = NOT_COPIED if osp.samefile(folder, PROJECT_ROOT) else set()
        return [n for n in names if n in skip or n in ('__pycache__', '.mim')
                or n.endswith(('.pyc', '.egg-info'))]
    shutil.copytree(PROJECT_ROOT, target, symlinks=True, ignore=ignored)


# ------------------------------------------------------------------------ editable

def test_scope_registered_and_editable_install_links_the_checkout(tmp_path):
    from mmengine.config.utils import MODULE2PACKAGE
    assert MODULE2PACKAGE.get('reobench_mm') == 'reobench_mm', \
        'import reobench_mm must register its config scope with MMEngine'
    package = get_installed_path('reobench_mm')
    assert osp.samefile(package, osp.dirname(reobench_mm.__file__))
    mim = osp.join(package, '.mim')
    if osp.samefile(package, osp.join(PROJECT_ROOT, 'reobench_mm')):
        for folder in ('configs', 'tools'):
            assert osp.isdir(osp.join(mim, folder)), \
                f'{mim}/{folder} is missing: reinstall with tools/install.sh'
            assert osp.samefile(osp.join(mim, folder), osp.join(PROJECT_ROOT, folder))
    assert osp.isfile(osp.join(mim, 'model-index.yml'))

    cfg = Config.fromfile(_user_config(str(tmp_path)))
    shipped = Config.fromfile(osp.join(PROJECT_ROOT, 'configs', SEG_CONFIG))
    assert cfg.model.decode_head.num_classes == cfg.model.auxiliary_head.num_classes == 5
    assert cfg.model.backbone == shipped.model.backbone
    assert cfg.model.data_preprocessor.mean == shipped.model.data_preprocessor.mean
    assert cfg.test_dataloader.dataset.type == 'PotsdamDataset'
    base = Config.fromfile(osp.join(mim, 'configs', '_base_', 'backbones', 'rvsa-b.py'))
    assert base.checkpoint == shipped.checkpoint


# ---------------------------------------------------------------------------- wheel

@pytest.fixture(scope='module')
def wheel_environment(tmp_path_factory):
    """A wheel built from a copy of the checkout, installed without dependencies into a
    fresh virtual environment that sees the project environment's third-party packages
    through a plain path line (which does not run that folder's own ``.pth`` files, so
    the editable reobench_mm stays out of it); the probe runs from outside the checkout."""
    root = tmp_path_factory.mktemp('packaging')
    sources, wheels, venv, work = (osp.join(root, n) for n in ('src', 'wheels', 'venv', 'work'))
    _copy_sources(sources)
    _run([sys.executable, '-m', 'pip', 'wheel', '--no-deps', '--no-build-isolation', '-q',
          '-w', wheels, sources], cwd=root)
    [wheel] = [osp.join(wheels, n) for n in os.listdir(wheels) if n.endswith('.whl')]
    _run([sys.executable, '-m', 'venv', '--without-pip', venv], cwd=root)
    python = osp.join(venv, 'bin', 'python')
    site_packages = _run([python, '-c', 'import sysconfig; print(sysconfig.get_path("purelib"))'],
                         cwd=root).strip()
    with open(osp.join(site_packages, 'project_environment.pth'), 'w') as f:
        f.write(sysconfig.get_path('purelib') + '\n')
    # pip itself comes from the project environment
    _run([python, '-m', 'pip', 'install', '--no-deps', '--no-index', '--ignore-installed',
          '-q', wheel], cwd=root)
    os.makedirs(work)
    with open(osp.join(work, 'probe.py'), 'w') as f:
        f.write(PROBE)
    output = _run([python, 'probe.py', _user_config(work)], cwd=work)
    [line] = [line for line in output.splitlines() if line.startswith('PROBE ')]
    return dict(site_packages=site_packages, wheel=wheel, **json.loads(line[len('PROBE '):]))


@pytest.mark.slow
def test_wheel_installs_outside_the_checkout(wheel_environment):
    env = wheel_environment
    package = osp.join(env['site_packages'], 'reobench_mm')
    assert osp.dirname(env['package_file']) == package
    assert env['installed_path'] == package
    # the editable install's path line (a .pth file of the project environment) is not run
    assert not any(p and osp.isdir(p) and osp.samefile(p, PROJECT_ROOT) for p in env['sys_path'])
    for folder in ('configs', 'tools'):
        mim = osp.join(package, '.mim', folder)
        assert osp.isdir(mim) and not osp.islink(mim)
    assert osp.isfile(osp.join(package, '.mim', 'configs', SEG_CONFIG))
    assert osp.isfile(osp.join(package, '.mim', 'tools', 'train.py'))


@pytest.mark.slow
def test_wheel_resolves_and_builds_an_inherited_config(wheel_environment):
    env = wheel_environment
    # the task config's own bases, the backbone base and the mmseg:: bases all resolved
    assert env['backbone'] == dict(type='RVSA', arch='b', img_size=512, drop_path_rate=0.1,
                                   out_indices='vit12',
                                   init_cfg=dict(type='Pretrained',
                                                 checkpoint='checkpoints/'
                                                 'vit-b-checkpoint-1599.pth'))
    assert env['neck_channels'] == 768 and env['mean'] == [123.675, 116.28, 103.53]
    assert env['num_classes'] == 5 and env['lr'] == 6e-5
    assert (env['default_scope'], env['test_loop'], env['dataset']) == \
        ('mmseg', 'CorruptionTestLoop', 'PotsdamDataset')
    assert env['pipeline'][:2] == ['LoadImageFromFile', 'LoadAnnotations']
    assert env['model'] == ['EncoderDecoder', 'RVSA', 'UPerHead', 5]


@pytest.mark.slow
def test_wheel_builds_an_inherited_model_as_tagged(wheel_environment):
    assert wheel_environment['model_scope'] == 'reobench_mm'
    assert wheel_environment['model'][:3] == ['EncoderDecoder', 'RVSA', 'UPerHead']
