# Oriented R-CNN (le90) on DIOR-R 800x800 with ViTAE-NC RVSA (ViTAE-B normal cells +
# rotated varied-size window attention, from the ViTAE-B MAE pretraining file), the RVSA
# variant of REOBench's published RVSA rows. The window blocks keep the q/v biases of the
# MAE file and of the published RVSA detection checkpoints (window_bias_layout='qv'; the
# reproduction config uses the fused layout of REOBench's detection code).
_base_ = ['../_base_/tasks/oriented-rcnn_dior-r.py', '../_base_/backbones/vitae-nc-rvsa-b.py']
model = dict(data_preprocessor=_base_.img_norm_cfg,
             backbone=dict(_base_.backbone, window_bias_layout='qv', out_indices='vit12',
                           final_norm=False),
             neck=[dict(_base_.model.neck[0], **_base_.sfp_neck),
                   dict(_base_.model.neck[1], in_channels=[_base_.vit_channels] * 4)])
