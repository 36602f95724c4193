"""One condition's per-image statistics, read and written as one ``.npz`` file.

:class:`ImageStats` holds the image ids (test-set order), the task metric's statistics
(:class:`~reobench_mm.evaluation.functional.image_stats.SegmentationImageStats` or
:class:`~reobench_mm.evaluation.functional.detection_ap.DetectionImageStats`) and the
calibration statistics per metric prefix
(:class:`~reobench_mm.evaluation.functional.image_stats.CalibrationImageStats`);
:meth:`ImageStats.to_bytes` / :meth:`ImageStats.from_bytes` write and read them as a
compressed ``.npz`` without pickled objects.
"""
from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple, Union

import numpy as np

from .detection_ap import DetectionImageStats
from .image_stats import CalibrationImageStats, SegmentationImageStats

__all__ = ['IMAGE_STATS_FORMAT', 'ImageStats', 'TASK_STATS', 'read_stats_file']

#: ``format`` entry of the ``.npz`` file of :class:`ImageStats`.
IMAGE_STATS_FORMAT = 'reobench_mm.image_stats/1'
#: kind -> the class of the task statistics.
TASK_STATS = {SegmentationImageStats.kind: SegmentationImageStats,
              DetectionImageStats.kind: DetectionImageStats}

TaskStats = Union[SegmentationImageStats, DetectionImageStats]


@dataclass
class ImageStats:
    """One condition's per-image statistics.

    Attributes:
        image_ids: the id of each image (:func:`image_ids_from_paths`), in test-set order.
        task: the task metric's statistics.
        calibration: calibration metric prefix (``calib``, ``calib_ts``) -> statistics.
    """
    image_ids: Tuple[str, ...]
    task: TaskStats
    calibration: Dict[str, CalibrationImageStats] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.image_ids = tuple(str(i) for i in self.image_ids)
        if len(set(self.image_ids)) != len(self.image_ids):
            raise ValueError('image ids must be unique')
        sizes = {'the task statistics': self.task.num_images}
        sizes.update({f'{prefix} statistics': stats.num_images
                      for prefix, stats in self.calibration.items()})
        wrong = {k: v for k, v in sizes.items() if v != len(self.image_ids)}
        if wrong:
            raise ValueError(f'{len(self.image_ids)} image ids but '
                             + ', '.join(f'{v} images in {k}' for k, v in wrong.items()))

    @property
    def num_images(self) -> int:
        return len(self.image_ids)

    def to_bytes(self) -> bytes:
        """The ``.npz`` (compressed, no pickles) of these statistics."""
        arrays = {'format': np.asarray(IMAGE_STATS_FORMAT), 'task': np.asarray(self.task.kind),
                  'image_ids': np.asarray(self.image_ids, dtype=str)}
        arrays.update({f'task.{k}': v for k, v in self.task.to_arrays().items()})
        for prefix, stats in self.calibration.items():
            if '.' in prefix:
                raise ValueError(f'calibration prefix {prefix!r} contains a dot')
            arrays.update({f'calibration.{prefix}.{k}': v
                           for k, v in stats.to_arrays().items()})
        buffer = io.BytesIO()
        np.savez_compressed(buffer, **arrays)
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> 'ImageStats':
        """Read :meth:`to_bytes` output.

        Raises:
            ValueError: not such a file (named what is wrong).
        """
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as npz:
                arrays = {k: npz[k] for k in npz.files}
        except Exception as error:  # zip, npy or pickle errors of a damaged file
            raise ValueError(f'not a per-image statistics file ({error})') from None
        if str(arrays.get('format', '')) != IMAGE_STATS_FORMAT:
            raise ValueError(f'has format {str(arrays.get("format"))!r}, expected '
                             f'{IMAGE_STATS_FORMAT!r}')
        kind = str(arrays['task'])
        if kind not in TASK_STATS:
            raise ValueError(f'has task statistics {kind!r}; known: {sorted(TASK_STATS)}')
        task = TASK_STATS[kind].from_arrays(
            {k[5:]: v for k, v in arrays.items() if k.startswith('task.')})
        calibration: Dict[str, Dict[str, np.ndarray]] = {}
        for key, value in arrays.items():
            if key.startswith('calibration.'):
                _, prefix, name = key.split('.', 2)
                calibration.setdefault(prefix, {})[name] = value
        return cls(tuple(arrays['image_ids'].tolist()), task,
                   {p: CalibrationImageStats.from_arrays(a) for p, a in calibration.items()})


def read_stats_file(path: str, sha256: Optional[str] = None) -> ImageStats:
    """The statistics in the file at ``path``, read once and, with ``sha256``, checked to
    be the bytes recorded.

    Raises:
        ValueError: the file cannot be read, has another SHA-256, or is not a statistics
            file (the path named).
    """
    try:
        with open(path, 'rb') as handle:
            data = handle.read()
    except OSError as error:
        raise ValueError(f'{path} cannot be read ({error.strerror or error})') from None
    if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
        raise ValueError(f'{path} has another SHA-256 than recorded (altered?)')
    try:
        return ImageStats.from_bytes(data)
    except ValueError as error:
        raise ValueError(f'{path}: {error}') from None
