# The segmentation task of REOBench without its backbone: UperNet + FCN over a
# SimpleFeaturePyramid, ISPRS Potsdam 512x512, MMSegmentation's runtime and the paper's
# AdamW schedule. A task config adds a backbone base (../backbones/) and links the two.
_base_ = [
    '../models/upernet_vit-b16_sfp.py', '../datasets/potsdam_512x512.py',
    'mmseg::_base_/default_runtime.py', '../schedules/schedule_potsdam_adamw_12e.py'
]
