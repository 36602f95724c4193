"""The geometric corruptions of the torch engine (``corrupt_geometric_torch``,
``warp_label_map_torch``) against the numpy engine on the real samples.

The torch engine reproduces OpenCV's fixed-point sampling, so the claims are exact:

- ``uint8`` images: the numpy engine's bits for ``rotate``, ``scale`` (every canvas) and
  ``translate``, every severity, both borders, 1, 3, 4 and 5 bands, square and
  non-square images;
- float images: the same bits for ``rotate`` and ``translate``; ``scale`` the same bits
  as OpenCV's own resize (Intel IPP off) and within float rounding of the IPP resize;
- label maps of every dtype (and 1×H×W maps as mmseg packs them): the same values;
- the transforms (matrix, canvas) are the numpy engine's, so boxes move identically;
- the uint8 and label claims also on a generated image, where the real samples are absent.

A bilinear warp at exact positions (``grid_sample``-like) fails the ``uint8`` claim: the
test of the fixed-point arithmetic is that it can tell the two apart.
"""
import os.path as osp
from functools import lru_cache
from typing import Dict

import cv2
import numpy as np
import pytest

torch = pytest.importorskip('torch')

from reobench_corruptions import corrupt_geometric  # noqa: E402
from reobench_corruptions.torch_engine import (corrupt_geometric_torch,  # noqa: E402
                                               corrupt_torch, warp_label_map_torch)

NAMES = ('rotate', 'scale', 'translate')
SCALE_CANVASES = ('replicate', 'reflect', 'black')


def _cases():
    for name in NAMES:
        for border in ('reflect', 'constant'):
            for canvas in (SCALE_CANVASES if name == 'scale' else (None, )):
                yield name, border, canvas


CASES = list(_cases())


def _case_id(case) -> str:
    name, border, canvas = case
    return f'{name}-{border}' + (f'-{canvas}' if canvas else '')


def _options(canvas) -> Dict[str, str]:
    return {} if canvas is None else {'canvas': canvas}


def _samples(root: str) -> Dict[str, np.ndarray]:
    """The real samples as uint8 RGB, read in place, plus a non-square crop with 5 bands
    (RGB, their mean and an inverted green band: more bands than OpenCV warps at once)."""
    images = {}
    for relative in ('potsdam/2_10_0_0_512_512_img.png', 'dior/00001.jpg',
                     'dota/P2805__1024__0___0.png'):
        image = cv2.imread(osp.join(root, relative), cv2.IMREAD_COLOR)
        assert image is not None, relative
        images[relative.split('/')[0]] = image
    crop = images['dior'][100:403, 50:250]
    extra = [crop.mean(axis=2, keepdims=True).astype(np.uint8), 255 - crop[..., 1:2]]
    images['dior-303x200x5'] = np.ascontiguousarray(np.concatenate([crop] + extra, axis=2))
    return images


def _torch(image: np.ndarray) -> 'torch.Tensor':
    return torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1)))[None]


def _numpy(batch: 'torch.Tensor') -> np.ndarray:
    return batch[0].permute(1, 2, 0).numpy()


@pytest.fixture
def samples(real_samples):
    return _cached_samples(real_samples)


@lru_cache(maxsize=1)
def _cached_samples(root: str) -> Dict[str, np.ndarray]:
    return _samples(root)


@pytest.mark.parametrize('case', CASES, ids=_case_id)
def test_uint8_images_are_the_numpy_engines_bits(samples, case):
    name, border, canvas = case
    for key, image in samples.items():
        for severity in range(1, 6):
            expected, transform = corrupt_geometric(image, name, severity, key=key, seed=5,
                                                    border=border, **_options(canvas))
            got, (moved, ) = corrupt_geometric_torch(_torch(image), name, severity,
                                                     keys=[key], seed=5, border=border,
                                                     **_options(canvas))
            assert got.dtype == torch.uint8
            np.testing.assert_array_equal(_numpy(got), expected, err_msg=f'{key} {severity}')
            np.testing.assert_array_equal(moved.matrix, transform.matrix)
            assert (moved.canvas, moved.output_shape, moved.border) == \
                (transform.canvas, transform.output_shape, transform.border)


