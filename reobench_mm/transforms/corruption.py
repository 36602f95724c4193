"""``ApplyCorruption``: the corruption engine as an MMCV pipeline transform."""
from __future__ import annotations

import os.path as osp
from typing import Optional

import numpy as np
import torch
from mmcv.transforms import BaseTransform

from ..corruptions import corrupt, corrupt_geometric, get_corruption
from ..corruptions.appearance import check_channel_order, jpeg_round_trip
from ..corruptions.base import as_bands, check_protocol, check_severity, from_float, to_float
from ..corruptions.geometric import GeometricTransform, check_border
from ..registry import TRANSFORMS

BOX_POLICIES = ('reference', 'drop_outside')
ANGLE_VERSIONS = ('le90', 'le135', 'oc')


@TRANSFORMS.register_module()
class ApplyCorruption(BaseTransform):
    """Corrupt the image (and, for geometric corruptions, move the labels).

    Place it right after image loading, and after annotation loading when the
    corruption is geometric, before resizing and normalisation. A severity of 0 or
    ``corruption='clean'`` is a no-op, so one config serves clean and corrupted runs.

    Required Keys:

    - img
    - img_path (optional; its file name is the sample's random key)
    - sample_idx (optional; the key when there is no img_path)
    - gt_seg_map, seg_fields (optional)
    - gt_bboxes (optional; ``HorizontalBoxes`` or ``RotatedBoxes``)
    - gt_bboxes_labels, gt_ignore_flags (optional)

    Modified Keys:

    - img
    - gt_seg_map and every key in seg_fields (geometric corruptions)
    - gt_bboxes, gt_bboxes_labels, gt_ignore_flags (geometric corruptions)

    Added Keys:

    - corruption (str), severity (int): what was applied; add them to the packing
      transform's ``meta_keys`` to carry them into the sample's metainfo.

    Args:
        corruption (str): a corruption of ``protocol``, or ``'clean'``.
        severity (int): 0..5.
        seed (int): global seed of every random draw.
        protocol (str): ``'reobench'`` or ``'geofm_calibration'``.
        border (str): ``'reflect'`` (the paper) or ``'constant'`` for rotate/translate.
        box_policy (str): ``'reference'`` keeps every box (as the paper did);
            ``'drop_outside'`` drops boxes whose centre leaves the image.
        angle_version (str): rotated-box angle convention to keep (``'le90'``).
        ignore_index (int): label written where a moved map has no source content.
        channel_order (str): order of 3-band images in ``img`` (``'bgr'`` as MMCV loads).
        max_value (float, optional): full scale of uint16 images (default 65535).
        reencode_jpeg_quality (int, optional): an extra JPEG pass after the corruption,
            as the authors' released DIOR files carry (they used quality 75). Off by
            default.
    """

    def __init__(self, corruption: str = 'clean', severity: int = 0, seed: int = 0,
                 protocol: str = 'reobench', border: str = 'reflect',
                 box_policy: str = 'reference', angle_version: str = 'le90',
                 ignore_index: int = 255, channel_order: str = 'bgr',
                 max_value: Optional[float] = None,
                 reencode_jpeg_quality: Optional[int] = None) -> None:
        self.set_condition(corruption, severity, seed, protocol, border)
        if box_policy not in BOX_POLICIES:
            raise ValueError(f'box_policy must be one of {BOX_POLICIES}, got {box_policy!r}')
        if angle_version not in ANGLE_VERSIONS:
            raise ValueError(f'angle_version must be one of {ANGLE_VERSIONS}, '
                             f'got {angle_version!r}')
        check_channel_order(channel_order)
        if reencode_jpeg_quality is not None and not 1 <= reencode_jpeg_quality <= 100:
            raise ValueError('reencode_jpeg_quality must be None or in 1..100, '
                             f'got {reencode_jpeg_quality}')
        self.box_policy, self.angle_version = box_policy, angle_version
        self.ignore_index, self.channel_order = ignore_index, channel_order
        self.max_value, self.reencode_jpeg_quality = max_value, reencode_jpeg_quality

    def set_condition(self, corruption: str, severity: int, seed: int = 0,
                      protocol: str = 'reobench', border: str = 'reflect') -> None:
        """Switch this instance to another condition (checked like the constructor's
        arguments): the robustness sweep reuses one built pipeline for every condition."""
        check_protocol(protocol)
        check_border(border)
        spec = None if corruption == 'clean' else get_corruption(corruption, protocol)
        self.severity = check_severity(severity)
        self.corruption, self.spec = corruption, spec
        self.seed, self.protocol, self.border = seed, protocol, border

    @property
    def is_noop(self) -> bool:
        return self.spec is None or self.severity == 0

    @staticmethod
    def sample_key(results: dict):
        """The file name of the image (stable across machines), else the sample index."""
        if results.get('img_path'):
            return osp.basename(results['img_path'])
        return results.get('sample_idx')

    def transform(self, results: dict) -> dict:
        results['corruption'] = 'clean' if self.is_noop else self.corruption
        results['severity'] = 0 if self.is_noop else self.severity
        if self.is_noop:
            return results
        image, key = results['img'], self.sample_key(results)
        common = dict(seed=self.seed, key=key, protocol=self.protocol, max_value=self.max_value)
        if self.spec.moves_labels:
            image, geometry = corrupt_geometric(image, self.corruption, self.severity,
                                                border=self.border, **common)
            self._move_labels(results, geometry)
        else:
            options = {'channel_order': self.channel_order} \
                if 'channel_order' in self.spec.options else {}
            image = corrupt(image, self.corruption, self.severity, **common, **options)
        if self.reencode_jpeg_quality is not None:
            if image.dtype == np.uint8:  # the codec on the bytes themselves
                image = jpeg_round_trip(as_bands(image), self.reencode_jpeg_quality,
                                        self.channel_order).reshape(image.shape)
            else:
                image = from_float(
                    jpeg_round_trip(to_float(image, self.max_value),
                                    self.reencode_jpeg_quality, self.channel_order), image,
                    self.max_value)
        results['img'] = image
        return results

    def _move_labels(self, results: dict, geometry: GeometricTransform) -> None:
        for key in set(results.get('seg_fields', [])) | {'gt_seg_map'}:
            if results.get(key) is not None:
                results[key] = geometry.warp_label_map(results[key], self.ignore_index)
        boxes = results.get('gt_bboxes')
        if boxes is None or len(boxes) == 0:
            return
        moved = move_boxes(boxes, geometry, self.angle_version)
        if self.box_policy == 'drop_outside':
            h, w = geometry.output_shape
            centres = moved.centers
            keep = ((centres[:, 0] >= 0) & (centres[:, 0] < w) & (centres[:, 1] >= 0)
                    & (centres[:, 1] < h)).numpy()
            moved = moved[torch.from_numpy(keep)]
            for field in ('gt_bboxes_labels', 'gt_ignore_flags'):
                if results.get(field) is not None:
                    results[field] = results[field][keep]
        results['gt_bboxes'] = moved

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(corruption={self.corruption!r}, '
                f'severity={self.severity}, seed={self.seed}, protocol={self.protocol!r}, '
                f'border={self.border!r}, box_policy={self.box_policy!r}, '
                f'reencode_jpeg_quality={self.reencode_jpeg_quality})')


