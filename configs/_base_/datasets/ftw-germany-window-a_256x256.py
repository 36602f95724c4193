# FTW Germany, window A only (the first season of each chip): the in-distribution side of
# EarthShift's season pair (../shifts/ftw.py, ftw_temporal_shift: the same chips' window
# B). EarthShift trains on the train split's window A and tests on the test split's
# window A (ID) and window B (OOD). Layout and pipelines: ftw-germany_256x256.py.
_base_ = ['./ftw-germany_256x256.py']
train_dataloader = dict(dataset=dict(window='a'))
val_dataloader = dict(dataset=dict(window='a'))
test_dataloader = val_dataloader
