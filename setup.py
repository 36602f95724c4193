"""Install reobench_mm, an OpenMMLab plugin for robustness evaluation of EO models."""
import os.path as osp

from setuptools import find_packages, setup

HERE = osp.dirname(osp.abspath(__file__))


def read_version() -> str:
    namespace: dict = {}
    with open(osp.join(HERE, 'reobench_mm', 'version.py'), encoding='utf-8') as f:
        exec(compile(f.read(), 'version.py', 'exec'), namespace)
    return namespace['__version__']


def read_requirements(name: str) -> list:
    """Requirement lines of ``requirements/<name>.txt`` without comments."""
    with open(osp.join(HERE, 'requirements', name + '.txt'), encoding='utf-8') as f:
        lines = (line.split('#', 1)[0].strip() for line in f)
        return [line for line in lines if line]


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
    classifiers=[
        'Programming Language :: Python :: 3',
        'License :: OSI Approved :: Apache Software License',
        'Topic :: Scientific/Engineering :: Image Recognition',
    ],
)
