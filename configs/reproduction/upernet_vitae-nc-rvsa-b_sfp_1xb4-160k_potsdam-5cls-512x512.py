# Reproduction of REOBench's RVSA segmentation row (lx709/REOBench:
# Segmentation/configs/vit_base_win/rvsa_corrupted.py, backbone ViTAE_NC_Win_RVSA_V3_WSZ7 of
# Segmentation/mmseg/models/backbones/vitae_nc_win_rvsa_v3_wsz7.py, the ViTAE-NC variant of
# RVSA, from vitae-b-checkpoint-1599-transform-no-average.pth): UperNet, Potsdam 5 classes,
# 160k iterations, 4 images per iteration (rvsa_corrupted.py, the only released config of
# this backbone on Potsdam, has samples_per_gpu=4; the RVSA repository's Potsdam config
# upernet_vitae_nc_base_rvsa_v3_kvdiff_wsz7_..._class5_ignore5.py uses 2).
_base_ = ['../_base_/tasks/upernet_potsdam-5cls_reobench.py',
          '../_base_/backbones/vitae-nc-rvsa-b.py']
model = dict(
    data_preprocessor=_base_.img_norm_cfg,  # ImageNet statistics
    neck=_base_.sfp_neck,
    backbone=dict(
        _base_.backbone,
        img_size=512,
        drop_path_rate=0.1,  # rvsa_corrupted.py
        out_indices=(3, 5, 7, 11)),  # rvsa_corrupted.py
    decode_head=dict(in_channels=[_base_.vit_channels] * 4),
    auxiliary_head=dict(in_channels=_base_.vit_channels))
train_dataloader = dict(batch_size=4)
