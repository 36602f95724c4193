# The natural-image twin of fpn-probe_dinov3-sat-l16_frozen_1xb8-12e_potsdam-224x224.py:
# the same probe with Meta's distilled DINOv3 ViT-L/16 pretrained on LVD-1689M web images
# (timm's vit_large_patch16_dinov3_qkvb with tag lvd1689m) and its ImageNet normalisation
# (timm's for the tag). Meta's official file, or timm's hub file of the tag saved once
# (docs/backbones.md). The weights are under the DINOv3 License.
_base_ = ['./fpn-probe_dinov3-sat-l16_frozen_1xb8-12e_potsdam-224x224.py']
checkpoint = 'checkpoints/dinov3_vitl16_pretrain_lvd1689m-8aa4cbdd.pth'
model = dict(
    data_preprocessor=dict(mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375]),
    backbone=dict(model_name='vit_large_patch16_dinov3_qkvb.lvd1689m',
                  init_cfg=dict(type='Pretrained', checkpoint=checkpoint)))
