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
        # blocks 3/5/7/11 of 24 without final norm, as the authors' released class of the
        # same name returns them (lx709/REOBench:
        # Segmentation/mmseg/models/backbones/SatMAE_vit_large.py; the MMRotate copy is
        # not released)
        out_indices='vit24_reobench_segmentation',
        final_norm=False),
    neck=[dict(_base_.model.neck[0], **_base_.sfp_neck),
          dict(_base_.model.neck[1], in_channels=[_base_.vit_channels] * 4)])
# blocks 12-23 and the final norm then get no gradient: multi-GPU training needs DDP's
# unused-parameter search (the authors' runs computed and ignored them likewise)
find_unused_parameters = True
