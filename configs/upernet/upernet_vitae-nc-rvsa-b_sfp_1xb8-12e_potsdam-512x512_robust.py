# The config of the same name without "_robust", trained with the held-out corruption
# recipe: sensor corruptions in training (../_base_/robust/random-corruption_sensor.py), the
# environmental and geometric ones held out for testing.
# EpochIndexedDataset places the corruption step by the placement rules (right after the
# loading steps, in the pipeline's own order).
_base_ = [
    './upernet_vitae-nc-rvsa-b_sfp_1xb8-12e_potsdam-512x512.py',
    '../_base_/robust/random-corruption_sensor.py'
]
train_dataloader = dict(
    sampler=dict(_delete_=True, type='EpochIndexSampler',
                 sampler=_base_.train_dataloader.sampler),
    dataset=dict(_delete_=True, type='EpochIndexedDataset',
                 dataset=_base_.train_dataloader.dataset,
                 corruption=_base_.random_corruption))
