# REOBench reproduction: Oriented R-CNN (le90) on DIOR-R 800x800 with RVSA on ViTAE-NC-B
# (ViTAE_NC_Win_RVSA_V3_WSZ7), as lx709/REOBench: Detection/configs/DIOR/RVSA_base.py ran it
# (task settings in ../_base_/tasks/oriented-rcnn_dior-r_reobench.py). Not reproduced: that
# file trains on the test split (train ann_file test_labels/, img_prefix test/), which
# would make the numbers meaningless; this config trains on trainval as the other eight
# files do.
_base_ = [
    '../_base_/tasks/oriented-rcnn_dior-r_reobench.py', '../_base_/backbones/vitae-nc-rvsa-b.py'
]
model = dict(
    # drop path 0.1 and img_size 800 (RVSA_base.py; the model base's values). The ViTAE-B
    # MAE file vitae-b-checkpoint-1599-transform-no-average.pth: RVSA_base.py comments it
    # out, its evaluation copies (Detection/configs/DIOR/eval/RVSA_base/) name it.
    # The backbone class of that name is
    # lx709/REOBench: Detection/mmrotate/models/backbones/vitae_nc_win_rvsa_v3_wsz7.py:
    # - its forward_features runs every block, applies the final LayerNorm to the last
    #   block's map and feeds that one map to all four pyramid levels (the
    #   out_indices=[3, 5, 7, 11] of RVSA_base.py are not read): 'last_block';
    # - the window blocks' qkv projection has one fused bias (query, key and value), the
    #   global blocks separate q/v biases: 'fused' (the MAE file's q/v biases of the window
    #   blocks are dropped on load and their fused bias starts at zero, as that class's
    #   non-strict load leaves them);
    # - the convolution branch uses SyncBatchNorm (the same as BatchNorm2d unless training
    #   is distributed).
    backbone=dict(_base_.backbone, pyramid_source='last_block', window_bias_layout='fused',
                  pcm_norm='SyncBatchNorm'),
    neck=[dict(_base_.model.neck[0], **_base_.sfp_neck),
          dict(_base_.model.neck[1], in_channels=[_base_.vit_channels] * 4)])
# 20 epochs, lr x0.1 at epochs 13 and 18 (RVSA_base.py, which keeps step=[8, 11] commented
# out); the other eight files: 12 epochs, steps 8 and 11
param_scheduler = [
    dict(type='LinearLR', start_factor=1.0 / 3, by_epoch=False, begin=0, end=500),
    dict(type='MultiStepLR', begin=0, end=20, by_epoch=True, milestones=[13, 18], gamma=0.1),
]
train_cfg = dict(max_epochs=20)
