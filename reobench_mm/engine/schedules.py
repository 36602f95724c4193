"""Helpers to shorten or lengthen an iteration-based schedule in a config."""
from mmengine.config import Config

__all__ = ['rescale_iter_schedule']


def rescale_iter_schedule(cfg: Config, max_iters: int) -> Config:
    """Set ``train_cfg.max_iters`` and stretch the iteration-based parts with it.

    Parameter schedulers (``by_epoch=False``) keep their proportions: each
    ``begin``/``end`` is scaled by ``max_iters / old_max_iters`` and kept strictly
    increasing; validation runs and the checkpoint is saved at the last iteration.

    Raises:
        ValueError: ``max_iters < 1`` or the config is not iteration-based.
    """
    if max_iters < 1:
        raise ValueError(f'max_iters must be >= 1, got {max_iters}')
    if cfg.train_cfg.get('type') != 'IterBasedTrainLoop':
        raise ValueError('rescale_iter_schedule needs train_cfg.type="IterBasedTrainLoop", '
                         f'got {cfg.train_cfg.get("type")!r}')
    old = cfg.train_cfg.max_iters
    schedulers = cfg.get('param_scheduler') or []
    if isinstance(schedulers, dict):
        schedulers = [schedulers]
    previous_end = 0
    for scheduler in schedulers:
        if scheduler.get('by_epoch', True):
            raise ValueError(f'scheduler {scheduler.get("type")} is epoch-based')
        begin = max(previous_end, round(scheduler.get('begin', 0) * max_iters / old))
        end = round(min(scheduler.get('end', old), old) * max_iters / old)
        scheduler.begin, scheduler.end = begin, max(end, begin + 1)
        previous_end = scheduler.end
    cfg.train_cfg.max_iters = max_iters
    cfg.train_cfg.val_interval = max_iters
    if cfg.get('default_hooks', {}).get('checkpoint') is not None:
        cfg.default_hooks.checkpoint.interval = max_iters
    return cfg
