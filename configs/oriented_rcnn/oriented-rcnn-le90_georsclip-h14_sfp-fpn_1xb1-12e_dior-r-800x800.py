# Oriented R-CNN (le90) on DIOR-R 800x800 with the GeoRSCLIP ViT-H/14 visual tower.
# Pretrained weights: the official file checkpoints/RS5M_ViT-H-14.pt, converted on load
# (or once with tools/convert_checkpoint.py). Normalisation: CLIP's image statistics.
_base_ = [
    '../_base_/models/oriented-rcnn-le90_vit-b16_sfp-fpn.py',
    '../_base_/datasets/dior_r_800x800.py', 'mmrotate::_base_/default_runtime.py',
    '../_base_/schedules/schedule_dior_adamw_12e.py'
]
checkpoint = 'checkpoints/RS5M_ViT-H-14.pt'
vit_channels = 1280
patch_size = 14
model = dict(
    data_preprocessor=dict(mean=[122.771, 116.746, 104.094], std=[68.501, 66.632, 70.323]),
    backbone=dict(
        _delete_=True,
        type='CLIPVisionTransformer', arch='ViT-H/14',
        img_size=800,
        out_indices='vit32',
        final_norm=True,
        drop_path_rate=0.1,
        init_cfg=dict(type='Pretrained', checkpoint=checkpoint)),
    neck=[
        dict(type='SimpleFeaturePyramid', in_channels=vit_channels, patch_size=patch_size),
        dict(type='mmdet.FPN', in_channels=[vit_channels] * 4, out_channels=256, num_outs=5),
    ])
