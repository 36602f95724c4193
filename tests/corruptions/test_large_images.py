"""Bounded memory on large images: no corruption holds more than a few image-sized
buffers (``benchmarks/large_image_memory.py`` measures the same at 8000×8000).

The image here is small enough for a test; tiles are made proportionally small
(``TILE_ELEMENTS``) so that the tiles' own temporaries are as negligible as they are
on a large image. Memory is what numpy and Python allocate (``tracemalloc``),
including the result.
"""
import tracemalloc

import cv2
import numpy as np
import pytest

from reobench_corruptions import PROTOCOLS, corrupt, list_corruptions
from reobench_corruptions import base as engine_base

ALL = [(p, n) for p in PROTOCOLS for n in list_corruptions(p)]
TARGET_RATIO = 3.0  # peak extra memory <= 3x the image's bytes, as the benchmark's target


@pytest.fixture(scope='module')
def images():
    rng = np.random.default_rng(0)
    small = rng.random((60, 50, 3)).astype(np.float32) * 0.8 + 0.1
    floats = cv2.resize(small, (1000, 1200), interpolation=cv2.INTER_LINEAR)
    return {'uint8': np.rint(floats * 255).astype(np.uint8), 'float32': floats}


@pytest.mark.parametrize('dtype', ['uint8', 'float32'])
@pytest.mark.parametrize('protocol,name', ALL)
def test_peak_memory_is_bounded(images, monkeypatch, protocol, name, dtype):
    monkeypatch.setattr(engine_base, 'TILE_ELEMENTS', 1 << 14)
    image = images[dtype]
    tracemalloc.start()
    try:
        result = corrupt(image, name, 3, protocol=protocol, key='large')
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.shape == image.shape
    assert peak <= TARGET_RATIO * image.nbytes, \
        f'{name}: peak {peak / image.nbytes:.2f}x the image bytes'


@pytest.mark.parametrize('protocol,name', [('reobench', 'haze'), ('reobench', 'gaussian_noise'),
                                           ('geofm_calibration', 'cloud_shadow')])
def test_peak_memory_is_bounded_at_full_scales_float32_cannot_hold(images, monkeypatch,
                                                                  protocol, name):
    """A float32 image with max_value=1e38 is divided and multiplied back in float64,
    a row tile at a time: within the same bound."""
    monkeypatch.setattr(engine_base, 'TILE_ELEMENTS', 1 << 14)
    image = images['float32'] * np.float32(1e38)
    tracemalloc.start()
    try:
        result = corrupt(image, name, 3, protocol=protocol, key='large', max_value=1e38)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.dtype == np.float32 and np.isfinite(result).all()
    assert peak <= TARGET_RATIO * image.nbytes, \
        f'{name}: peak {peak / image.nbytes:.2f}x the image bytes'
