# Baseline: the same UperNet ResNet-50, randomly initialised (no pretraining file).
_base_ = ['./upernet_r50-in1k_1xb8-12e_potsdam-512x512.py']
model = dict(backbone=dict(init_cfg=None))
