# DIOR-R and DOTA-v1.0 as each other's out-of-distribution partner (source: another
# dataset, its annotators and conventions), on their shared classes. Each set is wrapped
# in ClassMappedDataset with a map of its classes onto the model's; the classes the other
# set lacks are ignored, and the mAP averages over the classes with objects.
#
# A DIOR-R model on DOTA (split into 1024 px patches with MMRotate's
# tools/data/dota/split/img_split.py, ss_val.json, into data/split_ss_dota): DOTA's
# small-vehicle and large-vehicle are DIOR-R's vehicle; helicopter, roundabout,
# soccer-ball-field and swimming-pool have no DIOR-R class and are ignored.
# A DOTA model on DIOR-R (converted with tools/dataset_converters/dior_r.py into
# data/dior_r): DIOR-R's vehicle cannot be told apart into small and large, so it
# is ignored with the ten DIOR-R classes DOTA lacks; nine classes are compared.
# The wrappers name no classes: a shift set's map takes the model's (its test set's), so
# a model of a subset of the classes (the demo's four DIOR-R classes) uses the same maps:
# map_classes says which classes the maps were written for, and a class the model lacks
# is ignored (logged), as the model's own test set leaves its objects out.
# Use (DIOR-R model):
#   _base_ = ['<a DIOR-R config>', '../_base_/shifts/dior-r_dota.py']
#   test_cfg = dict(type='RobustnessTestLoop', shifts=dict(dota={{_base_.dota_for_dior_r_shift}}))
dior_r_classes = ('airplane', 'airport', 'baseballfield', 'basketballcourt', 'bridge',
                  'chimney', 'expressway-service-area', 'expressway-toll-station', 'dam',
                  'golffield', 'groundtrackfield', 'harbor', 'overpass', 'ship', 'stadium',
                  'storagetank', 'tenniscourt', 'trainstation', 'vehicle', 'windmill')
dota_classes = ('plane', 'baseball-diamond', 'bridge', 'ground-track-field', 'small-vehicle',
                'large-vehicle', 'ship', 'tennis-court', 'basketball-court', 'storage-tank',
                'soccer-ball-field', 'roundabout', 'harbor', 'swimming-pool', 'helicopter')
# DOTA class -> DIOR-R class (None: ignored)
dota_to_dior_r = {
    'plane': 'airplane', 'baseball-diamond': 'baseballfield', 'bridge': 'bridge',
    'ground-track-field': 'groundtrackfield', 'small-vehicle': 'vehicle',
    'large-vehicle': 'vehicle', 'ship': 'ship', 'tennis-court': 'tenniscourt',
    'basketball-court': 'basketballcourt', 'storage-tank': 'storagetank',
    'soccer-ball-field': None, 'roundabout': None, 'harbor': 'harbor',
    'swimming-pool': None, 'helicopter': None}
# DIOR-R class -> DOTA class (None: ignored)
dior_r_to_dota = {
    'airplane': 'plane', 'airport': None, 'baseballfield': 'baseball-diamond',
    'basketballcourt': 'basketball-court', 'bridge': 'bridge', 'chimney': None,
    'expressway-service-area': None, 'expressway-toll-station': None, 'dam': None,
    'golffield': None, 'groundtrackfield': 'ground-track-field', 'harbor': 'harbor',
    'overpass': None, 'ship': 'ship', 'stadium': None, 'storagetank': 'storage-tank',
    'tenniscourt': 'tennis-court', 'trainstation': None, 'vehicle': None, 'windmill': None}
dota_for_dior_r_shift = dict(
    shift_type='source',
    dataset=dict(type='reobench_mm.ClassMappedDataset', map_classes=dior_r_classes,
                 mapping=dota_to_dior_r,
                 dataset=dict(type='mmrotate.DOTADataset', data_root='data/split_ss_dota/',
                              ann_file='val/annfiles/', data_prefix=dict(img_path='val/images/'),
                              test_mode=True)))
dior_r_for_dota_shift = dict(
    shift_type='source',
    dataset=dict(type='reobench_mm.ClassMappedDataset', map_classes=dota_classes,
                 mapping=dior_r_to_dota,
                 dataset=dict(type='reobench_mm.DIORRDataset', data_root='data/dior_r/',
                              ann_file='test/annfiles/', data_prefix=dict(img_path='test/images/'),
                              test_mode=True)))
