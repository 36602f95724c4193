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
        # blocks 3/5/7/11 of 24 without final norm, as the authors' released SatMAE class
        # returns them (lx709/REOBench:
        # Segmentation/mmseg/models/backbones/SatMAEpp_vit_large.py is a copy of it; the
        # MMRotate class SatMAEVisionTransformerpp is not released)
        out_indices='vit24_reobench_segmentation',
        final_norm=False),
    neck=[dict(_base_.model.neck[0], **_base_.sfp_neck),
          dict(_base_.model.neck[1], in_channels=[_base_.vit_channels] * 4)])
# blocks 12-23 and the final norm then get no gradient: multi-GPU training needs DDP's
# unused-parameter search (the authors' runs computed and ignored them likewise)
find_unused_parameters = True
