"""``ApplyCorruption``: the corruption engine as an MMCV pipeline transform."""
from __future__ import annotations

import numbers
import os.path as osp
import warnings
from typing import Any, Dict, Mapping, Optional, Sequence, Union

import numpy as np
import torch
from mmcv.transforms import BaseTransform

from reobench_corruptions import corrupt, corrupt_geometric, get_corruption
from reobench_corruptions.appearance import check_channel_order, jpeg_round_trip
from reobench_corruptions.band_noise import check_band_noise
from reobench_corruptions.band_values import MaxValue, check_band_max_values, needs_band_names
from reobench_corruptions.bands import band_kinds, bands_in_domain
from reobench_corruptions.base import (PROTOCOLS, SUPPORTED_DTYPES, as_bands, from_float,
                                list_corruptions, to_float)
from reobench_corruptions.condition import CLEAN_NAME, Condition
from reobench_corruptions.geometric import GeometricTransform
from ..registry import TRANSFORMS

BOX_POLICIES = ('reference', 'drop_outside')
#: The sample key under which ``ApplyCorruption(labels_later=True)`` records the transform
#: of a geometric corruption for :class:`ApplyCorruptionToLabels`.
GEOMETRY_KEY = 'corruption_geometry'
ANGLE_VERSIONS = ('le90', 'le135', 'oc')
#: Engine options the transform sets itself (not through ``corruption_options``).
_OWN_OPTIONS = ('channel_order', 'border')


def check_corruption_options(options: Optional[Mapping[str, Any]]) -> Dict[str, dict]:
    """``corruption_options`` as ``{corruption name: {option: value}}``, checked: every
    name is a corruption of a protocol and every option one that corruption takes
    (``bands`` for every pixel-value corruption; its values are checked by the engine
    when it runs, at every severity; the form of ``band_noise`` is checked here).

    Raises:
        ValueError: not a mapping of mappings, an unknown corruption or option.
    """
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise ValueError('corruption_options must map corruption names to their options, '
                         "e.g. dict(cloud_shadow=dict(bands=[0, 1, 2])), got "
                         f'{options!r}')
    out = {}
    for name, given in options.items():
        protocols = [p for p in PROTOCOLS if name in list_corruptions(p)]
        if not protocols:
            raise ValueError(f'corruption_options names {name!r}, which is not a corruption '
                             f'of any protocol')
        valid = [o for o in get_corruption(name, protocols[0]).accepted_options
                 if o not in _OWN_OPTIONS]
        if not isinstance(given, Mapping) or set(given) - set(valid):
            raise ValueError(f'corruption_options[{name!r}] must be a dict of its options '
                             f'{valid or "(it has none)"}, got {given!r}')
        if 'band_noise' in given:
            check_band_noise(given['band_noise'])
        out[name] = dict(given)
    return out


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def band_options(corruption: str, domain: str, what: str,
                 band_names: Optional[Sequence[str]], count: int,
                 options: Mapping[str, Any]) -> dict:
    """``options`` with the ``bands`` a corruption of band ``domain`` (its spec's
    ``band_domain``) acts on in a sample of ``count`` bands named ``band_names`` (see Bands
    in :class:`ApplyCorruption`; the pipeline step and ``corruption_device='model'`` both
    ask it; ``what`` names the step in errors): unchanged without ``band_names``, for a
    corruption of every band, with an explicit ``bands``, when no band's kind is known,
    or when every band is in its domain.

    Raises:
        ValueError: ``band_names`` of another length than the image's band count, or
            named bands none of which is in the corruption's domain.
    """
    if band_names is None or domain == 'all' or 'bands' in options:
        return dict(options)
    names = list(band_names)
    if len(names) != count:
        raise ValueError(f'{what}: the sample\'s band_names name {len(names)} bands '
                         f'({names}) but its image has {count}; they must name every band '
                         'of the image, in order')
    kinds = band_kinds(names)
    if all(kind == 'unknown' for kind in kinds):
        return dict(options)  # nothing known of the bands: every band, as without names
    selected = bands_in_domain(names, domain)
    if not selected:
        described = ', '.join(f'{n} ({k})' for n, k in zip(names, kinds))
        raise ValueError(
            f'{what} acts on {domain} bands only, and this image has none: its bands are '
            f'{described}. {corruption!r} makes no sense for that sensor; choose a '
            'corruption that acts on every band (noise, blur, compression, data gaps, '
            'geometric), or load optical bands')
    if len(selected) == count:
        return dict(options)
    return dict(options, bands=selected)


