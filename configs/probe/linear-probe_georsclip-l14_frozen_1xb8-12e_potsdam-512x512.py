# Frozen-encoder linear probe on ISPRS Potsdam 512x512 with the GeoRSCLIP ViT-L/14 visual
# tower: the embeddings and all 24 blocks frozen, a 1x1-convolution head on the last
# block's token map.
_base_ = ['../_base_/tasks/linear-probe_potsdam.py', '../_base_/backbones/georsclip-l14.py']
model = dict(data_preprocessor=_base_.img_norm_cfg,
             backbone=dict(_base_.backbone, frozen_stages=24, out_indices=(23, )),
             decode_head=dict(in_channels=_base_.vit_channels, channels=_base_.vit_channels))
