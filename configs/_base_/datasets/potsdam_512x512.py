# ISPRS Potsdam as tools/dataset_converters/potsdam.py writes it: 512x512 patches,
# 3,456 train / 2,016 test, labels 1..6 read with reduce_zero_label=True (0 = ignored).
# MMSegmentation's own Potsdam settings (CorruptionTestLoop puts ApplyCorruption into the
# test pipeline, before resizing) and the paper's batch of 8.
_base_ = ['mmseg::_base_/datasets/potsdam.py']
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='Resize', scale=(512, 512), keep_ratio=True),
    dict(type='PackSegInputs',
         meta_keys=('img_path', 'seg_map_path', 'ori_shape', 'img_shape', 'pad_shape',
                    'scale_factor', 'flip', 'flip_direction', 'reduce_zero_label',
                    'corruption', 'severity')),
]
train_dataloader = dict(batch_size=8, num_workers=4,
                        sampler=dict(type='DefaultSampler', shuffle=True))
# the labels' rules (docs/distribution_shifts.md, label rules): full boundaries (not ISPRS's
# eroded reference), 0 = no data, loaded as 255 and ignored
label_rules = dict(boundaries='full', ignore_index=255, reduce_zero_label=True, nodata=0)
val_dataloader = dict(dataset=dict(pipeline=test_pipeline,
                                   metainfo=dict(label_rules=label_rules)))
test_dataloader = val_dataloader
