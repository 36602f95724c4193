"""The arithmetic of the attacks, in torch alone (no model, no OpenMMLab).

Everything here works on one image: ``x`` is a ``C×H×W`` float tensor of pixels in the
input's own units (0-255 for uint8 data, the data's own scale for 16-bit and float
bands), never normalised. The budget ``eps`` is a ``C×1×1`` tensor (one value per band;
:func:`band_budget`) for L∞ and a number for L2, in the same units.

- :func:`random_start`: the seeded uniform start in the ε-ball (L∞: each pixel uniform in
  ``[-ε_c, ε_c]``; L2: uniform in the ball, a Gaussian direction scaled by ``ε·u^(1/d)``);
- :func:`step_direction`: the gradient's sign (L∞) or the gradient over its L2 norm;
- :func:`project`: back into the ε-ball around the clean image (L∞: per band clipping;
  L2: scaling down to norm ε), and :func:`clamp_pixels` into the valid pixel range;
- the per-pixel objectives of segmentation: :func:`pixel_cross_entropy`,
  :func:`segpgd_loss` (Gu et al., ECCV 2022) and :func:`cospgd_loss` (Agnihotri et al.,
  ICML 2024), each taking the ignore mask;
- :func:`apgd_checkpoints`: APGD's step-size checkpoints (Croce and Hein, ICML 2020).
"""
from __future__ import annotations

import math
from typing import List, Sequence, Union

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ['NORMS', 'band_budget', 'random_start', 'step_direction', 'project',
           'clamp_pixels', 'l2_norm', 'pixel_cross_entropy', 'segpgd_lambda', 'segpgd_loss',
           'cospgd_weights', 'cospgd_loss', 'apgd_checkpoints']

#: The threat models: the L∞ ball (a bound per pixel and band) and the L2 ball (a bound on
#: the whole image's perturbation).
NORMS = ('linf', 'l2')


def band_budget(eps: Union[float, Sequence[float]], bands: int, *, dtype=torch.float32,
                device=None) -> Tensor:
    """ε as a ``bands×1×1`` tensor: one number for every band, or one per band.

    Raises:
        ValueError: a list whose length is not the number of bands.
    """
    values = [float(eps)] * bands if np.ndim(eps) == 0 else [float(e) for e in eps]
    if len(values) != bands:
        raise ValueError(f'eps has {len(values)} values per band but the image has {bands} '
                         'bands; give one number, or one per band')
    return torch.tensor(values, dtype=dtype, device=device).view(bands, 1, 1)


def l2_norm(delta: Tensor) -> Tensor:
    """The L2 norm of a perturbation over all its pixels and bands (a 0-d tensor)."""
    return delta.flatten().norm(p=2)


def random_start(shape: Sequence[int], eps: Union[Tensor, float], norm: str,
                 rng: np.random.Generator, *, dtype=torch.float32, device=None) -> Tensor:
    """A random perturbation in the ε-ball of ``norm``, drawn from ``rng`` (numpy: the
    same draws on every device and in every process for the same generator state).

    L∞: each pixel uniform in ``[-ε_c, ε_c]`` (``eps`` a ``C×1×1`` tensor). L2: uniform
    in the ball of radius ``eps`` (a number): a standard normal direction, normalised,
    times ``eps·u^(1/d)`` with ``u`` uniform in [0, 1) and ``d`` the number of values.
    """
    shape = tuple(int(s) for s in shape)
    if norm == 'linf':
        draw = torch.from_numpy(rng.uniform(-1.0, 1.0, size=shape)).to(dtype=dtype,
                                                                       device=device)
        return draw * torch.as_tensor(eps, dtype=dtype, device=device)
    if norm == 'l2':
        direction = torch.from_numpy(rng.standard_normal(size=shape))
        size = direction.numel()
        radius = float(eps) * float(rng.uniform()) ** (1.0 / size)
        length = float(direction.norm())
        if length == 0.0:
            return torch.zeros(shape, dtype=dtype, device=device)
        return (direction * (radius / length)).to(dtype=dtype, device=device)
    raise ValueError(f'norm must be one of {NORMS}, got {norm!r}')


def step_direction(grad: Tensor, norm: str) -> Tensor:
    """The ascent direction: ``sign(grad)`` for L∞, ``grad / ‖grad‖₂`` for L2 (zero where
    the gradient is zero)."""
    if norm == 'linf':
        return grad.sign()
    if norm == 'l2':
        length = l2_norm(grad)
        return grad / length if float(length) > 0 else torch.zeros_like(grad)
    raise ValueError(f'norm must be one of {NORMS}, got {norm!r}')


