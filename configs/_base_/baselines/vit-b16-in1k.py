# Baseline encoder: ViT-B/16 pretrained on ImageNet (timm's weights), the same shape as
# the RVSA / MAE ViT-B encoders. Save timm's state dict once, e.g.
#   torch.save(timm.create_model('vit_base_patch16_224.augreg2_in21k_ft_in1k',
#                                pretrained=True).state_dict(), 'checkpoints/vit-b16_in1k_timm.pth')
# (converted on load: the classifier dropped, the position embedding resampled to the
# input grid); ImageNet normalisation.
checkpoint = 'checkpoints/vit-b16_in1k_timm.pth'
vit_channels, patch_size = 768, 16  # trunk width, patch size
sfp_neck = dict(in_channels=vit_channels, patch_size=patch_size)
img_norm_cfg = dict(mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375])
backbone = dict(type='ImageNetViT', arch='b', init_cfg=dict(type='Pretrained', checkpoint=checkpoint))
