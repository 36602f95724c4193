# FLAIR #2, aerial imagery, in the release layout (data/flair2/flair_aerial_train/
# <domain>/<zone>/img/IMG_<n>.tif with flair_labels_train/<domain>/<zone>/msk/MSK_<n>.tif;
# flair_2_aerial_test and flair_2_labels_test alike): 512x512 patches of 5 uint8 bands
# (red, green, blue, NIR, elevation), labels 1..19 read with reduce_zero_label=True and
# merged into the official baselines' 13 classes (13..19 -> other) by the dataset.
# Trained on the release's train folders; validated and tested on its test folders (the
# baseline's validation domains are drawn at random from the training domains: give them
# with FLAIR2Dataset's domains=, or split lists, for a separate validation set).
# The calibration study's input: every image resized to 224x224 bilinearly (Resize with
# interpolation='bilinear'; label maps are resized by nearest neighbour). Training
# resizes image and labels; testing loads the labels after the resize, at 512x512.
# The images are read with rasterio (LoadMultiBandImageFromFile; the aerial patches
# have no nodata, so no pixel is ignored for want of data); the labels are single-band
# uint8 GeoTIFFs, read by LoadAnnotations.
dataset_type = 'FLAIR2Dataset'
data_root = 'data/flair2'
input_size = (224, 224)
flair_bands = ('RED', 'GREEN', 'BLUE', 'NIR', 'ELEVATION')  # FLAIR2_BANDS, file order
load_image = dict(type='LoadMultiBandImageFromFile', band_names=flair_bands)
resize = dict(type='Resize', scale=input_size, keep_ratio=False, interpolation='bilinear')
meta_keys = ('img_path', 'seg_map_path', 'ori_shape', 'img_shape', 'pad_shape',
             'scale_factor', 'flip', 'flip_direction', 'reduce_zero_label', 'corruption',
             'severity', 'band_names', 'band_indices', 'window')
train_pipeline = [
    load_image,
    dict(type='LoadAnnotations'),  # reduce_zero_label: the dataset's (True)
    resize,
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    load_image,
    resize,
    dict(type='LoadAnnotations'),  # reduce_zero_label: the dataset's (True)
    dict(type='PackSegInputs', meta_keys=meta_keys),
]
# the labels' rules (docs/distribution_shifts.md, label rules): full boundaries, 1..19
# read with reduce_zero_label (a 0, unused by the release, would be ignored)
label_rules = dict(boundaries='full', ignore_index=255, reduce_zero_label=True, nodata=None)
train_dataloader = dict(
    batch_size=8,
    num_workers=2,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=True),
    dataset=dict(type=dataset_type, data_root=data_root,
                 data_prefix=dict(img_path='flair_aerial_train',
                                  seg_map_path='flair_labels_train'),
                 pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=1,
    num_workers=2,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type=dataset_type, data_root=data_root,
                 data_prefix=dict(img_path='flair_2_aerial_test',
                                  seg_map_path='flair_2_labels_test'),
                 metainfo=dict(label_rules=label_rules), pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='IoUMetric', iou_metrics=['mIoU'])
test_evaluator = val_evaluator
