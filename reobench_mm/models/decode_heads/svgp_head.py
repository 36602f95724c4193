"""A sparse variational Gaussian-process classification head: :class:`SVGPHead`.

The calibration study's SVGP probe (its Sec. III-E) reads the frozen encoder's features
with a GP classifier instead of a 1x1 convolution: per pixel, a feature vector ``x``; per
class ``c``, a latent function ``f_c(x)`` with a linear-kernel GP prior; the class
probabilities ``softmax(f(x))``; the GPs sparse (learned inducing points) and trained by
maximising the variational ELBO. This head builds that on top of the FPN probe's neck:

- features: the FPN levels resized to the finest and concatenated (``resize_concat``, as
  the FPN probe's head), a 1x1 convolution to ``channels`` = D dimensions (with bias; no
  norm, no activation), image by image, then resized bilinearly to the output size (the
  labels' size in training; in testing the size MMSegmentation would upsample logits
  to), so the GP is evaluated at every labelled pixel;
- GP (:mod:`.svgp_model`, GPyTorch): ``num_classes`` independent SVGPs, each with its own
  ``num_inducing`` (default D) learned inducing points initialised as orthonormal rows,
  a learned constant mean and a linear kernel (optionally scaled); GPyTorch's
  ``SoftmaxLikelihood`` without mixing weights;
- loss (``loss_elbo``): minus GPyTorch's ``VariationalELBO`` on at most
  ``num_train_pixels`` pixels of the batch, drawn uniformly without replacement from the
  pixels whose label is not ``ignore_index``; its ``num_data`` (the number of training
  points the KL term is weighed against) is the number of labelled training pixels seen
  so far (all batches, all processes, this one included; kept in the checkpoint), or a
  fixed ``num_data``;
- prediction: the log of the Monte-Carlo predictive
  ``p(c | x) = 1/S sum_s softmax(mu(x) + sigma(x) * eps_s)_c`` with GPyTorch's latent
  marginal mean ``mu`` and standard deviation ``sigma`` and ``S = num_mc_samples`` fixed
  standard-normal draws ``eps_s`` (one per class), drawn once from a generator seeded with
  ``mc_seed`` and shared by every pixel. ``seg_logits`` are these log-probabilities, so
  ``softmax(seg_logits)`` is the predictive distribution and every metric that reads
  ``seg_logits`` applies unchanged. Each image is evaluated on its own, in chunks of
  exactly ``chunk_pixels`` pixels (the last one zero-padded), so a pixel's numbers do not
  depend on the batch size or on the run.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import torch
from mmengine.dist import all_reduce
from mmseg.models.decode_heads.decode_head import BaseDecodeHead
from mmseg.models.losses import accuracy
from mmseg.models.utils import resize
from torch import Tensor, nn

from ...registry import MODELS

__all__ = ['SVGPHead', 'GPYTORCH_REQUIREMENT']

#: The GPyTorch versions the head is written for (requirements/runtime.txt).
GPYTORCH_REQUIREMENT = 'gpytorch>=1.15,<2'


def _svgp_model():
    """The :mod:`.svgp_model` module, or an ImportError saying how to install GPyTorch."""
    try:
        from . import svgp_model
    except ImportError as error:
        raise ImportError(f'SVGPHead needs GPyTorch, which could not be imported ({error}); '
                          f'install it with: pip install "{GPYTORCH_REQUIREMENT}"') from error
    return svgp_model


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f'{name} must be an integer >= 1, got {value!r}')
    return value


def _no_autocast(device: torch.device):
    """A context without autocast on ``device``: the GP computes in float32."""
    return torch.autocast(device_type=device.type, enabled=False)


@MODELS.register_module()
class SVGPHead(BaseDecodeHead):
    """Sparse variational GP classification head (see the module docstring).

    Args:
        in_channels (int | Sequence[int]): Input channels (a sequence with
            ``input_transform='resize_concat'``: their sum is the projection's input).
        channels (int): D, the dimension of the per-pixel feature vectors (the 1x1
            projection's output), the GP's input dimension.
        num_classes (int): Number of classes (>= 2), one latent function each.
        in_index (int | Sequence[int]): Input feature index (as ``BaseDecodeHead``).
            Defaults to -1.
        input_transform (str, optional): ``'resize_concat'`` or None (as
            ``BaseDecodeHead``). Defaults to None.
        num_inducing (int, optional): Inducing points per class, 1..D (a linear kernel's
            ``K_ZZ`` has rank at most D). Defaults to D.
        kernel_scale (bool): Wrap the linear kernel in a ``ScaleKernel`` (the linear
            kernel's own variance already scales it). Defaults to False.
        num_train_pixels (int): Largest number of labelled pixels of a training batch
            the ELBO is computed on. Defaults to 4096.
        num_data (int, optional): The ELBO's ``num_data``; None: the number of labelled
            training pixels seen so far. Defaults to None.
        num_elbo_samples (int): Draws per pixel of the ELBO's Monte-Carlo expectation
            (GPyTorch's ``num_likelihood_samples``). Defaults to 10.
        num_mc_samples (int): S, the fixed draws of the predictive. Defaults to 128.
        mc_seed (int): Seed of the generator of the predictive's draws. Defaults to 0.
        inducing_seed (int): Seed of the inducing points' initialisation. Defaults to 0.
        chunk_pixels (int): Pixels per GP evaluation in prediction. Defaults to 8192.
        ignore_index (int): Label of the pixels left out of the loss. Defaults to 255.
        align_corners (bool): ``align_corners`` of the resizes. Defaults to False.
        init_cfg (dict, optional): MMEngine initialisation config; None keeps PyTorch's
            initialisation of the projection. Defaults to None.
    """

    def __init__(self, in_channels: Union[int, Sequence[int]], channels: int, *,
                 num_classes: int, in_index: Union[int, Sequence[int]] = -1,
                 input_transform: Optional[str] = None, num_inducing: Optional[int] = None,
                 kernel_scale: bool = False, num_train_pixels: int = 4096,
                 num_data: Optional[int] = None, num_elbo_samples: int = 10,
                 num_mc_samples: int = 128, mc_seed: int = 0, inducing_seed: int = 0,
                 chunk_pixels: int = 8192, ignore_index: int = 255,
                 align_corners: bool = False, init_cfg: Optional[dict] = None) -> None:
        _positive_int('channels', channels)
        if isinstance(num_classes, bool) or not isinstance(num_classes, int) \
                or num_classes < 2:
            raise ValueError(f'num_classes must be an integer >= 2 (one latent function '
                             f'per class, softmax likelihood), got {num_classes!r}')
        num_inducing = channels if num_inducing is None else num_inducing
        _positive_int('num_inducing', num_inducing)
        if num_data is not None:
            _positive_int('num_data', num_data)
        for name, value in (('num_train_pixels', num_train_pixels),
                            ('num_elbo_samples', num_elbo_samples),
                            ('num_mc_samples', num_mc_samples), ('chunk_pixels', chunk_pixels)):
            _positive_int(name, value)
        for name, value in (('mc_seed', mc_seed), ('inducing_seed', inducing_seed)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f'{name} must be an integer >= 0, got {value!r}')
        if not isinstance(kernel_scale, bool):
            raise ValueError(f'kernel_scale must be True or False, got {kernel_scale!r}')
        model = _svgp_model()
        super().__init__(in_channels, channels, num_classes=num_classes, dropout_ratio=0.0,
                         in_index=in_index, input_transform=input_transform,
                         ignore_index=ignore_index, align_corners=align_corners,
                         loss_decode=[], init_cfg=init_cfg)
        # BaseDecodeHead's classifier and (empty) decode losses are not used: the GP
        # classifies and the ELBO is the loss
        del self.conv_seg, self.loss_decode
        self.num_inducing = num_inducing
        self.kernel_scale = kernel_scale
        self.num_train_pixels = num_train_pixels
        self.num_data = num_data
        self.num_elbo_samples = num_elbo_samples
        self.num_mc_samples = num_mc_samples
        self.mc_seed = mc_seed
        self.chunk_pixels = chunk_pixels
        self.projection = nn.Conv2d(self.in_channels, channels, kernel_size=1)
        inducing = model.orthonormal_inducing_points(num_classes, num_inducing, channels,
                                                     inducing_seed)
        self.gp = model.IndependentSVGP(num_classes, inducing, kernel_scale)
        self.likelihood = model.softmax_likelihood(num_classes)
        generator = torch.Generator().manual_seed(mc_seed)
        #: (S, num_classes) standard-normal draws of the predictive (rebuilt from the seed)
        self.register_buffer('mc_draws', torch.randn(num_mc_samples, num_classes,
                                                     generator=generator), persistent=False)
        #: labelled training pixels seen so far, all processes (the ELBO's default num_data)
        self.register_buffer('pixels_seen', torch.zeros((), dtype=torch.int64))

    # ------------------------------------------------------------------ features

    def projected_features(self, inputs: Sequence[Tensor]) -> Tensor:
        """The per-pixel feature vectors at the input levels' resolution ``(B, D, h, w)``:
        the transformed inputs (``input_transform``) through the 1x1 projection, one
        image at a time."""
        x = self._transform_inputs(inputs)
        return torch.cat([self.projection(x[i:i + 1]) for i in range(x.shape[0])])

    def _resized(self, features: Tensor, size: Optional[Sequence[int]]) -> Tensor:
        if size is None or tuple(features.shape[-2:]) == tuple(size):
            return features
        return torch.cat([resize(features[i:i + 1], size=tuple(size), mode='bilinear',
                                 align_corners=self.align_corners)
                          for i in range(features.shape[0])])

    # ------------------------------------------------------------------ prediction

    def predictive_log_probs(self, pixels: Tensor) -> Tensor:
        """``(n, D)`` feature vectors -> ``(n, num_classes)`` log predictive
        probabilities, ``log 1/S sum_s softmax(mu + sigma * eps_s)``, in chunks of exactly
        ``chunk_pixels`` rows."""
        model = _svgp_model()
        model.clear_caches(self.gp)  # parameters may have changed since the last call
        out = []
        count = pixels.shape[0]
        draws = self.mc_draws.unsqueeze(-1)  # (S, C, 1)
        with _no_autocast(pixels.device):
            pixels = pixels.float()
            for start in range(0, count, self.chunk_pixels):
                chunk = pixels[start:start + self.chunk_pixels]
                kept = chunk.shape[0]
                if kept < self.chunk_pixels:
                    chunk = torch.cat([chunk, chunk.new_zeros(self.chunk_pixels - kept,
                                                              chunk.shape[1])])
                mean, variance = model.latent_marginals(self.gp, chunk)
                # (S, C, chunk): the classes of one draw and pixel along dim 1
                samples = mean.t().unsqueeze(0) + \
                    variance.clamp_min(0).sqrt().t().unsqueeze(0) * draws
                log_probs = torch.logsumexp(torch.log_softmax(samples, dim=1), dim=0)
                out.append(log_probs.t()[:kept] - math.log(self.num_mc_samples))
        if not out:
            return pixels.new_zeros(0, self.num_classes)
        return torch.cat(out)

    def forward(self, inputs: Sequence[Tensor],
                out_size: Optional[Sequence[int]] = None) -> Tensor:
        """Log predictive probabilities ``(B, num_classes, H, W)`` (the seg logits) at
        ``out_size`` (default: the finest input level's size), image by image."""
        features = self._resized(self.projected_features(inputs), out_size)
        batch, dims, height, width = features.shape
        maps = []
        for image in features:
            log_probs = self.predictive_log_probs(image.reshape(dims, -1).t())
            maps.append(log_probs.t().reshape(self.num_classes, height, width))
        return torch.stack(maps)

    @staticmethod
    def output_size(batch_img_metas: List[dict]) -> Tuple[int, int]:
        """The size ``predict_by_feat`` resizes seg logits to: ``img_shape`` when it is a
        ``torch.Size`` (the sliding window's crops), else ``pad_shape``, else
        ``img_shape``."""
        meta = batch_img_metas[0]
        if isinstance(meta['img_shape'], torch.Size):
            size = meta['img_shape']
        elif 'pad_shape' in meta:
            size = meta['pad_shape'][:2]
        else:
            size = meta['img_shape']
        return int(size[0]), int(size[1])

    def predict(self, inputs: Sequence[Tensor], batch_img_metas: List[dict],
                test_cfg: Any) -> Tensor:
        """Seg logits at the size MMSegmentation would upsample them to, evaluated there
        (``predict_by_feat``'s resize is then the identity)."""
        logits = self.forward(inputs, out_size=self.output_size(batch_img_metas))
        return self.predict_by_feat(logits, batch_img_metas)

    # ------------------------------------------------------------------ training

    def training_pixels(self, labels: Tensor) -> Tensor:
        """Indices into the flattened ``(B, H, W)`` labels of the pixels the ELBO is
        computed on: those not ``ignore_index``; when there are more than
        ``num_train_pixels``, the first ``num_train_pixels`` of a ``torch.randperm`` of
        them (the global generator), in raster order. (When exactly ``num_classes`` remain,
        the last is left out: GPyTorch's softmax likelihood would read an
        ``n == num_classes`` sample as the layout it deprecated.)"""
        valid = torch.nonzero(labels.reshape(-1) != self.ignore_index).squeeze(1)
        if valid.numel() > self.num_train_pixels:
            pick = torch.randperm(valid.numel(), device=valid.device)[:self.num_train_pixels]
            valid = valid[pick.sort().values]
        if valid.numel() == self.num_classes:
            valid = valid[:-1]
        return valid

    def loss(self, inputs: Sequence[Tensor], batch_data_samples: Sequence[Any],
             train_cfg: Any) -> Dict[str, Tensor]:
        """``loss_elbo`` (minus the ELBO, per pixel) and ``acc_seg`` (accuracy of the
        latent mean's arg-max on the ELBO's pixels, in %)."""
        labels = self._stack_batch_gt(batch_data_samples)
        features = self._resized(self.projected_features(inputs), labels.shape[-2:])
        flat = labels.reshape(-1).long()
        bad = (flat != self.ignore_index) & ((flat < 0) | (flat >= self.num_classes))
        if bool(bad.any()):
            raise ValueError(f'label {int(flat[bad][0])} is outside [0, {self.num_classes}) '
                             f'and is not ignore_index={self.ignore_index}')
        seen = (flat != self.ignore_index).sum().to(self.pixels_seen)
        all_reduce(seen)
        self.pixels_seen += seen
        chosen = self.training_pixels(flat)
        if chosen.numel() == 0:  # nothing labelled: no data term, no step
            zero = sum(p.sum() for p in self.parameters()) * 0.0
            return dict(loss_elbo=zero, acc_seg=zero.detach())
        height, width = features.shape[-2:]
        image, rest = chosen // (height * width), chosen % (height * width)
        pixels = features[image, :, rest // width, rest % width]  # (n, D), no full copy
        targets = flat[chosen]
        num_data = self.num_data if self.num_data is not None else int(self.pixels_seen)
        model = _svgp_model()
        with _no_autocast(pixels.device):
            elbo, mean = model.variational_elbo(self.gp, self.likelihood, pixels.float(),
                                                targets, num_data, self.num_elbo_samples)
        return dict(loss_elbo=-elbo, acc_seg=accuracy(mean.detach(), targets))
