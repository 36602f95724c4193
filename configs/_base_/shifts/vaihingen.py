# ISPRS Vaihingen as the out-of-distribution partner of ISPRS Potsdam (a pair of this
# package's; not one of EarthShift's): another city (geographic), 9 cm instead of 5 cm ground
# sampling distance (scale), and near-infrared/red/green orthophotos (sensor: a model
# trained on Potsdam's RGB orthophotos sees other bands; one trained on Potsdam's IRRG
# orthophotos, potsdam-irrg_512x512.py, the same bands). Prepare it with MMSegmentation's
# converter from the two official zips (ISPRS_semantic_labeling_Vaihingen.zip and
# ISPRS_semantic_labeling_Vaihingen_ground_truth_eroded_COMPLETE.zip):
#   python <mmseg>/tools/dataset_converters/vaihingen.py <folder of the zips> -o data/vaihingen
# MMSegmentation's ISPRSDataset has Potsdam's six classes in Potsdam's order, so no class
# map is needed. Label rules differ: the converter reads the *eroded* Vaihingen labels
# (class boundaries ignored) while Potsdam's configs score full boundaries (REOBench's
# setting), so this pair's drop is measured on easier OOD pixels; compare with care.
# Use:
#   _base_ = ['<a Potsdam config>', '../_base_/shifts/vaihingen.py']
#   test_cfg = dict(type='RobustnessTestLoop', shifts=dict(vaihingen={{_base_.vaihingen_shift}}))
vaihingen_shift = dict(
    shift_type='geographic',
    dataset=dict(type='ISPRSDataset', data_root='data/vaihingen',
                 data_prefix=dict(img_path='img_dir/val', seg_map_path='ann_dir/val')))
