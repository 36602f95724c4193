# Frozen-encoder linear probe on the synthetic Potsdam-format demo data: the narrow
# ResNet-18 encoder of the demo UperNet, loaded from that model's checkpoint (`make demo`
# writes work_dirs/demo/seg/iter_600.pth; paths are relative to the repository root) and
# frozen whole (stem and all 4 stages: no gradients, BatchNorm statistics fixed), with a
# 1x1-convolution head on its last stage (128 channels, stride 32). No neck, no auxiliary
# head; the demo schedule (AdamW, 600 iterations) trains the head only.
_base_ = ['./upernet_r18-tiny_1xb4-600i_demo-potsdam-128x128.py']
encoder_checkpoint = 'work_dirs/demo/seg/iter_600.pth'
model = dict(
    backbone=dict(
        frozen_stages=4,
        out_indices=(3, ),
        init_cfg=dict(type='Pretrained', checkpoint=encoder_checkpoint, prefix='backbone.')),
    decode_head=dict(
        _delete_=True,
        type='FCNHead',
        in_channels=128,
        channels=128,
        in_index=0,
        num_convs=0,
        concat_input=False,
        dropout_ratio=0.0,
        num_classes=6,
        align_corners=False,
        loss_decode=dict(type='CrossEntropyLoss', use_sigmoid=False, loss_weight=1.0)),
    auxiliary_head=None)
