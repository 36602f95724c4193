# Frozen-encoder FPN probe on ISPRS Potsdam with every input resized bilinearly to 224x224
# (the calibration study's input size; ../_base_/tasks/fpn-probe_potsdam-224.py) and DOFA
# ViT-B/16 (Dynamic One-For-All, wavelength-conditioned patch embedding): the embeddings
# (the weight generator included) and all 12 blocks frozen, the FPN decoder on blocks 3,
# 6, 9, 12 (the last of each quarter; out_indices counts from 0).
# - weights: the official file checkpoints/DOFA_ViT_base_e100.pth (CC-BY-4.0), converted
#   on load (its mask token and distillation projector dropped);
# - wavelengths: Potsdam's red, green and blue bands (the data preprocessor turns the
#   loaded BGR into RGB before the encoder) at 0.665, 0.56 and 0.49 um, the values of
#   DOFA's own RGB example (Sentinel-2 B04, B03, B02); wavelengths='from_band_names' with
#   band_names=['R', 'G', 'B'] gives the same;
# - normalisation: ImageNet's, as DOFA's RGB example.
_base_ = ['../_base_/tasks/fpn-probe_potsdam-224.py']
checkpoint = 'checkpoints/DOFA_ViT_base_e100.pth'
vit_channels, patch_size = 768, 16  # trunk width, patch size
wavelengths = [0.665, 0.56, 0.49]  # um: red, green, blue
model = dict(
    data_preprocessor=dict(mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375]),
    backbone=dict(_delete_=True, type='DOFA', arch='b', img_size=224, wavelengths=wavelengths,
                  frozen_stages=12, out_indices=(2, 5, 8, 11),
                  init_cfg=dict(type='Pretrained', checkpoint=checkpoint)),
    neck=dict(in_channels=[vit_channels] * 4))
