"""The fixtures the whole suite shares: the demo data, the trained-model cache, the real
samples; the budget guards (``budget.py``) as a plugin. A folder's own ``conftest.py``
holds what only its files share (``robustness/conftest.py``). The helpers the test
modules import (paths, demo configs, tool runners) are in ``helpers.py``."""
import os
import os.path as osp
import sys

import pytest
from filelock import FileLock

from helpers import DET_DEMO_CONFIG, REAL_SAMPLES, SEG_DEMO_CONFIG
from model_cache import ModelCache

pytest_plugins = ['budget', 'pytester']

_WORKERS = os.environ.get('PYTEST_XDIST_WORKER_COUNT')
if _WORKERS:  # one torch thread pool per core, not one per worker and core
    import torch
    _THREADS = str(max(1, (os.cpu_count() or 1) // int(_WORKERS)))
    torch.set_num_threads(int(_THREADS))
    # the tools a test starts compute with as many threads as the test's own process, so
    # that their numbers are the same bits (reductions split by thread differ in the last)
    os.environ.update(OMP_NUM_THREADS=_THREADS, MKL_NUM_THREADS=_THREADS)


def _cache_config_formatting() -> None:
    """MMEngine formats a config with yapf every time a Runner logs, dumps or stores it
    (``Config.pretty_text``: four to five times per Runner, 0.2 s each here; 17 % of the
    CPU time of the loop tests). yapf's ``FormatCode`` is a pure function of the text and
    the style, so the suite's processes keep its results (the same text out, formatted
    once); the tools the tests start as subprocesses format as always."""
    import functools
    import mmengine.config.config as config_module
    original = config_module.FormatCode

    @functools.lru_cache(maxsize=512)
    def formatted(text: str, style: tuple, options: tuple) -> tuple:
        return original(text, style_config=dict(style), **dict(options))

    def format_code(text, style_config=None, **options):
        if not isinstance(style_config, dict):
            return original(text, style_config=style_config, **options)
        return formatted(text, tuple(sorted(style_config.items())),
                         tuple(sorted(options.items())))

    config_module.FormatCode = format_code


_cache_config_formatting()


@pytest.fixture(autouse=True)
def _loggers_on_open_streams():
    """Drop the stream handlers of MMEngine's loggers whose streams are closed: a tool
    run in process under ``capsys`` leaves its logger writing to that test's captured
    stream, and a later test that logs (building a model) would print logging errors."""
    if 'mmengine.logging' in sys.modules:
        from mmengine.logging import MMLogger
        for logger in list(MMLogger._instance_dict.values()):
            for handler in list(logger.handlers):
                if getattr(getattr(handler, 'stream', None), 'closed', False):
                    logger.removeHandler(handler)
    yield


@pytest.fixture(scope='session')
def run_root(tmp_path_factory) -> str:
    """A folder shared by every xdist worker of this run (the parent of the workers' own
    temporary folders; the run's temporary folder itself without xdist)."""
    base = tmp_path_factory.getbasetemp()
    return str(base.parent if os.environ.get('PYTEST_XDIST_WORKER') else base)


@pytest.fixture(scope='session')
def demo_data(run_root) -> str:
    """A small copy of the demo data, written once per run for all workers: 6 training
    and 3 test images per dataset, and 3 test images of each shifted set."""
    from reobench_mm.datasets.synthetic import make_demo_data
    from reobench_mm.datasets.synthetic_shift import write_shifted_demo_data
    root = osp.join(run_root, 'demo_data')
    with FileLock(root + '.lock'):
        if not osp.isfile(osp.join(root, 'done')):
            make_demo_data(root, seed=0, num_train=6, num_test=3, size=256,
                           num_potsdam_test=3)
            write_shifted_demo_data(root, seed=0, num_test=3, size=256)
            with open(osp.join(root, 'done'), 'w', encoding='utf-8') as handle:
                handle.write('ok\n')
    return root


@pytest.fixture(scope='session')
def trained_models(run_root):
    """The run's trained-model cache (``model_cache.py``): ``trained_models.get(config,
    data_root, iters)`` trains once per run, across workers, and hands out a read-only
    :class:`model_cache.TrainedModel`. The suite uses the variants below."""
    cache = ModelCache(osp.join(run_root, 'trained_models'))
    yield cache
    broken = cache.check_all()
    assert not broken, broken


@pytest.fixture(scope='session')
def seg_model(trained_models, demo_data):
    """The demo UperNet trained 30 iterations on the demo data (tests of the loops,
    placement, shifts and seeds: any trained model will do)."""
    return trained_models.get(SEG_DEMO_CONFIG, osp.join(demo_data, 'potsdam'), 30)


@pytest.fixture(scope='session')
def seg_model_200(trained_models, demo_data):
    """The demo UperNet trained 200 iterations (tests whose numbers need a model that has
    learnt something: attacks, precision, device corruption)."""
    return trained_models.get(SEG_DEMO_CONFIG, osp.join(demo_data, 'potsdam'), 200)


@pytest.fixture(scope='session')
def det_model(trained_models, demo_data):
    """The demo Oriented R-CNN trained 30 iterations on the demo data."""
    return trained_models.get(DET_DEMO_CONFIG, osp.join(demo_data, 'dior'), 30)


@pytest.fixture
def real_samples() -> str:
    if not osp.isdir(REAL_SAMPLES):
        pytest.skip(f'real samples folder {REAL_SAMPLES} is absent (it lives beside the '
                    'project checkout as ../shared/data/real_samples)')
    return REAL_SAMPLES
