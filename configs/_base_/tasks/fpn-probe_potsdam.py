# A frozen-encoder FPN probe on ISPRS Potsdam 512x512: the linear probe's task
# (linear-probe_potsdam.py: dataset, runtime, evaluation, CorruptionTestLoop, optimiser,
# schedule, frozen encoder) with the calibration study's decoder (its Sec. III-D) on four
# hooked layers instead of the 1x1 convolution on the last one. A probe config adds a
# backbone base (../backbones/), freezes all its blocks (frozen_stages = depth), hooks four
# evenly spaced blocks, the last of each quarter (out_indices, e.g. (2, 5, 8, 11) for 12
# blocks; a CNN: its four stages), and sets the neck's in_channels to the trunk width.
# The hooked layers are listed shallow to deep; the FPN treats the last as the coarsest.
# - neck: MMSegmentation's FPN: a 1x1 lateral convolution per level (trunk width -> 256),
#   the top-down path from the deepest level down (bilinear upsampling of each level to
#   the next finer one's size, added; align_corners=False, the head's setting; a ViT's
#   blocks all have stride = patch size, so there it adds same-size maps), a 3x3
#   convolution per level; no norm, no activation (mmseg's defaults);
# - head: FCNHead without convolutions (num_convs=0) on all four levels with
#   input_transform='resize_concat': every level resized bilinearly to the first
#   (finest) level's size, concatenated (4 x 256 channels), one 1x1 convolution to the
#   class logits, no dropout; MMSegmentation upsamples those bilinearly to the labels;
# - only the neck and the head train, with the linear probe's plain AdamW and schedule.
# The 224x224 variant (the study's input size) is fpn-probe_potsdam-224.py.
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
        upsample_cfg=dict(mode='bilinear', align_corners=False)),
    decode_head=dict(
        in_channels=[fpn_channels] * 4,
        in_index=[0, 1, 2, 3],
        input_transform='resize_concat',
        channels=4 * fpn_channels))
