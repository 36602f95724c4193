# Frozen-encoder FPN probe on ISPRS Potsdam with every input resized bilinearly to 224x224
# (the calibration study's input size; ../_base_/tasks/fpn-probe_potsdam-224.py) and Clay
# v1.5 (ViT-L/8 MAE encoder, wavelength-conditioned dynamic patch embedding): the
# embeddings (the weight generator included) and all 24 blocks frozen, the FPN decoder on
# blocks 6, 12, 18, 24 (the last of each quarter; out_indices counts from 0). Patch size 8:
# the four maps the FPN gets are all at stride 8 (28x28 at 224 px).
# - weights: the official file checkpoints/clay-v1.5.ckpt (Apache-2.0), converted on load
#   (its MAE decoder, teacher and teacher projection dropped);
# - wavelengths: Potsdam's red, green and blue bands (the data preprocessor turns the
#   loaded BGR into RGB before the encoder) through the backbone's band table: Clay's
#   NAIP (aerial RGB) values 0.65, 0.56, 0.48 um;
# - gsd: the ground one input pixel covers: Potsdam's 0.05 m orthophotos resized from
#   512 px tiles to 224, 0.05 * 512 / 224 = 0.114 m (Clay encodes the GSD of its input);
# - time and location: not given, so zeros, as Clay's own fine-tuning code feeds them;
# - normalisation: Clay's NAIP mean and standard deviation of red, green and blue.
_base_ = ['../_base_/tasks/fpn-probe_potsdam-224.py']
checkpoint = 'checkpoints/clay-v1.5.ckpt'
vit_channels, patch_size = 1024, 8  # trunk width, patch size
model = dict(
    data_preprocessor=dict(mean=[110.16, 115.41, 98.15], std=[47.23, 39.82, 35.43]),
    backbone=dict(_delete_=True, type='ClayV15', arch='l', img_size=224,
                  band_names=('red', 'green', 'blue'), gsd=0.05 * 512 / 224,
                  frozen_stages=24, out_indices=(5, 11, 17, 23),
                  init_cfg=dict(type='Pretrained', checkpoint=checkpoint)),
    neck=dict(in_channels=[vit_channels] * 4))
