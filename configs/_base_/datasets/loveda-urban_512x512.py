# LoveDA's Urban domain in the official layout (Train.zip and Val.zip unzipped into
# data/loveDA_official): trained on Train/Urban, evaluated on Val/Urban, with
# MMSegmentation's LoveDA settings (LoveDADataset, labels 1..7 read with
# reduce_zero_label=True). Its out-of-distribution partner is Val/Rural
# (../shifts/loveda.py).
_base_ = ['mmseg::_base_/datasets/loveda.py']
data_root = 'data/loveDA_official'
train_dataloader = dict(dataset=dict(
    data_root=data_root,
    data_prefix=dict(img_path='Train/Urban/images_png', seg_map_path='Train/Urban/masks_png')))
# the labels' rules (docs/distribution_shifts.md, label rules): full boundaries, 0 = no data
label_rules = dict(boundaries='full', ignore_index=255, reduce_zero_label=True, nodata=0)
val_dataloader = dict(dataset=dict(
    data_root=data_root, metainfo=dict(label_rules=label_rules),
    data_prefix=dict(img_path='Val/Urban/images_png', seg_map_path='Val/Urban/masks_png')))
test_dataloader = val_dataloader
