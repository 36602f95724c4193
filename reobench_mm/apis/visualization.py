"""A grid of one image's predictions under several conditions (:func:`show_conditions`).

One column per condition, titled with its key: row 1 the corrupted input as the model saw
it, row 2 the prediction over it (segmentation: the palette-coloured class map blended in;
rotated detection: the boxes as polygons in their class colours), row 3 the label moved
with the image when one was given. A legend of the classes runs below the grid.
"""
from __future__ import annotations

import math
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from ..analysis.plotting import FIGURE_LAYOUT, agg_pyplot, atomic_savefig, wrap_to_width
from ..evaluation.keys import SEGMENTATION
from .inference import ConditionPrediction, ConditionPredictions

__all__ = ['show_conditions', 'display_image', 'class_palette']

#: Inches per grid panel.
PANEL_INCHES = 2.6
#: Colour of label pixels that are ignored (no source content after a geometric move).
IGNORED_COLOUR = (0, 0, 0)


def display_image(image: np.ndarray, channel_order: str = 'bgr',
                  full_scale: float = 255.0) -> np.ndarray:
    """An ``H×W×3`` uint8 RGB view of a pipeline image: the first 3 bands of more
    (3-band BGR images reversed to RGB), a single band as grey, uint16 and float images
    scaled to 0–255 by their full scale."""
    bands = image[..., None] if image.ndim == 2 else image
    if bands.shape[-1] >= 3:
        bands = bands[..., :3]
        if image.shape[-1] == 3 and channel_order == 'bgr':
            bands = bands[..., ::-1]
    else:
        bands = np.repeat(bands[..., :1], 3, axis=-1)
    if bands.dtype != np.uint8:
        scaled = bands.astype(np.float64) * (255.0 / float(full_scale))
        bands = np.clip(np.round(scaled), 0, 255).astype(np.uint8)
    return np.ascontiguousarray(bands)


def class_palette(dataset_meta: dict, num_classes: int) -> np.ndarray:
    """``num_classes × 3`` uint8 RGB colours: the ``palette`` of ``dataset_meta``, extended
    with matplotlib's ``tab20`` colours where it is missing or short."""
    given = dataset_meta.get('palette')
    colours = [tuple(int(v) for v in c) for c in given] \
        if isinstance(given, (list, tuple)) else []
    if len(colours) < num_classes:
        import matplotlib
        table = matplotlib.colormaps['tab20']
        colours += [tuple(int(round(255 * v)) for v in table(i % 20)[:3])
                    for i in range(len(colours), num_classes)]
    return np.asarray(colours[:max(num_classes, 1)], dtype=np.uint8).reshape(-1, 3)


def _resize_to(image: np.ndarray, shape: Tuple[int, int]) -> np.ndarray:
    if tuple(image.shape[:2]) == tuple(shape):
        return image
    import cv2
    return cv2.resize(image, (int(shape[1]), int(shape[0])), interpolation=cv2.INTER_LINEAR)


def _blend(image: np.ndarray, labels: np.ndarray, palette: np.ndarray, opacity: float
           ) -> np.ndarray:
    """The image with the class colours of ``labels`` blended in; labels outside the
    palette (ignored) drawn in :data:`IGNORED_COLOUR`, blended the same way."""
    image = _resize_to(image, labels.shape)
    known = (labels >= 0) & (labels < len(palette))
    colours = np.empty(labels.shape + (3,), np.float64)
    colours[known] = palette[labels[known]]
    colours[~known] = IGNORED_COLOUR
    out = (1.0 - opacity) * image.astype(np.float64) + opacity * colours
    return np.clip(np.round(out), 0, 255).astype(np.uint8)


def _draw_boxes(image: np.ndarray, prediction: Any, palette: np.ndarray,
                score_thr: float) -> Tuple[np.ndarray, int]:
    """The rotated boxes of ``prediction`` scoring at least ``score_thr`` as closed
    polygons on a copy of ``image`` (resized to the original image size, in whose
    coordinates the boxes are); returns the image and the number of boxes drawn."""
    import cv2
    import torch
    from mmrotate.structures.bbox import RotatedBoxes, rbox2qbox
    shape = prediction.metainfo.get('ori_shape', image.shape[:2])
    canvas = _resize_to(image, shape[:2]).copy()
    instances = prediction.pred_instances
    boxes = instances.bboxes
    boxes = boxes if isinstance(boxes, RotatedBoxes) else RotatedBoxes(boxes)
    keep = (instances.scores >= score_thr).cpu()
    corners = rbox2qbox(boxes.tensor.detach().cpu()[keep]).reshape(-1, 4, 2)
    labels = instances.labels.cpu()[keep]
    thickness = max(1, int(round(min(canvas.shape[:2]) / 200)))
    for polygon, label in zip(corners, labels):
        colour = tuple(int(v) for v in palette[int(label) % len(palette)])
        points = torch.round(polygon).to(torch.int32).numpy().reshape(-1, 1, 2)
        cv2.polylines(canvas, [points], True, colour, thickness, cv2.LINE_AA)
    return canvas, len(corners)


