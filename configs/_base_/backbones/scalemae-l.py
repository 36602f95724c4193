# Scale-MAE ViT-L/16 (GSD ratio 1.0, as in its evaluation): SatMAE's trunk layout with
# ImageNet normalisation, the official file checkpoints/scalemae-vitlarge-800.pth.
_base_ = ['./satmae-l.py']
checkpoint = 'checkpoints/scalemae-vitlarge-800.pth'
img_norm_cfg = dict(mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375])
backbone = dict(type='ScaleMAE', init_cfg=dict(checkpoint=checkpoint))
