# Baseline: UperNet + FCN on ISPRS Potsdam 512x512 with MMSegmentation's ImageNet ResNet-50
# (ResNetV1c, open-mmlab://resnet50_v1c), the task's data, heads and AdamW schedule; the
# layer-wise lr decay of the ViT encoders does not apply to a ResNet (one lr for all).
_base_ = ['../_base_/tasks/upernet_potsdam.py']
norm_cfg = dict(type='SyncBN', requires_grad=True)
model = dict(
    backbone=dict(_delete_=True, type='ResNetV1c', depth=50, num_stages=4,
                  out_indices=(0, 1, 2, 3), dilations=(1, 1, 1, 1), strides=(1, 2, 2, 2),
                  norm_cfg=norm_cfg, norm_eval=False, style='pytorch', contract_dilation=True,
                  init_cfg=dict(type='Pretrained', checkpoint='open-mmlab://resnet50_v1c')),
    neck=None,
    decode_head=dict(in_channels=[256, 512, 1024, 2048]),
    auxiliary_head=dict(in_channels=1024))
optim_wrapper = dict(_delete_=True, type='OptimWrapper',
                     optimizer=dict(type='AdamW', lr=6e-5, betas=(0.9, 0.999), weight_decay=0.05))
