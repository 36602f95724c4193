# Frozen-encoder SVGP probe on the synthetic Potsdam-format demo data: the demo FPN probe
# (fpn-probe_r18-tiny_frozen_...: the demo UperNet's narrow ResNet-18 loaded from
# work_dirs/demo/seg/iter_600.pth and frozen whole, MMSegmentation's FPN on its 4 stages,
# 32 channels per level) with the sparse variational GP head of the Potsdam SVGP probes
# (configs/_base_/tasks/svgp-probe_potsdam.py) at the demo's width: the 4 levels
# concatenated at stride 4 (128 channels), a 1x1 projection to D = 16, per class an SVGP
# with a linear kernel and 16 learned inducing points, at most 4096 labelled pixels per
# batch for the ELBO, 128 fixed draws for the predictive. The demo schedule trains the
# neck and the head only, without weight decay on the GP's parameters.
_base_ = ['./fpn-probe_r18-tiny_frozen_1xb4-600i_demo-potsdam-128x128.py', '../_base_/models/svgp-head.py']
svgp_dims = 16  # D (32 on Potsdam; narrow like the demo)
model = dict(
    decode_head=dict(_base_.svgp_head, _delete_=True,  # the FPN probe's FCNHead
                     in_channels=[_base_.fpn_channels] * 4, channels=svgp_dims,
                     num_inducing=svgp_dims, num_classes=6))
optim_wrapper = dict(paramwise_cfg=dict(custom_keys=_base_.svgp_custom_keys))
