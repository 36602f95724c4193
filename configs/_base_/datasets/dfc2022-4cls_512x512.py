# DFC2022 (the IEEE GRSS Data Fusion Contest 2022 on MiniFrance) on the 4 classes it
# shares with DeepGlobe Land Cover (urban fabric, forests, water, open spaces with little
# or no vegetation; EarthShift's DFC2022 labels 1, 10, 14, 12), in the official layout
# (labeled_train.zip unzipped into data/dfc2022: labeled_train/<region>/BDORTHO/<id>.tif,
# 3-band uint8 orthophotos at 50 cm, and labeled_train/<region>/UrbanAtlas/
# <id>_UA2012.tif labels, 0 = no information). The other classes are ignored. Only
# labeled_train has labels, so 400 of its images are held out as the test set
# (HeldOutSplitDataset, seed 0; EarthShift's own re-split is not published).
# The orthophotos are read with rasterio as B, G, R (bands [3, 2, 1]): the channel order
# OpenCV gives DeepGlobe's JPEGs, so one data_preprocessor (bgr_to_rgb=True) serves both.
dataset_type = 'DFC2022Dataset'
data_root = 'data/dfc2022'
shared_classes = ('urban_fabric', 'forests', 'water', 'open_spaces_with_little_or_no_vegetation')
load_bgr = dict(type='LoadMultiBandImageFromFile', bands=[3, 2, 1])
crop_size = (512, 512)
train_pipeline = [
    load_bgr,
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='IgnoreNodataLabels', ignore_index=255),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    load_bgr,
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='IgnoreNodataLabels', ignore_index=255),
    dict(type='PackSegInputs',
         meta_keys=('img_path', 'seg_map_path', 'ori_shape', 'img_shape', 'pad_shape',
                    'scale_factor', 'flip', 'flip_direction', 'reduce_zero_label',
                    'corruption', 'severity', 'band_names', 'band_indices', 'window')),
]
# the labels' rules (docs/distribution_shifts.md, label rules): full boundaries, 0 = no
# information (loaded as 255 with reduce_zero_label)
label_rules = dict(boundaries='full', ignore_index=255, reduce_zero_label=True, nodata=0)
dfc2022_train = dict(type=dataset_type, data_root=data_root, split_dir='labeled_train',
                     metainfo=dict(classes=shared_classes, label_rules=label_rules))
test_size = 400
train_dataloader = dict(
    batch_size=8,
    num_workers=2,
    persistent_workers=True,
    sampler=dict(type='InfiniteSampler', shuffle=True),
    dataset=dict(type='HeldOutSplitDataset', size=test_size, seed=0, part='rest',
                 stratify=False, dataset=dict(dfc2022_train, pipeline=train_pipeline)))
val_dataloader = dict(
    batch_size=1,
    num_workers=2,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type='HeldOutSplitDataset', size=test_size, seed=0, part='held_out',
                 stratify=False,
                 dataset=dict(dfc2022_train, test_mode=True, pipeline=test_pipeline)))
test_dataloader = val_dataloader
val_evaluator = dict(type='IoUMetric', iou_metrics=['mIoU'])
test_evaluator = val_evaluator
