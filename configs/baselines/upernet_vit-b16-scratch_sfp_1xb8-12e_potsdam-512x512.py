# Baseline: UperNet + FCN on ISPRS Potsdam 512x512 with a randomly initialised ViT-B/16,
# the segmentation task and schedule of the Earth-observation encoders unchanged.
_base_ = ['../_base_/tasks/upernet_potsdam.py', '../_base_/baselines/vit-b16-scratch.py']
model = dict(data_preprocessor=_base_.img_norm_cfg, neck=_base_.sfp_neck,
             backbone=dict(_base_.backbone, out_indices='vit12'),
             decode_head=dict(in_channels=[_base_.vit_channels] * 4),
             auxiliary_head=dict(in_channels=_base_.vit_channels))
