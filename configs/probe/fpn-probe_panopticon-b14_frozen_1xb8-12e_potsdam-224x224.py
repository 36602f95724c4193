# Frozen-encoder FPN probe on ISPRS Potsdam with every input resized bilinearly to 224x224
# (the calibration study's input size; ../_base_/tasks/fpn-probe_potsdam-224.py) and
# Panopticon ViT-B/14 (Waldmann et al. 2025): the official teacher weights
# checkpoints/panopticon_vitb14_teacher.pth (converted on load: mask token dropped, the
# 37x37 position embedding resampled to the 16x16 grid as the official forward does), the
# spectral patch embedding and all 12 blocks frozen, the FPN decoder on blocks 3, 6, 9, 12
# (the last of each quarter; out_indices counts from 0), without the final norm.
# - patch 14: a 224 px input gives 16x16 token maps, all four at stride 14;
# - wavelengths: one channel id per input band, in the order the data preprocessor hands
#   them over (bgr_to_rgb: red, green, blue). Potsdam's RGB orthophotos take the official
#   RGB convention, Sentinel-2 B04/B03/B02 (664.6, 559.6, 493.0 nm), in the whole
#   nanometres the spectral embedding uses (it floors them): 664, 559, 492 nm;
# - normalisation: ImageNet's mean and std (the official evaluations standardise each
#   data set with its own per-band statistics; Potsdam's are not part of the package).
_base_ = ['../_base_/tasks/fpn-probe_potsdam-224.py']
checkpoint = 'checkpoints/panopticon_vitb14_teacher.pth'
vit_channels, patch_size = 768, 14  # trunk width, patch size
potsdam_rgb_wavelengths = (664, 559, 492)  # nm: red, green, blue
model = dict(
    data_preprocessor=dict(mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375]),
    backbone=dict(_delete_=True, type='Panopticon', arch='b', img_size=224,
                  wavelengths=potsdam_rgb_wavelengths, frozen_stages=12,
                  out_indices=(2, 5, 8, 11),
                  init_cfg=dict(type='Pretrained', checkpoint=checkpoint)),
    neck=dict(in_channels=[vit_channels] * 4))
