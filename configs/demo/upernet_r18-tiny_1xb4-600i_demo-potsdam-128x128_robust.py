# The demo UperNet trained with the held-out corruption recipe (sensor corruptions in
# training; see ../_base_/robust/random-corruption_sensor.py).
# EpochIndexedDataset places the corruption step by the placement rules (right after the
# loading steps, in the pipeline's own order).
_base_ = ['./upernet_r18-tiny_1xb4-600i_demo-potsdam-128x128.py',
          '../_base_/robust/random-corruption_sensor.py']
train_dataloader = dict(
    sampler=dict(_delete_=True, type='EpochIndexSampler',
                 sampler=_base_.train_dataloader.sampler),
    dataset=dict(_delete_=True, type='EpochIndexedDataset',
                 dataset=_base_.train_dataloader.dataset,
                 corruption=_base_.random_corruption))
