# A frozen-encoder SVGP probe on ISPRS Potsdam 512x512: the FPN probe's task
# (fpn-probe_potsdam.py: frozen encoder, four hooked layers, MMSegmentation's FPN neck,
# dataset, optimiser, schedule, CorruptionTestLoop) with the calibration study's sparse
# variational Gaussian-process head (its Sec. III-E) in place of the 1x1 classifier.
# A probe config adds a backbone base and the hooked blocks exactly as an FPN probe does.
# - head: SVGPHead (reobench_mm/models/decode_heads/svgp_head.py): the four FPN levels
#   resized bilinearly to the finest and concatenated (4 x 256 channels), a 1x1
#   projection to D = 32 dimensions, resized bilinearly to the labels; per class an
#   independent SVGP with a linear kernel, a learned constant mean and 32 learned inducing
#   points (= D: with a linear kernel more would make K_ZZ singular; initialised as
#   orthonormal rows, seed 0); GPyTorch's softmax likelihood without mixing weights;
# - loss: minus GPyTorch's variational ELBO on at most 4096 labelled pixels per batch
#   (uniformly without replacement, ignore_index left out), 10 draws per pixel, its KL
#   term weighed against the number of labelled training pixels seen so far;
# - prediction: seg_logits are the log Monte-Carlo predictive probabilities over 128
#   fixed standard-normal draws (seed 0), so softmax(seg_logits) is the predictive;
# - optimiser: the FPN probe's AdamW, without weight decay on the GP's parameters
#   (variational distribution, inducing points, mean, kernel): the ELBO already has the
#   KL term as its regulariser.
_base_ = ['./fpn-probe_potsdam.py']
svgp_dims = 32  # D: the per-pixel feature vectors the GP reads
model = dict(
    decode_head=dict(
        _delete_=True,  # the FPN probe's FCNHead
        type='SVGPHead',
        in_channels=[_base_.fpn_channels] * 4,
        in_index=[0, 1, 2, 3],
        input_transform='resize_concat',
        channels=svgp_dims,
        num_classes={{_base_.num_classes}},
        num_inducing=svgp_dims,
        kernel_scale=False,
        num_train_pixels=4096,
        num_data=None,
        num_elbo_samples=10,
        num_mc_samples=128,
        mc_seed=0,
        inducing_seed=0,
        ignore_index=255,
        align_corners=False))
optim_wrapper = dict(paramwise_cfg=dict(custom_keys={'decode_head.gp.': dict(decay_mult=0.0)}))