def name_options(band_names: Optional[Sequence[str]], count: int, max_value: MaxValue,
                 options: Mapping[str, Any]) -> dict:
    """The ``band_names`` argument for the engine (``corrupt`` and ``corrupt_torch``,
    plain and geometric) for a sample of ``count`` bands named ``band_names``: the names
    when they name every band (the engine then names bands in its errors) or when
    ``max_value`` or an option is given by band name (a ``max_value`` mapping; a
    ``band_noise`` mapping or ``'sensor'``: the engine then refuses names of another
    length); ``{}`` otherwise (no names, or names of another length that nothing needs,
    as before). The pipeline step and ``corruption_device='model'`` both ask it."""
    if band_names is None:
        return {}
    names = tuple(band_names)
    if len(names) == count or needs_band_names(max_value, options):
        return {'band_names': names}
    return {}


def sample_draw_key(results: Mapping[str, Any]) -> Any:
    """The key of a sample's random draws (corruptions, attacks' random starts): the image's
    file name (stable across machines and folders), with the window read when the sample
    is a window of a larger raster (``'name.tif@col_off,row_off,width,height'``: each
    window of one scene gets draws of its own, as a separate image would), else the
    sample index; None when the sample has neither."""
    if results.get('img_path'):
        key = osp.basename(results['img_path'])
        window = results.get('window')
        if window is not None:
            key += '@' + ','.join(str(int(v)) for v in window)
        return key
    index = results.get('sample_idx')
    # an integer index as a Python int (numpy's too); another key (a name) as it is
    return int(index) if isinstance(index, numbers.Integral) else index