def move_boxes(boxes, geometry: GeometricTransform, angle_version: str = 'le90'):
    """Move mmdet/mmrotate boxes with ``geometry``.

    ``HorizontalBoxes`` become the enclosing horizontal box of their moved corners;
    ``RotatedBoxes`` (and other box types convertible to quadrilaterals) are moved
    corner by corner and refitted as rotated boxes, regularised to ``angle_version``.
    """
    from mmdet.structures.bbox import HorizontalBoxes
    from mmrotate.structures.bbox import QuadriBoxes, RotatedBoxes

    tensor = boxes.tensor
    if isinstance(boxes, HorizontalBoxes):
        x1, y1, x2, y2 = tensor.double().unbind(-1)
        corners = torch.stack([x1, y1, x2, y1, x2, y2, x1, y2], -1).view(-1, 4, 2).numpy()
        moved = geometry.apply_to_points(corners)
        enclosing = np.concatenate([moved.min(1), moved.max(1)], axis=1)
        return HorizontalBoxes(torch.as_tensor(enclosing, dtype=tensor.dtype))
    quads = boxes.convert_to('qbox').tensor.double().view(-1, 4, 2).numpy()
    moved = geometry.apply_to_points(quads).reshape(-1, 8)
    rotated = QuadriBoxes(torch.as_tensor(moved, dtype=torch.float32)).convert_to('rbox')
    regular = RotatedBoxes(rotated.tensor).regularize_boxes(angle_version)
    result = RotatedBoxes(regular.to(tensor.dtype))
    if not isinstance(boxes, RotatedBoxes):
        result = result.convert_to(type(boxes))
    return result
