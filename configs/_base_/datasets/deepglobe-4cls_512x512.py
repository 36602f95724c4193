# DeepGlobe Land Cover on the 4 classes it shares with DFC2022 (urban, forest, water,
# barren; EarthShift's DeepGlobe -> DFC2022 pair, ../shifts/deepglobe_dfc2022.py), in the
# official layout (the challenge's release unzipped into data/deepglobe: train/<id>_sat.jpg
# with train/<id>_mask.png colour masks; valid/ and test/ have no masks). The other
# classes (agriculture, rangeland) and unknown (black) are ignored, as EarthShift keeps
# only the 4 shared classes. Only train has masks, so a fifth of it (161 of 803 images)
# is held out as the test set (HeldOutSplitDataset, seed 0; EarthShift's own re-split of
# the release is not published). Masks are binarised at 128 before their colours are
# read, as the release asks (LoadAnnotationsFromColours). Images are JPEGs read by
# OpenCV (BGR, as LoadImageFromFile gives them).
dataset_type = 'DeepGlobeLandCoverDataset'
data_root = 'data/deepglobe'
shared_classes = ('urban_land', 'forest_land', 'water', 'barren_land')
deepglobe_colours = [(0, 255, 255), (255, 255, 0), (255, 0, 255), (0, 255, 0), (0, 0, 255),
                     (255, 255, 255)]  # DEEPGLOBE_COLOURS in reobench_mm.datasets
load_masks = dict(type='LoadAnnotationsFromColours', colours=deepglobe_colours,
                  threshold=128, ignore_index=255)
crop_size = (512, 512)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    load_masks,
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    load_masks,
    dict(type='PackSegInputs',
         meta_keys=('img_path', 'seg_map_path', 'ori_shape', 'img_shape', 'pad_shape',
                    'scale_factor', 'flip', 'flip_direction', 'reduce_zero_label',
                    'corruption', 'severity')),
]
# the labels' rules (docs/distribution_shifts.md, label rules): full boundaries; the
# colours of no class (unknown) and the classes left out are loaded as 255
label_rules = dict(boundaries='full', ignore_index=255, reduce_zero_label=False, nodata=None)
deepglobe_train = dict(type=dataset_type, data_root=data_root,
                       metainfo=dict(classes=shared_classes, label_rules=label_rules))
test_size = 161
train_dataloader = dict(
    batch_size=8,
    num_workers=2,
    persistent_workers=True,
    sampler=dict(type='InfiniteSampler', shuffle=True),
    dataset=dict(type='HeldOutSplitDataset', size=test_size, seed=0, part='rest',
                 stratify=False, dataset=dict(deepglobe_train, pipeline=train_pipeline)))
val_dataloader = dict(
    batch_size=1,
    num_workers=2,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type='HeldOutSplitDataset', size=test_size, seed=0, part='held_out',
                 stratify=False,
                 dataset=dict(deepglobe_train, test_mode=True, pipeline=test_pipeline)))
test_dataloader = val_dataloader
val_evaluator = dict(type='IoUMetric', iou_metrics=['mIoU'])
test_evaluator = val_evaluator
