# Fields of The World (FTW), Germany, in the official layout (`ftw data download
# --countries=germany` into data/, which unpacks data/ftw/germany/): 256x256 chips of 4
# Sentinel-2 L2A bands (B04, B03, B02, B08; uint16), 3-class masks (background, field,
# field boundary; 3 = unlabelled, loaded as 255). The splits are the chip index's
# (chips_germany.parquet, read with pyarrow). Both windows: every chip's window A, then its
# window B (EarthShift's samples for the geographic pairs, ../shifts/ftw.py).
# The images are read with rasterio (LoadMultiBandImageFromFile); a pixel whose four bands
# are all 0 has no data and its label is ignored (the chips carry no nodata value, so it
# is given: nodata=0).
dataset_type = 'FTWDataset'
data_root = 'data/ftw'
ftw_bands = ('B04', 'B03', 'B02', 'B08')  # FTW_BANDS in reobench_mm.datasets.ftw
load_ftw = dict(type='LoadMultiBandImageFromFile', band_names=ftw_bands, nodata=0)
meta_keys = ('img_path', 'seg_map_path', 'ori_shape', 'img_shape', 'pad_shape',
             'scale_factor', 'flip', 'flip_direction', 'reduce_zero_label', 'corruption',
             'severity', 'band_names', 'band_indices', 'window')
train_pipeline = [
    load_ftw,
    dict(type='LoadAnnotations'),
    dict(type='IgnoreNodataLabels', ignore_index=255),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    load_ftw,
    dict(type='LoadAnnotations'),
    dict(type='IgnoreNodataLabels', ignore_index=255),
    dict(type='PackSegInputs', meta_keys=meta_keys),
]
# the labels' rules (docs/distribution_shifts.md, label rules): full boundaries, nothing
# stored as no data (the unlabelled 3 is mapped to 255 by the dataset)
label_rules = dict(boundaries='full', ignore_index=255, reduce_zero_label=False, nodata=None)
train_dataloader = dict(
    batch_size=8,
    num_workers=2,
    persistent_workers=True,
    sampler=dict(type='InfiniteSampler', shuffle=True),
    dataset=dict(type=dataset_type, data_root=data_root, country='germany', split='train',
                 window='both', pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=1,
    num_workers=2,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type=dataset_type, data_root=data_root, country='germany', split='test',
                 window='both', metainfo=dict(label_rules=label_rules),
                 pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='IoUMetric', iou_metrics=['mIoU'])
test_evaluator = val_evaluator
