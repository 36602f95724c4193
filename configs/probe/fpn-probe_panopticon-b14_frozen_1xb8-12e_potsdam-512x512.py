# Frozen-encoder FPN probe on ISPRS Potsdam 512x512 (../_base_/tasks/fpn-probe_potsdam.py)
# with Panopticon ViT-B/14: the 224x224 probe (fpn-probe_panopticon-b14_frozen_1xb8-12e_
# potsdam-224x224.py, which explains every setting) at the patches' own size. Patch 14:
# a 512 px input gives 36x36 token maps at stride 14, the last 8 pixel rows and columns
# left out by the patch convolution (as in the official code); the position embedding is
# resampled to the 36x36 grid at load.
_base_ = ['../_base_/tasks/fpn-probe_potsdam.py']
checkpoint = 'checkpoints/panopticon_vitb14_teacher.pth'
vit_channels, patch_size = 768, 14  # trunk width, patch size
potsdam_rgb_wavelengths = (664, 559, 492)  # nm: red, green, blue
model = dict(
    data_preprocessor=dict(mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375]),
    backbone=dict(_delete_=True, type='Panopticon', arch='b', img_size=512,
                  wavelengths=potsdam_rgb_wavelengths, frozen_stages=12,
                  out_indices=(2, 5, 8, 11),
                  init_cfg=dict(type='Pretrained', checkpoint=checkpoint)),
    neck=dict(in_channels=[vit_channels] * 4))
