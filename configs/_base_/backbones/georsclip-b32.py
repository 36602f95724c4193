# GeoRSCLIP ViT-B/32 visual tower: RemoteCLIP B/32's architecture and normalisation, the
# official file checkpoints/RS5M_ViT-B-32.pt.
_base_ = ['./remoteclip-b32.py']
checkpoint = 'checkpoints/RS5M_ViT-B-32.pt'
backbone = dict(init_cfg=dict(checkpoint=checkpoint))
