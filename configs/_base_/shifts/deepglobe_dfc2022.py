# DeepGlobe Land Cover <-> DFC2022 (MiniFrance): EarthShift's source pair (its
# data-shift-exp.json, DeepGlobe-DFC2022), two datasets of sub-metre RGB imagery with
# their own land-cover legends, compared on the 4 classes they share. EarthShift keeps
# DeepGlobe's labels 1, 4, 5, 6 (urban, forest, water, barren in its 0 = unknown
# numbering) and DFC2022's 1, 10, 14, 12 (urban fabric, forests, water, open spaces with
# little or no vegetation), each mapped in that order to the classes 0..3, and ignores
# every other class. The class maps below are that choice, one to one: DFC2022's other
# artificial classes (industrial/transport units, mine/dump/construction sites,
# artificial vegetated areas) are not counted as DeepGlobe's urban land, its herbaceous
# vegetation and wetlands not as rangeland; DeepGlobe's agriculture and rangeland have no
# DFC2022 counterpart in the map; DFC2022's clouds and shadows are ignored.
# Layouts (the official releases):
# - DeepGlobe: the challenge's release unzipped into data/deepglobe: train/<id>_sat.jpg
#   (2448x2448 RGB, 50 cm) and train/<id>_mask.png (RGB colour masks, binarised at 128;
#   unknown black, ignored); read by DeepGlobeLandCoverDataset with
#   LoadAnnotationsFromColours.
# - DFC2022: labeled_train.zip (IEEE DataPort, the contest's data) unzipped into
#   data/dfc2022: labeled_train/<region>/BDORTHO/<id>.tif (3-band uint8, 50 cm) and
#   labeled_train/<region>/UrbanAtlas/<id>_UA2012.tif (0 = no information, 1..15);
#   read by DFC2022Dataset, the orthophotos as B, G, R like OpenCV's JPEGs.
# Preparation: none beyond unzipping. The OOD sets are the whole labelled part of the
# other dataset; the ID test sets are held out of the labelled part
# (../datasets/deepglobe-4cls_512x512.py, ../datasets/dfc2022-4cls_512x512.py).
# Each set is wrapped in ClassMappedDataset onto the model's classes (the test set's):
# map_classes names the classes the map is written for, and a target the model lacks is
# ignored. Use (a DeepGlobe model on its 4 shared classes):
#   _base_ = ['<a config on ../datasets/deepglobe-4cls_512x512.py>',
#             '../_base_/shifts/deepglobe_dfc2022.py']
#   test_cfg = dict(type='RobustnessTestLoop',
#                   shifts=dict(dfc2022={{_base_.dfc2022_for_deepglobe_shift}}))
deepglobe_classes = ('urban_land', 'agriculture_land', 'rangeland', 'forest_land', 'water',
                     'barren_land')
dfc2022_classes = (
    'urban_fabric', 'industrial_commercial_public_military_private_and_transport_units',
    'mine_dump_and_construction_sites', 'artificial_non_agricultural_vegetated_areas',
    'arable_land', 'permanent_crops', 'pastures', 'complex_and_mixed_cultivation_patterns',
    'orchards_at_the_fringe_of_urban_classes', 'forests', 'herbaceous_vegetation_associations',
    'open_spaces_with_little_or_no_vegetation', 'wetlands', 'water', 'clouds_and_shadows')
# DFC2022 class -> DeepGlobe class (None: ignored)
dfc2022_to_deepglobe = {c: None for c in dfc2022_classes}
dfc2022_to_deepglobe.update({
    'urban_fabric': 'urban_land', 'forests': 'forest_land', 'water': 'water',
    'open_spaces_with_little_or_no_vegetation': 'barren_land'})
# DeepGlobe class -> DFC2022 class (None: ignored)
deepglobe_to_dfc2022 = dict(
    urban_land='urban_fabric', agriculture_land=None, rangeland=None,
    forest_land='forests', water='water',
    barren_land='open_spaces_with_little_or_no_vegetation')
deepglobe_colours = [(0, 255, 255), (255, 255, 0), (255, 0, 255), (0, 255, 0), (0, 0, 255),
                     (255, 255, 255)]
meta_keys = ('img_path', 'seg_map_path', 'ori_shape', 'img_shape', 'pad_shape',
             'scale_factor', 'flip', 'flip_direction', 'reduce_zero_label', 'corruption',
             'severity')
deepglobe_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotationsFromColours', colours=deepglobe_colours, threshold=128,
         ignore_index=255),
    dict(type='PackSegInputs', meta_keys=meta_keys),
]
dfc2022_pipeline = [
    dict(type='LoadMultiBandImageFromFile', bands=[3, 2, 1]),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='IgnoreNodataLabels', ignore_index=255),
    dict(type='PackSegInputs', meta_keys=meta_keys),
]
deepglobe_label_rules = dict(boundaries='full', ignore_index=255, reduce_zero_label=False,
                             nodata=None)
dfc2022_label_rules = dict(boundaries='full', ignore_index=255, reduce_zero_label=True,
                           nodata=0)
dfc2022_for_deepglobe_shift = dict(
    shift_type='source',
    dataset=dict(type='reobench_mm.ClassMappedDataset', map_classes=deepglobe_classes,
                 mapping=dfc2022_to_deepglobe,
                 dataset=dict(type='DFC2022Dataset', data_root='data/dfc2022',
                              split_dir='labeled_train', test_mode=True,
                              metainfo=dict(label_rules=dfc2022_label_rules),
                              pipeline=dfc2022_pipeline)))
deepglobe_for_dfc2022_shift = dict(
    shift_type='source',
    dataset=dict(type='reobench_mm.ClassMappedDataset', map_classes=dfc2022_classes,
                 mapping=deepglobe_to_dfc2022,
                 dataset=dict(type='DeepGlobeLandCoverDataset', data_root='data/deepglobe',
                              test_mode=True, metainfo=dict(label_rules=deepglobe_label_rules),
                              pipeline=deepglobe_pipeline)))
