# Reproduction of REOBench's SatMAE segmentation row (lx709/REOBench:
# Segmentation/configs/vit_base_win/SatMAE_Potsdam.py, backbone SatMAEVisionTransformer of
# Segmentation/mmseg/models/backbones/SatMAE_vit_large.py): SatMAE ViT-L/16, UperNet,
# Potsdam 5 classes, 160k iterations, 2 images per iteration (samples_per_gpu=2; the
# number of GPUs is not recorded).
_base_ = ['../_base_/tasks/upernet_potsdam-5cls_reobench.py', '../_base_/backbones/satmae-l.py']
# the file their backbone loads (its init_weights hard-codes this name): SatMAE's fMoW-RGB
# ViT-L pretraining; the recommended configs name it fmow_pretrain.pth
checkpoint = 'checkpoints/pretrain-vit-large-e199.pth'
# SatMAE_Potsdam.py: SatMAE's fMoW statistics for [0, 1] pixels, applied to 0-255 pixels
# (mmcv's Normalize does not rescale), so the trunk sees about 255 x the standardised
# image plus ~369; kept as they ran it
img_norm_cfg = dict(
    mean=[0.4182007312774658, 0.4214799106121063, 0.3991275727748871],
    std=[0.28774282336235046, 0.27541765570640564, 0.2764017581939697])
model = dict(
    data_preprocessor=img_norm_cfg,
    neck=_base_.sfp_neck,
    backbone=dict(
        _base_.backbone,
        img_size=512,
        drop_path_rate=0.2,  # SatMAE_Potsdam.py
        # SatMAE_vit_large.py feeds blocks 3/5/7/11 of the 24 to the pyramid, no final norm
        out_indices=(3, 5, 7, 11),
        final_norm=False,
        # their init_weights drops the 224-px pos_embed (shape differs) and keeps the
        # sin-cos of the 32x32 grid it was initialised with, trainable
        pos_embed_resize='sincos',
        init_cfg=dict(type='Pretrained', checkpoint=checkpoint)),
    decode_head=dict(in_channels=[_base_.vit_channels] * 4),
    auxiliary_head=dict(in_channels=_base_.vit_channels))
train_dataloader = dict(batch_size=2)