@pytest.mark.parametrize('case', CASES, ids=_case_id)
def test_label_maps_are_the_numpy_engines_values(samples, case):
    name, border, canvas = case
    image = samples['dior-303x200x5']
    labels = (image[..., 1] // 40).astype(np.int64)
    labels[:20] = 255  # an ignored band
    for severity in (1, 3, 5):
        _, transform = corrupt_geometric(image, name, severity, key='k', border=border,
                                         **_options(canvas))
        _, (moved, ) = corrupt_geometric_torch(_torch(image), name, severity, keys=['k'],
                                               border=border, **_options(canvas))
        for dtype, ignore in ((np.int64, 255), (np.uint8, 255), (np.int32, -1),
                              (np.float32, 255), (np.bool_, 0)):
            label_map = (labels % 2).astype(dtype) if dtype == np.bool_ else \
                labels.astype(dtype)
            expected = transform.warp_label_map(label_map, ignore)
            packed = torch.from_numpy(label_map)[None]  # 1×H×W, as mmseg packs it
            got = warp_label_map_torch(packed, moved, ignore)
            assert got.shape == (1, ) + expected.shape and got.dtype == packed.dtype
            np.testing.assert_array_equal(got[0].numpy(), expected,
                                          err_msg=f'{severity} {np.dtype(dtype).name}')
            np.testing.assert_array_equal(
                warp_label_map_torch(torch.from_numpy(label_map), moved, ignore).numpy(),
                expected)


@pytest.mark.parametrize('case', CASES, ids=_case_id)
def test_generated_images_and_labels_are_the_numpy_engines(case):
    """The same claims on a generated textured image (odd, non-square, 5 bands), so they
    are checked where the real samples are absent."""
    name, border, canvas = case
    rng = np.random.default_rng(3)
    smooth = cv2.GaussianBlur(rng.random((97, 131, 5)).astype(np.float32), (0, 0), 1.5)
    image = np.clip(smooth * 400 - 70, 0, 255).astype(np.uint8)
    labels = torch.from_numpy((image[..., 0] // 50).astype(np.int64))[None]
    for severity in range(1, 6):
        expected, transform = corrupt_geometric(image, name, severity, key='g', seed=1,
                                                border=border, **_options(canvas))
        got, (moved, ) = corrupt_geometric_torch(_torch(image), name, severity, keys=['g'],
                                                 seed=1, border=border, **_options(canvas))
        np.testing.assert_array_equal(_numpy(got), expected, err_msg=str(severity))
        np.testing.assert_array_equal(
            warp_label_map_torch(labels, moved, 255)[0].numpy(),
            transform.warp_label_map(labels[0].numpy(), 255))


@pytest.fixture
def without_ipp():
    """OpenCV with Intel IPP off (restored afterwards): its own resize arithmetic."""
    used = cv2.ipp.useIPP()
    cv2.ipp.setUseIPP(False)
    yield
    cv2.ipp.setUseIPP(used)


@pytest.mark.parametrize('name', NAMES)
def test_float_images(samples, name, without_ipp):
    image = samples['potsdam'].astype(np.float32) / 255
    for severity in (1, 4):
        expected, _ = corrupt_geometric(image, name, severity, key='p')
        got, _ = corrupt_geometric_torch(_torch(image), name, severity, keys=['p'])
        np.testing.assert_array_equal(_numpy(got), expected)


def test_float_scale_with_ipp_is_within_float_rounding(samples):
    """With IPP (the default of x86 builds) OpenCV resizes float32 images with other
    arithmetic: the torch result stays within 4e-5 of the full scale, i.e. within one
    grey level of 12-bit data and of 8-bit data scaled to floats."""
    if not cv2.ipp.useIPP():
        pytest.skip('this OpenCV build does not use Intel IPP')
    image = samples['dior'].astype(np.float32) / 255
    for severity in range(1, 6):
        expected, _ = corrupt_geometric(image, 'scale', severity)
        got, _ = corrupt_geometric_torch(_torch(image), 'scale', severity)
        assert np.abs(_numpy(got) - expected).max() <= 4e-5


def test_uint16_and_batches(samples):
    image = np.rint(samples['dota'].astype(np.float64) / 255 * 4095).astype(np.uint16)
    batch = torch.cat([_torch(image)] * 3)
    keys = ['a', 'b', 'c']
    got, transforms = corrupt_geometric_torch(batch, 'translate', 5, keys=keys,
                                              max_value=4095)
    assert got.dtype == torch.uint16
    for i, key in enumerate(keys):  # a batch gives each sample's own single call
        expected, transform = corrupt_geometric(image, 'translate', 5, key=key,
                                                max_value=4095)
        np.testing.assert_array_equal(_numpy(got[i:i + 1]), expected)
        np.testing.assert_array_equal(transforms[i].matrix, transform.matrix)
    # translate draws its direction from the key: the three keys do not all agree
    assert len({tuple(t.matrix[:, 2]) for t in transforms}) > 1
    assert torch.equal(corrupt_torch(batch, 'translate', 5, keys=keys, max_value=4095), got)


def test_exact_positions_would_fail(samples):
    """Bilinear sampling at the exact (unquantised) positions, as ``grid_sample`` does,
    is not OpenCV's warp: the exact-bits claim can detect it."""
    image = samples['potsdam']
    expected, transform = corrupt_geometric(image, 'rotate', 1)
    h, w = image.shape[:2]
    inverse = cv2.invertAffineTransform(transform.opencv_matrix)
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float32)
    map_x = (inverse[0, 0] * xs + inverse[0, 1] * ys + inverse[0, 2]).astype(np.float32)
    map_y = (inverse[1, 0] * xs + inverse[1, 1] * ys + inverse[1, 2]).astype(np.float32)
    exact = image.astype(np.float64)
    x0, y0 = np.floor(map_x).astype(int), np.floor(map_y).astype(int)
    fx, fy = (map_x - x0)[..., None], (map_y - y0)[..., None]

    def at(y, x):
        return exact[np.clip(y, 0, h - 1), np.clip(x, 0, w - 1)]

    value = (at(y0, x0) * (1 - fx) * (1 - fy) + at(y0, x0 + 1) * fx * (1 - fy)
             + at(y0 + 1, x0) * (1 - fx) * fy + at(y0 + 1, x0 + 1) * fx * fy)
    inside = (x0 >= 0) & (x0 < w - 1) & (y0 >= 0) & (y0 < h - 1)
    differs = np.rint(value).astype(np.int64) != expected.astype(np.int64)
    assert differs[inside].mean() > 0.01


def test_severity_zero_and_refusals(samples):
    image = _torch(samples['dota'])
    same, (identity, ) = corrupt_geometric_torch(image, 'rotate', 0)
    assert torch.equal(same, image) and identity.name == 'identity'
    with pytest.raises(ValueError, match='not a geometric corruption'):
        corrupt_geometric_torch(image, 'haze', 3)
    with pytest.raises(ValueError, match="border must be one of.*'reflect'"):
        corrupt_geometric_torch(image, 'rotate', 3, border='wrap')
    with pytest.raises(ValueError, match="canvas .* must be one of"):
        corrupt_geometric_torch(image, 'scale', 3, canvas='white')
    with pytest.raises(TypeError, match='unknown options'):
        corrupt_geometric_torch(image, 'rotate', 3, canvas='black')
    with pytest.raises(ValueError, match='needs one key per sample'):
        corrupt_geometric_torch(image, 'translate', 3)
    _, (transform, ) = corrupt_geometric_torch(image, 'rotate', 3)
    with pytest.raises(ValueError, match=r'height × width \(170, 170\)'):
        warp_label_map_torch(torch.zeros(1, 100, 170, dtype=torch.int64), transform, 255)
    with pytest.raises(ValueError, match=r'does not fit a uint8 label map.*0\.\.255'):
        warp_label_map_torch(torch.zeros(170, 170, dtype=torch.uint8), transform, 300)
    with pytest.raises(TypeError, match='must be a torch.Tensor'):
        warp_label_map_torch(np.zeros((170, 170)), transform, 255)
