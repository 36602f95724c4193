# Frozen-encoder FPN probe on the synthetic Potsdam-format demo data: the demo linear
# probe (the narrow ResNet-18 of the demo UperNet, loaded from that model's checkpoint
# work_dirs/demo/seg/iter_600.pth and frozen whole) with the FPN decoder of the Potsdam
# FPN probes (configs/_base_/tasks/fpn-probe_potsdam.py) on its 4 stages (16, 32, 64,
# 128 channels at strides 4, 8, 16, 32, so the top-down path really upsamples; a CNN's
# hooked layers are its four stages): 1x1 laterals to 32 channels, bilinear
# upsample-and-add (align_corners=False), 3x3 convolutions (no norm, no activation), every
# level resized bilinearly to stride 4 and concatenated (128 channels), a 1x1 classifier.
# The demo schedule trains the decoder only.
_base_ = ['./linear-probe_r18-tiny_frozen_1xb4-600i_demo-potsdam-128x128.py']
fpn_channels = 32  # width of every FPN level (256 on Potsdam; narrow like the demo)
model = dict(
    backbone=dict(out_indices=(0, 1, 2, 3)),
    neck=dict(
        type='FPN',
        in_channels=[16, 32, 64, 128],
        out_channels=fpn_channels,
        num_outs=4,
        norm_cfg=None,
        act_cfg=None,
        upsample_cfg=dict(mode='bilinear', align_corners=False)),
    decode_head=dict(
        in_channels=[fpn_channels] * 4,
        in_index=[0, 1, 2, 3],
        input_transform='resize_concat',
        channels=4 * fpn_channels))
