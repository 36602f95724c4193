# EarthShift's segmentation model (Doerksen & Kerner 2026, official code) on ISPRS Potsdam
# 512x512: the encoder's last block, after the trunk's final norm, decoded by EarthShift's
# simple convolutional head. The dataset, runtime and evaluation (CorruptionTestLoop) are
# the segmentation task's (upernet_potsdam.py); no schedule: a config adds one of
# ../schedules/schedule_earthshift_adamw_{40e,50e}.py and a backbone base
# (../baselines/, ../backbones/), and sets the backbone to return its last block after
# the final norm (this package's ViTs: out_indices=(depth - 1, ), final_norm=True).
# - no neck, no auxiliary head;
# - head: the official SimpleDecoder, Conv2d(C, 256, 3, padding=1) -> ReLU ->
#   Conv2d(256, classes, 1), written as MMSegmentation's FCNHead with one 3x3
#   convolution without norm (bias on), ReLU, no input concatenation, no dropout; its
#   logits are upsampled bilinearly (align_corners=False) to the input, as the official
#   model does. Only the initialisation differs: MMSegmentation's (3x3: Kaiming normal,
#   fan-out, bias 0; classifier: normal std 0.01, bias 0) instead of PyTorch's default;
# - no stochastic depth in the encoder (the official models run without);
# - batch 32 (the official batch size; 108 iterations per epoch on Potsdam's 3,456
#   training patches).
_base_ = [
    '../models/upernet_vit-b16_sfp.py', '../datasets/potsdam_512x512.py',
    'mmseg::_base_/default_runtime.py'
]
earthshift_head_channels = 256  # width of the SimpleDecoder's 3x3 convolution
model = dict(
    backbone=dict(drop_path_rate=0.0),
    neck=None,
    decode_head=dict(
        _delete_=True,
        type='FCNHead',
        in_channels=768,
        channels=earthshift_head_channels,
        in_index=-1,
        num_convs=1,
        kernel_size=3,
        concat_input=False,
        dropout_ratio=0.0,
        norm_cfg=None,
        act_cfg=dict(type='ReLU'),
        num_classes={{_base_.num_classes}},
        align_corners=False,
        loss_decode=dict(type='CrossEntropyLoss', use_sigmoid=False, loss_weight=1.0)),
    auxiliary_head=None)
train_dataloader = dict(batch_size=32)
