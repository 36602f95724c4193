# DynamicEarthNet in the release layout (data/dynamicearthnet/planet/<zone>/<lonlat>/
# <cube_id>/PF-SR/<YYYY-MM-DD>.tif, labels/<cube_id>_<zone>/Labels/Raster/..., and the
# authors' split files dynnet_training_splits/{train,val,test}.txt): one sample per cube
# and month, the month's first daily Planet Fusion image (1024x1024, 4 bands blue, green,
# red, NIR), read as red, green, blue, NIR (the authors' order). Labels: one-hot rasters
# of 7 bands (255 = the class), decoded by LoadOneHotAnnotations; snow & ice (band 7) is
# ignored and a pixel in no band is class 0, as in the authors' loader: 6 classes.
# The calibration study's input: every image resized to 224x224 bilinearly (Resize with
# interpolation='bilinear'; label maps are resized by nearest neighbour). Training
# resizes image and labels; testing loads the labels after the resize, at 1024x1024.
# Images and labels are read with rasterio (LoadMultiBandImageFromFile,
# LoadOneHotAnnotations); the Planet Fusion images are gap-filled (no nodata), so no
# pixel is ignored for want of data.
dataset_type = 'DynamicEarthNetDataset'
data_root = 'data/dynamicearthnet'
input_size = (224, 224)
planet_bands = ('BLUE', 'GREEN', 'RED', 'NIR')  # DYNAMICEARTHNET_BANDS, file order
load_image = dict(type='LoadMultiBandImageFromFile', bands=['RED', 'GREEN', 'BLUE', 'NIR'],
                  band_names=planet_bands)
load_labels = dict(type='LoadOneHotAnnotations', on_value=255, ignore_bands=[7],
                   unlabelled=0, ignore_index=255)
resize = dict(type='Resize', scale=input_size, keep_ratio=False, interpolation='bilinear')
meta_keys = ('img_path', 'seg_map_path', 'ori_shape', 'img_shape', 'pad_shape',
             'scale_factor', 'flip', 'flip_direction', 'reduce_zero_label', 'corruption',
             'severity', 'band_names', 'band_indices', 'window')
train_pipeline = [
    load_image,
    load_labels,
    resize,
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    load_image,
    resize,
    load_labels,
    dict(type='PackSegInputs', meta_keys=meta_keys),
]
# the labels' rules (docs/distribution_shifts.md, label rules): full boundaries; snow &
# ice is decoded as 255, no stored value marks missing data
label_rules = dict(boundaries='full', ignore_index=255, reduce_zero_label=False, nodata=None)
train_dataloader = dict(
    batch_size=8,
    num_workers=2,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=True),
    dataset=dict(type=dataset_type, data_root=data_root,
                 ann_file='dynnet_training_splits/train.txt', pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=1,
    num_workers=2,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type=dataset_type, data_root=data_root,
                 ann_file='dynnet_training_splits/val.txt',
                 metainfo=dict(label_rules=label_rules), pipeline=test_pipeline))
test_dataloader = dict(
    batch_size=1,
    num_workers=2,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type=dataset_type, data_root=data_root,
                 ann_file='dynnet_training_splits/test.txt',
                 metainfo=dict(label_rules=label_rules), pipeline=test_pipeline))
val_evaluator = dict(type='IoUMetric', iou_metrics=['mIoU'])
test_evaluator = val_evaluator
