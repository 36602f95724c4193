"""Runner hooks and fixes that make MMEngine work on the pinned torch."""
from .checkpoint import (MMENGINE_CHECKPOINT_GLOBALS, TRUST_ENV_VAR, allow_checkpoint_globals,
                         load_local_checkpoint)
from .hooks import ProgressBarHook
from .layer_decay import ViTLayerDecayOptimWrapperConstructor, parameter_group_of
from .schedules import rescale_iter_schedule

__all__ = [
    'ProgressBarHook', 'MMENGINE_CHECKPOINT_GLOBALS', 'allow_checkpoint_globals',
    'load_local_checkpoint', 'TRUST_ENV_VAR', 'rescale_iter_schedule',
    'ViTLayerDecayOptimWrapperConstructor', 'parameter_group_of'
]
