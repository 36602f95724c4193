# Oriented R-CNN (le90) on DIOR-R 800x800 with Scale-MAE ViT-L/16 (GSD ratio 1.0, as in
# its evaluation; ImageNet normalisation). Pretrained weights: the official file
# checkpoints/scalemae-vitlarge-800.pth.
_base_ = ['./oriented-rcnn-le90_satmae-l_sfp-fpn_1xb1-12e_dior-r-800x800.py']
checkpoint = 'checkpoints/scalemae-vitlarge-800.pth'
model = dict(
    data_preprocessor=dict(mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375]),
    backbone=dict(type='ScaleMAE', init_cfg=dict(type='Pretrained', checkpoint=checkpoint)))
