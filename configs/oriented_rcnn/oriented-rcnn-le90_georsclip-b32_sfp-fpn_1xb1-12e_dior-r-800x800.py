# Oriented R-CNN (le90) on DIOR-R 800x800 with the GeoRSCLIP ViT-B/32 visual tower (same
# architecture as RemoteCLIP B/32). Pretrained weights: the official file
# checkpoints/RS5M_ViT-B-32.pt.
_base_ = ['./oriented-rcnn-le90_remoteclip-b32_sfp-fpn_1xb1-12e_dior-r-800x800.py']
checkpoint = 'checkpoints/RS5M_ViT-B-32.pt'
model = dict(
    backbone=dict(init_cfg=dict(type='Pretrained', checkpoint=checkpoint)))
