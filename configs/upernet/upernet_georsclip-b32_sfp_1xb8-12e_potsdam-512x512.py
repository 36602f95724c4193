# UperNet + FCN on ISPRS Potsdam 512x512 with the GeoRSCLIP ViT-B/32 visual tower (same
# architecture as RemoteCLIP B/32). Pretrained weights: the official file
# checkpoints/RS5M_ViT-B-32.pt.
_base_ = ['./upernet_remoteclip-b32_sfp_1xb8-12e_potsdam-512x512.py']
checkpoint = 'checkpoints/RS5M_ViT-B-32.pt'
model = dict(
    backbone=dict(init_cfg=dict(type='Pretrained', checkpoint=checkpoint)))
