"""The forward precision of a test step: fp32, or bf16/fp16 under :func:`torch.autocast`.

``RobustnessTestLoop(precision='bf16')`` (``--precision bf16``) runs the model's
``test_step`` under ``torch.autocast`` on the model's device with that dtype: matrix
products and convolutions in half precision, reductions and softmax in float32 as
autocast decides. It changes the numbers (slightly), so it is part of the fingerprint of
the records (a run in another precision does not reuse them); the change on the demo
models is measured in ``docs/robustness_loops.md``. The attacks' gradients and the
temperature fit stay in float32. Rotated detectors run in fp32 only: MMRotate's
post-processing of rotated boxes needs float32 (it converts boxes to NumPy, which has no
bfloat16, and OpenCV's convex hull takes no float16), so a half-precision forward ends
inside it; :func:`check_precision` refuses that before anything runs.
"""
from __future__ import annotations

import contextlib
from typing import Any, ContextManager

import torch

from ..evaluation.keys import SEGMENTATION

__all__ = ['PRECISIONS', 'forward_precision', 'check_precision']

#: The precisions of the test step.
PRECISIONS = ('fp32', 'bf16', 'fp16')
_DTYPES = {'bf16': torch.bfloat16, 'fp16': torch.float16}


def forward_precision(precision: str, model: Any) -> ContextManager:
    """A context in which ``model``'s forward runs in ``precision`` (a no-op for fp32).

    Raises:
        ValueError: another precision.
    """
    if precision not in PRECISIONS:
        raise ValueError(f'precision must be one of {PRECISIONS}, got {precision!r}')
    if precision == 'fp32':
        return contextlib.nullcontext()
    device = next(iter(model.parameters())).device
    return torch.autocast(device_type=device.type, dtype=_DTYPES[precision])


def check_precision(precision: str, fp16: bool, task: str) -> None:
    """Refuse a precision the run cannot use: both ``fp16=True`` (MMEngine's flag) and
    another ``precision``, or half precision for a rotated detector (see the module
    docstring).

    Raises:
        SweepError: naming what was given and what to give.
    """
    from ..errors import SweepError
    if fp16 and precision != 'fp32':
        raise SweepError(f"test_cfg.fp16=True and precision={precision!r}: give one of them "
                         "(precision='fp16' is what fp16=True asks for)")
    if precision != 'fp32' and task != SEGMENTATION:
        raise SweepError(
            f"precision={precision!r} is for segmentation models: MMRotate's post-processing "
            'of rotated boxes needs float32 (NumPy has no bfloat16, OpenCV\'s convex hull '
            "takes no float16); evaluate detectors in 'fp32'")
