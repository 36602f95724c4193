# UperNet + FCN on ISPRS Potsdam 512x512 with SatMAE++ ViT-L/16 (fMoW-RGB pretraining;
# same trunk and normalisation as SatMAE). Pretrained weights: the official file
# checkpoints/checkpoint_ViT-L_pretrain_fmow_rgb.pth.
_base_ = ['./upernet_satmae-l_sfp_1xb8-12e_potsdam-512x512.py']
checkpoint = 'checkpoints/checkpoint_ViT-L_pretrain_fmow_rgb.pth'
model = dict(
    backbone=dict(type='SatMAEPlusPlus', init_cfg=dict(type='Pretrained', checkpoint=checkpoint)))
