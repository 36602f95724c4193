"""Config side of the command-line tools (layer 7).

How ``tools/train.py``, ``tools/test.py`` and the experiment drivers prepare a config:
the task, the work dir, the corruption a test run applies and where its
``ApplyCorruption`` step goes (:mod:`reobench_mm.utils.config`).

May import the layers below it: the base modules (``version``, ``fileio``, ``registry``),
``corruptions``, ``transforms``, ``datasets``, ``models``, ``evaluation`` and ``engine``;
never ``analysis`` or ``robustness``.
"""
from .config import (PreparedTest, applied_condition, check_corruption_args,
                     corruption_settings, corruption_tag, default_work_dir,
                     get_test_pipelines, infer_task, insert_corruption, prepare_test_config,
                     prepare_train_config, tagged_path, use_corruption_loop)

__all__ = [
    'PreparedTest', 'applied_condition', 'check_corruption_args', 'corruption_settings',
    'corruption_tag', 'default_work_dir', 'get_test_pipelines', 'infer_task',
    'insert_corruption', 'prepare_test_config', 'prepare_train_config', 'tagged_path',
    'use_corruption_loop'
]
