# Oriented R-CNN (le90) on DIOR-R 800x800 with SatMAE ViT-L/16 (fMoW-RGB pretraining).
# Pretrained weights: the official file checkpoints/fmow_pretrain.pth, converted on load
# (or once with tools/convert_checkpoint.py). Normalisation: SatMAE's fMoW-RGB
# statistics.
_base_ = [
    '../_base_/models/oriented-rcnn-le90_vit-b16_sfp-fpn.py',
    '../_base_/datasets/dior_r_800x800.py', 'mmrotate::_base_/default_runtime.py',
    '../_base_/schedules/schedule_dior_adamw_12e.py'
]
checkpoint = 'checkpoints/fmow_pretrain.pth'
vit_channels = 1024
patch_size = 16
model = dict(
    data_preprocessor=dict(mean=[106.59, 107.355, 101.745], std=[73.44, 70.125, 70.38]),
    backbone=dict(
        _delete_=True,
        type='SatMAE', arch='l',
        img_size=800,
        out_indices='vit24',
        final_norm=True,
        drop_path_rate=0.1,
        init_cfg=dict(type='Pretrained', checkpoint=checkpoint)),
    neck=[
        dict(type='SimpleFeaturePyramid', in_channels=vit_channels, patch_size=patch_size),
        dict(type='mmdet.FPN', in_channels=[vit_channels] * 4, out_channels=256, num_outs=5),
    ])
