# Frozen-encoder FPN probe on ISPRS Potsdam with every input resized bilinearly to 224x224
# (the calibration study's input size; ../_base_/tasks/fpn-probe_potsdam-224.py) and the
# OlmoEarth v1 Tiny encoder (192 wide, 12 blocks, 3 heads, patch kernel 8; pre-trained on
# Sentinel-2 L2A, Sentinel-1, Landsat and maps): the embeddings and all 12 blocks frozen,
# the FPN decoder on blocks 3, 6, 9, 12 (the last of each quarter; out_indices counts from
# 0), each the block's raw output with a location's band-set tokens averaged.
# - weights: weights.pth of the hub's allenai/OlmoEarth-v1-Tiny (OlmoEarth Artifact
#   License: no military, surveillance or extractive-industry use), converted on load
#   (decoder, target encoder, contrastive head, other modalities' embeddings dropped);
# - patch size 8 (the kernel, no resize): a 28x28 token map per band set at 224 px;
# - bands: Potsdam's red, green and blue (the data preprocessor turns the loaded BGR into
#   RGB) stand for Sentinel-2 B04, B03, B02 in the 10 m band set; its B08 is zero, the 20 m
#   and 60 m band sets are absent (left out of the sequence, as the official encoder drops
#   missing tokens);
# - normalisation: x / 255, so the 8-bit values span [0, 1] as the pre-training data do
#   after the official normalisation (mean - 2 std -> 0, mean + 2 std -> 1); aerial RGB
#   has no reflectance mapping onto L2A;
# - month 7 (July) and 10 m per pixel in the encodings: the official evaluation's defaults.
_base_ = ['../_base_/tasks/fpn-probe_potsdam-224.py']
checkpoint = 'checkpoints/OlmoEarth-v1-Tiny/weights.pth'
vit_channels, patch_size = 192, 8  # trunk width, token size (the kernel)
model = dict(
    data_preprocessor=dict(mean=[0.0, 0.0, 0.0], std=[255.0, 255.0, 255.0]),
    backbone=dict(_delete_=True, type='OlmoEarth', arch='tiny', img_size=224,
                  band_names=('B04', 'B03', 'B02'), patch_size=patch_size, month=7,
                  input_res=10.0,
                  frozen_stages=12, out_indices=(2, 5, 8, 11),
                  init_cfg=dict(type='Pretrained', checkpoint=checkpoint)),
    neck=dict(in_channels=[vit_channels] * 4))
