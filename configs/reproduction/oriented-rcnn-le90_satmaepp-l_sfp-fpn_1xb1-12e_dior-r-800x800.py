# REOBench reproduction: Oriented R-CNN (le90) on DIOR-R 800x800 with SatMAE++ ViT-L/16, as
# lx709/REOBench: Detection/configs/DIOR/SatMAE_pp.py ran it (task settings in
# ../_base_/tasks/oriented-rcnn_dior-r_reobench.py).
_base_ = ['../_base_/tasks/oriented-rcnn_dior-r_reobench.py', '../_base_/backbones/satmaepp-l.py']
# the fMoW-RGB fine-tuned classification file (SatMAE_pp.py), not the pretraining one
checkpoint = 'checkpoints/checkpoint_ViT-L_finetune_fmow_rgb.pth'
model = dict(
    backbone=dict(
        _base_.backbone,
        init_cfg=dict(type='Pretrained', checkpoint=checkpoint),
        drop_path_rate=0.2,  # SatMAE_pp.py (recommended: 0.1)
        # blocks 5/11/17/23 of 24, each through the final LayerNorm, one per pyramid
        # level, as the class of that name returns them (lx709/REOBench:
        # Detection/mmrotate/models/backbones/SatMAEpp_vit_large.py, forward ->
        # forward_features2); the paper describes a pyramid from the last layer only.
        out_indices='vit24',
        final_norm=True,
        # that class keeps the file's 224 px pos_embed and resamples it to the 50x50 grid
        # with MAE's interpolate_pos_embed (bicubic, no antialias, class row kept)
        pos_embed_resize='bicubic'),
    neck=[dict(_base_.model.neck[0], **_base_.sfp_neck),
          dict(_base_.model.neck[1], in_channels=[_base_.vit_channels] * 4)])
