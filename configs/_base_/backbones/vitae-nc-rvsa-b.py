# ViTAE-NC RVSA: RVSA built from ViTAE-B normal cells (a grouped-convolution branch beside
# each attention, q/v biases), the variant the REOBench authors ran for their RVSA rows;
# initialised from the MillionAID MAE pretraining file
# checkpoints/vitae-b-checkpoint-1599-transform-no-average.pth (converted on load, or once
# with tools/model_converters/convert_checkpoint.py); ImageNet normalisation.
checkpoint = 'checkpoints/vitae-b-checkpoint-1599-transform-no-average.pth'
vit_channels, patch_size = 768, 16  # trunk width, patch size
sfp_neck = dict(in_channels=vit_channels, patch_size=patch_size)
img_norm_cfg = dict(mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375])
# window blocks with separate q/v biases: the layout of the MAE file and of the published
# RVSA checkpoints ('fused' is REOBench's detection backbone, see configs/reproduction/)
backbone = dict(type='ViTAENCRVSA', arch='b', window_bias_layout='qv',
                init_cfg=dict(type='Pretrained', checkpoint=checkpoint))
