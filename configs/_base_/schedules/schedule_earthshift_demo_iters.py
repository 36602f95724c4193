# EarthShift's schedule (schedule_earthshift_adamw_40e.py) by iterations, for the demo
# data: AdamW, weight decay 0, lr 1e-4; a linear warm-up from 1e-6 x lr over the first
# half of the iterations (as 20 of 40 epochs are), then cosine annealing to 0 over the
# second half (T_max = end - begin, MMEngine's default, so a rescaled schedule keeps it).
# An epoch schedule is epochs x ceil(N / 32) iterations at the official batch of 32: on
# the 24 demo training images one iteration per epoch, so 40 epochs are 40 iterations
# and 50 epochs 50 (Potsdam's 3,456 patches: 4,320 and 5,400).
max_iters = 40
warmup_iters = max_iters // 2
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=1e-4, betas=(0.9, 0.999), weight_decay=0.0))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, end_factor=1.0, by_epoch=False, begin=0,
         end=warmup_iters),
    dict(type='CosineAnnealingLR', eta_min=0.0, by_epoch=False, begin=warmup_iters,
         end=max_iters),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=max_iters)
val_cfg = dict(type='ValLoop')
# MMEngine's TestLoop, clean unless given a corruption, which it places in the test
# pipeline: --cfg-options test_cfg.corruption=NAME test_cfg.severity=K (any tool), or
# --corruption NAME --severity K (tools/test.py)
test_cfg = dict(type='CorruptionTestLoop')
