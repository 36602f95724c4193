# A frozen-encoder FPN probe on ISPRS Potsdam 512x512: the linear probe's task
# (linear-probe_potsdam.py: dataset, runtime, evaluation, CorruptionTestLoop, optimiser,
# schedule, frozen encoder) with the calibration study's decoder on four hooked blocks
# instead of the 1x1 convolution on the last one. A probe config adds a backbone base
# (../backbones/), freezes all its blocks (frozen_stages = depth), reads the last block of
# each quarter (out_indices, e.g. (2, 5, 8, 11) for 12 blocks) and sets the neck's
# in_channels to the trunk width.
# - neck: MMSegmentation's FPN: a 1x1 lateral convolution per level (trunk width -> 256),
#   the top-down path (nearest upsampling of the coarser level to the finer one's size,
#   added; a ViT's blocks all have stride = patch size, so here it adds same-size maps),
#   a 3x3 convolution per level; no norm, no activation (mmseg's defaults);
# - head: FCNHead without convolutions (num_convs=0) on all four levels with
#   input_transform='resize_concat': every level resized bilinearly to the first
#   (finest) level's size, concatenated (4 x 256 channels), one 1x1 convolution to the
#   class logits, no dropout; MMSegmentation upsamples those bilinearly to the labels;
# - only the neck and the head train, with the linear probe's plain AdamW and schedule.
_base_ = ['./linear-probe_potsdam.py']
fpn_channels = 256  # width of every FPN level
model = dict(
    neck=dict(
        _delete_=True,  # the linear probe has neck=None
        type='FPN',
        in_channels=[768] * 4,
        out_channels=fpn_channels,
        num_outs=4,
        norm_cfg=None,
        act_cfg=None,
        upsample_cfg=dict(mode='nearest')),
    decode_head=dict(
        in_channels=[fpn_channels] * 4,
        in_index=[0, 1, 2, 3],
        input_transform='resize_concat',
        channels=4 * fpn_channels))
