# Sen1Floods11, hand-labelled chips seen by Sentinel-2, in the official layout (the
# release's v1.1 folder copied into data/sen1floods11: data/flood_events/HandLabeled/
# {S2Hand,S1Hand,LabelHand}/ and splits/flood_handlabeled/flood_{train,valid,test,
# bolivia}_data.csv): 512x512 chips of the 13 Sentinel-2 L1C bands (B1..B12 with B8A,
# int16 reflectance x 10000, nodata 0), labels -1 no data (loaded as 255), 0 not water,
# 1 water. Trained on train, validated on valid, tested on test (EarthShift's splits).
# The images are read with rasterio (LoadMultiBandImageFromFile); the file's nodata value
# marks the pixels whose labels are ignored. Its sensor-shift partner is the same test
# chips seen by Sentinel-1 (../shifts/sen1floods11.py).
dataset_type = 'Sen1Floods11Dataset'
data_root = 'data/sen1floods11'
s2_bands = ('B01', 'B02', 'B03', 'B04', 'B05', 'B06', 'B07', 'B08', 'B8A', 'B09', 'B10',
            'B11', 'B12')  # SENTINEL2_BANDS in reobench_mm.transforms.raster_loading
load_s2 = dict(type='LoadMultiBandImageFromFile', band_names=s2_bands)
meta_keys = ('img_path', 'seg_map_path', 'ori_shape', 'img_shape', 'pad_shape',
             'scale_factor', 'flip', 'flip_direction', 'reduce_zero_label', 'corruption',
             'severity', 'band_names', 'band_indices', 'window')
train_pipeline = [
    load_s2,
    dict(type='LoadAnnotations'),
    dict(type='IgnoreNodataLabels', ignore_index=255),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    load_s2,
    dict(type='LoadAnnotations'),
    dict(type='IgnoreNodataLabels', ignore_index=255),
    dict(type='PackSegInputs', meta_keys=meta_keys),
]
# the labels' rules (docs/distribution_shifts.md, label rules): full boundaries; the stored
# -1 is loaded as 255 (LoadAnnotations casts labels to uint8), the ignored label
label_rules = dict(boundaries='full', ignore_index=255, reduce_zero_label=False, nodata=255)
train_dataloader = dict(
    batch_size=8,
    num_workers=2,
    persistent_workers=True,
    sampler=dict(type='InfiniteSampler', shuffle=True),
    dataset=dict(type=dataset_type, data_root=data_root, split='train', sensor='s2',
                 pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=1,
    num_workers=2,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type=dataset_type, data_root=data_root, split='valid', sensor='s2',
                 metainfo=dict(label_rules=label_rules), pipeline=test_pipeline))
test_dataloader = dict(
    batch_size=1,
    num_workers=2,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type=dataset_type, data_root=data_root, split='test', sensor='s2',
                 metainfo=dict(label_rules=label_rules), pipeline=test_pipeline))
val_evaluator = dict(type='IoUMetric', iou_metrics=['mIoU'])
test_evaluator = val_evaluator
