# Fields of The World (FTW) in the official layout (`ftw data download` into data/, which
# unpacks data/ftw/<country>/: s2_images/window_{a,b}/<aoi_id>.tif, label_masks/
# semantic_3class/<aoi_id>.tif, chips_<country>.parquet with the splits): 256x256 chips
# of 4 Sentinel-2 L2A bands (B04, B03, B02, B08; uint16), 3-class masks (background,
# field, field boundary; 3 = unlabelled, loaded as 255 by FTWDataset). One image per
# chip, window A (the planting season; window='b' or 'both' for the other or both), one
# country per dataset (country=; a ConcatDataset of several for more).
# The calibration study's input: every image resized to 224x224 bilinearly (Resize with
# interpolation='bilinear'; label maps are resized by nearest neighbour). Training
# resizes image and labels; testing loads the labels after the resize, at 256x256.
# The images are read with rasterio (LoadMultiBandImageFromFile); a pixel whose four
# bands are all 0 has no data and its label is ignored (the chips carry no nodata value,
# so it is given: nodata=0). The masks are single-band uint8 GeoTIFFs (LoadAnnotations).
dataset_type = 'FTWDataset'
data_root = 'data/ftw'
country = 'germany'
window = 'a'
input_size = (224, 224)
ftw_bands = ('B04', 'B03', 'B02', 'B08')  # FTW_BANDS in reobench_mm.datasets.ftw
load_image = dict(type='LoadMultiBandImageFromFile', band_names=ftw_bands, nodata=0)
resize = dict(type='Resize', scale=input_size, keep_ratio=False, interpolation='bilinear')
meta_keys = ('img_path', 'seg_map_path', 'ori_shape', 'img_shape', 'pad_shape',
             'scale_factor', 'flip', 'flip_direction', 'reduce_zero_label', 'corruption',
             'severity', 'band_names', 'band_indices', 'window')
train_pipeline = [
    load_image,
    dict(type='LoadAnnotations'),
    dict(type='IgnoreNodataLabels', ignore_index=255),
    resize,
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    load_image,
    resize,
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
    sampler=dict(type='DefaultSampler', shuffle=True),
    dataset=dict(type=dataset_type, data_root=data_root, country=country, split='train',
                 window=window, pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=1,
    num_workers=2,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type=dataset_type, data_root=data_root, country=country, split='val',
                 window=window, metainfo=dict(label_rules=label_rules),
                 pipeline=test_pipeline))
test_dataloader = dict(
    batch_size=1,
    num_workers=2,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type=dataset_type, data_root=data_root, country=country, split='test',
                 window=window, metainfo=dict(label_rules=label_rules),
                 pipeline=test_pipeline))
val_evaluator = dict(type='IoUMetric', iou_metrics=['mIoU'])
test_evaluator = val_evaluator
