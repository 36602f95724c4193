# Frozen-encoder FPN probe on ISPRS Potsdam 512x512 (../_base_/tasks/fpn-probe_potsdam.py)
# with DOFA ViT-B/16: the 224x224 probe's encoder, wavelengths and normalisation
# (fpn-probe_dofa-b16_frozen_1xb8-12e_potsdam-224x224.py) at 512 px: the checkpoint's
# 14x14 position embedding is resampled bicubically (no antialias) to the 32x32 grid.
_base_ = ['../_base_/tasks/fpn-probe_potsdam.py']
checkpoint = 'checkpoints/DOFA_ViT_base_e100.pth'
vit_channels, patch_size = 768, 16  # trunk width, patch size
wavelengths = [0.665, 0.56, 0.49]  # um: red, green, blue
model = dict(
    data_preprocessor=dict(mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375]),
    backbone=dict(_delete_=True, type='DOFA', arch='b', img_size=512, wavelengths=wavelengths,
                  frozen_stages=12, out_indices=(2, 5, 8, 11),
                  init_cfg=dict(type='Pretrained', checkpoint=checkpoint)),
    neck=dict(in_channels=[vit_channels] * 4))
