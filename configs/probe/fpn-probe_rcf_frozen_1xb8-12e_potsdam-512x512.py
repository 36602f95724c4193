# FPN probe on ISPRS Potsdam 512x512 with random convolutional features (RCF, MOSAIKS;
# torchgeo's RCF in its gaussian mode): 256 fixed 3x3 filters drawn from a standard
# normal (seed 0), bias -1, relu(z) and relu(-z) of each response (512 features), averaged
# over 4x4, 8x8, 16x16 and 32x32 windows for the FPN decoder's four levels (512 channels
# each; the multi-scale pooling is the package's choice, docs/backbones.md). No weights to
# load, nothing to freeze (the filters are buffers); ImageNet normalisation of the input.
_base_ = ['../_base_/tasks/fpn-probe_potsdam.py']
rcf_features = 512
model = dict(
    data_preprocessor=dict(mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375]),
    backbone=dict(_delete_=True, type='RandomConvFeatures', in_channels=3,
                  features=rcf_features, kernel_size=3, bias=-1.0, seed=0),
    neck=dict(in_channels=[rcf_features] * 4))
