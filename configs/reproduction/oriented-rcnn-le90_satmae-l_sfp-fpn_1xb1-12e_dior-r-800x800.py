# REOBench reproduction: Oriented R-CNN (le90) on DIOR-R 800x800 with SatMAE ViT-L/16, as
# lx709/REOBench: Detection/configs/DIOR/SatMAE_large.py ran it (task settings in
# ../_base_/tasks/oriented-rcnn_dior-r_reobench.py).
_base_ = ['../_base_/tasks/oriented-rcnn_dior-r_reobench.py', '../_base_/backbones/satmae-l.py']
# the fMoW fine-tuned classification file (SatMAE_large.py: pretrained=fmow_finetune.pth;
# its evaluation copies name finetune-vit-large-e7.pth), not the pretraining file
checkpoint = 'checkpoints/fmow_finetune.pth'
model = dict(
    backbone=dict(
        _base_.backbone,
        init_cfg=dict(type='Pretrained', checkpoint=checkpoint),
        drop_path_rate=0.2,  # SatMAE_large.py (recommended: 0.1)
        # blocks 5/11/17/23, each through the final LayerNorm, one per pyramid level, as
        # the class of that name returns them (lx709/REOBench:
        # Detection/mmrotate/models/backbones/SatMAE_vit_large.py, forward ->
        # forward_features2); the paper describes a pyramid from the last layer only.
        # That class also drops the file's 224 px pos_embed and keeps the sin-cos of the
        # 50x50 grid: the backbone's default pos_embed_resize='sincos'.
        out_indices='vit24',
        final_norm=True),
    neck=[dict(_base_.model.neck[0], **_base_.sfp_neck),
          dict(_base_.model.neck[1], in_channels=[_base_.vit_channels] * 4)])
