# Frozen-encoder FPN probe on ISPRS Potsdam 512x512 with ResNet-50 (timm's resnet50, its
# ImageNet weights resnet50.a1_in1k): the whole encoder frozen (no gradients, batch norm
# statistics fixed), the FPN decoder on its four stages (layer1..layer4: 256, 512, 1024,
# 2048 channels at strides 4, 8, 16, 32, listed fine to coarse). timm's weight file of
# that tag, saved once
# (docs/backbones.md; the hub's model.safetensors also loads, named *.safetensors):
#   torch.save(timm.create_model('resnet50.a1_in1k', pretrained=True).state_dict(), PATH)
# converted on load (the classifier dropped); ImageNet normalisation (timm's for the tag).
_base_ = ['../_base_/tasks/fpn-probe_potsdam.py']
checkpoint = 'checkpoints/resnet50.a1_in1k.pth'
stage_channels = [256, 512, 1024, 2048]
model = dict(
    data_preprocessor=dict(mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375]),
    backbone=dict(_delete_=True, type='TimmFeatureEncoder', model_name='resnet50.a1_in1k',
                  frozen=True, init_cfg=dict(type='Pretrained', checkpoint=checkpoint)),
    neck=dict(in_channels=stage_channels))
