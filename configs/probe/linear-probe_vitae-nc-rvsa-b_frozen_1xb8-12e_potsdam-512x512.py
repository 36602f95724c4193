# Frozen-encoder linear probe on ISPRS Potsdam 512x512 with ViTAE-NC RVSA (ViTAE-B normal
# cells + rotated varied-size window attention, MAE pretraining): the embeddings and all
# 12 blocks frozen (their batch norms in eval mode), a 1x1-convolution head on the last
# block's token map.
_base_ = ['../_base_/tasks/linear-probe_potsdam.py', '../_base_/backbones/vitae-nc-rvsa-b.py']
model = dict(data_preprocessor=_base_.img_norm_cfg,
             backbone=dict(_base_.backbone, frozen_stages=12, out_indices=(11, )),
             decode_head=dict(in_channels=_base_.vit_channels, channels=_base_.vit_channels))