def _panel(ax: Any, image: np.ndarray, title: Optional[str] = None,
           row_label: Optional[str] = None, note: Optional[str] = None) -> None:
    ax.imshow(image, interpolation='nearest')
    ax.set_xticks([])
    ax.set_yticks([])
    if title:
        ax.set_title(title, fontsize=11, fontweight='bold')
    if row_label:
        ax.set_ylabel(row_label, fontsize=10)
    if note:
        ax.set_xlabel(note, fontsize=9)


def _title(entry: ConditionPrediction, inches: float) -> str:
    # an attack's settings are its base condition's
    condition = getattr(entry.condition, 'base', entry.condition)
    extra = [f'seed {condition.seed}'] if condition.seed else []
    if condition.protocol != 'reobench':
        extra.append(condition.protocol)
    if condition.border != 'reflect' and condition.geometric:
        extra.append(f'{condition.border} border')
    text = entry.key + (f' ({", ".join(extra)})' if extra else '')
    return wrap_to_width(text, inches, 11)


def _legend_handles(classes: Sequence[str], palette: np.ndarray, ignored: bool) -> List[Any]:
    from matplotlib.patches import Patch
    handles = [Patch(facecolor=tuple(c / 255.0 for c in palette[i]), edgecolor='0.3',
                     label=str(name)) for i, name in enumerate(classes)]
    if ignored:
        handles.append(Patch(facecolor=tuple(c / 255.0 for c in IGNORED_COLOUR),
                             edgecolor='0.3', label='ignored (label)'))
    return handles


def show_conditions(result: ConditionPredictions, out_file: str, *,
                    classes: Optional[Sequence[str]] = None,
                    palette: Optional[Sequence[Sequence[int]]] = None,
                    opacity: float = 0.5, score_thr: float = 0.3, dpi: int = 100) -> str:
    """Draw ``result`` (:func:`~reobench_mm.apis.inference.predict_conditions`) as a grid
    and save it as PNG atomically: one column per condition (titled with its key), row 1
    the corrupted input, row 2 the prediction over it, row 3 the moved label when one was
    given, and a legend of the classes.

    Args:
        result: the predictions of one image.
        out_file: the PNG to write.
        classes, palette: class names and RGB colours (default: the model's
            ``dataset_meta``; missing colours taken from ``tab20``).
        opacity: weight of the class colours over the image (segmentation), in [0, 1].
        score_thr: the lowest score of a box drawn (detection).
        dpi: resolution (a panel is 2.6 inches wide).

    Returns:
        ``out_file``.

    Raises:
        ValueError: an opacity outside [0, 1] or an empty result.
    """
    if not 0.0 <= float(opacity) <= 1.0:
        raise ValueError(f'opacity must be in [0, 1], got {opacity!r}')
    if not len(result):
        raise ValueError('the result holds no condition to draw')
    meta = result.dataset_meta
    classes = list(classes if classes is not None else meta.get('classes') or [])
    segmentation = result.task == SEGMENTATION
    num_classes = len(classes)
    if segmentation:
        num_classes = max([num_classes] + [
            int(e.prediction.pred_sem_seg.data.max()) + 1 for e in result])
    palette = class_palette({'palette': palette} if palette is not None else meta,
                            num_classes)
    if len(classes) < num_classes:
        classes += [f'class {i}' for i in range(len(classes), num_classes)]
    with_labels = any(e.label is not None for e in result)
    rows, columns = (3 if with_labels else 2), len(result)
    # panels as tall as the images are for their width (a wide image in square panels
    # left blank bands between the rows); the titles and legend below get their own room
    height, width = np.asarray(next(iter(result)).image).shape[:2]
    panel_height = PANEL_INCHES * min(4.0, max(0.25, height / max(1, width)))
    plt = agg_pyplot()
    fig, axes = plt.subplots(rows, columns, squeeze=False, layout=FIGURE_LAYOUT,
                             figsize=(PANEL_INCHES * columns,
                                      (panel_height + 0.12) * rows + 0.25 * math.ceil(
                                          num_classes / max(1, 2 * columns)) + 0.5))
    ignored = False
    try:
        for column, entry in enumerate(result):
            shown = display_image(entry.image, result.channel_order, result.full_scale)
            first = column == 0
            _panel(axes[0][column], shown, _title(entry, PANEL_INCHES),
                   'input' if first else None)
            if segmentation:
                labels = entry.prediction.pred_sem_seg.data[0].cpu().numpy()
                _panel(axes[1][column], _blend(shown, labels, palette, opacity),
                       row_label='prediction' if first else None)
            else:
                drawn, count = _draw_boxes(shown, entry.prediction, palette, score_thr)
                _panel(axes[1][column], drawn, row_label='prediction' if first else None,
                       note=f'{count} box{"es" if count != 1 else ""} '
                            f'with score ≥ {score_thr:g}')
            if with_labels:
                ax = axes[2][column]
                if entry.label is None:
                    ax.set_axis_off()
                    continue
                label = entry.label.astype(np.int64)
                ignored = ignored or bool(((label < 0) | (label >= len(palette))).any())
                _panel(ax, _blend(shown, label, palette, opacity),
                       row_label='label' if first else None)
        handles = _legend_handles(classes, palette, ignored)
        if handles:
            fig.legend(handles=handles, loc='outside lower center', frameon=False,
                       ncol=min(len(handles), max(2, 2 * columns)), fontsize=9)
        return atomic_savefig(fig, out_file, dpi=dpi)
    finally:
        plt.close(fig)
