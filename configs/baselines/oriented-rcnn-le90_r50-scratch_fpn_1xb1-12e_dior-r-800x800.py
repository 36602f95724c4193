# Baseline: the same Oriented R-CNN ResNet-50, randomly initialised (no pretraining file;
# no stage frozen, the batch norms trained).
_base_ = ['./oriented-rcnn-le90_r50-in1k_fpn_1xb1-12e_dior-r-800x800.py']
model = dict(backbone=dict(init_cfg=None, frozen_stages=-1, norm_eval=False))
