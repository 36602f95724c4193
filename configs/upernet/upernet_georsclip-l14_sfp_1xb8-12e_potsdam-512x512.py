# UperNet + FCN on ISPRS Potsdam 512x512 with the GeoRSCLIP ViT-L/14 visual tower.
# Like REOBench, the decoder reads blocks 3/5/7/11 of the 24-block trunk.
_base_ = ['../_base_/tasks/upernet_potsdam.py', '../_base_/backbones/georsclip-l14.py']
model = dict(data_preprocessor=_base_.img_norm_cfg, neck=_base_.sfp_neck,
             backbone=dict(_base_.backbone, out_indices='vit24_reobench_segmentation'),
             decode_head=dict(in_channels=[_base_.vit_channels] * 4),
             auxiliary_head=dict(in_channels=_base_.vit_channels))
