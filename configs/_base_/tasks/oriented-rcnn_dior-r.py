# The rotated-detection task of REOBench without its backbone: Oriented R-CNN (le90) over
# a SimpleFeaturePyramid + FPN, DIOR-R 800x800, MMRotate's runtime and the paper's AdamW
# schedule. A task config adds a backbone base (../backbones/) and links the two.
_base_ = [
    '../models/oriented-rcnn-le90_vit-b16_sfp-fpn.py', '../datasets/dior_r_800x800.py',
    'mmrotate::_base_/default_runtime.py', '../schedules/schedule_dior_adamw_12e.py'
]
