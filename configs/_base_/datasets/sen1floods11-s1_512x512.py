# Sen1Floods11's hand-labelled chips seen by Sentinel-1: VV and VH backscatter in dB
# (float32, nodata NaN), the same labels and splits as sen1floods11-s2_512x512.py. The
# S1 side of EarthShift's sensor pair as a dataset of its own (a model that reads 2 bands:
# see ../shifts/sen1floods11.py). The nodata pixels' labels are ignored and their values
# set to 0 (FillNodata), as the official training code replaces NaN by 0.
_base_ = ['./sen1floods11-s2_512x512.py']
s1_bands = ('VV', 'VH')  # S1_BANDS in reobench_mm.datasets.sen1floods11
load_s1 = dict(type='LoadMultiBandImageFromFile', band_names=s1_bands)
train_pipeline = [
    load_s1,
    dict(type='LoadAnnotations'),
    dict(type='IgnoreNodataLabels', ignore_index=255),
    dict(type='FillNodata', value=0.0),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    load_s1,
    dict(type='LoadAnnotations'),
    dict(type='IgnoreNodataLabels', ignore_index=255),
    dict(type='FillNodata', value=0.0),
    dict(type='PackSegInputs', meta_keys={{_base_.meta_keys}}),
]
train_dataloader = dict(dataset=dict(sensor='s1', pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(sensor='s1', pipeline=test_pipeline))
test_dataloader = dict(dataset=dict(sensor='s1', pipeline=test_pipeline))
