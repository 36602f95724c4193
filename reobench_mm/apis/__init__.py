"""Library side of the command-line tools (config preparation, corruption insertion)."""
from .config_utils import (CORRUPTION_DEFAULTS, ROTATED_DETECTION, SEGMENTATION,
                           PreparedTest, check_corruption_args, corruption_settings,
                           corruption_tag, default_work_dir, dump_json_atomic,
                           ensure_custom_imports, get_test_pipelines, infer_task,
                           insert_corruption, prepare_test_config, prepare_train_config,
                           tagged_path, use_corruption_loop, use_plain_test_loop)
from .data_budget import run_data_budget
from .representation_drift import representation_drift
from .sweep import (CheckpointMismatchError, FingerprintMismatchError, RobustnessSweep,
                    SweepError, SweepOutcome, WorkDirLockedError, merge_sweeps, run_sweep)

__all__ = [
    'CORRUPTION_DEFAULTS', 'SEGMENTATION', 'ROTATED_DETECTION', 'PreparedTest',
    'check_corruption_args', 'corruption_settings', 'corruption_tag', 'default_work_dir',
    'dump_json_atomic', 'ensure_custom_imports', 'get_test_pipelines', 'infer_task',
    'insert_corruption', 'prepare_test_config', 'prepare_train_config', 'tagged_path',
    'use_corruption_loop', 'use_plain_test_loop', 'RobustnessSweep', 'SweepOutcome',
    'SweepError', 'CheckpointMismatchError', 'FingerprintMismatchError', 'WorkDirLockedError',
    'run_sweep', 'merge_sweeps', 'run_data_budget', 'representation_drift'
]
