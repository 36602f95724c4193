# DIOR-R as tools/dataset_converters/dior_r.py writes it (DOTA-style annfiles, 20
# classes, 800x800 images): official trainval for training, test for evaluation.
dataset_type = 'DIORRDataset'
data_root = 'data/dior_r/'
backend_args = None
image_size = (800, 800)
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
    # DIOR-R images are 800x800 already: Resize keeps them and scales nothing
    dict(type='mmdet.Resize', scale=image_size, keep_ratio=True),
    dict(type='mmdet.PackDetInputs',
         meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor',
                    'corruption', 'severity')),
]
train_dataloader = dict(
    batch_size=1,
    num_workers=2,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=True),
    batch_sampler=None,
    dataset=dict(type=dataset_type, data_root=data_root, ann_file='trainval/annfiles/',
                 data_prefix=dict(img_path='trainval/images/'),
                 filter_cfg=dict(filter_empty_gt=True), pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=1,
    num_workers=2,
    persistent_workers=True,
    drop_last=False,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type=dataset_type, data_root=data_root, ann_file='test/annfiles/',
                 data_prefix=dict(img_path='test/images/'), test_mode=True,
                 pipeline=test_pipeline))
test_dataloader = val_dataloader
# mAP at IoU 0.5; REOBench's code uses VOC07 11-point ('11points'), 'area' is VOC12 style
# (MMRotate's DOTAMetric numbers, computed in process: no spawned pool per evaluation)
val_evaluator = dict(type='InProcessDOTAMetric', metric='mAP', iou_thrs=[0.5],
                     eval_mode='11points')
test_evaluator = val_evaluator
