# Frozen-encoder linear probe on ISPRS Potsdam 512x512 with the GeoRSCLIP ViT-B/32 visual
# tower: the embeddings and all 12 blocks frozen, a 1x1-convolution head on the last
# block's token map.
_base_ = ['../_base_/tasks/linear-probe_potsdam.py', '../_base_/backbones/georsclip-b32.py']
model = dict(data_preprocessor=_base_.img_norm_cfg,
             backbone=dict(_base_.backbone, frozen_stages=12, out_indices=(11, )),
             decode_head=dict(in_channels=_base_.vit_channels, channels=_base_.vit_channels))
