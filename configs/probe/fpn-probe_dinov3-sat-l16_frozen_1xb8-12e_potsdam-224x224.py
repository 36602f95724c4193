# Frozen-encoder FPN probe on ISPRS Potsdam with every input resized bilinearly to 224x224
# (the calibration study's input size; ../_base_/tasks/fpn-probe_potsdam-224.py) and
# DINOv3-Sat: Meta's distilled DINOv3 ViT-L/16 pretrained on SAT-493M satellite images
# (timm's vit_large_patch16_dinov3_qkvb with tag sat493m: RoPE, 4 register tokens, layer
# scale; the variant with attention biases, which is the official computation whatever
# the file's bias values). The whole encoder frozen, the FPN decoder on blocks 6, 12, 18,
# 24 (the last of each quarter; out_indices counts from 0), all four at stride 16, as the
# package's other ViT probes. The weights: Meta's official file (converted on load by
# timm's DINOv3 converter) or timm's hub file of the tag saved once (docs/backbones.md):
#   torch.save(timm.create_model('vit_large_patch16_dinov3_qkvb.sat493m',
#                                pretrained=True).state_dict(), PATH)
# DINOv3-Sat's own normalisation (timm's for the tag, Meta's satellite transform):
# mean (0.430, 0.411, 0.296), std (0.213, 0.156, 0.143) of [0, 1] pixels. The weights
# are under the DINOv3 License.
_base_ = ['../_base_/tasks/fpn-probe_potsdam-224.py']
checkpoint = 'checkpoints/dinov3_vitl16_pretrain_sat493m-eadcf0ff.pth'
vit_channels = 1024  # trunk width
model = dict(
    data_preprocessor=dict(mean=[109.65, 104.805, 75.48], std=[54.315, 39.78, 36.465]),
    backbone=dict(_delete_=True, type='TimmFeatureEncoder',
                  model_name='vit_large_patch16_dinov3_qkvb.sat493m', frozen=True,
                  out_indices=(5, 11, 17, 23),
                  init_cfg=dict(type='Pretrained', checkpoint=checkpoint)),
    neck=dict(in_channels=[vit_channels] * 4))
