# UperNet + FCN on ISPRS Potsdam 512x512 with RVSA (ViT-B + rotated varied-size window
# attention), from the MAE ViT-B pretraining file. Pretrained weights: the official file
# checkpoints/vit-b-checkpoint-1599.pth, converted on load (or once with
# tools/convert_checkpoint.py). Normalisation: ImageNet statistics.
_base_ = [
    '../_base_/models/upernet_vit-b16_sfp.py', '../_base_/datasets/potsdam_512x512.py',
    'mmseg::_base_/default_runtime.py', '../_base_/schedules/schedule_potsdam_adamw_12e.py'
]
checkpoint = 'checkpoints/vit-b-checkpoint-1599.pth'
vit_channels = 768
patch_size = 16
model = dict(
    data_preprocessor=dict(mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375]),
    backbone=dict(
        _delete_=True,
        type='RVSA', arch='b',
        img_size=512,
        out_indices='vit12',
        drop_path_rate=0.1,
        init_cfg=dict(type='Pretrained', checkpoint=checkpoint)),
    neck=dict(in_channels=vit_channels, patch_size=patch_size),
    decode_head=dict(in_channels=[vit_channels] * 4),
    auxiliary_head=dict(in_channels=vit_channels))
