"""Temperature scaling for semantic segmentation.

Temperature scaling (Guo et al., "On Calibration of Modern Neural Networks", ICML 2017)
divides the logits by one scalar ``T > 0`` fitted to minimise the negative
log-likelihood (NLL) of held-out labels; it changes confidences, never the argmax.
:func:`fit_temperature` fits ``T`` on pixel logits;
:class:`~reobench_mm.evaluation.metrics.temperature.TemperatureFitMetric` fits it inside an
MMSegmentation test loop from a bounded, deterministic subsample of pixels.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

__all__ = ['fit_temperature', 'temperature_nll']


def _valid_pixels(logits: torch.Tensor, labels: torch.Tensor, ignore_index: int):
    """Float64 logits and int64 labels of the pixels whose label is not ignored."""
    if not isinstance(logits, torch.Tensor) or not isinstance(labels, torch.Tensor):
        raise TypeError(f'logits and labels must be torch tensors, got '
                        f'{type(logits).__name__} and {type(labels).__name__}')
    if logits.ndim != 2:
        raise ValueError(f'logits must have shape (N, C), got {tuple(logits.shape)}')
    if labels.ndim != 1 or labels.shape[0] != logits.shape[0]:
        raise ValueError(f'labels must have shape (N,) = ({logits.shape[0]},) to match '
                         f'logits {tuple(logits.shape)}, got {tuple(labels.shape)}')
    if logits.shape[0] == 0:
        raise ValueError('cannot fit a temperature on empty input (N = 0 pixels)')
    if logits.shape[1] < 2:
        raise ValueError(f'logits need at least 2 classes, got C = {logits.shape[1]}')
    valid = labels != ignore_index
    if not bool(valid.any()):
        raise ValueError(f'all {labels.shape[0]} labels equal ignore_index={ignore_index}: '
                         'no valid pixels')
    logits = logits[valid].detach().to(torch.float64)
    labels = labels[valid].detach().to(torch.int64)
    if bool((labels < 0).any()) or bool((labels >= logits.shape[1]).any()):
        raise ValueError(f'labels must be in [0, {logits.shape[1]}) or ignore_index='
                         f'{ignore_index}, got {labels.min().item()}..{labels.max().item()}')
    if not bool(torch.isfinite(logits).all()):
        raise ValueError('logits contain NaN or infinite values')
    return logits, labels


def temperature_nll(logits: torch.Tensor, labels: torch.Tensor, temperature: float = 1.0,
                    ignore_index: int = 255) -> float:
    """Mean NLL of ``softmax(logits / temperature)`` over the pixels not labelled
    ``ignore_index``.

    Args:
        logits: (N, C) logits.
        labels: (N,) class indices or ``ignore_index``.
        temperature: the temperature, > 0.
        ignore_index: label of the pixels left out.
    """
    if not temperature > 0 or not math.isfinite(temperature):
        raise ValueError(f'temperature must be a positive finite number, got {temperature}')
    logits, labels = _valid_pixels(logits, labels, ignore_index)
    return float(F.cross_entropy(logits / temperature, labels))


def fit_temperature(logits: torch.Tensor, labels: torch.Tensor, ignore_index: int = 255,
                    max_iter: int = 100) -> float:
    """The temperature ``T`` that minimises the mean NLL of ``softmax(logits / T)``.

    Optimises ``log T`` (float64, from ``T = 1``) with ``torch.optim.LBFGS`` and a strong
    Wolfe line search over all pixels at once. When every valid pixel is classified
    correctly the NLL keeps falling as ``T -> 0``; the fit then stops at a small ``T``
    where the gradient vanishes numerically.

    Args:
        logits: (N, C) logits.
        labels: (N,) class indices or ``ignore_index``.
        ignore_index: label of the pixels left out.
        max_iter: most LBFGS iterations.

    Returns:
        float: the fitted temperature (> 1 softens over-confident predictions).
    """
    if isinstance(max_iter, bool) or not isinstance(max_iter, int) or max_iter < 1:
        raise ValueError(f'max_iter must be a positive integer, got {max_iter!r}')
    logits, labels = _valid_pixels(logits, labels, ignore_index)
    log_temperature = torch.zeros((), dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.LBFGS([log_temperature], lr=1.0, max_iter=max_iter,
                                  tolerance_grad=1e-10, tolerance_change=1e-12,
                                  line_search_fn='strong_wolfe')

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = F.cross_entropy(logits * torch.exp(-log_temperature), labels)
        loss.backward()
        return loss

    optimizer.step(closure)
    temperature = math.exp(float(log_temperature.detach()))
    if not math.isfinite(temperature) or temperature <= 0:
        raise RuntimeError(f'the temperature fit diverged (T = {temperature})')
    return temperature
