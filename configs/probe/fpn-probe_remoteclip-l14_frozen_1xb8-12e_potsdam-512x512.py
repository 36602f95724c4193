# Frozen-encoder FPN probe on ISPRS Potsdam 512x512 with the RemoteCLIP ViT-L/14 visual
# tower: the embeddings and all 24 blocks frozen, the FPN decoder on blocks 6, 12, 18, 24
# (the last of each quarter; out_indices counts from 0).
_base_ = ['../_base_/tasks/fpn-probe_potsdam.py', '../_base_/backbones/remoteclip-l14.py']
model = dict(data_preprocessor=_base_.img_norm_cfg,
             backbone=dict(_base_.backbone, frozen_stages=24, out_indices=(5, 11, 17, 23)),
             neck=dict(in_channels=[_base_.vit_channels] * 4))