@TRANSFORMS.register_module()
class ApplyCorruption(BaseTransform):
    """Corrupt the image (and, for geometric corruptions, move the labels).

    Where it goes: right after image loading, before any resizing, cropping, padding
    and normalisation; for geometric corruptions after the annotation loading (and
    ``ConvertBoxType``) too, so that the labels move with the image (see
    :mod:`reobench_mm.transforms.placement`; ``CorruptionTestLoop``, ``tools/test.py``
    and the robustness sweep place it for you). A wrong placement is an error, never a
    silently different number:

    - a geometric corruption of a sample whose annotations are still to be loaded (the
      dataset gave ``seg_map_path`` or ``instances``, but there is no ``gt_seg_map`` /
      ``gt_bboxes`` yet) raises a ``RuntimeError`` that says where to put the step;
    - an image that an earlier step resized, cropped or padded (its shape differs from
      ``ori_shape``, or ``scale_factor`` is not 1) raises a ``RuntimeError``: the
      severity tables are defined on the original image. ``allow_resized=True``
      corrupts it anyway, with one warning, except a geometric corruption of a sample
      with labels (they are still at the original size and cannot move with it).

    A severity of 0 or ``corruption='clean'`` is a no-op, so one config serves clean
    and corrupted runs.

    Bands: a corruption whose band domain is ``'optical'`` (``cloud``, ``haze``,
    ``brightness_contrast``, ``cloud_shadow``: ``get_corruption(name).band_domain``) is
    applied to the optical bands only when the sample carries ``band_names`` (from
    :class:`~reobench_mm.transforms.raster_loading.LoadMultiBandImageFromFile`): the
    bands named as optical (:func:`~reobench_corruptions.bands.band_kinds`) get exactly
    the engine's result, the others (SAR, unknown names) come back bit-identical. An
    image with named bands but no optical one (a Sentinel-1 ``VV``/``VH`` image under
    ``cloud``) is a ValueError naming the corruption and the bands. Images without
    ``band_names`` (RGB pipelines), or whose names are all unknown, are corrupted on
    every band, as before. A ``bands`` option given in ``corruption_options`` wins over
    the band names.

    Required Keys:

    - img (a numpy array: the step runs after image loading and before the image
      becomes a tensor; without one it is an error that says where the step belongs)
    - img_path or sample_idx (the sample's random key: the image's file name, else its
      index; a sample with neither is an error, since every sample would then get the
      same random draws)
    - band_names (optional; see Bands above)
    - gt_seg_map, seg_fields (optional)
    - gt_bboxes (optional; ``HorizontalBoxes``, ``RotatedBoxes`` or ``QuadriBoxes``)
    - gt_bboxes_labels, gt_ignore_flags (optional)
    - ori_shape, scale_factor (optional; checked as described above)

    Modified Keys:

    - img
    - gt_seg_map and every key in seg_fields (geometric corruptions)
    - gt_bboxes, gt_bboxes_labels, gt_ignore_flags (geometric corruptions)

    Added Keys:

    - corruption (str), severity (int): what was applied; add them to the packing
      transform's ``meta_keys`` to carry them into the sample's metainfo.

    The condition is kept as a :class:`~reobench_corruptions.condition.Condition`
    (:attr:`condition`; ``corruption``, ``severity``, ``seed``, ``protocol`` and
    ``border`` read its fields), so a no-op step says ``'clean'`` and severity 0.

    Args:
        corruption (str): a corruption of ``protocol``, or ``'clean'``.
        severity (int): 0..5.
        seed (int): global seed of every random draw (an integer >= 0).
        protocol (str): ``'reobench'`` or ``'geofm_calibration'``.
        border (str): ``'reflect'`` (the paper) or ``'constant'`` for rotate/translate.
        box_policy (str): ``'reference'`` keeps every box (as the paper did);
            ``'drop_outside'`` drops boxes whose centre leaves the image.
        angle_version (str): rotated-box angle convention to keep (``'le90'``).
        ignore_index (int): label written where a moved map has no source content.
        channel_order (str): order of 3-band images in ``img`` (``'bgr'`` as MMCV loads).
        max_value (float, optional): full scale of the image: uint16 (default 65535) and
            float images (default 1.0; ``255`` for ``LoadImageFromFile(to_float32=True)``).
            Values above it are an error in the bands the corruption acts on (the others
            pass through bit-identical whatever they hold, e.g. Sentinel-1 bands in dB
            under an optical-only corruption). Or one full scale per band: a list with
            one per band, or a mapping from band name to full scale, looked up in the
            sample's ``band_names`` (see :mod:`reobench_corruptions.band_values`).
        reencode_jpeg_quality (int, optional): an extra JPEG pass after the corruption,
            as the authors' released DIOR files carry (they used quality 75). Off by
            default.
        allow_resized (bool): corrupt images that an earlier step resized (one warning)
            instead of refusing them.
        corruption_options (dict, optional): a corruption's own options, by corruption
            name, used whenever that corruption runs: ``dict(cloud_shadow=dict(bands=[0,
            1, 2]))`` clouds only those bands (positions from 0; ``bands`` is taken by
            every pixel-value corruption and wins over ``band_names``),
            ``dict(scale=dict(canvas='black'))`` the canvas of ``scale``,
            ``dict(poisson_gaussian_noise=dict(band_noise='sensor'))`` its (η, σ) per band
            by the kind of each band of the sample's ``band_names`` (or a list of
            per-band pairs, or a mapping by band name; see
            :mod:`reobench_corruptions.band_noise`) (see the corruptions' documentation).
        labels_later (bool): the annotations are loaded after this step (the toolboxes'
            test pipelines load them after ``Resize``): a geometric corruption moves the
            image here, at its original size, and records its transform for
            :class:`ApplyCorruptionToLabels`, placed after the annotation loading, which
            moves the labels, still at their original size, by the same transform. The
            placement rules set it (and insert that step) where a pipeline needs it.
    """

    def __init__(self, corruption: str = CLEAN_NAME, severity: int = 0, seed: int = 0,
                 protocol: str = 'reobench', border: str = 'reflect',
                 box_policy: str = 'reference', angle_version: str = 'le90',
                 ignore_index: int = 255, channel_order: str = 'bgr',
                 max_value: MaxValue = None,
                 reencode_jpeg_quality: Optional[int] = None,
                 allow_resized: bool = False,
                 corruption_options: Optional[Mapping[str, Any]] = None,
                 labels_later: bool = False) -> None:
        self.set_condition(Condition(corruption, severity, seed, protocol, border))
        if box_policy not in BOX_POLICIES:
            raise ValueError(f'box_policy must be one of {BOX_POLICIES}, got {box_policy!r}')
        if angle_version not in ANGLE_VERSIONS:
            raise ValueError(f'angle_version must be one of {ANGLE_VERSIONS}, '
                             f'got {angle_version!r}')
        check_channel_order(channel_order)
        if reencode_jpeg_quality is not None and (
                not _is_int(reencode_jpeg_quality) or not 1 <= reencode_jpeg_quality <= 100):
            raise ValueError('reencode_jpeg_quality must be None or an integer in 1..100, '
                             f'got {reencode_jpeg_quality!r}')
        if not _is_int(ignore_index):
            raise ValueError(f'ignore_index must be an integer, got {ignore_index!r}')
        if not isinstance(allow_resized, bool):
            raise ValueError(f'allow_resized must be True or False, got {allow_resized!r}')
        if not isinstance(labels_later, bool):
            raise ValueError(f'labels_later must be True or False, got {labels_later!r}')
        self.labels_later = labels_later
        self.box_policy, self.angle_version = box_policy, angle_version
        self.ignore_index, self.channel_order = int(ignore_index), channel_order
        self.max_value = check_band_max_values(max_value)
        if reencode_jpeg_quality is not None and isinstance(self.max_value, (tuple, dict)):
            raise ValueError('reencode_jpeg_quality re-encodes the whole image at one full '
                             'scale; it takes a max_value of one number (or None), got one '
                             f'per band: {max_value!r}')
        self.reencode_jpeg_quality = reencode_jpeg_quality
        self.allow_resized = allow_resized
        self.corruption_options = check_corruption_options(corruption_options)
        self._warned_resized = False

    def set_condition(self, corruption: Union[Condition, str],
                      severity: Optional[int] = None, seed: Optional[int] = None,
                      protocol: Optional[str] = None, border: Optional[str] = None) -> None:
        """Switch this instance to another condition: a
        :class:`~reobench_corruptions.condition.Condition`, or its settings as the
        constructor takes them (``set_condition('haze', 2, seed=3)``; settings left out
        take their defaults). The robustness sweep reuses one built pipeline for every
        condition. A rejected condition leaves the instance as it was.

        Raises:
            KeyError: unknown corruption. ValueError: bad severity, seed, protocol or
            border. TypeError: a condition together with settings.
        """
        condition = Condition.of(corruption, severity, seed, protocol, border)
        self.spec = None if condition.is_clean else get_corruption(condition.corruption,
                                                                   condition.protocol)
        self._condition = condition

    @property
    def condition(self) -> Condition:
        """The condition this step applies."""
        return self._condition

    # the condition's fields, read-only (set_condition switches them together)
    corruption = property(lambda self: self._condition.corruption)
    severity = property(lambda self: self._condition.severity)
    seed = property(lambda self: self._condition.seed)
    protocol = property(lambda self: self._condition.protocol)
    border = property(lambda self: self._condition.border)

    @property
    def is_noop(self) -> bool:
        return self._condition.is_clean

    @staticmethod
    def sample_key(results: Mapping[str, Any]):
        """The key of the sample's random draws: see :func:`sample_draw_key`."""
        return sample_draw_key(results)

    def draw_key(self, results: dict):
        """The key of the corruption's random draws for this sample: its
        :meth:`sample_key` (a subclass may refine it, e.g. by the epoch)."""
        return self.sample_key(results)

    def _what(self) -> str:
        return f'ApplyCorruption({self.corruption!r}, severity={self.severity})'

    def check_sample(self, results: dict) -> None:
        """Refuse a sample this corruption cannot be applied to correctly (see the class
        docstring): no loaded image (the step runs before image loading, or after the
        image became a tensor), no sample key, an image resized before this step, or
        (geometric corruptions) labels that are still to be loaded or that cannot be
        moved."""
        image = results.get('img')
        if not isinstance(image, np.ndarray):
            found = ('the sample has no image yet (no img key)' if 'img' not in results
                     else 'the sample\'s img is None' if image is None
                     else f'the sample\'s img is a {type(image).__module__}.'
                          f'{type(image).__name__}, not a numpy array')
            raise RuntimeError(
                f'{self._what()} needs a loaded image as a numpy array, but {found}. It '
                'belongs right after image loading: put it right after LoadImageFromFile '
                '(after LoadAnnotations for geometric corruptions), before any resizing, '
                'normalisation or conversion to tensors; CorruptionTestLoop, tools/test.py '
                'and the robustness sweep place it there.')
        if image.dtype.name not in SUPPORTED_DTYPES:
            raise TypeError(
                f'{self._what()}: the image has dtype {image.dtype.name}, a data type the '
                f'corruptions do not take (they take {", ".join(SUPPORTED_DTYPES)}): load it with '
                'LoadMultiBandImageFromFile(..., to_float32=True) and give the corruption '
                "max_value=<the sensor's full scale> (e.g. 10000 for Sentinel-2 "
                'reflectances)')
        if self.sample_key(results) is None:
            raise RuntimeError(
                f'{self._what()}: the sample has neither img_path nor sample_idx, which key '
                'its random draws; without a key every sample would get the same noise. '
                "Datasets provide both; for arrays, set results['sample_idx'].")
        original = results.get('ori_shape')
        factor = results.get('scale_factor')
        resized = original is not None and tuple(image.shape[:2]) != tuple(original[:2])
        rescaled = factor is not None and not np.allclose(np.asarray(factor, float), 1.0)
        if resized or rescaled:
            detail = (f'the image is {image.shape[0]}x{image.shape[1]}, its original size '
                      f'{original[0]}x{original[1]}' if resized else
                      f'an earlier step rescaled it (scale_factor {tuple(factor)})')
            labels = [key for key in ('gt_seg_map', 'gt_bboxes')
                      if results.get(key) is not None and len(results[key])]
            if self.spec.moves_labels and labels:
                # the labels were loaded at the original size: moving them with the
                # resized image's geometry would misplace them, allow_resized or not
                raise RuntimeError(
                    f'{self._what()}: {detail}, while {" and ".join(labels)} still have the '
                    'original size, so image and labels cannot be moved together. Load the '
                    'annotations before the resize and put ApplyCorruption right after '
                    'them, or keep the test images at the test size (then Resize changes '
                    'nothing)')
            if not self.allow_resized:
                raise RuntimeError(
                    f'{self._what()}: {detail}. A step before it resized, cropped or padded '
                    'the image, but the severity parameters are defined on the original '
                    'image. Put ApplyCorruption right after image loading (before Resize); '
                    'geometric corruptions go after LoadAnnotations, which is only right '
                    'when the resize keeps the test images as they are. Set '
                    'allow_resized=True to corrupt resized images on purpose.')
            if not self._warned_resized:
                self._warned_resized = True
                warnings.warn(f'{self._what()} corrupts resized images ({detail}; '
                              'allow_resized=True): severities are no longer those of the '
                              'original images')
        if not self.spec.moves_labels:
            return
        pending = [f'{path} but no {loaded}' for path, loaded in (
            ('seg_map_path', 'gt_seg_map'), ('instances', 'gt_bboxes'))
            if results.get(path) and results.get(loaded) is None]
        if pending and not self.labels_later:
            raise RuntimeError(
                f'{self._what()} runs before the annotations are loaded (the sample has '
                f'{" and ".join(pending)} yet): a geometric corruption moves the image, and '
                'labels loaded after it would stay where they were. Put ApplyCorruption '
                'after LoadAnnotations (and ConvertBoxType) in the pipeline; '
                'CorruptionTestLoop, tools/test.py and the robustness sweep place it there.')
        unmovable = [key for key in ('gt_masks', 'gt_instances_masks', 'gt_keypoints')
                     if results.get(key) is not None]
        if unmovable:
            raise RuntimeError(f'{self._what()} cannot move {unmovable} (it moves label '
                               'maps and boxes); leave them out of the annotations or use a '
                               'non-geometric corruption')

    def transform(self, results: dict) -> dict:
        results['corruption'], results['severity'] = self._condition.pair
        if self.is_noop:
            return results
        self.check_sample(results)
        image, key = results['img'], self.draw_key(results)
        extra = self.corruption_options.get(self.corruption, {})
        common = dict(seed=self.seed, key=key, protocol=self.protocol, max_value=self.max_value,
                      **name_options(results.get('band_names'), as_bands(image).shape[2],
                                     self.max_value, extra))
        if self.spec.moves_labels:
            image, geometry = corrupt_geometric(image, self.corruption, self.severity,
                                                border=self.border, **common, **extra)
            if self.labels_later:  # moved by ApplyCorruptionToLabels, once they are loaded
                results[GEOMETRY_KEY] = dict(
                    geometry=geometry, ignore_index=self.ignore_index,
                    angle_version=self.angle_version, box_policy=self.box_policy,
                    what=self._what())
            else:
                move_labels(results, geometry, self.ignore_index, self.angle_version,
                            self.box_policy)
        else:
            options = {'channel_order': self.channel_order} \
                if 'channel_order' in self.spec.options else {}
            image = corrupt(image, self.corruption, self.severity, **common, **options,
                            **band_options(self.corruption, self.spec.band_domain, self._what(),
                                          results.get('band_names'),
                                          as_bands(results['img']).shape[2], extra))
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

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(corruption={self.corruption!r}, '
                f'severity={self.severity}, seed={self.seed}, protocol={self.protocol!r}, '
                f'border={self.border!r}, box_policy={self.box_policy!r}, '
                f'reencode_jpeg_quality={self.reencode_jpeg_quality}, '
                f'allow_resized={self.allow_resized}, '
                f'corruption_options={self.corruption_options!r}, '
                f'labels_later={self.labels_later})')


