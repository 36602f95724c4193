# A deep ensemble of two demo UperNets (the calibration baseline next to temperature
# scaling): the members are the demo config's model, trained separately (e.g. with
# randomness.seed=0 and 1); tools/model_converters/make_ensemble.py combines their
# checkpoints into one for this config. Evaluation only: the ensemble does not train.
_base_ = ['./upernet_r18-tiny_1xb4-600i_demo-potsdam-128x128.py']
model = dict(
    _delete_=True,
    type='SegmentationEnsemble',
    members=[{{_base_.model}}, {{_base_.model}}])
