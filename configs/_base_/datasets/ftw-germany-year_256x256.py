# FTW Germany for EarthShift's year pair (../shifts/ftw.py, ftw_year_shift): EarthShift's
# code trains and tests in distribution on the train split only (both windows), holding
# out 200 of its samples as the ID test set (torch's random_split, generator seed 42), and
# tests out of distribution on the test split (both windows). Here the 200 are held out by
# HeldOutSplitDataset (this package's seeded draw over the same samples, so not the same
# 200): training on the rest, testing on them. Layout and pipelines:
# ftw-germany_256x256.py.
_base_ = ['./ftw-germany_256x256.py']
germany_train = dict(type='FTWDataset', data_root={{_base_.data_root}}, country='germany',
                     split='train', window='both')
train_dataloader = dict(dataset=dict(
    _delete_=True, type='HeldOutSplitDataset', size=200, seed=0, part='rest',
    stratify=False, dataset=dict(germany_train, pipeline={{_base_.train_pipeline}})))
val_dataloader = dict(dataset=dict(
    _delete_=True, type='HeldOutSplitDataset', size=200, seed=0, part='held_out',
    stratify=False, dataset=dict(germany_train, test_mode=True,
                                 metainfo=dict(label_rules={{_base_.label_rules}}),
                                 pipeline={{_base_.test_pipeline}})))
test_dataloader = val_dataloader
