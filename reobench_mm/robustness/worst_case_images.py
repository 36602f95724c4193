"""Thumbnails of a sweep's worst cases: the corrupted input, the prediction and the label.

After the conditions are evaluated, a robustness test loop runs the model once more on
the few images with the largest drops (:func:`~reobench_mm.analysis.worst_cases.worst_cases`),
each under its condition, and :func:`worst_case_panels` turns each into three RGB
thumbnails for :func:`~reobench_mm.analysis.worst_cases.plot_worst_cases`: the input as
the model saw it (its first three bands, read as OpenCV's BGR order), the prediction and
the label (segmentation: class colours of the dataset's palette, ignored pixels black;
rotated detection: the boxes drawn on the input, predictions with a score of at least
``score_thr``).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Mapping, Sequence

import cv2
import numpy as np
import torch

__all__ = ['worst_case_picks', 'worst_case_panels', 'THUMBNAILS']

#: How many cases get thumbnails.
THUMBNAILS = 4
#: Longest side of a thumbnail, pixels.
THUMBNAIL_SIZE = 256


def worst_case_picks(cases: Mapping[str, Any], count: int = THUMBNAILS) -> List[dict]:
    """The ``count`` largest drops over all conditions (one per image), as
    ``{'condition' (key), 'index', 'image', 'clean', 'value', 'drop'}``."""
    entries = [dict(entry, condition=key) for key, items in cases['largest_drops'].items()
               for entry in items if entry['drop'] is not None]
    entries.sort(key=lambda e: (-e['drop'], e['condition'], e['index']))
    picks, seen = [], set()
    for entry in entries:
        if entry['index'] in seen:
            continue
        seen.add(entry['index'])
        picks.append(entry)
        if len(picks) == count:
            break
    return picks


def _as_rgb(inputs: torch.Tensor) -> np.ndarray:
    """``(C, H, W)`` model input -> ``(H, W, 3)`` uint8 for display."""
    image = inputs.detach().cpu().numpy()
    if image.shape[0] >= 3:
        image = image[[2, 1, 0]]
    else:
        image = np.repeat(image[:1], 3, axis=0)
    image = np.transpose(image, (1, 2, 0)).astype(np.float64)
    if image.max() > 255 or image.min() < 0:  # not 8-bit: stretch for display
        low, high = np.percentile(image, [1, 99])
        image = (image - low) / max(high - low, 1e-12) * 255
    return np.clip(image, 0, 255).astype(np.uint8)


def _fit(image: np.ndarray, shape: Sequence[int], nearest: bool) -> np.ndarray:
    if image.shape[:2] == tuple(shape[:2]):
        return image
    return cv2.resize(image, (int(shape[1]), int(shape[0])),
                      interpolation=cv2.INTER_NEAREST if nearest else cv2.INTER_AREA)


def _thumbnail(image: np.ndarray, nearest: bool) -> np.ndarray:
    scale = THUMBNAIL_SIZE / max(image.shape[:2])
    if scale >= 1:
        return image
    shape = (max(1, round(image.shape[0] * scale)), max(1, round(image.shape[1] * scale)))
    return _fit(image, shape, nearest)


def _colour_labels(labels: np.ndarray, palette: Sequence[Sequence[int]]) -> np.ndarray:
    colours = np.zeros((256, 3), dtype=np.uint8)
    for index, colour in enumerate(palette[:256]):
        colours[index] = colour
    return colours[np.clip(labels, 0, 255).astype(np.int64)]


def _field(sample: Any, name: str) -> Any:
    return sample.get(name) if isinstance(sample, Mapping) else getattr(sample, name, None)


def _segmentation(rgb: np.ndarray, sample: Any, metainfo: Mapping[str, Any]
                  ) -> Dict[str, np.ndarray]:
    classes = metainfo.get('classes') or ()
    palette = metainfo.get('palette') or [
        [int(v) for v in np.random.default_rng(i).integers(0, 256, 3)]
        for i in range(len(classes))]
    prediction = _field(sample, 'pred_sem_seg').data[0].cpu().numpy()
    label = _field(sample, 'gt_sem_seg').data[0].cpu().numpy()
    return {'prediction': _fit(_colour_labels(prediction, palette), rgb.shape, True),
            'label': _fit(_colour_labels(label, palette), rgb.shape, True)}


def _draw_boxes(rgb: np.ndarray, boxes: np.ndarray, scale: Sequence[float],
                colour: Sequence[int]) -> np.ndarray:
    out = rgb.copy()
    for cx, cy, w, h, angle in boxes[:, :5]:
        corners = cv2.boxPoints(((cx * scale[0], cy * scale[1]),
                                 (w * scale[0], h * scale[1]), math.degrees(angle)))
        cv2.polylines(out, [np.round(corners).astype(np.int32)], True, tuple(colour), 1,
                      cv2.LINE_AA)
    return out


def _detection(rgb: np.ndarray, sample: Any, score_thr: float) -> Dict[str, np.ndarray]:
    meta = sample.metainfo if hasattr(sample, 'metainfo') else {}
    scale = meta.get('scale_factor', (1.0, 1.0))
    pred = _field(sample, 'pred_instances')
    boxes = pred.bboxes.tensor if hasattr(pred.bboxes, 'tensor') else pred.bboxes
    keep = pred.scores >= score_thr
    gts = _field(sample, 'gt_instances')
    gt_boxes = gts.bboxes.tensor if hasattr(gts.bboxes, 'tensor') else gts.bboxes
    # predictions are rescaled to the original image, the packed labels are not
    return {'prediction': _draw_boxes(rgb, boxes[keep].cpu().numpy(), scale, (255, 64, 64)),
            'label': _draw_boxes(rgb, gt_boxes.cpu().numpy(), (1.0, 1.0), (64, 255, 64))}


def worst_case_panels(picks: Sequence[Mapping[str, Any]], dataset: Any, model: Any,
                      switch: Callable[[Any], None], condition: Callable[[str], Any],
                      task: str, score_thr: float = 0.3) -> List[Dict[str, Any]]:
    """Run ``model`` on each picked image under its condition (``switch(condition(key))``
    before ``dataset[index]``) and return the panels of
    :func:`~reobench_mm.analysis.worst_cases.plot_worst_cases`."""
    from mmengine.dataset import pseudo_collate
    metainfo = getattr(dataset, 'metainfo', {}) or {}
    panels = []
    model.eval()
    for pick in picks:
        switch(condition(pick['condition']))
        data = pseudo_collate([dataset[pick['index']]])
        with torch.no_grad():
            sample = model.test_step(data)[0]
        rgb = _as_rgb(data['inputs'][0])
        if task == 'segmentation':
            parts = _segmentation(rgb, sample, metainfo)
        else:
            parts = _detection(rgb, sample, score_thr)
        nearest = task == 'segmentation'
        panels.append({
            'input': _thumbnail(rgb, False),
            'prediction': _thumbnail(parts['prediction'], nearest),
            'label': _thumbnail(parts['label'], nearest),
            'title': f'{pick["condition"]}\n{pick["image"]}\n'
                     f'{pick["clean"]:.1f} → {pick["value"]:.1f}'})
    return panels
