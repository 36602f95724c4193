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
_base_ = ['./fpn-probe_potsdam.py', '../models/svgp-head.py']
svgp_dims = 32  # D: the per-pixel feature vectors the GP reads
model = dict(
    decode_head=dict(_base_.svgp_head, _delete_=True,  # the FPN probe's FCNHead
                     in_channels=[_base_.fpn_channels] * 4, channels=svgp_dims,
                     num_inducing=svgp_dims, num_classes=_base_.num_classes))
optim_wrapper = dict(paramwise_cfg=dict(custom_keys=_base_.svgp_custom_keys))
