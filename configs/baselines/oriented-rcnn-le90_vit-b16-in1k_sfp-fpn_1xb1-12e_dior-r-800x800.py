# Baseline: Oriented R-CNN (le90) on DIOR-R 800x800 with a ImageNet-pretrained (timm weights) ViT-B/16,
# the detection task and schedule of the Earth-observation encoders unchanged.
_base_ = ['../_base_/tasks/oriented-rcnn_dior-r.py', '../_base_/baselines/vit-b16-in1k.py']
model = dict(data_preprocessor=_base_.img_norm_cfg,
             backbone=dict(_base_.backbone, img_size=800, out_indices='vit12', final_norm=True),
             neck=[dict(_base_.model.neck[0], **_base_.sfp_neck),
                   dict(_base_.model.neck[1], in_channels=[_base_.vit_channels] * 4)])
