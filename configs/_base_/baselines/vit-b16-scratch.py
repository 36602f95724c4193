# Baseline encoder: ViT-B/16 randomly initialised (timm's initialisation, no pretraining
# file), the same trunk as vit-b16-in1k.py; ImageNet normalisation.
vit_channels, patch_size = 768, 16  # trunk width, patch size
sfp_neck = dict(in_channels=vit_channels, patch_size=patch_size)
img_norm_cfg = dict(mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375])
backbone = dict(type='ImageNetViT', arch='b', init_cfg=None)
