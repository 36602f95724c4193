# UperNet + FCN on ISPRS Potsdam 512x512 with Scale-MAE ViT-L/16 (GSD ratio 1.0, as in
# its evaluation; ImageNet normalisation). Pretrained weights: the official file
# checkpoints/scalemae-vitlarge-800.pth.
_base_ = ['./upernet_satmae-l_sfp_1xb8-12e_potsdam-512x512.py']
checkpoint = 'checkpoints/scalemae-vitlarge-800.pth'
model = dict(
    data_preprocessor=dict(mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375]),
    backbone=dict(type='ScaleMAE', init_cfg=dict(type='Pretrained', checkpoint=checkpoint)))