def move_labels(results: dict, geometry: GeometricTransform, ignore_index: int,
                angle_version: str = 'le90', box_policy: str = 'reference') -> None:
    """Move the label maps (``gt_seg_map`` and ``seg_fields``; ``ignore_index`` where a
    moved map has no source content) and the boxes (``gt_bboxes``, with
    ``box_policy='drop_outside'`` dropping those whose centre leaves the image, and their
    labels and ignore flags) of ``results`` by ``geometry``."""
    for key in set(results.get('seg_fields', [])) | {'gt_seg_map'}:
        if results.get(key) is not None:
            results[key] = geometry.warp_label_map(results[key], ignore_index)
    boxes = results.get('gt_bboxes')
    if boxes is None or len(boxes) == 0:
        return
    moved = move_boxes(boxes, geometry, angle_version)
    if box_policy == 'drop_outside':
        keep = centres_inside(moved, geometry)
        moved = moved[torch.from_numpy(keep)]
        for field in ('gt_bboxes_labels', 'gt_ignore_flags'):
            if results.get(field) is not None:
                results[field] = results[field][keep]
    results['gt_bboxes'] = moved


def centres_inside(boxes, geometry: GeometricTransform) -> np.ndarray:
    """Boolean mask of the (moved) ``boxes`` whose centre lies in the output image: the
    boxes ``box_policy='drop_outside'`` keeps."""
    h, w = geometry.output_shape
    centres = boxes.centers.cpu()
    return ((centres[:, 0] >= 0) & (centres[:, 0] < w) & (centres[:, 1] >= 0)
            & (centres[:, 1] < h)).numpy()


