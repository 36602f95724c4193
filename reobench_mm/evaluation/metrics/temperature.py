"""Temperature scaling inside a test loop: :class:`TemperatureFitMetric` fits the
temperature of :func:`~reobench_mm.evaluation.functional.temperature.fit_temperature` on a
bounded, deterministic subsample of the pixels of an MMSegmentation test run."""
from __future__ import annotations

import os.path as osp
import zlib
from typing import Any, Dict, Mapping, Optional, Sequence

import numpy as np
import torch
from mmengine.evaluator import BaseMetric

from ...registry import METRICS
from ..functional.temperature import fit_temperature, temperature_nll
from ..keys import TEMPERATURE_PREFIX

__all__ = ['TemperatureFitMetric']


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
    replacement by ``numpy.random.default_rng([seed, crc32(file name)])`` (the image's
    file name, as the corruptions key their draws): the choice depends on the image alone,
    not on batch size, order, process or where the data lies. The pixels of all images
    are concatenated sorted by file name (then path), so the fit does not depend on the
    number of processes or the data's location either.

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
    default_prefix: Optional[str] = TEMPERATURE_PREFIX

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
            name = osp.basename(img_path)
            rng = np.random.default_rng([self.seed, zlib.crc32(name.encode('utf-8'))])
            if len(valid) > self.pixels_per_image:
                valid = np.sort(rng.choice(valid, size=self.pixels_per_image,
                                           replace=False))
            flat_logits = logits.reshape(logits.shape[0], -1).cpu()
            chosen = torch.from_numpy(valid)
            self.results.append(((name, img_path),
                                 flat_logits[:, chosen].T.to(torch.float32).numpy(),
                                 flat_labels[valid]))

    def compute_metrics(self, results: list) -> Dict[str, float]:
        """Fit the temperature on the pixels of all images (sorted by file name, then
        path)."""
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