def project(delta: Tensor, eps: Union[Tensor, float], norm: str) -> Tensor:
    """``delta`` projected onto the ε-ball: clipped to ``[-ε_c, ε_c]`` per band (L∞), or
    scaled down to L2 norm ε when longer (L2)."""
    if norm == 'linf':
        eps = torch.as_tensor(eps, dtype=delta.dtype, device=delta.device)
        return torch.maximum(torch.minimum(delta, eps), -eps)
    if norm == 'l2':
        length = float(l2_norm(delta))
        if length <= float(eps):
            return delta
        return delta * (float(eps) / length)
    raise ValueError(f'norm must be one of {NORMS}, got {norm!r}')


def clamp_pixels(x: Tensor, low: float, high: float) -> Tensor:
    """Pixels clamped into the valid range ``[low, high]`` (0 and the data's full
    scale)."""
    return x.clamp(min=low, max=high)


# ----------------------------------------------------------------------------- objectives

def pixel_cross_entropy(logits: Tensor, labels: Tensor, valid: Tensor) -> Tensor:
    """Per-pixel cross-entropy ``H×W`` of ``C×H×W`` logits against ``H×W`` labels, zero
    where ``valid`` is False (ignored pixels; their label is never read)."""
    safe = torch.where(valid, labels, torch.zeros_like(labels))
    loss = F.cross_entropy(logits.unsqueeze(0), safe.unsqueeze(0).long(),
                           reduction='none')[0]
    return loss * valid


def _valid_mean(values: Tensor, valid: Tensor) -> Tensor:
    count = valid.sum()
    return values.sum() / count.clamp(min=1)


def segpgd_lambda(step: int, steps: int) -> float:
    """SegPGD's weight of the wrongly classified pixels at (0-based) ``step`` of
    ``steps``: ``λ_t = t / (2T)``, rising from 0 towards 1/2."""
    return step / (2.0 * steps)


def segpgd_loss(logits: Tensor, labels: Tensor, valid: Tensor, step: int, steps: int
                ) -> Tensor:
    """SegPGD's objective: ``((1 − λ_t)·Σ_{correct} CE + λ_t·Σ_{wrong} CE) / N`` over the
    ``N`` valid pixels, with the pixels split by the current prediction (``argmax`` of
    ``logits``) and ``λ_t`` of :func:`segpgd_lambda`."""
    ce = pixel_cross_entropy(logits, labels, valid)
    with torch.no_grad():
        correct = (logits.argmax(dim=0) == labels) & valid
    lam = segpgd_lambda(step, steps)
    weights = torch.where(correct, torch.full_like(ce, 1.0 - lam), torch.full_like(ce, lam))
    return _valid_mean(ce * weights, valid)


def cospgd_weights(logits: Tensor, labels: Tensor, valid: Tensor) -> Tensor:
    """CosPGD's per-pixel weights ``H×W``: the cosine similarity between the softmax of
    the logits and the one-hot label along the class axis, detached (no gradient flows
    through the weights); zero on ignored pixels."""
    with torch.no_grad():
        probs = torch.softmax(logits, dim=0)
        safe = torch.where(valid, labels, torch.zeros_like(labels)).long()
        onehot = F.one_hot(safe, logits.shape[0]).permute(2, 0, 1).to(probs.dtype)
        cosine = F.cosine_similarity(probs, onehot, dim=0)
        return cosine * valid


def cospgd_loss(logits: Tensor, labels: Tensor, valid: Tensor) -> Tensor:
    """CosPGD's objective: the mean over valid pixels of the per-pixel cross-entropy
    weighted by :func:`cospgd_weights`."""
    ce = pixel_cross_entropy(logits, labels, valid)
    return _valid_mean(ce * cospgd_weights(logits, labels, valid), valid)


# ----------------------------------------------------------------------------- APGD

def apgd_checkpoints(steps: int) -> List[int]:
    """APGD's checkpoints for ``N = steps`` iterations, as the authors' code computes
    them: the first after ``max(⌊0.22·N⌋, 1)`` iterations, each next window shorter by
    ``max(⌊0.03·N⌋, 1)`` down to ``max(⌊0.06·N⌋, 1)`` (the integer form of the paper's
    ``p_{j+1} = p_j + max(p_j − p_{j−1} − 0.03, 0.06)``); the iteration counts (1-based)
    at which the step size may be halved, up to ``N``. For ``N = 100``: 22, 41, 57, 70,
    80, 87, 93, 99."""
    window = max(int(0.22 * steps), 1)
    shortest, decrease = max(int(0.06 * steps), 1), max(int(0.03 * steps), 1)
    out, at = [], 0
    while at + window <= steps:
        at += window
        out.append(at)
        window = max(window - decrease, shortest)
    return out
