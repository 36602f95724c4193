# Oriented R-CNN (le90) on DIOR-R 800x800 with SatMAE++ ViT-L/16 (fMoW-RGB pretraining;
# same trunk and normalisation as SatMAE). Pretrained weights: the official file
# checkpoints/checkpoint_ViT-L_pretrain_fmow_rgb.pth.
_base_ = ['./oriented-rcnn-le90_satmae-l_sfp-fpn_1xb1-12e_dior-r-800x800.py']
checkpoint = 'checkpoints/checkpoint_ViT-L_pretrain_fmow_rgb.pth'
model = dict(
    backbone=dict(type='SatMAEPlusPlus', init_cfg=dict(type='Pretrained', checkpoint=checkpoint)))
