# LoveDA's two domains as each other's out-of-distribution partner (geographic): a model
# trained on one domain (loveda-urban_512x512.py or loveda-rural_512x512.py) is evaluated
# on the validation images of the other. The sets are read in LoveDA's official layout
# (Train/{Urban,Rural}/{images_png,masks_png}, Val/...; unzip Train.zip and Val.zip into
# data/loveDA_official) by MMSegmentation's LoveDADataset (labels 1..7, 0 = no data).
# Use:
#   _base_ = ['<a LoveDA Urban config>', '../_base_/shifts/loveda.py']
#   test_cfg = dict(type='RobustnessTestLoop', shifts=dict(rural={{_base_.loveda_rural_shift}}))
loveda_official_root = 'data/loveDA_official'
# both domains' labels: full boundaries, 0 = no data (read with reduce_zero_label=True)
loveda_label_rules = dict(boundaries='full', ignore_index=255, reduce_zero_label=True, nodata=0)
loveda_urban_shift = dict(
    shift_type='geographic',
    dataset=dict(type='LoveDADataset', data_root=loveda_official_root,
                 metainfo=dict(label_rules=loveda_label_rules),
                 data_prefix=dict(img_path='Val/Urban/images_png',
                                  seg_map_path='Val/Urban/masks_png')))
loveda_rural_shift = dict(
    shift_type='geographic',
    dataset=dict(type='LoveDADataset', data_root=loveda_official_root,
                 metainfo=dict(label_rules=loveda_label_rules),
                 data_prefix=dict(img_path='Val/Rural/images_png',
                                  seg_map_path='Val/Rural/masks_png')))
