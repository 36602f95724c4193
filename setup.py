"""Install reobench_mm, an OpenMMLab plugin for robustness evaluation of EO models.

Like the OpenMMLab toolboxes, the installed package carries the project's ``configs/`` and
``tools/`` in ``reobench_mm/.mim/``: MMEngine resolves ``reobench_mm::upernet/<name>.py``
(and ``reobench_mm::_base_/...``) in ``_base_`` lists there, and MIM finds the tools.

- A wheel (``pip install .``, ``pip wheel .``, or a build from the sdist) gets copies,
  written into the build directory; the checkout is left as it is.
- An editable install (``pip install -e .``) gets links in the checkout's
  ``reobench_mm/.mim/`` to its ``configs/`` and ``tools/``, so edits apply at once.

MMEngine reads ``.mim/model-index.yml`` (the model-zoo index) before it looks in
``.mim/configs/``; the project's ``model-index.yml`` is shipped when there is one, else an
empty index is written.
"""
import os
import os.path as osp
import shutil
import warnings

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py
from setuptools.command.develop import develop

HERE = osp.dirname(osp.abspath(__file__))
PACKAGE = 'reobench_mm'
MIM_FOLDERS = ('configs', 'tools')
MODEL_INDEX = 'model-index.yml'
EMPTY_MODEL_INDEX = '# No model-zoo metafiles: configs are found under .mim/configs/.\nImport: []\n'
SKIPPED = shutil.ignore_patterns('__pycache__', '*.pyc', '*.pyo')


def read_version() -> str:
    namespace: dict = {}
    with open(osp.join(HERE, PACKAGE, 'version.py'), encoding='utf-8') as f:
        exec(compile(f.read(), 'version.py', 'exec'), namespace)
    return namespace['__version__']


def read_requirements(name: str) -> list:
    """Requirement lines of ``requirements/<name>.txt`` without comments."""
    with open(osp.join(HERE, 'requirements', name + '.txt'), encoding='utf-8') as f:
        lines = (line.split('#', 1)[0].strip() for line in f)
        return [line for line in lines if line]


def _clear(path: str) -> None:
    if osp.islink(path) or osp.isfile(path):
        os.remove(path)
    elif osp.isdir(path):
        shutil.rmtree(path)


def _write_model_index(mim_dir: str, link: bool) -> None:
    source = osp.join(HERE, MODEL_INDEX)
    target = osp.join(mim_dir, MODEL_INDEX)
    _clear(target)
    if not osp.isfile(source):
        with open(target, 'w', encoding='utf-8') as f:
            f.write(EMPTY_MODEL_INDEX)
    elif link:
        os.symlink(osp.relpath(source, mim_dir), target)
    else:
        shutil.copyfile(source, target)


def copy_mim_files(package_dir: str) -> None:
    """Copy ``configs/``, ``tools/`` and the model index into ``<package_dir>/.mim/``."""
    mim_dir = osp.join(package_dir, '.mim')
    os.makedirs(mim_dir, exist_ok=True)
    for folder in MIM_FOLDERS:
        target = osp.join(mim_dir, folder)
        _clear(target)
        shutil.copytree(osp.join(HERE, folder), target, ignore=SKIPPED)
    _write_model_index(mim_dir, link=False)


def link_mim_files() -> None:
    """Point the checkout's ``reobench_mm/.mim/`` at its ``configs/`` and ``tools/``
    (copies where the file system has no symbolic links)."""
    mim_dir = osp.join(HERE, PACKAGE, '.mim')
    os.makedirs(mim_dir, exist_ok=True)
    for folder in MIM_FOLDERS:
        source, target = osp.join(HERE, folder), osp.join(mim_dir, folder)
        _clear(target)
        try:
            os.symlink(osp.relpath(source, mim_dir), target, target_is_directory=True)
        except OSError:
            warnings.warn(f'cannot link {target} to {source}: copied instead, so later edits '
                          'of the checkout are not seen there until the next install')
            shutil.copytree(source, target, ignore=SKIPPED)
    try:
        _write_model_index(mim_dir, link=True)
    except OSError:
        _write_model_index(mim_dir, link=False)


class BuildPy(build_py):
    """Adds ``.mim/`` to the built package: copies, or links for an editable wheel."""

    def run(self):
        super().run()
        if getattr(self, 'editable_mode', False):
            link_mim_files()
        else:
            copy_mim_files(osp.join(self.build_lib, PACKAGE))


class Develop(develop):
    """``setup.py develop`` (pip's editable install without PEP 660): links ``.mim/``."""

    def run(self):
        link_mim_files()
        super().run()


setup(
    name='reobench_mm',
    version=read_version(),
    description='Robustness evaluation of Earth-observation foundation models '
    'for MMSegmentation and MMRotate: REOBench corruptions, EO backbones, sweeps.',
    long_description=open(osp.join(HERE, 'README.md'), encoding='utf-8').read()
    if osp.exists(osp.join(HERE, 'README.md')) else '',
    long_description_content_type='text/markdown',
    license='Apache-2.0',
    python_requires='>=3.9',
    packages=find_packages(exclude=('tests', 'tests.*', 'tools', 'configs')),
    include_package_data=True,
    install_requires=read_requirements('runtime') + read_requirements('mminstall'),
    extras_require={
        'tests': read_requirements('tests'),
        'build': read_requirements('build'),
    },
    cmdclass={'build_py': BuildPy, 'develop': Develop},
    zip_safe=False,
    classifiers=[
        'Programming Language :: Python :: 3',
        'License :: OSI Approved :: Apache Software License',
        'Topic :: Scientific/Engineering :: Image Recognition',
    ],
)
