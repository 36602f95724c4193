# UperNet + FCN on a narrow ResNet-18, 600 iterations on the synthetic Potsdam-format demo
# data (tools/make_demo_data.py), 128x128 crops: trains in CPU minutes.
_base_ = [
    'mmseg::_base_/default_runtime.py',
    '../_base_/models/upernet_r18-tiny.py',
    '../_base_/datasets/synthetic_potsdam.py',
    '../_base_/schedules/schedule_demo_iters.py',
]
custom_imports = dict(imports=['reobench_mm'], allow_failed_imports=False)
randomness = dict(seed=0, deterministic=False)
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=50, log_metric_by_epoch=False),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval={{_base_.max_iters}},
                    max_keep_ckpts=1))
log_processor = dict(by_epoch=False)
custom_hooks = [dict(type='ProgressBarHook')]
