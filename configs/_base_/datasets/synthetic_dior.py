# Synthetic DIOR-R-format demo data (tools/make_demo_data.py), read by MMRotate's own
# DIORDataset: 256x256 JPEG scenes, robndbox XML annotations, 4 of DIOR's classes.
dataset_type = 'DIORDataset'
data_root = 'data/demo/dior/'
metainfo = dict(classes=('airplane', 'ship', 'storagetank', 'vehicle'))
backend_args = None
image_size = (256, 256)
train_pipeline = [
    dict(type='mmdet.LoadImageFromFile', backend_args=backend_args),
    dict(type='mmdet.LoadAnnotations', with_bbox=True, box_type='qbox'),
    dict(type='ConvertBoxType', box_type_mapping=dict(gt_bboxes='rbox')),
    dict(type='mmdet.Resize', scale=image_size, keep_ratio=True),
    dict(type='mmdet.RandomFlip', prob=0.75, direction=['horizontal', 'vertical', 'diagonal']),
    dict(type='mmdet.PackDetInputs'),
]
test_pipeline = [
    dict(type='mmdet.LoadImageFromFile', backend_args=backend_args),
    dict(type='mmdet.LoadAnnotations', with_bbox=True, box_type='qbox'),
    dict(type='ConvertBoxType', box_type_mapping=dict(gt_bboxes='rbox')),
    # the scenes are 256x256 already: Resize keeps them, so boxes stay as loaded
    dict(type='mmdet.Resize', scale=image_size, keep_ratio=True),
    dict(
        type='mmdet.PackDetInputs',
        meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor',
                   'corruption', 'severity')),
]
train_dataloader = dict(
    batch_size=2,
    num_workers=2,
    persistent_workers=True,
    sampler=dict(type='InfiniteSampler', shuffle=True),
    batch_sampler=None,
    dataset=dict(
        type=dataset_type,
        metainfo=metainfo,
        data_root=data_root,
        ann_file='ImageSets/Main/trainval.txt',
        data_prefix=dict(img_path='JPEGImages-trainval'),
        filter_cfg=dict(filter_empty_gt=True),
        pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=1,
    num_workers=2,
    persistent_workers=True,
    drop_last=False,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(
        type=dataset_type,
        metainfo=metainfo,
        data_root=data_root,
        ann_file='ImageSets/Main/test.txt',
        data_prefix=dict(img_path='JPEGImages-test'),
        test_mode=True,
        pipeline=test_pipeline))
test_dataloader = val_dataloader
# MMRotate's DOTAMetric numbers, computed in process (no spawned pool per evaluation)
val_evaluator = dict(type='InProcessDOTAMetric', metric='mAP', iou_thrs=[0.5])
test_evaluator = val_evaluator
