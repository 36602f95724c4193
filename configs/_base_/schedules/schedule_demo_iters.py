# Short iteration-based schedule for the demo data: AdamW, linear warm-up, poly decay.
max_iters = 600
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=2e-3, betas=(0.9, 0.999), weight_decay=0.01))
param_scheduler = [
    dict(type='LinearLR', start_factor=0.1, by_epoch=False, begin=0, end=20),
    dict(type='PolyLR', eta_min=1e-5, power=0.9, by_epoch=False, begin=20, end=max_iters),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=max_iters)
val_cfg = dict(type='ValLoop')
# MMEngine's TestLoop, clean unless given a corruption, which it places in the test
# pipeline: --cfg-options test_cfg.corruption=NAME test_cfg.severity=K (any tool), or
# --corruption NAME --severity K (tools/test.py)
test_cfg = dict(type='CorruptionTestLoop')
