# Frozen-encoder FPN probe on ISPRS Potsdam 512x512 with MobileNetV3-Large 1.0 (timm's
# mobilenetv3_large_100, its ImageNet weights ra_in1k): the whole encoder frozen (no
# gradients, batch norm statistics fixed), the FPN decoder on its four levels at strides
# 4, 8, 16, 32 (blocks.1, blocks.2, blocks.4, blocks.6: 24, 40, 112, 960 channels, listed
# fine to coarse). timm's weight file of that tag, saved once
# (docs/backbones.md; the hub's model.safetensors also loads, named *.safetensors):
#   torch.save(timm.create_model('mobilenetv3_large_100.ra_in1k',
#                                pretrained=True).state_dict(), PATH)
# converted on load (conv_head and classifier dropped); ImageNet normalisation.
_base_ = ['../_base_/tasks/fpn-probe_potsdam.py']
checkpoint = 'checkpoints/mobilenetv3_large_100.ra_in1k.pth'
stage_channels = [24, 40, 112, 960]
model = dict(
    data_preprocessor=dict(mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375]),
    backbone=dict(_delete_=True, type='TimmFeatureEncoder',
                  model_name='mobilenetv3_large_100.ra_in1k', frozen=True,
                  init_cfg=dict(type='Pretrained', checkpoint=checkpoint)),
    neck=dict(in_channels=stage_channels))
