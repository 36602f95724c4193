# REOBench detection schedule: AdamW lr 1e-5 (batch 1), 12 epochs, lr x0.1 at epochs 8
# and 11, linear warm-up over 500 iterations (MMRotate's 1x schedule with AdamW).
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=1e-5, betas=(0.9, 0.999), weight_decay=0.05),
    clip_grad=dict(max_norm=35, norm_type=2))
param_scheduler = [
    dict(type='LinearLR', start_factor=1.0 / 3, by_epoch=False, begin=0, end=500),
    dict(type='MultiStepLR', begin=0, end=12, by_epoch=True, milestones=[8, 11], gamma=0.1),
]
train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=12, val_interval=1)
val_cfg = dict(type='ValLoop')
# MMEngine's TestLoop, clean unless given a corruption, which it places in the test
# pipeline: --cfg-options test_cfg.corruption=NAME test_cfg.severity=K (any tool), or
# --corruption NAME --severity K (tools/test.py)
test_cfg = dict(type='CorruptionTestLoop')
