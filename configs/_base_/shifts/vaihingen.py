# ISPRS Vaihingen as the out-of-distribution partner of ISPRS Potsdam (a pair of this
# package's, not one of EarthShift's): another city (geographic), 9 cm instead of 5 cm ground
# sampling distance (scale), and near-infrared/red/green orthophotos (sensor: a model
# trained on Potsdam's RGB orthophotos sees other bands; one trained on Potsdam's IRRG
# orthophotos, potsdam-irrg_512x512.py, the same bands). Prepare it with MMSegmentation's
# converter from the two official zips (ISPRS_semantic_labeling_Vaihingen.zip and
# ISPRS_semantic_labeling_Vaihingen_ground_truth_eroded_COMPLETE.zip):
#   python <mmseg>/tools/dataset_converters/vaihingen.py <folder of the zips> -o data/vaihingen
# (only those two: the converter writes any other zip's .tif files as images, and the
# full-boundary reference's files carry the orthophotos' names).
# MMSegmentation's ISPRSDataset has Potsdam's six classes in Potsdam's order, so no class
# map is needed.
# Label rules: that converter reads ISPRS's *eroded* reference (a band of 3 px along the
# class boundaries stored as 0, loaded as 255 and ignored), while the Potsdam configs score
# full boundaries (REOBench's setting). The robustness loops refuse the pair until both
# sides are scored alike: erode the Potsdam labels the same way in the test pipeline with
# `vaihingen_erosion`
# (configs/shifts/upernet_rvsa-b_sfp_1xb8-12e_potsdam-512x512_vaihingen.py does).
# Use:
#   _base_ = ['<a Potsdam config>', '../_base_/shifts/vaihingen.py']
#   test_cfg = dict(type='RobustnessTestLoop', shifts=dict(vaihingen={{_base_.vaihingen_shift}}))
#   + the Potsdam test pipeline with `vaihingen_erosion` after LoadAnnotations
vaihingen_label_rules = dict(boundaries='eroded', erosion_radius=3, ignore_index=255,
                             reduce_zero_label=True, nodata=0)
# the ID side's step that scores full-boundary labels as ISPRS's eroded reference
vaihingen_erosion = dict(type='ErodeLabelBoundaries', radius=3, ignore_index=255)
vaihingen_shift = dict(
    shift_type='geographic',
    dataset=dict(type='ISPRSDataset', data_root='data/vaihingen',
                 data_prefix=dict(img_path='img_dir/val', seg_map_path='ann_dir/val'),
                 metainfo=dict(label_rules=vaihingen_label_rules)))
