# Frozen-encoder FPN probe on ISPRS Potsdam with every input resized bilinearly to 224x224
# (the calibration study's input size; ../_base_/tasks/fpn-probe_potsdam-224.py, which
# also sets img_size=224) and ViTAE-NC RVSA (ViTAE-B normal cells + rotated varied-size
# window attention, MAE pretraining): the embeddings and all 12 blocks frozen (their batch
# norms in eval mode), the FPN decoder on blocks 3, 6, 9, 12 (the last of each quarter;
# out_indices counts from 0).
_base_ = ['../_base_/tasks/fpn-probe_potsdam-224.py', '../_base_/backbones/vitae-nc-rvsa-b.py']
model = dict(data_preprocessor=_base_.img_norm_cfg,
             backbone=dict(_base_.backbone, frozen_stages=12, out_indices=(2, 5, 8, 11)),
             neck=dict(in_channels=[_base_.vit_channels] * 4))
