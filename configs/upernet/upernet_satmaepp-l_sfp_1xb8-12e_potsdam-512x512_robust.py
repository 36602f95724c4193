# The config of the same name without "_robust", trained with the held-out corruption
# recipe: sensor corruptions in training (../_base_/robust/random-corruption_sensor.py), the
# environmental and geometric ones held out for testing. The corruption step goes right
# after the annotation loading.
_base_ = [
    './upernet_satmaepp-l_sfp_1xb8-12e_potsdam-512x512.py',
    '../_base_/robust/random-corruption_sensor.py'
]
_pipeline = _base_.train_dataloader.dataset.pipeline
train_dataloader = dict(
    sampler=dict(_delete_=True, type='EpochIndexSampler',
                 sampler=_base_.train_dataloader.sampler),
    dataset=dict(_delete_=True, type='EpochIndexedDataset',
                 dataset=dict(_base_.train_dataloader.dataset,
                              pipeline=_pipeline[:2] + [_base_.random_corruption]
                              + _pipeline[2:])))
