# RVSA: ViT-B/16 with rotated varied-size window attention, initialised from the MAE
# ViT-B pretraining file checkpoints/vit-b-checkpoint-1599.pth (converted on load, or
# once with tools/model_converters/convert_checkpoint.py); ImageNet normalisation.
checkpoint = 'checkpoints/vit-b-checkpoint-1599.pth'
vit_channels, patch_size = 768, 16  # trunk width, patch size
sfp_neck = dict(in_channels=vit_channels, patch_size=patch_size)
img_norm_cfg = dict(mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375])
backbone = dict(type='RVSA', arch='b', init_cfg=dict(type='Pretrained', checkpoint=checkpoint))
