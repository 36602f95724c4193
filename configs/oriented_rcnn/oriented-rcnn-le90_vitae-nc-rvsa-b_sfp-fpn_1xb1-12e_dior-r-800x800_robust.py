# The config of the same name without "_robust", trained with the held-out corruption
# recipe: sensor corruptions in training (../_base_/robust/random-corruption_sensor.py), the
# environmental and geometric ones held out for testing.
# EpochIndexedDataset places the corruption step by the placement rules (right after the
# loading steps, in the pipeline's own order).
_base_ = [
    './oriented-rcnn-le90_vitae-nc-rvsa-b_sfp-fpn_1xb1-12e_dior-r-800x800.py',
    '../_base_/robust/random-corruption_sensor.py'
]
train_dataloader = dict(
    sampler=dict(_delete_=True, type='EpochIndexSampler',
                 sampler=_base_.train_dataloader.sampler),
    dataset=dict(_delete_=True, type='EpochIndexedDataset',
                 dataset=_base_.train_dataloader.dataset,
                 corruption=_base_.random_corruption))
