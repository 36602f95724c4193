# UperNet + FCN on ISPRS Potsdam 512x512 with ViTAE-NC RVSA (ViTAE-B normal cells +
# rotated varied-size window attention, from the ViTAE-B MAE pretraining file), the RVSA
# variant of REOBench's published RVSA rows.
_base_ = ['../_base_/tasks/upernet_potsdam.py', '../_base_/backbones/vitae-nc-rvsa-b.py']
model = dict(data_preprocessor=_base_.img_norm_cfg, neck=_base_.sfp_neck,
             backbone=dict(_base_.backbone, out_indices='vit12'),
             decode_head=dict(in_channels=[_base_.vit_channels] * 4),
             auxiliary_head=dict(in_channels=_base_.vit_channels))
