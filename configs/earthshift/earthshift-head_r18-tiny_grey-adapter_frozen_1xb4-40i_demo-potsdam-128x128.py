# EarthShift's frozen-encoder ('head') setting on the synthetic Potsdam-format demo data,
# at a size that trains in CPU seconds: the demo images read as one grey band (OpenCV's
# grayscale decoding, 0.299 R + 0.587 G + 0.114 B), a ChannelAdapter from that band to the
# 3 input channels of the narrow ResNet-18 of the demo UperNet (loaded from that model's
# checkpoint: `make demo` writes work_dirs/demo/seg/iter_600.pth; paths are relative to
# the repository root), adapter and encoder frozen (the adapter at its random
# initialisation, as in the official code's head mode), EarthShift's simple convolutional
# head (3x3 convolution to 256 channels, ReLU, 1x1 classifier) on the last stage (128
# channels, stride 32), and the iteration-based EarthShift schedule: 40 iterations of
# batch 4, 20 of warm-up, 20 of cosine decay.
_base_ = [
    'mmseg::_base_/default_runtime.py',
    '../_base_/models/upernet_r18-tiny.py',
    '../_base_/models/earthshift-head.py',
    '../_base_/datasets/synthetic_potsdam.py',
    '../_base_/schedules/schedule_earthshift_demo_iters.py',
]
custom_imports = dict(imports=['reobench_mm'], allow_failed_imports=False)
randomness = dict(seed=0, deterministic=False)
encoder_checkpoint = 'work_dirs/demo/seg/iter_600.pth'
load_grey = dict(type='LoadImageFromFile', color_type='grayscale')
train_pipeline = [
    load_grey,
    dict(type='LoadAnnotations'),
    dict(type='RandomCrop', crop_size=(128, 128), cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    load_grey,
    dict(type='LoadAnnotations'),
    dict(type='PackSegInputs',
         meta_keys=('img_path', 'seg_map_path', 'ori_shape', 'img_shape', 'pad_shape',
                    'scale_factor', 'flip', 'flip_direction', 'reduce_zero_label',
                    'corruption', 'severity')),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
model = dict(
    # ImageNet's channel statistics through the same weights
    data_preprocessor=dict(mean=[117.04], std=[57.53], bgr_to_rgb=False),
    backbone=dict(
        _delete_=True,
        type='ChannelAdapter',
        in_channels=1,
        out_channels=3,
        frozen=True,
        backbone=dict(
            _base_.model.backbone,
            frozen_stages=4,
            norm_eval=True,
            out_indices=(3, ),
            init_cfg=dict(type='Pretrained', checkpoint=encoder_checkpoint,
                          prefix='backbone.'))),
    decode_head=dict(_base_.earthshift_head, _delete_=True, in_channels=128, num_classes=6),
    auxiliary_head=None)
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=10, log_metric_by_epoch=False),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval={{_base_.max_iters}},
                    max_keep_ckpts=1))
log_processor = dict(by_epoch=False)
custom_hooks = [dict(type='ProgressBarHook')]
