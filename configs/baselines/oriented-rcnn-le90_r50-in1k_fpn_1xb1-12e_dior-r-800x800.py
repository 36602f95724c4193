# Baseline: Oriented R-CNN (le90) on DIOR-R 800x800 with MMRotate's ImageNet ResNet-50 + FPN
# (torchvision://resnet50, as MMRotate's own Oriented R-CNN), the task's data, heads and
# AdamW schedule.
_base_ = ['../_base_/tasks/oriented-rcnn_dior-r.py']
model = dict(
    data_preprocessor=dict(mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375]),
    backbone=dict(_delete_=True, type='mmdet.ResNet', depth=50, num_stages=4,
                  out_indices=(0, 1, 2, 3), frozen_stages=1,
                  norm_cfg=dict(type='BN', requires_grad=True), norm_eval=True, style='pytorch',
                  init_cfg=dict(type='Pretrained', checkpoint='torchvision://resnet50')),
    neck=dict(_delete_=True, type='mmdet.FPN', in_channels=[256, 512, 1024, 2048],
              out_channels=256, num_outs=5))
