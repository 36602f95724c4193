# The demo UperNet trained with the held-out corruption recipe (sensor corruptions in
# training; see ../_base_/robust/random-corruption_sensor.py). The corruption step goes
# right after the annotation loading, before the crop.
_base_ = ['./upernet_r18-tiny_1xb4-600i_demo-potsdam-128x128.py',
          '../_base_/robust/random-corruption_sensor.py']
train_dataloader = dict(
    sampler=dict(_delete_=True, type='EpochIndexSampler',
                 sampler=_base_.train_dataloader.sampler),
    dataset=dict(_delete_=True, type='EpochIndexedDataset',
                 dataset=dict(_base_.train_dataloader.dataset,
                              pipeline=_base_.train_pipeline[:2] + [_base_.random_corruption]
                              + _base_.train_pipeline[2:])))
