# EarthShift's fine-tuning schedule (Doerksen & Kerner 2026, training.py of the official
# code), frozen-encoder setting: 40 epochs. AdamW with PyTorch's default betas and weight
# decay 0 (the value the official code passes), no gradient clipping; a linear warm-up
# from 1e-6 x lr over the first 20 epochs, then cosine annealing to 0 over the remaining
# 20, both stepped every iteration (convert_to_iter_based). The official batch is 32: the
# configs that use this schedule set it on the train dataloader (the task base
# ../tasks/earthshift-head_potsdam.py does); an epoch is then ceil(N / 32) iterations
# (Potsdam's 3,456 training patches: 108, so 4,320 in all).
# lr 1e-4 is a starting value: EarthShift sweeps the learning rate, and a sweep overrides
# optim_wrapper.optimizer.lr.
# MMEngine's LinearLR reaches the full lr on the last iteration of its range (iteration
# 20 x 108 - 1), one iteration before torch's LinearLR(total_iters=20 x 108) of the
# official code, which gets there at iteration 2,160; from then on the two are the same.
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=1e-4, betas=(0.9, 0.999), weight_decay=0.0))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, end_factor=1.0, by_epoch=True, begin=0, end=20,
         convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', T_max=20, eta_min=0.0, by_epoch=True, begin=20, end=40,
         convert_to_iter_based=True),
]
# validation after every epoch, as the official training loop does
train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=40, val_interval=1)
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
