# The frozen-encoder FPN probe of fpn-probe_potsdam-224.py on CloudSEN12 (the 13 bands of
# Sentinel-2 L1C, 4 classes: clear, thick cloud, thin cloud, cloud shadow), for encoders
# that read multispectral bands: the dataset, its 224x224 bilinear resize, nodata handling
# and evaluation are ../datasets/cloudsen12_224x224.py; the decoder, optimiser, schedule,
# runtime and CorruptionTestLoop are those of fpn-probe_potsdam-224.py, written out here
# (MMEngine does not merge two bases that both define the data keys):
# - neck: MMSegmentation's FPN, a 1x1 lateral convolution per hooked layer (trunk width ->
#   256), the bilinear top-down path, a 3x3 convolution per level, no norm, no activation;
# - head: FCNHead without convolutions on all four levels, 'resize_concat' (every level
#   resized bilinearly to the finest, concatenated, one 1x1 convolution to the logits);
# - only the neck and the head train: plain AdamW lr 1e-3, weight decay 0.01, 12 epochs,
#   one epoch of linear warm-up then linear decay, per iteration.
# A probe config adds the backbone (frozen_stages = depth, four hooked blocks, the last of
# each quarter), the neck's in_channels and the normalisation of its bands.
_base_ = [
    '../models/upernet_vit-b16_sfp.py', '../datasets/cloudsen12_224x224.py',
    'mmseg::_base_/default_runtime.py', '../schedules/schedule_potsdam_adamw_12e.py'
]
num_classes = 4
fpn_channels = 256  # width of every FPN level
model = dict(
    data_preprocessor=dict(size={{_base_.input_size}}, bgr_to_rgb=False),
    neck=dict(
        _delete_=True,  # the UperNet model's SimpleFeaturePyramid
        type='FPN',
        in_channels=[768] * 4,
        out_channels=fpn_channels,
        num_outs=4,
        norm_cfg=None,
        act_cfg=None,
        upsample_cfg=dict(mode='bilinear', align_corners=False)),
    decode_head=dict(
        _delete_=True,
        type='FCNHead',
        in_channels=[fpn_channels] * 4,
        in_index=[0, 1, 2, 3],
        input_transform='resize_concat',
        channels=4 * fpn_channels,
        num_convs=0,
        concat_input=False,
        dropout_ratio=0.0,
        num_classes=num_classes,
        align_corners=False,
        loss_decode=dict(type='CrossEntropyLoss', use_sigmoid=False, loss_weight=1.0)),
    auxiliary_head=None)
optim_wrapper = dict(
    _delete_=True,
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=1e-3, betas=(0.9, 0.999), weight_decay=0.01))
param_scheduler = [
    dict(type='LinearLR', start_factor=0.01, by_epoch=True, begin=0, end=1,
         convert_to_iter_based=True),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=True, begin=1, end=12,
         convert_to_iter_based=True),
]
# the trunk's final norm may stay out of the forward and then receives no gradient
model_wrapper_cfg = dict(type='MMDistributedDataParallel', find_unused_parameters=True)
