# UperNet + FCN on ISPRS Potsdam 512x512 with the GeoRSCLIP ViT-H/14 visual tower.
# Pretrained weights: the official file checkpoints/RS5M_ViT-H-14.pt, converted on load
# (or once with tools/convert_checkpoint.py). Normalisation: CLIP's image statistics.
_base_ = [
    '../_base_/models/upernet_vit-b16_sfp.py', '../_base_/datasets/potsdam_512x512.py',
    'mmseg::_base_/default_runtime.py', '../_base_/schedules/schedule_potsdam_adamw_12e.py'
]
checkpoint = 'checkpoints/RS5M_ViT-H-14.pt'
vit_channels = 1280
patch_size = 14
model = dict(
    data_preprocessor=dict(mean=[122.771, 116.746, 104.094], std=[68.501, 66.632, 70.323]),
    backbone=dict(
        _delete_=True,
        type='CLIPVisionTransformer', arch='ViT-H/14',
        img_size=512,
        out_indices='vit32',
        drop_path_rate=0.1,
        init_cfg=dict(type='Pretrained', checkpoint=checkpoint)),
    neck=dict(in_channels=vit_channels, patch_size=patch_size),
    decode_head=dict(in_channels=[vit_channels] * 4),
    auxiliary_head=dict(in_channels=vit_channels))
