# Fields of The World (FTW): EarthShift's temporal and geographic pairs of field-boundary
# segmentation (3 classes: background, field, field boundary), all read by FTWDataset in
# the official release's layout: <root>/<country>/chips_<country>.parquet (the chip
# index: aoi_id, split), s2_images/window_{a,b}/<aoi_id>.tif (256x256, 4 uint16 bands B04,
# B03, B02, B08) and label_masks/semantic_3class/<aoi_id>.tif (uint8; 3 = unlabelled,
# loaded as 255).
# Preparation (the FTW tools, pip install ftw-tools): download and unpack the countries
# into data/ftw (the command unpacks into <out>/ftw/<country>):
#   ftw data download -o data --countries=germany,cambodia,denmark
# The pairs (ID: the config's test set; OOD: the set below), as EarthShift's code builds
# them (its configs temporal-shift-exp.json and geo-shift-exp.json, data_manager.py):
# - seasons (ftw_temporal_shift, temporal): trained on Germany's train chips, window A;
#   ID the test chips' window A (../datasets/ftw-germany-window-a_256x256.py), OOD the
#   same chips' window B (the other season).
# - years (ftw_year_shift, temporal): trained on Germany's train split, both windows, 200
#   of its samples held out as the ID test set (../datasets/ftw-germany-year_256x256.py);
#   OOD the test split, both windows. The code builds this pair from the release's splits
#   alone.
# - Germany -> Cambodia, Germany -> Denmark (ftw_cambodia_shift, ftw_denmark_shift,
#   geographic): trained on Germany's train split, both windows; ID Germany's test split
#   (../datasets/ftw-germany_256x256.py), OOD the other country's test split, both
#   windows.
# The sets take the test pipeline (the same bands and loading as the test set's).
# Use:
#   _base_ = ['<a config on ../datasets/ftw-germany_256x256.py>', '../_base_/shifts/ftw.py']
#   test_cfg = dict(type='RobustnessTestLoop', shifts=dict(cambodia={{_base_.ftw_cambodia_shift}}))
ftw_root = 'data/ftw'
# full boundaries; the unlabelled 3 is mapped to 255 by the dataset, nothing stored as no data
ftw_label_rules = dict(boundaries='full', ignore_index=255, reduce_zero_label=False, nodata=None)
ftw_temporal_shift = dict(
    shift_type='temporal',
    dataset=dict(type='FTWDataset', data_root=ftw_root, country='germany', split='test',
                 window='b', metainfo=dict(label_rules=ftw_label_rules)))
ftw_year_shift = dict(
    shift_type='temporal',
    dataset=dict(type='FTWDataset', data_root=ftw_root, country='germany', split='test',
                 window='both', metainfo=dict(label_rules=ftw_label_rules)))
ftw_cambodia_shift = dict(
    shift_type='geographic',
    dataset=dict(type='FTWDataset', data_root=ftw_root, country='cambodia', split='test',
                 window='both', metainfo=dict(label_rules=ftw_label_rules)))
ftw_denmark_shift = dict(
    shift_type='geographic',
    dataset=dict(type='FTWDataset', data_root=ftw_root, country='denmark', split='test',
                 window='both', metainfo=dict(label_rules=ftw_label_rules)))
