# SpaceNet 2 building footprints in the release layout (the training tarballs extracted
# into data/spacenet2: AOI_<n>_<city>_Train/MUL/MUL_AOI_<n>_<city>_img<k>.tif, 8 bands,
# uint16, about 163x163 px of 1.24 m) with the building masks written beside it by
# reobench_mm.datasets.converters.spacenet2.write_building_masks (rasterio's rasterize
# of the GeoJSON footprints on each image's grid: AOI_<n>_<city>_Train/building_masks/
# MUL/buildings_AOI_<n>_<city>_img<k>.tif, 0 background, 1 building). Only the training
# chips have footprints, so the splits are lists of chip ids (AOI_2_Vegas_img1, one per
# line: data/spacenet2/splits/{train,test}.txt).
# The calibration study's input: every image resized to 224x224 bilinearly (Resize with
# interpolation='bilinear'; label maps are resized by nearest neighbour). Training
# resizes image and labels; testing loads the labels after the resize, at the chip size.
# The images are read with rasterio (LoadMultiBandImageFromFile); a pixel whose 8 bands
# are all 0 (beyond the edge of an AOI's image) has no data and its label is ignored.
# The masks are single-band uint8 GeoTIFFs, read by LoadAnnotations.
dataset_type = 'SpaceNet2Dataset'
data_root = 'data/spacenet2'
input_size = (224, 224)
wv3_bands = ('COASTAL', 'BLUE', 'GREEN', 'YELLOW', 'RED', 'RED_EDGE', 'NIR1',
             'NIR2')  # WORLDVIEW3_MS_BANDS in reobench_mm.datasets.spacenet2
load_image = dict(type='LoadMultiBandImageFromFile', band_names=wv3_bands, nodata=0)
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
train_dataloader = dict(
    batch_size=8,
    num_workers=2,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=True),
    dataset=dict(type=dataset_type, data_root=data_root, product='MUL',
                 ann_file='splits/train.txt', pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=1,
    num_workers=2,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type=dataset_type, data_root=data_root, product='MUL',
                 ann_file='splits/test.txt', metainfo=dict(label_rules=label_rules),
                 pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='IoUMetric', iou_metrics=['mIoU'])
test_evaluator = val_evaluator
