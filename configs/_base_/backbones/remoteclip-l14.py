# RemoteCLIP ViT-L/14 visual tower: the official file checkpoints/RemoteCLIP-ViT-L-14.pt
# (converted on load, or once with tools/model_converters/convert_checkpoint.py); CLIP's
# image statistics.
checkpoint = 'checkpoints/RemoteCLIP-ViT-L-14.pt'
vit_channels, patch_size = 1024, 14  # trunk width, patch size
sfp_neck = dict(in_channels=vit_channels, patch_size=patch_size)
img_norm_cfg = dict(mean=[122.771, 116.746, 104.094], std=[68.501, 66.632, 70.323])
backbone = dict(type='CLIPVisionTransformer', arch='ViT-L/14',
                init_cfg=dict(type='Pretrained', checkpoint=checkpoint))
