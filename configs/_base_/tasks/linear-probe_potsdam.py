# A frozen-encoder linear probe on ISPRS Potsdam 512x512: the segmentation task of
# upernet_potsdam.py (dataset, runtime, evaluation, CorruptionTestLoop) with the whole
# encoder frozen and a light head. A probe config adds a backbone base (../backbones/) and
# freezes all its blocks (frozen_stages = depth) and reads the last one (out_indices).
# - no neck, no auxiliary head;
# - head: dropout-free 1x1 convolution from the last block's token map (stride = patch
#   size) to the class logits, which MMSegmentation upsamples bilinearly to the labels
#   (FCNHead with num_convs=0: in_channels == channels, no conv, no norm);
# - only the head trains: plain AdamW lr 1e-3, weight decay 0.01, 12 epochs, one epoch of
#   linear warm-up then linear decay, both per iteration over however many iterations an
#   epoch has (a data-budget fraction changes that).
_base_ = ['./upernet_potsdam.py']
model = dict(
    neck=None,
    decode_head=dict(
        _delete_=True,
        type='FCNHead',
        in_channels=768,
        channels=768,
        in_index=0,
        num_convs=0,
        concat_input=False,
        dropout_ratio=0.0,
        num_classes={{_base_.num_classes}},
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
# the trunk's final norm is not in the forward (final_norm=False) and receives no gradient
model_wrapper_cfg = dict(type='MMDistributedDataParallel', find_unused_parameters=True)
