# upernet_rvsa-b_sfp_1xb8-12e_potsdam-512x512.py evaluated on Potsdam (ID) and ISPRS
# Vaihingen (OOD, ../_base_/shifts/vaihingen.py) in one robustness run, both scored by the
# same label rules: Vaihingen's labels are ISPRS's eroded reference (3 px boundary band
# ignored), so the Potsdam labels are eroded the same way in the test pipeline. Tested: the
# eroded Potsdam mIoU equals MMSegmentation's IoUMetric on labels eroded by hand.
_base_ = ['../upernet/upernet_rvsa-b_sfp_1xb8-12e_potsdam-512x512.py',
          '../_base_/shifts/vaihingen.py']
# the same steps for both sets; Vaihingen's labels are stored eroded, so its pipeline has
# no erosion step (a shift set without a pipeline would take the test set's, erosion too)
load_steps = [dict(type='LoadImageFromFile'), dict(type='LoadAnnotations', reduce_zero_label=True)]
process_steps = [
    dict(type='Resize', scale=(512, 512), keep_ratio=True),
    dict(type='PackSegInputs',
         meta_keys=('img_path', 'seg_map_path', 'ori_shape', 'img_shape', 'pad_shape',
                    'scale_factor', 'flip', 'flip_direction', 'reduce_zero_label',
                    'corruption', 'severity')),
]
test_dataloader = dict(dataset=dict(
    pipeline=load_steps + [_base_.vaihingen_erosion] + process_steps))
test_cfg = dict(type='RobustnessTestLoop', shifts=dict(vaihingen=dict(
    _base_.vaihingen_shift,
    dataset=dict(_base_.vaihingen_shift['dataset'], pipeline=load_steps + process_steps))))
