# The frozen-encoder FPN probe of fpn-probe_potsdam.py at the calibration study's input
# size: every input image (the 512x512 Potsdam patches) resized bilinearly to 224x224
# before the encoder, in training and in testing; everything else (frozen encoder, FPN
# decoder with bilinear top-down upsampling, optimiser, schedule, CorruptionTestLoop) is
# the 512 probe's. A probe config adds a backbone base and the hooked blocks as there.
# - Resize: MMSegmentation's Resize with interpolation='bilinear' for the image (cv2's
#   INTER_LINEAR); it always resizes label maps by nearest neighbour, so class ids stay
#   class ids. keep_ratio=False: 224x224 whatever the input's aspect.
# - training: loading, the resize, then the 512 probe's random flip and photometric
#   distortion; its random rescale and crop are left out (every input is the whole
#   patch at 224 px).
# - testing: the image is resized, the labels are loaded after the resize (the toolboxes'
#   order), so they keep their original 512x512 resolution and the logits are upsampled
#   bilinearly to it; CorruptionTestLoop corrupts the image at its original size, before
#   the resize (a geometric corruption moves the labels in a step after their loading).
# - backbone img_size=224: the position embeddings are laid out for the 224 grid (14x14
#   at patch 16, 16x16 at 14, 7x7 at 32), so checkpoints made at 224 px (MAE, SatMAE,
#   CLIP) load without resampling theirs.
_base_ = ['./fpn-probe_potsdam.py']
input_size = 224
crop_size = (input_size, input_size)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='Resize', scale=crop_size, keep_ratio=False, interpolation='bilinear'),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=crop_size, keep_ratio=False, interpolation='bilinear'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='PackSegInputs',
         meta_keys=('img_path', 'seg_map_path', 'ori_shape', 'img_shape', 'pad_shape',
                    'scale_factor', 'flip', 'flip_direction', 'reduce_zero_label',
                    'corruption', 'severity')),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
model = dict(data_preprocessor=dict(size=crop_size), backbone=dict(img_size=input_size))
