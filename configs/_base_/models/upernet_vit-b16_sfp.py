# UperNet + auxiliary FCN head on a plain ViT through SimpleFeaturePyramid (REOBench / RVSA
# segmentation protocol): UPerHead pool scales 1/2/3/6 with 512 channels on the 4 levels,
# FCN auxiliary head on level 2 with loss weight 0.4. As written: RVSA ViT-B/16 (768
# channels); task configs set the backbone, its channels, patch size and normalisation
# from a backbone base (configs/_base_/backbones/).
custom_imports = dict(imports=['reobench_mm'], allow_failed_imports=False)
norm_cfg = dict(type='SyncBN', requires_grad=True)
num_classes = 6
data_preprocessor = dict(
    type='SegDataPreProcessor',
    mean=[123.675, 116.28, 103.53],  # ImageNet statistics
    std=[58.395, 57.12, 57.375],
    bgr_to_rgb=True,
    pad_val=0,
    seg_pad_val=255,
    size=(512, 512))
model = dict(
    type='EncoderDecoder',
    data_preprocessor=data_preprocessor,
    backbone=dict(type='RVSA', arch='b', img_size=512, drop_path_rate=0.1),
    neck=dict(type='SimpleFeaturePyramid', in_channels=768, patch_size=16),
    decode_head=dict(
        type='UPerHead',
        in_channels=[768] * 4,
        in_index=[0, 1, 2, 3],
        pool_scales=(1, 2, 3, 6),
        channels=512,
        dropout_ratio=0.1,
        num_classes=num_classes,
        norm_cfg=norm_cfg,
        align_corners=False,
        loss_decode=dict(type='CrossEntropyLoss', use_sigmoid=False, loss_weight=1.0)),
    auxiliary_head=dict(
        type='FCNHead',
        in_channels=768,
        in_index=2,
        channels=256,
        num_convs=1,
        concat_input=False,
        dropout_ratio=0.1,
        num_classes=num_classes,
        norm_cfg=norm_cfg,
        align_corners=False,
        loss_decode=dict(type='CrossEntropyLoss', use_sigmoid=False, loss_weight=0.4)),
    train_cfg=dict(),
    test_cfg=dict(mode='whole'))
