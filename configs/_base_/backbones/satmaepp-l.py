# SatMAE++ ViT-L/16 pretrained on fMoW-RGB: SatMAE's trunk and normalisation, the official
# file checkpoints/checkpoint_ViT-L_pretrain_fmow_rgb.pth.
_base_ = ['./satmae-l.py']
checkpoint = 'checkpoints/checkpoint_ViT-L_pretrain_fmow_rgb.pth'
backbone = dict(type='SatMAEPlusPlus', init_cfg=dict(checkpoint=checkpoint))
