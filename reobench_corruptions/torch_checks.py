"""The input checks of the torch engine (:mod:`~reobench_corruptions.torch_engine`): the
batch's type, shape and dtype, the values of the bands a corruption acts on (one full
scale, or one per band), which other bands lie outside their range (the corruption sees
zeros there, and they are put back), and the samples' keys. Imports torch."""
from __future__ import annotations

import math
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from .band_values import (MaxValue, band_scales, check_band_ranges, out_of_range_note,
                          per_band_full_scales)
from .base import full_scale, sample_key

__all__ = ['TORCH_DTYPES', 'Key', 'check_tensor', 'check_images', 'band_extremes',
           'band_note', 'check_band_values', 'blanked', 'check_keys']

Key = Union[str, int]

#: torch dtypes accepted, with the numpy dtype whose full scale they take. uint16 data
#: is ``torch.uint16`` (e.g. ``torch.from_numpy`` of a uint16 array); int32 tensors are
#: refused, since nothing tells their full scale apart from other integer data.
TORCH_DTYPES = {
    torch.uint8: np.uint8,
    torch.uint16: np.uint16,
    torch.float16: np.float16,
    torch.float32: np.float32,
    torch.float64: np.float64,
}


def check_tensor(images) -> int:
    """Check the batch's type, shape and dtype; its band count."""
    if not isinstance(images, torch.Tensor):
        raise TypeError(f'images must be a torch.Tensor of shape B×C×H×W, got '
                        f'{type(images).__name__}')
    if images.dim() != 4 or min(images.shape) < 1:
        raise ValueError(f'images must be a B×C×H×W tensor with B, C, H, W >= 1, got shape '
                         f'{tuple(images.shape)}')
    if images.dtype not in TORCH_DTYPES:
        hint = ' (uint16 data: convert with images.to(torch.uint16))' \
            if images.dtype == torch.int32 else ''
        raise TypeError(f'unsupported dtype {images.dtype}{hint}; valid: '
                        f'{", ".join(str(d) for d in TORCH_DTYPES)}')
    return images.shape[1]


def check_images(images, max_value: MaxValue, selected: Optional[List[int]] = None,
                  names: Optional[Tuple] = None
                  ) -> Tuple[Union[float, Tuple[float, ...]], List[int]]:
    """Check the batch (:func:`check_tensor`, and the values of the bands the corruption
    acts on: ``selected``, every band when None) and return ``(scale, blank)``: its full
    scale (one per band where they differ) and the other bands outside their range
    (:func:`~reobench_corruptions.band_values.check_band_ranges`)."""
    check_tensor(images)
    dtype = TORCH_DTYPES[images.dtype]
    per_band = per_band_full_scales(dtype, max_value, images.shape[1], names)
    if per_band is not None or selected is not None:
        return check_band_values(images, max_value, per_band, selected, names)
    scale = full_scale(dtype, max_value)
    shown = f'{scale:g}' if max_value is None else repr(max_value)
    if images.dtype == torch.uint16 and scale < 65535:
        largest = int(images.to(torch.int32).max())
        if largest > scale:
            raise ValueError(f'the uint16 images have values up to {largest}, above '
                             f'max_value={shown} (the full scale in force); set max_value '
                             f"to the sensor's full scale (at least {largest}), or leave it "
                             'unset for 65535' + band_note(images, scale, names))
    elif images.dtype.is_floating_point:
        low, high = float(images.min()), float(images.max())
        limit = float(dtype(scale))
        if not (math.isfinite(low) and math.isfinite(high)):
            raise ValueError('float images must be finite (no NaN or inf)'
                             + band_note(images, limit, names))
        if low < 0 or high > limit:
            raise ValueError(f'float images must lie in [0, max_value] = [0, {shown}]; '
                             f'found values in [{low!r}, {high!r}]. Floats in 0..255 need '
                             'max_value=255; negative values mean the corruption runs after '
                             'normalisation: put it before Normalize'
                             + band_note(images, limit, names))
    return scale, []


def band_extremes(images: torch.Tensor) -> Tuple[List, List]:
    """Each band's smallest and largest value, as numpy scalars of the numpy twin of
    the batch's dtype (shown exactly in messages)."""
    values = images.to(torch.int32) if images.dtype == torch.uint16 else images
    twin = TORCH_DTYPES[images.dtype]
    return ([twin(v) for v in values.amin(dim=(0, 2, 3)).tolist()],
            [twin(v) for v in values.amax(dim=(0, 2, 3)).tolist()])


def band_note(images: torch.Tensor, limit: float, names) -> str:
    """Which bands of a batch lie outside [0, ``limit``] (``out_of_range_note``)."""
    return out_of_range_note(*band_extremes(images), limit, names)


def check_band_values(images: torch.Tensor, max_value: MaxValue, per_band, selected, names
                 ) -> Tuple[Union[float, Tuple[float, ...]], List[int]]:
    """:func:`check_images` band by band (full scales per band, or a selection)."""
    dtype = TORCH_DTYPES[images.dtype]
    count = images.shape[1]
    scales, shown = band_scales(dtype, max_value, per_band, count)
    blank: List[int] = []
    if images.dtype != torch.uint8:
        blank = check_band_ranges(*band_extremes(images), [float(dtype(s)) for s in scales],
                                  set(range(count)) if selected is None else set(selected),
                                  shown, per_band is not None, names)
    return (scales[0] if all(s == scales[0] for s in scales) else tuple(scales)), blank


def blanked(images: torch.Tensor, blank: List[int]) -> torch.Tensor:
    """``images`` with zeros in the ``blank`` bands (a copy when there are any): what
    the corruption sees of bands it leaves unchanged and that lie outside their range."""
    if not blank:
        return images
    out = images.clone()
    for band in blank:
        out[:, band].zero_()
    return out


def check_keys(keys, batch_size: int, spec, severity: int) -> List[Optional[Key]]:
    if keys is None:
        if spec.stochastic and severity > 0:
            raise ValueError(
                f'{spec.name!r} (severity {severity}) draws random numbers and needs one '
                f'key per sample: pass keys= with {batch_size} values stable for each '
                "image, e.g. their file names or dataset indices (keys=['a.png', ...]); "
                'without keys every image would get the same draws')
        return [None] * batch_size
    if isinstance(keys, (str, bytes)) or not isinstance(keys, Sequence):
        raise TypeError(f'keys must be a list of {batch_size} sample keys (one str or int '
                        f'per image of the batch), got {keys!r}')
    if len(keys) != batch_size:
        raise ValueError(f'got {len(keys)} keys for a batch of {batch_size} images; pass '
                         'exactly one key (str or int) per image, in batch order')
    for key in keys:
        sample_key(key)  # TypeError for anything but str / int / None
        if key is None and spec.stochastic and severity > 0:
            raise ValueError(f'{spec.name!r} draws random numbers: every sample needs a key '
                             f'(str or int), got None in {list(keys)!r}')
    return list(keys)
