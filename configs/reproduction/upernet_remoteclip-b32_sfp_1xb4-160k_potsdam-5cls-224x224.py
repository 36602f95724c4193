# Reproduction of REOBench's RemoteCLIP ViT-B/32 segmentation row (lx709/REOBench:
# Segmentation/configs/vit_base_win/ViT_CLIP.py, its active lines: model_name 'ViT-B-32',
# RemoteCLIP-ViT-B-32.pt):
# UperNet, Potsdam 5 classes, 224x224 training crops, 160k iterations, 4 images per
# iteration (ViT_CLIP.py, the training config of the CLIP rows: samples_per_gpu=4).
# Their CLIP wrapper cannot run as released (see
# configs/_base_/tasks/upernet_potsdam-5cls-224_reobench.py); what their configs state is
# kept, the rest follows their other ViT rows.
_base_ = ['../_base_/tasks/upernet_potsdam-5cls-224_reobench.py',
          '../_base_/backbones/remoteclip-b32.py']
# ImageNet statistics (ViT_CLIP.py), not CLIP's own
img_norm_cfg = dict(mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375])
model = dict(
    data_preprocessor=img_norm_cfg,
    neck=_base_.sfp_neck,
    backbone=dict(
        _base_.backbone,
        img_size=224,  # position embedding at the 224-px grid, resampled for 512 px tests
        act_layer='gelu',  # open_clip config name without a pretrained tag: exact GELU
        drop_path_rate=0.0,  # open_clip's default; their configs set none
        out_indices=(3, 5, 7, 11),  # as their other rows and their CLIP draft
        final_norm=False),
    decode_head=dict(in_channels=[_base_.vit_channels] * 4),
    auxiliary_head=dict(in_channels=_base_.vit_channels))
# their LayerDecayOptimizerConstructor recognises none of the CLIP wrapper's parameter
# names (backbone.model.visual...): everything at the base lr
optim_wrapper = dict(paramwise_cfg=dict(layer_ids='recipe_none'))
train_dataloader = dict(batch_size=4)
