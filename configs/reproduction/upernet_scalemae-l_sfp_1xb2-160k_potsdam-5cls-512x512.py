# Reproduction of REOBench's Scale-MAE segmentation row (lx709/REOBench:
# Segmentation/configs/vit_base_win/scale_MAE.py, backbone scale_SatMAEVisionTransformer of
# Segmentation/mmseg/models/backbones/scale_MAE_vit_large.py): Scale-MAE ViT-L/16, UperNet,
# Potsdam 5 classes, 160k iterations, 2 images per iteration.
_base_ = ['../_base_/tasks/upernet_potsdam-5cls_reobench.py',
          '../_base_/backbones/scalemae-l.py']
model = dict(
    data_preprocessor=_base_.img_norm_cfg,  # ImageNet statistics, as scale_MAE.py
    neck=_base_.sfp_neck,
    backbone=dict(
        _base_.backbone,
        img_size=512,
        drop_path_rate=0.2,  # scale_MAE.py
        out_indices=(3, 5, 7, 11),  # scale_MAE_vit_large.py: blocks 3/5/7/11, no final norm
        final_norm=False,
        # their trunk adds the plain sin-cos of the 32x32 grid (no GSD scaling, as
        # input_res=1.0 gives) as a trainable table initialised with it; here it is
        # recomputed every forward, i.e. kept at its initial value
        input_res=1.0),
    decode_head=dict(in_channels=[_base_.vit_channels] * 4),
    auxiliary_head=dict(in_channels=_base_.vit_channels))
train_dataloader = dict(batch_size=2)
