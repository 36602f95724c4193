# REOBench reproduction: Oriented R-CNN (le90) on DIOR-R 800x800 with Scale-MAE ViT-L/16, as
# lx709/REOBench: Detection/configs/DIOR/scaleMAE.py ran it (task settings in
# ../_base_/tasks/oriented-rcnn_dior-r_reobench.py).
_base_ = ['../_base_/tasks/oriented-rcnn_dior-r_reobench.py', '../_base_/backbones/scalemae-l.py']
model = dict(
    backbone=dict(
        _base_.backbone,
        drop_path_rate=0.2,  # scaleMAE.py (recommended: 0.1)
        # the last block through the final LayerNorm feeds all four pyramid levels, as the
        # class of that name does (lx709/REOBench:
        # Detection/mmrotate/models/backbones/scale_MAE_vit_large.py, forward_features).
        pyramid_source='last_block',
        # That class resamples the file's stored 224 px sin-cos pos_embed bicubically to
        # the 50x50 grid and trains it; ScaleMAE recomputes a sin-cos embedding instead,
        # which at input_res=1.0 is the plain sin-cos of the grid (not reproduced exactly).
        input_res=1.0),
    neck=[dict(_base_.model.neck[0], **_base_.sfp_neck),
          dict(_base_.model.neck[1], in_channels=[_base_.vit_channels] * 4)])
