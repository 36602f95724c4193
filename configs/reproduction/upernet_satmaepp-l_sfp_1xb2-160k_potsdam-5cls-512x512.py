# Reproduction of REOBench's SatMAE++ segmentation row (lx709/REOBench:
# Segmentation/configs/vit_base_win/SatMAE_pp_Potsdam.py): everything as the SatMAE row
# (same backbone class SatMAEVisionTransformer, normalisation, drop path, blocks, batch 2)
# with the SatMAE++ fMoW-RGB pretraining file that config names
# (checkpoint_ViT-L_pretrain_fmow_rgb.pth, this backbone base's).
# Caution: the released backbone ignores the config's file: the init_weights of
# Segmentation/mmseg/models/backbones/SatMAE_vit_large.py (the class the config builds;
# SatMAEpp_vit_large.py is not imported, and hard-codes the same name) always loads
# pretrain-vit-large-e199.pth, SatMAE's file. If the published row was run from the
# released code, it is a second SatMAE run; set
# model.backbone.init_cfg.checkpoint=checkpoints/pretrain-vit-large-e199.pth to run that.
_base_ = ['../_base_/tasks/upernet_potsdam-5cls_reobench.py',
          '../_base_/backbones/satmaepp-l.py']
# SatMAE_pp_Potsdam.py: SatMAE's fMoW statistics for [0, 1] pixels applied to 0-255
# pixels (see the SatMAE row), kept as they ran it
img_norm_cfg = dict(
    mean=[0.4182007312774658, 0.4214799106121063, 0.3991275727748871],
    std=[0.28774282336235046, 0.27541765570640564, 0.2764017581939697])
model = dict(
    data_preprocessor=img_norm_cfg,
    neck=_base_.sfp_neck,
    backbone=dict(
        _base_.backbone,
        img_size=512,
        drop_path_rate=0.2,  # SatMAE_pp_Potsdam.py
        out_indices=(3, 5, 7, 11),  # SatMAE_vit_large.py: blocks 3/5/7/11, no final norm
        final_norm=False,
        pos_embed_resize='sincos'),  # as the SatMAE row
    decode_head=dict(in_channels=[_base_.vit_channels] * 4),
    auxiliary_head=dict(in_channels=_base_.vit_channels))
train_dataloader = dict(batch_size=2)
