# EarthShift's segmentation model (Doerksen & Kerner 2026, official code) on ISPRS Potsdam
# 512x512: the encoder's last block, after the trunk's final norm, decoded by EarthShift's
# simple convolutional head. The dataset, runtime and evaluation (CorruptionTestLoop) are
# the segmentation task's (upernet_potsdam.py); no schedule: a config adds one of
# ../schedules/schedule_earthshift_adamw_{40e,50e}.py and a backbone base
# (../baselines/, ../backbones/), and sets the backbone to return its last block after
# the final norm (this package's ViTs: out_indices=(depth - 1, ), final_norm=True).
# - no neck, no auxiliary head;
# - head: the official SimpleDecoder as MMSegmentation's FCNHead
#   (../models/earthshift-head.py);
# - no stochastic depth in the encoder (the official models run without);
# - batch 32 (the official batch size; 108 iterations per epoch on Potsdam's 3,456
#   training patches).
_base_ = [
    '../models/upernet_vit-b16_sfp.py', '../models/earthshift-head.py',
    '../datasets/potsdam_512x512.py', 'mmseg::_base_/default_runtime.py'
]
model = dict(
    backbone=dict(drop_path_rate=0.0),
    neck=None,
    decode_head=dict(_base_.earthshift_head, _delete_=True, in_channels=768,
                     num_classes={{_base_.num_classes}}),
    auxiliary_head=None)
train_dataloader = dict(batch_size=32)
