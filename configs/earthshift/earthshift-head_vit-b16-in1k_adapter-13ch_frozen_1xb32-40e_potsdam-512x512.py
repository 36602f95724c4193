# EarthShift's frozen-encoder setting for 13-band inputs (e.g. Sentinel-2 L1C, bands B1-B12
# with B8A): the model of earthshift-head_vit-b16-in1k_frozen_1xb32-40e_potsdam-512x512.py
# with a ChannelAdapter in front of the RGB encoder, a 1x1 convolution without bias from
# 13 bands to 3 channels, frozen at its random initialisation as in the official code's
# head mode; the inputs normalised per band with the Sentinel-2 L1C statistics of SatMAE's
# fMoW-Sentinel loader (digital numbers).
# Sentinel-2 data do not ship with the package and the Potsdam dataset this inherits is
# RGB: to train, replace the dataloaders' datasets with a 13-band one (images read with
# LoadImageFromFile(imdecode_backend='tifffile', color_type='unchanged'), which needs the
# tifffile package, and no PhotoMetricDistortion, which works on 3-band images only).
_base_ = ['./earthshift-head_vit-b16-in1k_frozen_1xb32-40e_potsdam-512x512.py']
num_bands = 13
s2_mean = [1370.19151926, 1184.3824625, 1120.77120066, 1136.26026392, 1263.73947144,
           1645.40315151, 1846.87040806, 1762.59530783, 1972.62420416, 582.72633433,
           14.77112979, 1732.16362238, 1247.91870117]
s2_std = [633.15169573, 650.2842772, 712.12507725, 965.23119807, 948.9819932,
          1108.06650639, 1258.36394548, 1233.1492281, 1364.38688993, 472.37967789,
          14.3114637, 1310.36996126, 1087.6020813]
model = dict(
    data_preprocessor=dict(mean=s2_mean, std=s2_std, bgr_to_rgb=False),
    backbone=dict(_delete_=True, type='ChannelAdapter', in_channels=num_bands, out_channels=3,
                  frozen=True, backbone=_base_.model.backbone))
