"""Runner extensions (test loops, hooks, progress, layer-wise lr decay) and the fixes
that make MMEngine work on the pinned torch (weights-only checkpoint loading, strict
checks)."""
from .checkpoint import (MMENGINE_CHECKPOINT_GLOBALS, TRUST_ENV_VAR, CheckpointError,
                         CheckpointMismatchError, KeyMismatch, allow_checkpoint_globals,
                         load_checkpoint_strict, load_local_checkpoint, read_checkpoint)
from .hooks import ProgressBarHook
from .layer_decay import ViTLayerDecayOptimWrapperConstructor, parameter_group_of
from .corruption_loop import CorruptionTestLoop
from .dataloader_workers import release_dataloader_workers
from .progress import Progress
from .schedules import rescale_iter_schedule

__all__ = [
    'ProgressBarHook', 'Progress', 'CorruptionTestLoop', 'MMENGINE_CHECKPOINT_GLOBALS',
    'allow_checkpoint_globals', 'load_local_checkpoint', 'TRUST_ENV_VAR', 'CheckpointError',
    'CheckpointMismatchError', 'KeyMismatch', 'read_checkpoint', 'load_checkpoint_strict',
    'rescale_iter_schedule', 'ViTLayerDecayOptimWrapperConstructor', 'parameter_group_of',
    'release_dataloader_workers'
]
