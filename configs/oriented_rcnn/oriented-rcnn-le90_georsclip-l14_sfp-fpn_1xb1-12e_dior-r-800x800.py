# Oriented R-CNN (le90) on DIOR-R 800x800 with the GeoRSCLIP ViT-L/14 visual tower.
_base_ = ['../_base_/tasks/oriented-rcnn_dior-r.py', '../_base_/backbones/georsclip-l14.py']
model = dict(data_preprocessor=_base_.img_norm_cfg,
             backbone=dict(_base_.backbone, out_indices='vit24', final_norm=True),
             neck=[dict(_base_.model.neck[0], **_base_.sfp_neck),
                   dict(_base_.model.neck[1], in_channels=[_base_.vit_channels] * 4)])
