# CloudSEN12, the high-quality labelled patches, in the per-patch GeoTIFF layout
# (data/cloudsen12/high/<roi_id>/<s2_id>/S2L1C.tif and labels/manual_hq.tif): 509x509
# patches of the 13 Sentinel-2 L1C bands (B1..B12 with B8A, int16 reflectance x 10000),
# labels 0 clear, 1 thick cloud, 2 thin cloud, 3 cloud shadow. The splits are lists of
# <roi_id>/<s2_id> lines (data/cloudsen12/splits/{train,val,test}.txt).
# The calibration study's input: every image resized to 224x224 bilinearly (Resize with
# interpolation='bilinear'; MMSegmentation resizes label maps by nearest neighbour, so
# class ids stay class ids). Training resizes image and labels; testing resizes the image
# and loads the labels after it, at their original size (the toolboxes' order: the
# logits are upsampled to them).
# The images are read with rasterio (LoadMultiBandImageFromFile); a pixel whose 13 bands
# are all 0 has no data and its label is ignored (IgnoreNodataLabels). The labels are
# single-band uint8 GeoTIFFs, read by LoadAnnotations.
dataset_type = 'CloudSEN12Dataset'
data_root = 'data/cloudsen12'
input_size = (224, 224)
s2_bands = ('B01', 'B02', 'B03', 'B04', 'B05', 'B06', 'B07', 'B08', 'B8A', 'B09', 'B10',
            'B11', 'B12')  # SENTINEL2_BANDS in reobench_mm.transforms.raster_loading
load_image = dict(type='LoadMultiBandImageFromFile', band_names=s2_bands, nodata=0)
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
# the labels' rules (docs/distribution_shifts.md, label rules): full boundaries, every
# stored value a class (nodata pixels are ignored from the image)
label_rules = dict(boundaries='full', ignore_index=255, reduce_zero_label=False, nodata=None)
data_prefix = dict(img_path='high')
train_dataloader = dict(
    batch_size=8,
    num_workers=2,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=True),
    dataset=dict(type=dataset_type, data_root=data_root, data_prefix=data_prefix,
                 ann_file='splits/train.txt', pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=1,
    num_workers=2,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type=dataset_type, data_root=data_root, data_prefix=data_prefix,
                 ann_file='splits/val.txt', metainfo=dict(label_rules=label_rules),
                 pipeline=test_pipeline))
test_dataloader = dict(
    batch_size=1,
    num_workers=2,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type=dataset_type, data_root=data_root, data_prefix=data_prefix,
                 ann_file='splits/test.txt', metainfo=dict(label_rules=label_rules),
                 pipeline=test_pipeline))
val_evaluator = dict(type='IoUMetric', iou_metrics=['mIoU'])
test_evaluator = val_evaluator
