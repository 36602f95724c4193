# Frozen-encoder FPN probe with Prithvi-EO-2.0-300M (ViT-L/16 with a 3-D patch embedding,
# pre-trained on NASA's HLS data) at the calibration study's 224x224 input. The encoder
# reads six bands (HLS Blue, Green, Red, Narrow NIR, SWIR 1, SWIR 2), so it cannot take
# ISPRS Potsdam's RGB patches: this probe runs on CloudSEN12's Sentinel-2 L1C patches
# (../_base_/tasks/fpn-probe_cloudsen12-224.py: the FPN probe of fpn-probe_potsdam-224.py on
# that dataset, 4 classes).
# - bands: the pipeline loads all 13 Sentinel-2 bands; the backbone picks the six by name
#   (band_names): B02 -> Blue, B03 -> Green, B04 -> Red, B8A -> Narrow NIR, B11 -> SWIR 1,
#   B12 -> SWIR 2 (HLS S30 takes its bands from these MSI bands);
# - normalisation: the pre-training statistics (reflectance x 10000) of those six bands;
#   the seven other bands pass with mean 0, std 1 and are dropped by the backbone;
# - one time step (num_frames=1), no temporal or location encoding: this is the plain
#   300M release (Prithvi_EO_V2_300M.pt, converted on load: the MAE decoder, its mask token
#   and the fixed position embeddings dropped);
# - the embeddings and all 24 blocks frozen (and the final norm, unused here), the FPN on
#   blocks 6, 12, 18, 24 (the last of each quarter; out_indices counts from 0), each the
#   block's raw output.
_base_ = ['../_base_/tasks/fpn-probe_cloudsen12-224.py']
checkpoint = 'checkpoints/Prithvi_EO_V2_300M.pt'
vit_channels = 1024
model = dict(
    data_preprocessor=dict(
        # B01, B02, B03, B04, B05, B06, B07, B08, B8A, B09, B10, B11, B12
        mean=[0.0, 1087.0, 1342.0, 1433.0, 0.0, 0.0, 0.0, 0.0, 2734.0, 0.0, 0.0, 1958.0,
              1363.0],
        std=[1.0, 2248.0, 2179.0, 2178.0, 1.0, 1.0, 1.0, 1.0, 1850.0, 1.0, 1.0, 1242.0,
             1049.0]),
    backbone=dict(
        _delete_=True,
        type='PrithviV2',
        arch='300m',
        img_size=224,
        num_frames=1,
        band_names=_base_.s2_bands,
        frozen_stages=24,
        out_indices=(5, 11, 17, 23),
        init_cfg=dict(type='Pretrained', checkpoint=checkpoint)),
    neck=dict(in_channels=[vit_channels] * 4))
