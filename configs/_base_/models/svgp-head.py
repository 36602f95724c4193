# The calibration study's SVGP probe head (SVGPHead, reobench_mm/models/decode_heads/
# svgp_head.py) with the settings every SVGP probe shares: the four FPN levels resized to
# the finest and concatenated, per class an SVGP with a linear kernel (no scale), at most
# 4096 labelled pixels per batch for the ELBO (10 draws per pixel, the number of labelled
# training pixels counted as they are seen), 128 fixed draws (seed 0) for the predictive,
# inducing points initialised with seed 0. A config sets the FPN width, the projection
# dimension D (= the number of inducing points) and the classes:
#   decode_head=dict(_base_.svgp_head, _delete_=True, in_channels=[256] * 4, channels=32,
#                    num_inducing=32, num_classes=6)
# and keeps weight decay off the GP's parameters with svgp_custom_keys:
#   optim_wrapper=dict(paramwise_cfg=dict(custom_keys=_base_.svgp_custom_keys))
svgp_head = dict(
    type='SVGPHead',
    in_index=[0, 1, 2, 3],
    input_transform='resize_concat',
    kernel_scale=False,
    num_train_pixels=4096,
    num_data=None,
    num_elbo_samples=10,
    num_mc_samples=128,
    mc_seed=0,
    inducing_seed=0,
    ignore_index=255,
    align_corners=False)
# the GP's parameters (variational distribution, inducing points, mean, kernel) without
# weight decay: the ELBO's KL term is their regulariser
svgp_custom_keys = {'decode_head.gp.': dict(decay_mult=0.0)}
