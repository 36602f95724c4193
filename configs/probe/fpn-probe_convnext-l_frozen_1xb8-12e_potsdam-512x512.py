# Frozen-encoder FPN probe on ISPRS Potsdam 512x512 with ConvNeXt-L pretrained by DINOv3
# (timm's convnext_large, weights convnext_large.dinov3_lvd1689m: self-supervised on
# LVD-1689M): the whole encoder frozen, the FPN decoder on its four stages
# (stages.0..stages.3: 192, 384, 768, 1536 channels at strides 4, 8, 16, 32, listed fine
# to coarse). timm's weight file of that tag, saved once
# (docs/backbones.md; the hub's model.safetensors also loads, named *.safetensors):
#   torch.save(timm.create_model('convnext_large.dinov3_lvd1689m',
#                                pretrained=True).state_dict(), PATH)
# converted on load (head norm dropped); ImageNet normalisation (timm's for the tag).
_base_ = ['../_base_/tasks/fpn-probe_potsdam.py']
checkpoint = 'checkpoints/convnext_large.dinov3_lvd1689m.pth'
stage_channels = [192, 384, 768, 1536]
model = dict(
    data_preprocessor=dict(mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375]),
    backbone=dict(_delete_=True, type='TimmFeatureEncoder',
                  model_name='convnext_large.dinov3_lvd1689m', frozen=True,
                  init_cfg=dict(type='Pretrained', checkpoint=checkpoint)),
    neck=dict(in_channels=stage_channels))
