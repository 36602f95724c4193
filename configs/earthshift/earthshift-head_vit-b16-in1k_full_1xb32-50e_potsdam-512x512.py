# EarthShift's full fine-tuning setting on ISPRS Potsdam 512x512 with the
# ImageNet-pretrained ViT-B/16 baseline encoder (timm weights): encoder and simple
# convolutional head trained together on the last block's token map after the final norm
# (stride 16), 50 epochs of AdamW at batch 32, one learning rate for every parameter.
_base_ = [
    '../_base_/tasks/earthshift-head_potsdam.py',
    '../_base_/schedules/schedule_earthshift_adamw_50e.py',
    '../_base_/baselines/vit-b16-in1k.py',
]
model = dict(data_preprocessor=_base_.img_norm_cfg,
             backbone=dict(_base_.backbone, out_indices=(11, ), final_norm=True),
             decode_head=dict(in_channels=_base_.vit_channels))
