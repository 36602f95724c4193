# The schedule of REOBench's released segmentation configs (lx709/REOBench:
# Segmentation/configs/vit_base_win/*.py over Segmentation/configs/_base_/schedules/
# schedule_160k.py): 160,000 iterations, AdamW lr 6e-5, betas (0.9, 0.999), weight decay
# 0.05, no gradient clipping; mmcv's poly policy (power 1, min_lr 0) over all 160k
# iterations with a linear warm-up over the first 1,500 (warmup_ratio 1e-6) that scales
# the poly lr, here as the product of LinearLR and PolyLR, both from iteration 0;
# validation and checkpoints every 16,000 iterations (the metrics, mIoU and mFscore,
# are set by the task base).
# Layer-wise lr decay as their LayerDecayOptimizerConstructor (Segmentation/mmcv_custom/
# layer_decay_optimizer_constructor.py) computes it: num_layers=12 for every backbone,
# rate 0.9; 'recipe_blocks' = the groups it gives a backbone whose blocks are named
# blocks.N (embeddings 0, block i -> i + 1 without clipping, the rest 13). Configs of
# backbones whose names it does not recognise set layer_ids='recipe_none'.
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=6e-5, betas=(0.9, 0.999), weight_decay=0.05),
    constructor='ViTLayerDecayOptimWrapperConstructor',
    paramwise_cfg=dict(layer_decay_rate=0.9, num_layers=12, layer_ids='recipe_blocks'))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1500),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=0, end=160000),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=160000, val_interval=16000)
val_cfg = dict(type='ValLoop')
# clean unless given a corruption (see schedule_potsdam_adamw_12e.py)
test_cfg = dict(type='CorruptionTestLoop')
default_hooks = dict(
    timer=dict(type='IterTimerHook'),
    logger=dict(type='LoggerHook', interval=50, log_metric_by_epoch=False),
    param_scheduler=dict(type='ParamSchedulerHook'),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=16000),
    sampler_seed=dict(type='DistSamplerSeedHook'),
    visualization=dict(type='SegVisualizationHook'))
