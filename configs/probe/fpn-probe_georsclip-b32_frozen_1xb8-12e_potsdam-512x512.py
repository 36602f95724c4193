# Frozen-encoder FPN probe on ISPRS Potsdam 512x512 with the GeoRSCLIP ViT-B/32 visual
# tower: the embeddings and all 12 blocks frozen, the FPN decoder on blocks 3, 6, 9, 12
# (the last of each quarter; out_indices counts from 0).
_base_ = ['../_base_/tasks/fpn-probe_potsdam.py', '../_base_/backbones/georsclip-b32.py']
model = dict(data_preprocessor=_base_.img_norm_cfg,
             backbone=dict(_base_.backbone, frozen_stages=12, out_indices=(2, 5, 8, 11)),
             neck=dict(in_channels=[_base_.vit_channels] * 4))
