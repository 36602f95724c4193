"""Temperature scaling for semantic segmentation.

Temperature scaling (Guo et al., "On Calibration of Modern Neural Networks", ICML 2017)
divides the logits by one scalar ``T > 0`` fitted to minimise the negative
log-likelihood (NLL) of held-out labels; it changes confidences, never the argmax.
:func:`fit_temperature` fits ``T`` on pixel logits; :class:`TemperatureFitMetric` fits it
inside an MMSegmentation test loop from a bounded, deterministic subsample of pixels.
"""
from __future__ import annotations

import math
import zlib
from typing import Any, Dict, Mapping, Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from mmengine.evaluator import BaseMetric

from ..registry import METRICS

__all__ = ['fit_temperature', 'temperature_nll', 'TemperatureFitMetric']


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


def _pixel_data(sample: Mapping, key: str) -> torch.Tensor:
    if key not in sample:
        raise KeyError(f'data sample has no {key!r} (keys: {sorted(sample)}); '
                       'TemperatureFitMetric needs a segmentor that outputs seg_logits '
                       'and annotations loaded in the test pipeline')
    data = sample[key]
    data = data['data'] if isinstance(data, Mapping) else data.data
    return torch.as_tensor(data)


@METRICS.register_module()
class TemperatureFitMetric(BaseMetric):
    """Fits a temperature on the segmentation logits of a test loop.

    From each data sample (``seg_logits`` C x H x W, ``gt_sem_seg``, ``img_path``) it keeps
    at most ``pixels_per_image`` pixels not labelled ``ignore_index``, drawn without
    replacement by ``numpy.random.default_rng([seed, crc32(img_path)])``: the choice
    depends on the image alone, not on batch size, order or process. The pixels of all
    images are concatenated sorted by image path, so the fit does not depend on the
    number of processes either.

    Memory: at most ``pixels_per_image x images x (C + 1)`` stored numbers (float32
    logits and int64 labels), e.g. 4096 pixels x 1000 images x 6 classes is about
    130 MB, gathered on the main process.

    Args:
        pixels_per_image: most pixels kept per image.
        seed: seed of the pixel subsample.
        ignore_index: label of the pixels left out.
        max_iter: most LBFGS iterations of :func:`fit_temperature`.
        collect_device: ``'cpu'`` or ``'gpu'``, for collecting results across processes.
        prefix: metric name prefix; default ``'tscale'``.

    Returns (``compute_metrics``): ``temperature``, ``nll_before`` (mean NLL at T = 1),
    ``nll_after`` (at the fitted T) and ``num_pixels`` (pixels fitted on).
    """
    default_prefix: Optional[str] = 'tscale'

    def __init__(self, pixels_per_image: int = 4096, seed: int = 0, ignore_index: int = 255,
                 max_iter: int = 100, collect_device: str = 'cpu',
                 prefix: Optional[str] = None) -> None:
        super().__init__(collect_device=collect_device, prefix=prefix)
        for name, value, minimum in (('pixels_per_image', pixels_per_image, 1),
                                     ('seed', seed, 0), ('max_iter', max_iter, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ValueError(f'{name} must be an integer >= {minimum}, got {value!r}')
        self.pixels_per_image = pixels_per_image
        self.seed = seed
        self.ignore_index = ignore_index
        self.max_iter = max_iter

    def process(self, data_batch: Any, data_samples: Sequence[Mapping]) -> None:
        """Keep a subsample of the valid pixels of each data sample."""
        for sample in data_samples:
            if hasattr(sample, 'to_dict'):
                sample = sample.to_dict()
            img_path = sample.get('img_path')
            if not isinstance(img_path, str):
                raise KeyError("data sample has no 'img_path' (add it to the meta_keys of "
                               'PackSegInputs); the pixel subsample is seeded by it')
            logits = _pixel_data(sample, 'seg_logits')
            labels = _pixel_data(sample, 'gt_sem_seg')
            if logits.ndim != 3:
                raise ValueError(f'seg_logits must be C x H x W, got {tuple(logits.shape)}')
            if labels.ndim == 3 and labels.shape[0] == 1:
                labels = labels[0]
            if tuple(labels.shape) != tuple(logits.shape[1:]):
                raise ValueError(f'gt_sem_seg {tuple(labels.shape)} and seg_logits '
                                 f'{tuple(logits.shape)} differ in size ({img_path})')
            flat_labels = labels.reshape(-1).cpu().numpy().astype(np.int64)
            valid = np.flatnonzero(flat_labels != self.ignore_index)
            rng = np.random.default_rng([self.seed, zlib.crc32(img_path.encode('utf-8'))])
            if len(valid) > self.pixels_per_image:
                valid = np.sort(rng.choice(valid, size=self.pixels_per_image,
                                           replace=False))
            flat_logits = logits.reshape(logits.shape[0], -1).cpu()
            chosen = torch.from_numpy(valid)
            self.results.append((img_path,
                                 flat_logits[:, chosen].T.to(torch.float32).numpy(),
                                 flat_labels[valid]))

    def compute_metrics(self, results: list) -> Dict[str, float]:
        """Fit the temperature on the pixels of all images (sorted by image path)."""
        if not results:
            raise ValueError('TemperatureFitMetric received no data samples')
        ordered = sorted(results, key=lambda item: item[0])
        logits = torch.from_numpy(np.concatenate([item[1] for item in ordered]))
        labels = torch.from_numpy(np.concatenate([item[2] for item in ordered]))
        if labels.numel() == 0:
            raise ValueError(f'no pixel of the {len(ordered)} images has a label other than '
                             f'ignore_index={self.ignore_index}')
        temperature = fit_temperature(logits, labels, ignore_index=self.ignore_index,
                                      max_iter=self.max_iter)
        return dict(temperature=temperature,
                    nll_before=temperature_nll(logits, labels, 1.0, self.ignore_index),
                    nll_after=temperature_nll(logits, labels, temperature,
                                              self.ignore_index),
                    num_pixels=int(labels.numel()))
