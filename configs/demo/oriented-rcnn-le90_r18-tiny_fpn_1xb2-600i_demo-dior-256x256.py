# Oriented R-CNN (le90) on a narrow ResNet-18 + FPN, 600 iterations on the synthetic
# DIOR-R-format demo data (tools/make_demo_data.py): trains in CPU minutes.
_base_ = [
    'mmrotate::_base_/default_runtime.py',
    '../_base_/models/oriented-rcnn-le90_r18-tiny_fpn.py',
    '../_base_/datasets/synthetic_dior.py',
    '../_base_/schedules/schedule_demo_iters.py',
]
custom_imports = dict(imports=['reobench_mm'], allow_failed_imports=False)
randomness = dict(seed=0, deterministic=False)
optim_wrapper = dict(optimizer=dict(lr=1e-3), clip_grad=dict(max_norm=35, norm_type=2))
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=50, log_metric_by_epoch=False),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval={{_base_.max_iters}},
                    max_keep_ckpts=1))
log_processor = dict(by_epoch=False)
custom_hooks = [dict(type='ProgressBarHook')]
