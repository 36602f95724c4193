# Frozen-encoder SVGP probe on ISPRS Potsdam 512x512 with RVSA (ViT-B/16 + rotated
# varied-size window attention, MAE pretraining): the embeddings and all 12 blocks
# frozen, the FPN neck on blocks 3, 6, 9, 12 (the last of each quarter; out_indices
# counts from 0) and the sparse variational GP head of ../_base_/tasks/svgp-probe_potsdam.py.
_base_ = ['../_base_/tasks/svgp-probe_potsdam.py', '../_base_/backbones/rvsa-b.py']
model = dict(data_preprocessor=_base_.img_norm_cfg,
             backbone=dict(_base_.backbone, frozen_stages=12, out_indices=(2, 5, 8, 11)),
             neck=dict(in_channels=[_base_.vit_channels] * 4))
