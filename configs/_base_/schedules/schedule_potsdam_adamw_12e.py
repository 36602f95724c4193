# REOBench segmentation schedule: AdamW lr 6e-5, weight decay 0.05, 12 epochs (batch 8:
# 432 iterations per epoch on the 3,456 Potsdam patches), layer-wise lr decay 0.9 as in
# the RVSA recipe, linear warm-up over 1,500 iterations then poly decay.
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=6e-5, betas=(0.9, 0.999), weight_decay=0.05),
    constructor='ViTLayerDecayOptimWrapperConstructor',
    paramwise_cfg=dict(layer_decay_rate=0.9))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1500),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=1500, end=12 * 432),
]
train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=12, val_interval=1)
val_cfg = dict(type='ValLoop')
# MMEngine's TestLoop, clean unless given a corruption, which it places in the test
# pipeline: --cfg-options test_cfg.corruption=NAME test_cfg.severity=K (any tool), or
# --corruption NAME --severity K (tools/test.py)
test_cfg = dict(type='CorruptionTestLoop')
default_hooks = dict(
    timer=dict(type='IterTimerHook'),
    logger=dict(type='LoggerHook', interval=50, log_metric_by_epoch=True),
    param_scheduler=dict(type='ParamSchedulerHook'),
    checkpoint=dict(type='CheckpointHook', by_epoch=True, interval=1, max_keep_ckpts=2),
    sampler_seed=dict(type='DistSamplerSeedHook'),
    visualization=dict(type='SegVisualizationHook'))
