# EarthShift's frozen-encoder ('head') setting on ISPRS Potsdam 512x512 with the
# ImageNet-pretrained ViT-B/16 baseline encoder (timm weights): the embeddings, all 12
# blocks and the trunk's final norm frozen, the simple convolutional head on the last
# block's token map after the final norm (stride 16), 40 epochs of AdamW at batch 32.
# frozen_stages covers the embeddings and the blocks; the final norm, which the forward
# uses here, gets lr 0 (with weight decay 0 AdamW then leaves it as it is), so that only
# the head trains, as in the official code's head mode.
_base_ = [
    '../_base_/tasks/earthshift-head_potsdam.py',
    '../_base_/schedules/schedule_earthshift_adamw_40e.py',
    '../_base_/baselines/vit-b16-in1k.py',
]
model = dict(data_preprocessor=_base_.img_norm_cfg,
             backbone=dict(_base_.backbone, out_indices=(11, ), final_norm=True,
                           frozen_stages=12),
             decode_head=dict(in_channels=_base_.vit_channels))
optim_wrapper = dict(
    paramwise_cfg=dict(custom_keys={'backbone.vit.norm.': dict(lr_mult=0.0, decay_mult=0.0)}))
