# GeoRSCLIP ViT-L/14 visual tower: RemoteCLIP L/14's architecture (OpenAI-initialised,
# QuickGELU) and normalisation, the official file checkpoints/RS5M_ViT-L-14.pt (RS5M
# release, ckpt/RS5M_ViT-L-14.pt).
_base_ = ['./remoteclip-l14.py']
checkpoint = 'checkpoints/RS5M_ViT-L-14.pt'
backbone = dict(init_cfg=dict(checkpoint=checkpoint))
