"""Running one attack on one image: :func:`perturb`.

The model enters only through ``objective(x, step, steps)``: the loss to maximise at the
pixels ``x`` (a ``C×H×W`` float tensor that requires a gradient), a 0-d tensor. Each
image is attacked on its own, so its perturbation does not depend on the other images of
its batch (nor on the batch size), and its random start is drawn from its own generator
(:func:`~reobench_corruptions.make_rng` keyed by the run's seed, the attack, ε and the
image's file name).

Gradients are taken with :func:`torch.autograd.grad` with respect to the pixels alone:
nothing is accumulated in the model's parameters.
"""
from __future__ import annotations

from typing import Callable, List, Optional, Union

import numpy as np
import torch
from torch import Tensor

from .functional import (apgd_checkpoints, band_budget, clamp_pixels, project, random_start,
                         step_direction)
from .spec import DEFAULT_ALPHA_FRACTION, AttackSpec

__all__ = ['perturb', 'default_alpha', 'Objective', 'APGD_MOMENTUM', 'APGD_RHO']

Objective = Callable[[Tensor, int, int], Tensor]
#: APGD's momentum α and its fraction ρ of successful steps (Croce and Hein, 2020).
APGD_MOMENTUM = 0.75
APGD_RHO = 0.75


def default_alpha(spec: AttackSpec, scale: float) -> Union[float, tuple]:
    """The step α of ``spec`` in pixel units: as given, else for L∞
    :data:`~reobench_mm.attacks.spec.DEFAULT_ALPHA_FRACTION` of the full scale ``scale``
    (2.55 for uint8) and for L2 ``2.5·ε / steps`` (Madry et al.'s rule for L2 PGD)."""
    if spec.alpha is not None:
        return spec.alpha
    if spec.norm == 'l2':
        return 2.5 * float(spec.eps) / spec.steps
    return DEFAULT_ALPHA_FRACTION * scale


def _gradient(objective: Objective, x: Tensor, step: int, steps: int):
    x = x.detach().requires_grad_(True)
    with torch.enable_grad():
        loss = objective(x, step, steps)
        if not isinstance(loss, Tensor) or loss.dim() != 0:
            raise RuntimeError('the attack objective must return a 0-d tensor')
        if not loss.requires_grad:
            raise RuntimeError(
                "the model's loss does not depend differentiably on the input pixels (no "
                'gradient reaches them: a part of the forward runs without gradients, '
                'detaches, or rounds), so it cannot be attacked by gradients')
        (grad, ) = torch.autograd.grad(loss, x)
    return float(loss.detach()), grad.detach()


def perturb(x0: Tensor, objective: Objective, spec: AttackSpec, rng: np.random.Generator,
            scale: float, on_iterate: Optional[Callable[[int, Tensor], None]] = None
            ) -> Tensor:
    """The adversarial image of ``x0`` (``C×H×W`` float pixels in ``[0, scale]``).

    Args:
        objective: the loss to maximise (see the module docstring).
        spec: the attack and its budget.
        rng: the image's generator of the random start.
        scale: the full scale (the valid pixels are ``[0, scale]``).
        on_iterate: called as ``on_iterate(t, x_t)`` with every iterate the objective is
            evaluated at (``t = 0`` the start); the per-step curves use it.

    Returns:
        ``x0 + δ`` with ``δ`` in the ε-ball of ``spec.norm`` and every pixel in
        ``[0, scale]``; ``x0`` itself for ε = 0.
    """
    x0 = x0.detach()
    if spec.is_null:
        return x0.clone()
    norm = spec.norm
    bands = x0.shape[0]
    eps = band_budget(spec.eps, bands, dtype=x0.dtype, device=x0.device) \
        if norm == 'linf' else float(spec.eps)

    def inside(x: Tensor) -> Tensor:
        return clamp_pixels(x0 + project(x - x0, eps, norm), 0.0, scale)

    if not spec.attack_kind.iterative:  # FGSM
        _, grad = _gradient(objective, x0, 0, 1)
        if on_iterate is not None:
            on_iterate(0, x0)
        return inside(x0 + eps * step_direction(grad, norm))
    x = x0
    if spec.random_start:
        x = inside(x0 + random_start(x0.shape, eps, norm, rng, dtype=x0.dtype,
                                     device=x0.device))
    if spec.attack_kind.schedule == 'apgd':
        return _apgd(x0, x, objective, spec, eps, inside, on_iterate)
    alpha = default_alpha(spec, scale)
    alpha = band_budget(alpha, bands, dtype=x0.dtype, device=x0.device) \
        if isinstance(alpha, tuple) else alpha
    for step in range(spec.steps):
        _, grad = _gradient(objective, x, step, spec.steps)
        if on_iterate is not None:
            on_iterate(step, x)
        x = inside(x + alpha * step_direction(grad, norm))
    return x


def _apgd(x0: Tensor, x: Tensor, objective: Objective, spec: AttackSpec,
          eps: Union[Tensor, float], inside: Callable[[Tensor], Tensor],
          on_iterate: Optional[Callable[[int, Tensor], None]]) -> Tensor:
    """APGD (Croce and Hein, 2020, Algorithm 1, as in the authors' code) from the start
    ``x``: the step size η starts at 2ε; the first step is plain, later ones add momentum
    (``x_{k+1} = P(x_k + 0.75·(z − x_k) + 0.25·(x_k − x_{k−1}))`` with
    ``z = P(x_k + η·dir(∇))``). At each checkpoint (:func:`apgd_checkpoints`) η is halved
    and the search restarts from the best point when at most ρ = 0.75 of the steps since
    the last checkpoint increased the loss, or when η was not halved at the last
    checkpoint and the best loss has not improved since. Returns the point of highest
    loss."""
    steps, norm = spec.steps, spec.norm
    checkpoints = set(apgd_checkpoints(steps))
    eta = eps * 2.0
    loss, grad = _gradient(objective, x, 0, steps)
    if on_iterate is not None:
        on_iterate(0, x)
    best, best_x, best_grad = loss, x, grad
    previous_x = x
    losses: List[float] = [loss]
    last_checkpoint, halved_last, best_at_checkpoint = 0, True, best
    for k in range(steps):
        z = inside(x + eta * step_direction(grad, norm))
        new_x = z if k == 0 else inside(
            x + APGD_MOMENTUM * (z - x) + (1 - APGD_MOMENTUM) * (x - previous_x))
        new_loss, new_grad = _gradient(objective, new_x, k + 1, steps)
        if on_iterate is not None:
            on_iterate(k + 1, new_x)
        losses.append(new_loss)
        previous_x, x, grad = x, new_x, new_grad
        if new_loss > best:
            best, best_x, best_grad = new_loss, new_x, new_grad
        if k + 1 in checkpoints:
            window = losses[last_checkpoint:k + 2]
            increases = sum(b > a for a, b in zip(window, window[1:]))
            oscillating = increases <= APGD_RHO * (len(window) - 1)
            stalled = not halved_last and best_at_checkpoint >= best
            halved_last = oscillating or stalled
            if halved_last:
                eta = eta / 2.0
                x, grad = best_x, best_grad
            last_checkpoint, best_at_checkpoint = k + 1, best
    return best_x
