# Oriented R-CNN (le90) on DIOR-R 800x800 with RVSA (ViT-B + rotated varied-size window
# attention), from the MAE ViT-B pretraining file. Pretrained weights: the official file
# checkpoints/vit-b-checkpoint-1599.pth, converted on load (or once with
# tools/convert_checkpoint.py). Normalisation: ImageNet statistics.
_base_ = [
    '../_base_/models/oriented-rcnn-le90_vit-b16_sfp-fpn.py',
    '../_base_/datasets/dior_r_800x800.py', 'mmrotate::_base_/default_runtime.py',
    '../_base_/schedules/schedule_dior_adamw_12e.py'
]
checkpoint = 'checkpoints/vit-b-checkpoint-1599.pth'
vit_channels = 768
patch_size = 16
model = dict(
    data_preprocessor=dict(mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375]),
    backbone=dict(
        _delete_=True,
        type='RVSA', arch='b',
        img_size=800,
        out_indices='vit12',
        final_norm=False,
        drop_path_rate=0.1,
        init_cfg=dict(type='Pretrained', checkpoint=checkpoint)),
    neck=[
        dict(type='SimpleFeaturePyramid', in_channels=vit_channels, patch_size=patch_size),
        dict(type='mmdet.FPN', in_channels=[vit_channels] * 4, out_channels=256, num_outs=5),
    ])
