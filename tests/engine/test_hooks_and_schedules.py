"""ProgressBarHook arguments and rescale_iter_schedule."""
import pytest
from mmengine.config import Config

from helpers import DET_DEMO_CONFIG, SEG_DEMO_CONFIG
from reobench_mm.engine import ProgressBarHook, rescale_iter_schedule


@pytest.mark.parametrize('iters', [1, 3, 30, 600, 3000])
@pytest.mark.parametrize('path', [SEG_DEMO_CONFIG, DET_DEMO_CONFIG])
def test_rescale_keeps_schedulers_ordered_and_in_range(path, iters):
    cfg = rescale_iter_schedule(Config.fromfile(path), iters)
    assert cfg.train_cfg.max_iters == iters == cfg.train_cfg.val_interval
    assert cfg.default_hooks.checkpoint.interval == iters
    warmup, poly = cfg.param_scheduler
    assert 0 == warmup.begin < warmup.end <= poly.begin < poly.end
    assert poly.end == max(iters, poly.begin + 1)
    if iters == 600:  # the config's own length: unchanged
        assert (warmup.end, poly.begin) == (20, 20)


def test_rescale_rejects_bad_input():
    cfg = Config.fromfile(SEG_DEMO_CONFIG)
    with pytest.raises(ValueError, match='>= 1'):
        rescale_iter_schedule(cfg, 0)
    cfg.train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=12)
    with pytest.raises(ValueError, match='IterBasedTrainLoop'):
        rescale_iter_schedule(cfg, 10)


@pytest.mark.parametrize('kwargs,match', [(dict(phases=['trian']), 'unknown phases'),
                                          (dict(bar_width=0), 'bar_width')])
def test_progress_bar_hook_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ProgressBarHook(**kwargs)
