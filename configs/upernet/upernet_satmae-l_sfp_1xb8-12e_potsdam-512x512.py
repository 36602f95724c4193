# UperNet + FCN on ISPRS Potsdam 512x512 with SatMAE ViT-L/16 (fMoW-RGB pretraining).
# Pretrained weights: the official file checkpoints/fmow_pretrain.pth, converted on load
# (or once with tools/convert_checkpoint.py). Normalisation: SatMAE's fMoW-RGB
# statistics.
_base_ = [
    '../_base_/models/upernet_vit-b16_sfp.py', '../_base_/datasets/potsdam_512x512.py',
    'mmseg::_base_/default_runtime.py', '../_base_/schedules/schedule_potsdam_adamw_12e.py'
]
checkpoint = 'checkpoints/fmow_pretrain.pth'
vit_channels = 1024
patch_size = 16
model = dict(
    data_preprocessor=dict(mean=[106.59, 107.355, 101.745], std=[73.44, 70.125, 70.38]),
    backbone=dict(
        _delete_=True,
        type='SatMAE', arch='l',
        img_size=512,
        out_indices='vit24_reobench_segmentation',
        drop_path_rate=0.1,
        init_cfg=dict(type='Pretrained', checkpoint=checkpoint)),
    neck=dict(in_channels=vit_channels, patch_size=patch_size),
    decode_head=dict(in_channels=[vit_channels] * 4),
    auxiliary_head=dict(in_channels=vit_channels))
