# SatMAE ViT-L/16 pretrained on fMoW-RGB: the official file checkpoints/fmow_pretrain.pth
# (converted on load, or once with tools/model_converters/convert_checkpoint.py); SatMAE's
# fMoW-RGB normalisation.
checkpoint = 'checkpoints/fmow_pretrain.pth'
vit_channels, patch_size = 1024, 16  # trunk width, patch size
sfp_neck = dict(in_channels=vit_channels, patch_size=patch_size)
img_norm_cfg = dict(mean=[106.59, 107.355, 101.745], std=[73.44, 70.125, 70.38])
backbone = dict(type='SatMAE', arch='l', init_cfg=dict(type='Pretrained', checkpoint=checkpoint))
