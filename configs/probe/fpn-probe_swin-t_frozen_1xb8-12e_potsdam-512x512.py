# Frozen-encoder FPN probe on ISPRS Potsdam 512x512 with Swin-T (timm's
# swin_tiny_patch4_window7_224, its ImageNet-1k weights ms_in1k), laid out for 512 px
# inputs (img_size=512: the attention masks of that grid; the weights do not depend on
# it): the whole encoder frozen, the FPN decoder on its four stages (layers.0..layers.3
# before the final norm: 96, 192, 384, 768 channels at strides 4, 8, 16, 32, listed fine
# to coarse). timm's weight file of that tag, saved once
# (docs/backbones.md; the hub's model.safetensors also loads, named *.safetensors):
#   torch.save(timm.create_model('swin_tiny_patch4_window7_224.ms_in1k',
#                                pretrained=True).state_dict(), PATH)
# converted on load (final norm and classifier dropped); ImageNet normalisation.
_base_ = ['../_base_/tasks/fpn-probe_potsdam.py']
checkpoint = 'checkpoints/swin_tiny_patch4_window7_224.ms_in1k.pth'
stage_channels = [96, 192, 384, 768]
model = dict(
    data_preprocessor=dict(mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375]),
    backbone=dict(_delete_=True, type='TimmFeatureEncoder',
                  model_name='swin_tiny_patch4_window7_224.ms_in1k', frozen=True,
                  model_args=dict(img_size=512),
                  init_cfg=dict(type='Pretrained', checkpoint=checkpoint)),
    neck=dict(in_channels=stage_channels))
