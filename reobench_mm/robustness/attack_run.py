"""Running an attack condition inside a robustness loop: :class:`AttackRun`.

While an :class:`~reobench_mm.robustness.conditions.attacks.AttackCondition` is evaluated, the
loop hands every batch to :meth:`AttackRun.apply` before the model's
``test_step``: each image of the batch (its pixels as the pipeline left them, the base
condition's corruption applied) is replaced by its adversarial version, computed on the
model's device with the model in eval mode, and the batch is then predicted and
evaluated exactly as a clean batch is (the same ``test_step``, the run's evaluator).

Per image:

- the full scale is the input dtype's (:func:`~reobench_corruptions.full_scale`: 255 for
  uint8, 65535 or the attack's ``max_value`` for uint16, 1.0 or ``max_value`` for
  float), and the valid pixels are ``[0, full scale]``;
- the random start is drawn from :func:`~reobench_corruptions.make_rng` keyed by the run's
  seed, the attack's name, kind and ε, and the image's file name (else its index): the
  same perturbation whatever the batch size, workers or order;
- the perturbation is checked to lie in the ε-ball and the pixels in the valid range
  (an error otherwise, never a silent number); the largest ratio of the perturbation
  to ε over the run is recorded.

What a run records beside the metrics (:meth:`AttackRun.record`): the settings, the
seconds, the peak memory (the device's peak allocation on CUDA; the process's resident
high-water mark on the CPU, which never decreases, so an upper bound), the largest
perturbation ratio and, for the fixed-step PGD family in segmentation, the curve of the
metric against the step (``curve[t]`` the mIoU of the iterates ``x_t``; the last entry,
``t = steps``, is the evaluated adversarial image).
"""
from __future__ import annotations

import resource
import time
from typing import Any, Dict, List, Optional

import numpy as np
import torch

from reobench_corruptions import full_scale, make_rng
from ..attacks.detection import DetectionTarget
from ..attacks.functional import band_budget, l2_norm
from ..attacks.iterative import perturb
from ..attacks.segmentation import SegmentationTarget
from ..errors import SweepError
from ..evaluation.functional.image_stats import SegmentationImageStats
from ..evaluation.keys import SEGMENTATION, Task
from ..transforms.corruption import sample_draw_key
from .conditions.attacks import AttackCondition

__all__ = ['AttackRun', 'sample_key']

#: Relative slack of the budget check (float32 rounding of ``x0 + δ``).
_TOLERANCE = 1e-5


def sample_key(sample: Any, index: int) -> Any:
    """The key of an image's random start: the key of its corruption draws
    (:func:`~reobench_mm.transforms.corruption.sample_draw_key`: its file name, with its
    window when it is a window of a larger raster, else its ``sample_idx``)."""
    key = sample_draw_key(getattr(sample, 'metainfo', {}) or {})
    if key is not None:
        return key
    raise SweepError(f'image {index} of the batch has neither img_path nor sample_idx, which '
                     'key its random start; datasets provide both')


def _scale_of(x: torch.Tensor, max_value: Optional[float]) -> float:
    name = str(x.dtype).replace('torch.', '')
    try:
        return full_scale(np.dtype(name), max_value)
    except (TypeError, ValueError) as error:
        raise SweepError(f'attacks: the input pixels are {name}: {error}') from None


