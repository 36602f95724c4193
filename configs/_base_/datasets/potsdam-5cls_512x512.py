# ISPRS Potsdam with 5 classes, clutter ignored: the label setting of REOBench's released
# segmentation configs (lx709/REOBench: Segmentation/configs/vit_base_win/*.py use
# num_classes=5, ignore_index=5 and a PotsdamDataset with reduce_zero_label=False, i.e. ids
# 0-4 for the five classes and 5 for clutter, which is ignored; the paper text says 6).
# Same setting, another file encoding: tools/dataset_converters/potsdam.py --num-classes 5
# writes the five classes as 1..5 and clutter (and boundaries) as 0, which
# reduce_zero_label=True turns into 255, the ignore index of MMSegmentation 1.x. The
# metric therefore has 5 classes and clutter pixels count nowhere. Converted into its own
# folder (data/potsdam_5cls), beside the 6-class data/potsdam.
_base_ = ['./potsdam_512x512.py']
data_root = 'data/potsdam_5cls'
metainfo = dict(
    classes=('impervious_surface', 'building', 'low_vegetation', 'tree', 'car'),
    palette=[[255, 255, 255], [0, 0, 255], [0, 255, 255], [0, 255, 0], [255, 255, 0]])
train_dataloader = dict(dataset=dict(data_root=data_root, metainfo=metainfo))
val_dataloader = dict(dataset=dict(data_root=data_root, metainfo=metainfo))
test_dataloader = val_dataloader
