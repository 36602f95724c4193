# Sen1Floods11: EarthShift's sensor pair, Sentinel-2 -> Sentinel-1, on the hand-labelled
# chips (surface water: not water, water). The ID set is the test split seen by
# Sentinel-2 (../datasets/sen1floods11-s2_512x512.py: 13 bands, int16, nodata 0); the OOD
# set below is the same chips seen by Sentinel-1 (VV and VH backscatter in dB, float32,
# nodata NaN, read with its own pipeline: the 2 bands, nodata labels ignored, NaN set to
# 0). Both are read by Sen1Floods11Dataset in the official layout of the release's v1.1
# folder: data/flood_events/HandLabeled/{S2Hand,S1Hand,LabelHand}/<Event>_<id>_<layer>.tif
# and splits/flood_handlabeled/flood_{train,valid,test,bolivia}_data.csv (labels int16:
# -1 no data, loaded as 255; 0 not water; 1 water).
# Preparation: copy the release's v1.1 folder (about 14 GB with the weakly labelled data;
# the hand-labelled part and the splits suffice) into data/sen1floods11, e.g.
#   gsutil -m rsync -r gs://sen1floods11/v1.1/data/flood_events/HandLabeled \
#       data/sen1floods11/data/flood_events/HandLabeled
#   gsutil -m rsync -r gs://sen1floods11/v1.1/splits data/sen1floods11/splits
# The model must read the set's 2 bands. EarthShift evaluates S1 with the S2-trained
# weights behind a new, untrained 2-band channel adapter (testing.py,
# run_s2_to_s1_sensor_shift): a model whose ChannelAdapter takes 13 bands refuses the set,
# so evaluate it with the model's 2-band twin (in_channels=2, the S2 checkpoint loaded
# with the adapter's mismatched weights left at their initialisation), whose own test set
# is ../datasets/sen1floods11-s1_512x512.py.
# Use:
#   _base_ = ['<a config on a 2-band model>', '../_base_/shifts/sen1floods11.py']
#   test_cfg = dict(type='RobustnessTestLoop', shifts=dict(s1={{_base_.sen1floods11_s1_shift}}))
sen1floods11_root = 'data/sen1floods11'
# full boundaries; the stored -1 is loaded as 255 (LoadAnnotations casts labels to uint8)
sen1floods11_label_rules = dict(boundaries='full', ignore_index=255, reduce_zero_label=False,
                                nodata=255)
sen1floods11_s1_pipeline = [
    dict(type='LoadMultiBandImageFromFile', band_names=('VV', 'VH')),
    dict(type='LoadAnnotations'),
    dict(type='IgnoreNodataLabels', ignore_index=255),
    dict(type='FillNodata', value=0.0),
    dict(type='PackSegInputs',
         meta_keys=('img_path', 'seg_map_path', 'ori_shape', 'img_shape', 'pad_shape',
                    'scale_factor', 'flip', 'flip_direction', 'reduce_zero_label',
                    'corruption', 'severity', 'band_names', 'band_indices', 'window')),
]
sen1floods11_s1_shift = dict(
    shift_type='sensor',
    dataset=dict(type='Sen1Floods11Dataset', data_root=sen1floods11_root, split='test',
                 sensor='s1', metainfo=dict(label_rules=sen1floods11_label_rules),
                 pipeline=sen1floods11_s1_pipeline))