#: The instance fields of packed detection samples whose boxes a geometric corruption
#: moves (``ignored_instances`` holds the boxes flagged ignored).
_INSTANCE_FIELDS = ('gt_instances', 'ignored_instances')


def move_sample_labels(sample: Any, geometry: GeometricTransform, ignore_index: int,
                       angle_version: str = 'le90', box_policy: str = 'reference') -> Any:
    """A copy of a packed data sample (mmseg ``SegDataSample``, mmdet ``DetDataSample``)
    whose labels are moved by ``geometry``, as :func:`move_labels` moves them in the
    pipeline: every ``gt_*`` pixel map on its device
    (:func:`~reobench_corruptions.torch_engine.warp_label_map_torch`, the same values),
    the boxes of ``gt_instances`` and ``ignored_instances`` with :func:`move_boxes` (a few
    numbers per box, on the CPU: the same boxes), dropped outside with
    ``box_policy='drop_outside'``. ``sample`` itself is not modified.

    Raises:
        RuntimeError: instances with masks (which geometric corruptions do not move).
    """
    from mmengine.structures import InstanceData, PixelData
    from reobench_corruptions.torch_engine import warp_label_map_torch
    moved = sample.clone()
    for name in sample.keys():
        value = sample.get(name)
        if name.startswith('gt_') and isinstance(value, PixelData):
            maps = {key: warp_label_map_torch(value.get(key), geometry, ignore_index)
                    for key in value.keys()}
            setattr(moved, name, PixelData(metainfo=value.metainfo, **maps))
    for name in _INSTANCE_FIELDS:
        instances = sample.get(name)
        if not isinstance(instances, InstanceData) or 'bboxes' not in instances:
            continue
        if 'masks' in instances:
            raise RuntimeError(f'{name} holds masks, which a geometric corruption does not '
                               'move; leave them out of the annotations')
        boxes = instances.bboxes
        new = instances.clone()
        if len(boxes):
            device = boxes.device
            new.bboxes = move_boxes(boxes.cpu(), geometry, angle_version).to(device)
            if box_policy == 'drop_outside':
                new = new[torch.from_numpy(centres_inside(new.bboxes, geometry)).to(device)]
        setattr(moved, name, new)
    return moved


