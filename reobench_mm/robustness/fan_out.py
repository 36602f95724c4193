"""One pass over the test set for many conditions: the ``fan_out`` option of
``RobustnessTestLoop``.

Without it the loop evaluates one condition after another: each condition starts the
dataloader (and its workers) again and runs the whole test set through the pipeline and
the model. With ``fan_out=N`` the conditions left to evaluate are taken ``N`` at a time
(in run order), and each group is evaluated in **one pass** over the test set:

- :class:`FanOutDataset` wraps the test dataset: its item ``i`` is the list of sample
  ``i`` under every condition of the group (the switchable ``ApplyCorruption`` steps of
  the process that builds it — the main process or a dataloader worker — are set to each
  condition in turn). The loading steps in front of the corruption are served by the
  run's decode cache (``decode_cache_bytes``), so each image is read and decoded once for
  all the conditions;
- the dataloader (the test dataloader's settings: batch size, workers, collate function,
  a sampler over the same images in the same order) yields, per batch of images, one
  batch per condition; each is predicted by the model's ``test_step`` and processed by
  **that condition's own copy of the evaluator** (the test-iteration hooks run around it
  as around any batch), so the model sees exactly the batches it sees condition by
  condition and the numbers are the same, bit for bit;
- with ``fan_out_batch=M`` the batches of M conditions are joined into one ``test_step``
  (the hooks still run around each condition's batch, each condition's outputs go to its
  evaluator): fewer, larger forwards, the numbers the same up to the float rounding of
  batched kernels;
- at the end of the pass each condition's evaluator is evaluated and its record written
  (metrics, calibration details, per-image statistics), as in the per-condition loop.

Memory: the samples of one batch of images under ``N`` conditions are in flight at once
(with workers, times the prefetch factor), plus ``N`` evaluator states (per image: the
class areas of segmentation, the detections of rotated detection, and the calibration
bins). Resuming: a group's records are written when its pass ends, so a run killed during
a pass evaluates that group again and keeps every group finished before (resume by
condition group).

Conditions with data of their own (shift sets, corruptions read from files) and attacks
are evaluated after the passes, one by one.
"""
from __future__ import annotations

import copy
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch.utils.data import DataLoader, Dataset

from reobench_corruptions.condition import Condition

__all__ = ['FanOutDataset', 'fan_out_groups', 'fan_out_loader', 'run_pass', 'join_batches',
           'Item']


class FanOutDataset(Dataset):
    """Each item is a list: the sample under each condition, in the order given.

    Args:
        dataset: the test dataset, with the switchable corruption steps placed.
        steps: its ``ApplyCorruption`` steps (switched together).
        conditions: the conditions of one pass.
    """

    def __init__(self, dataset: Any, steps: Sequence[Any], conditions: Sequence[Condition]
                 ) -> None:
        self.dataset, self.steps = dataset, list(steps)
        self.conditions = list(conditions)
        self.metainfo = getattr(dataset, 'metainfo', None)

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> List[Any]:
        out = []
        try:
            for condition in self.conditions:
                for step in self.steps:
                    step.set_condition(condition)
                out.append(self.dataset[index])
        finally:
            for step in self.steps:
                step.set_condition(self.conditions[0].clean())
        return out


def fan_out_groups(conditions: Sequence[Any], size: int) -> List[List[Any]]:
    """``conditions`` in groups of at most ``size``, in order."""
    return [list(conditions[i:i + size]) for i in range(0, len(conditions), size)]


def fan_out_loader(dataloader: DataLoader, dataset: FanOutDataset) -> DataLoader:
    """A dataloader over ``dataset`` with the settings of ``dataloader`` (batch size,
    workers, collate function, the same images in the same order); each batch is the list
    of one collated batch per condition."""
    collate = dataloader.collate_fn

    def collate_by_condition(items: List[List[Any]]) -> List[Any]:
        return [collate([item[k] for item in items]) for k in range(len(dataset.conditions))]

    workers = dataloader.num_workers
    return DataLoader(dataset, batch_size=dataloader.batch_size,
                      sampler=list(iter(dataloader.sampler)), num_workers=workers,
                      collate_fn=collate_by_condition, pin_memory=dataloader.pin_memory,
                      drop_last=dataloader.drop_last, worker_init_fn=dataloader.worker_init_fn,
                      persistent_workers=False,
                      **({'prefetch_factor': dataloader.prefetch_factor} if workers else {}))


#: One condition's share of a fan-out batch: the condition, its batch, its evaluator.
Item = Tuple[Condition, Any, Any]


def run_pass(conditions: Sequence[Condition], dataloader: DataLoader, steps: Sequence[Any],
             evaluator: Any, run_items: Callable[[int, List[Item]], None],
             finish: Callable[[Condition, Any], Dict[str, float]],
             pipeline_conditions: Optional[Sequence[Condition]] = None,
             joined: int = 1) -> Dict[Condition, Tuple[Dict[str, float], Any, float]]:
    """Evaluate ``conditions`` in one pass over ``dataloader``'s images:
    ``{condition: (metrics, its evaluator, seconds)}``.

    ``run_items(idx, items)`` predicts and processes the batches of ``joined`` conditions
    (``(condition, batch, evaluator)``, in order), each with that condition's copy of
    ``evaluator`` (copied before the pass, holding no results); ``finish(condition,
    evaluator)`` evaluates it; ``pipeline_conditions`` are what the pipeline applies for
    each (default: the conditions; clean where the model's device corrupts). The seconds
    of the pass are shared equally among its conditions.
    """
    dataset = FanOutDataset(dataloader.dataset, steps, pipeline_conditions or conditions)
    evaluators = {c: copy.deepcopy(evaluator) for c in conditions}
    start = time.perf_counter()
    for idx, batches in enumerate(fan_out_loader(dataloader, dataset)):
        items = [(c, batch, evaluators[c]) for c, batch in zip(conditions, batches)]
        for first in range(0, len(items), joined):
            run_items(idx, items[first:first + joined])
    metrics = {c: finish(c, evaluators[c]) for c in conditions}
    seconds = (time.perf_counter() - start) / max(len(conditions), 1)
    return {c: (metrics[c], evaluators[c], seconds) for c in conditions}


def join_batches(batches: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """One batch holding the samples of ``batches`` in order (lists joined, tensors
    concatenated along the first dimension)."""
    keys = set(batches[0])
    if any(set(b) != keys for b in batches):
        raise ValueError(f'cannot join batches with different keys: {[sorted(b) for b in batches]}')
    joined = {}
    for key in batches[0]:
        parts = [b[key] for b in batches]
        if all(isinstance(p, list) for p in parts):
            joined[key] = [x for p in parts for x in p]
        elif all(isinstance(p, torch.Tensor) for p in parts):
            joined[key] = torch.cat(parts)
        else:
            raise TypeError(f'cannot join the batches\' {key!r}: lists or tensors are joined, '
                            f'got {[type(p).__name__ for p in parts]}')
    return joined
