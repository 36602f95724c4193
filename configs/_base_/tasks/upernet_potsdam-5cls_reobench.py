# The segmentation task as REOBench's released configs ran it (lx709/REOBench:
# Segmentation/configs/vit_base_win/*.py): UperNet + FCN over a simple feature pyramid,
# ISPRS Potsdam with 5 classes (clutter ignored), 512x512 crops, 160k iterations. A
# reproduction config adds a backbone base (../backbones/), its blocks, normalisation and
# batch size.
# - heads with plain BN (Segmentation/configs/_base_/models/{upernet_vit_base_win,
#   SatMAE_vit_large,scale_MAE_vit_large,ViT_Base_CLIP}.py: norm_cfg=dict(type='BN'));
# - sliding-window test, 512x512 windows with stride 384 (the same model files): on the
#   512x512 Potsdam patches this is one window, i.e. the whole patch;
# - train pipeline as MMSegmentation's Potsdam one (random rescale 0.5-2 of 512, crop 512
#   with cat_max_ratio 0.75, flip, photometric distortion), as theirs;
# - mIoU and mFscore, as schedule_160k.py's evaluation;
# - an iteration-based loop needs an infinite sampler and logs by iteration.
_base_ = [
    '../models/upernet_vit-b16_sfp.py', '../datasets/potsdam-5cls_512x512.py',
    'mmseg::_base_/default_runtime.py', '../schedules/schedule_potsdam_160k_reobench.py'
]
num_classes = 5
norm_cfg = dict(type='BN', requires_grad=True)
model = dict(
    decode_head=dict(num_classes=num_classes, norm_cfg=norm_cfg),
    auxiliary_head=dict(num_classes=num_classes, norm_cfg=norm_cfg),
    test_cfg=dict(mode='slide', crop_size=(512, 512), stride=(384, 384)))
train_dataloader = dict(sampler=dict(type='InfiniteSampler', shuffle=True))
val_evaluator = dict(type='IoUMetric', iou_metrics=['mIoU', 'mFscore'])
test_evaluator = val_evaluator
log_processor = dict(by_epoch=False)
