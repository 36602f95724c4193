# Frozen-encoder FPN probe on ISPRS Potsdam with every input resized bilinearly to 224x224
# (the calibration study's input size; ../_base_/tasks/fpn-probe_potsdam-224.py, which
# also sets img_size=224) and SatMAE++ ViT-L/16 (fMoW-RGB pretraining): the embeddings and
# all 24 blocks frozen, the FPN decoder on blocks 6, 12, 18, 24 (the last of each quarter;
# out_indices counts from 0).
_base_ = ['../_base_/tasks/fpn-probe_potsdam-224.py', '../_base_/backbones/satmaepp-l.py']
model = dict(data_preprocessor=_base_.img_norm_cfg,
             backbone=dict(_base_.backbone, frozen_stages=24, out_indices=(5, 11, 17, 23)),
             neck=dict(in_channels=[_base_.vit_channels] * 4))