class AttackRun:
    """One attack condition being evaluated.

    Args:
        condition: the attack condition.
        model: the runner's model (eval mode).
        task: the run's task.
        ignore_index: the label the evaluator ignores (segmentation).
        num_classes: the model's classes (for the per-step curve).
    """

    def __init__(self, condition: AttackCondition, model: Any, task: Task,
                 ignore_index: Optional[int], num_classes: int) -> None:
        self.condition, self.spec = condition, condition.spec
        self.model, self.task = model, task
        self.num_classes = num_classes
        if task.name == SEGMENTATION:
            self.target: Any = SegmentationTarget(model, ignore_index)
        else:
            self.target = DetectionTarget(model, self.spec.losses, condition.seed)
        self.device = next(iter(model.parameters())).device
        self.curve: Optional[List[np.ndarray]] = [] if (
            self.spec.attack_kind.curve and task.name == SEGMENTATION
            and not self.spec.is_null) else None
        self.images = 0
        self.largest_ratio = 0.0
        self.start = time.perf_counter()
        if self.device.type == 'cuda':
            torch.cuda.reset_peak_memory_stats(self.device)

    # ------------------------------------------------------------------ per batch
    def _draw_name(self) -> str:
        return f'attack/{self.spec.name}/{self.spec.kind}/eps{self.spec.label}'

    def _objective(self, sample: Any, key: Any, on_logits=None):
        if self.task.name == SEGMENTATION:
            return self.target.objective(sample, self.spec.attack_kind.objective, self.device,
                                         on_logits)
        return self.target.objective(sample, str(key), self.device)

    def _check(self, x0: torch.Tensor, x: torch.Tensor, scale: float, key: Any) -> None:
        delta = (x - x0).double()
        if self.spec.norm == 'linf':
            eps = band_budget(self.spec.eps, x0.shape[0], dtype=torch.float64,
                              device=x0.device)
            size = delta.abs().amax(dim=(1, 2)).view(-1, 1, 1)
            ratio = float(torch.where(eps > 0, size / eps.clamp(min=1e-300),
                                      torch.where(size > 0, float('inf'), 0.0)).max())
        else:
            eps = float(self.spec.eps)
            size = float(l2_norm(delta))
            ratio = size / eps if eps > 0 else (0.0 if size == 0 else float('inf'))
        slack = _TOLERANCE + 4 * float(torch.finfo(torch.float32).eps) * scale / max(
            float(torch.as_tensor(self.spec.eps).min()), 1e-30)
        if ratio > 1.0 + slack or float(x.min()) < 0 or float(x.max()) > scale:
            raise SweepError(f'{self.condition.key}: the perturbation of image {key!r} leaves '
                             f'the budget (|delta| / eps = {ratio:.6g}) or the pixel range '
                             f'[0, {scale:g}] ([{float(x.min()):g}, {float(x.max()):g}])')
        self.largest_ratio = max(self.largest_ratio, ratio)

    def apply(self, data_batch: Dict[str, Any]) -> Dict[str, Any]:
        """``data_batch`` with each image replaced by its adversarial version (float32
        pixels on the CPU, the raw units); the samples are left as they are."""
        inputs = list(data_batch['inputs'])
        samples = data_batch['data_samples']
        for i, (x, sample) in enumerate(zip(inputs, samples)):
            scale = _scale_of(x, self.spec.max_value)
            x0 = x.to(self.device).float()
            if x0.numel() and (float(x0.min()) < 0 or float(x0.max()) > scale):
                raise SweepError(
                    f'{self.condition.key}: image {i} has pixels in [{float(x0.min()):g}, '
                    f'{float(x0.max()):g}], outside [0, {scale:g}] ({x.dtype}); set the '
                    "attack's max_value to the data's full scale")
            key = sample_key(sample, i)
            rng = make_rng(self.condition.seed, self._draw_name(), 0, key)
            on_logits, found = None, None
            if self.curve is not None:
                found, on_logits = self.target.curve_areas(sample, self.num_classes)
            adversarial = perturb(x0, self._objective(sample, key, on_logits), self.spec,
                                  rng, scale)
            self._check(x0, adversarial, scale, key)
            if found is not None:
                self._add_curve(found)
            inputs[i] = adversarial.detach().to('cpu', torch.float32)
            self.images += 1
        return dict(data_batch, inputs=inputs)

    def _add_curve(self, found: List[np.ndarray]) -> None:
        if not self.curve:
            self.curve.extend(a.copy() for a in found)
            return
        for total, areas in zip(self.curve, found):
            total += areas

    # ------------------------------------------------------------------ the record
    def record(self, value: float) -> Dict[str, Any]:
        """What the condition's record keeps beside its metrics (see the module
        docstring); ``value`` is the evaluated metric (the curve's last point)."""
        seconds = time.perf_counter() - self.start
        if self.device.type == 'cuda':
            peak, where = int(torch.cuda.max_memory_allocated(self.device)), 'device'
        else:
            peak, where = int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024, \
                'process_rss_high_water'
        out: Dict[str, Any] = dict(settings=self.spec.settings(), base=self.condition.base_key,
                                   images=self.images, seconds=round(seconds, 3),
                                   seconds_per_image=round(seconds / max(self.images, 1), 4),
                                   peak_memory_bytes=peak, peak_memory=where,
                                   largest_budget_ratio=round(self.largest_ratio, 6))
        if self.curve is not None:
            points = [float(SegmentationImageStats(a[None]).recorded_value())
                      for a in self.curve]
            out['curve'] = dict(steps=list(range(len(points) + 1)),
                                values=points + [float(value)])
        return out
