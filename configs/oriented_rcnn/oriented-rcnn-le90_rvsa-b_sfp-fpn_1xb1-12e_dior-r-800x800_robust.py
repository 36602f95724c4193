# The config of the same name without "_robust", trained with the held-out corruption
# recipe: sensor corruptions in training (../_base_/robust/random-corruption_sensor.py), the
# environmental and geometric ones held out for testing. The corruption step goes right
# after the annotation loading and ConvertBoxType.
_base_ = [
    './oriented-rcnn-le90_rvsa-b_sfp-fpn_1xb1-12e_dior-r-800x800.py',
    '../_base_/robust/random-corruption_sensor.py'
]
_pipeline = _base_.train_dataloader.dataset.pipeline
train_dataloader = dict(
    sampler=dict(_delete_=True, type='EpochIndexSampler',
                 sampler=_base_.train_dataloader.sampler),
    dataset=dict(_delete_=True, type='EpochIndexedDataset',
                 dataset=dict(_base_.train_dataloader.dataset,
                              pipeline=_pipeline[:3] + [_base_.random_corruption]
                              + _pipeline[3:])))
