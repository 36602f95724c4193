# The demo Oriented R-CNN trained with the held-out corruption recipe (sensor corruptions
# in training; see ../_base_/robust/random-corruption_sensor.py). The corruption step goes
# right after the annotation loading and ConvertBoxType, before the resize.
_base_ = ['./oriented-rcnn-le90_r18-tiny_fpn_1xb2-600i_demo-dior-256x256.py',
          '../_base_/robust/random-corruption_sensor.py']
train_dataloader = dict(
    sampler=dict(_delete_=True, type='EpochIndexSampler',
                 sampler=_base_.train_dataloader.sampler),
    dataset=dict(_delete_=True, type='EpochIndexedDataset',
                 dataset=dict(_base_.train_dataloader.dataset,
                              pipeline=_base_.train_pipeline[:3] + [_base_.random_corruption]
                              + _base_.train_pipeline[3:])))