@TRANSFORMS.register_module()
class ApplyCorruptionToLabels(BaseTransform):
    """The label part of a geometric corruption whose image part ran before the
    annotations were loaded (``ApplyCorruption(labels_later=True)``).

    The toolboxes' test pipelines load the annotations after ``Resize``, at the original
    size, so that predictions are scored against the original labels. There the image is
    corrupted right after loading, at its original size, and the transform it went
    through is recorded in the sample; this step, right after the annotation loading (and
    ``ConvertBoxType``), moves the label maps and boxes by that same transform, with the
    image step's ``ignore_index``, ``angle_version`` and ``box_policy``. Without a recorded
    transform (a clean sample, a pixel-value corruption, or labels already moved) it does
    nothing. The placement rules insert it where a pipeline needs it.

    Required Keys: ``gt_seg_map`` / ``gt_bboxes`` (optional; at the original size).
    Modified Keys: ``gt_seg_map`` and ``seg_fields``, ``gt_bboxes``, ``gt_bboxes_labels``,
    ``gt_ignore_flags``.
    """

    def transform(self, results: dict) -> dict:
        record = results.pop(GEOMETRY_KEY, None)
        if record is None:
            return results
        geometry = record['geometry']
        for key in set(results.get('seg_fields', [])) | {'gt_seg_map'}:
            labels = results.get(key)
            if labels is not None and tuple(labels.shape[:2]) != geometry.source_shape:
                raise RuntimeError(
                    f'{record["what"]} moved the image at {geometry.source_shape[0]}x'
                    f'{geometry.source_shape[1]}, but {key} is {labels.shape[0]}x'
                    f'{labels.shape[1]}: a step between resized the labels. Put '
                    'ApplyCorruptionToLabels right after the annotation loading')
        move_labels(results, geometry, record['ignore_index'], record['angle_version'],
                    record['box_policy'])
        return results


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
