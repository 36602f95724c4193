"""The torch engine (``reobench_corruptions.torch_engine``) against the numpy engine.

- ``exact`` corruptions (same draws, same maths): on 256×256 crops of the real samples,
  for 1, 3 and 4 bands, uint8, 12- and 16-bit uint16 and float32, every severity: at
  least 99.9 % of the values within one grey level of ``reobench_corruptions.corrupt``
  (the largest difference is printed).
- ``statistical`` corruptions (own draws on the device): the residual ``corrupted −
  clean`` has the numpy engine's mean and variance (or salt/pepper fractions), each
  within 5 standard errors computed from the sample; the same test at a neighbouring
  severity must fail, so it can detect a wrong distribution.
- determinism, batches against single calls, other keys/seeds, and the refusals.
"""
import os.path as osp
from functools import lru_cache
from typing import Dict, List, Tuple

import cv2
import numpy as np
import pytest

torch = pytest.importorskip('torch')

from reobench_corruptions import corrupt, get_corruption  # noqa: E402
from reobench_corruptions.noise import fractal_perlin  # noqa: E402
from reobench_corruptions.torch_engine import (PARITY, TORCH_DTYPES, corrupt_torch,  # noqa: E402
                                               torch_corruptions)
from reobench_corruptions.torch_kernels import (border_indices,  # noqa: E402
                                                fractal_perlin_torch, gaussian_taps,
                                                quantile_linear)

CROP = 256
EXACT = sorted(key for key, parity in PARITY.items() if parity == 'exact')
STATISTICAL = sorted(key for key, parity in PARITY.items() if parity == 'statistical')
#: dtype case -> (numpy dtype, max_value, factor from 8-bit grey levels)
DTYPE_CASES = {
    'uint8': (np.uint8, None, 1.0),
    'uint16-12bit': (np.uint16, 4095, 4095 / 255),
    'uint16-16bit': (np.uint16, None, 65535 / 255),
    'float32': (np.float32, None, 1 / 255),
}
Z_LIMIT = 5.0  # standard errors


@pytest.fixture(autouse=True, scope='module')
def _one_torch_thread():
    """One intra-op thread: on a small shared machine torch's thread pool spends more
    time waiting than working on 256×256 images."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _ids(keys) -> List[str]:
    return [f'{protocol}/{name}' for protocol, name in keys]


@lru_cache(maxsize=1)
def _rgb_crops(root: str) -> np.ndarray:
    """3 RGB uint8 crops (CROP×CROP) of the real samples, read in place."""
    crops = []
    for relative, origin in [('potsdam/2_10_0_0_512_512_img.png', (0, 0)),
                             ('dior/00001.jpg', (272, 272)), ('dota/demo.jpg', None)]:
        image = cv2.imread(osp.join(root, relative), cv2.IMREAD_COLOR)
        assert image is not None, relative
        top, left = origin or ((image.shape[0] - CROP) // 2, (image.shape[1] - CROP) // 2)
        crops.append(np.ascontiguousarray(image[top:top + CROP, left:left + CROP, ::-1]))
    return np.stack(crops)


def _images(root: str, bands: int, case: str) -> Tuple[np.ndarray, object]:
    """``B×H×W×bands`` images of the dtype case, made from the RGB crops: 1 band = the
    green band, 4 bands = RGB plus their mean as a fourth band."""
    rgb = _rgb_crops(root)
    if bands == 1:
        grey = rgb[..., 1:2]
    elif bands == 3:
        grey = rgb
    else:
        grey = np.concatenate([rgb, rgb.mean(axis=3, keepdims=True).astype(np.uint8)], axis=3)
    dtype, max_value, factor = DTYPE_CASES[case]
    if dtype == np.uint8:
        return grey, max_value
    return (np.rint(grey * factor) if dtype == np.uint16 else grey * factor).astype(dtype), \
        max_value


def _to_torch(images: np.ndarray) -> 'torch.Tensor':
    return torch.from_numpy(np.ascontiguousarray(images.transpose(0, 3, 1, 2)))


def _from_torch(images: 'torch.Tensor') -> np.ndarray:
    return images.permute(0, 2, 3, 1).cpu().numpy()


def _numpy_engine(images: np.ndarray, name: str, severity: int, protocol: str, keys,
                  max_value, **options) -> np.ndarray:
    return np.stack([corrupt(image, name, severity, key=key, protocol=protocol,
                             max_value=max_value, **options)
                     for image, key in zip(images, keys)])


def _grey_level_differences(a: np.ndarray, b: np.ndarray, case: str) -> np.ndarray:
    """|a − b| in grey levels of the dtype (1/255 of the full scale for floats)."""
    difference = np.abs(a.astype(np.float64) - b.astype(np.float64))
    return difference * 255 if case == 'float32' else difference


# ----------------------------------------------------------------------- exact parity


@pytest.mark.parametrize('case', list(DTYPE_CASES))
@pytest.mark.parametrize('protocol,name', EXACT, ids=_ids(EXACT))
def test_exact_parity_on_real_samples(real_samples, protocol, name, case):
    keys = ['potsdam', 'dior', 'dota']
    report = []
    for bands in (1, 3, 4):
        images, max_value = _images(real_samples, bands, case)
        for severity in range(1, 6):
            expected = _numpy_engine(images, name, severity, protocol, keys, max_value)
            got = _from_torch(corrupt_torch(_to_torch(images), name, severity, keys=keys,
                                            protocol=protocol, max_value=max_value))
            assert got.dtype == expected.dtype and got.shape == expected.shape
            difference = _grey_level_differences(got, expected, case)
            within = float(np.mean(difference <= 1.0))
            report.append((bands, severity, float(difference.max()), within))
            assert within >= 0.999, (bands, severity, difference.max(), within)
    print(f'{protocol}/{name} {case}: max difference '
          f'{max(r[2] for r in report):.3g} grey levels, smallest fraction within ±1 '
          f'{min(r[3] for r in report):.6f}')


@pytest.mark.parametrize('order', ['rgb', 'bgr'])
def test_jpeg_is_the_numpy_engines_bits(real_samples, order):
    """torchvision's libjpeg codec on the CPU and OpenCV's give the same bytes back, for
    colour and greyscale chunks (1, 3, 4 bands) and either channel order."""
    keys = ['potsdam', 'dior', 'dota']
    for bands in (1, 3, 4):
        images, _ = _images(real_samples, bands, 'uint8')
        for severity in (1, 5):
            expected = _numpy_engine(images, 'compression_artifacts', severity, 'reobench',
                                     keys, None, channel_order=order)
            got = corrupt_torch(_to_torch(images), 'compression_artifacts', severity,
                                channel_order=order)
            np.testing.assert_array_equal(_from_torch(got), expected)


@pytest.mark.parametrize('bands', [1, 3, 4])
def test_jpeg_on_generated_images(bands):
    """The same bits on generated images, where the real samples are absent."""
    images = _synthetic(batch=2, bands=bands, size=40)
    expected = _numpy_engine(_from_torch(images), 'compression_artifacts', 5, 'reobench',
                             [0, 1], None, channel_order='bgr')
    got = corrupt_torch(images, 'compression_artifacts', 5, channel_order='bgr')
    np.testing.assert_array_equal(_from_torch(got), expected)


def test_cloud_shadow_bands_option_matches(real_samples):
    images, max_value = _images(real_samples, 4, 'uint16-12bit')
    keys = [0, 1, 2]
    for severity in (1, 4):
        expected = _numpy_engine(images, 'cloud_shadow', severity, 'geofm_calibration', keys,
                                 max_value, bands=[0, 2])
        got = _from_torch(corrupt_torch(_to_torch(images), 'cloud_shadow', severity, keys=keys,
                                        protocol='geofm_calibration', max_value=max_value,
                                        bands=[0, 2]))
        assert np.abs(got.astype(np.int64) - expected).max() <= 1
        np.testing.assert_array_equal(got[..., [1, 3]], images[..., [1, 3]])


@pytest.mark.parametrize('dtype,max_value', [(np.float16, None), (np.float64, 255.0)])
@pytest.mark.parametrize('name', ['brightness_contrast', 'gaussian_blur', 'cloud'])
def test_other_float_dtypes(dtype, max_value, name):
    rng = np.random.default_rng(3)
    images = cv2.GaussianBlur(rng.random((64, 48, 3)), (0, 0), 2)[None]
    images = (images * (max_value or 1.0)).astype(dtype)
    expected = _numpy_engine(images, name, 3, 'reobench', ['a'], max_value)
    got = _from_torch(corrupt_torch(_to_torch(images), name, 3, keys=['a'],
                                    max_value=max_value))
    assert got.dtype == dtype
    scale = 255.0 / (max_value or 1.0)
    tolerance = 1e-3 if dtype == np.float16 else 1e-4  # in grey levels of 1/255
    assert np.abs(got.astype(np.float64) - expected).max() * scale <= tolerance


# ----------------------------------------------------------------- statistical parity


def _moment_z(a: np.ndarray, b: np.ndarray) -> Tuple[float, float]:
    """z-scores of the differences of the means and of the variances of two samples of
    independent values (standard errors from the samples' own moments)."""
    z = []
    for moment in ('mean', 'variance'):
        estimates, errors = [], []
        for x in (a, b):
            n = x.size
            mean, variance = x.mean(), x.var()
            if moment == 'mean':
                estimates.append(mean)
                errors.append(variance / n)
            else:
                fourth = np.mean((x - mean)**4)
                estimates.append(variance)
                errors.append((fourth - variance**2) / n)
        z.append(abs(estimates[0] - estimates[1]) / np.sqrt(sum(errors)))
    return z[0], z[1]


def _salt_pepper_z(a: np.ndarray, b: np.ndarray, clean: np.ndarray) -> Tuple[float, float]:
    """Two-proportion z-scores of the salt and pepper fractions among elements that
    were neither 0 nor 255."""
    eligible = (clean != 0) & (clean != 255)
    z = []
    for value in (255, 0):
        p = [float(np.mean(x[eligible] == value)) for x in (a, b)]
        pooled, n = (p[0] + p[1]) / 2, int(eligible.sum())
        z.append(abs(p[0] - p[1]) / np.sqrt(pooled * (1 - pooled) * 2 / n))
    return z[0], z[1]


def _statistics(protocol: str, name: str, clean: np.ndarray, torch_result: np.ndarray,
                numpy_result: np.ndarray) -> Tuple[float, float]:
    if name == 'salt_pepper_noise':
        return _salt_pepper_z(torch_result, numpy_result, clean)
    residual = [r.astype(np.float64) - clean for r in (torch_result, numpy_result)]
    return _moment_z(*residual)


@pytest.mark.parametrize('protocol,name', STATISTICAL, ids=_ids(STATISTICAL))
def test_statistical_parity_on_real_samples(real_samples, protocol, name):
    """Same distribution as the numpy engine at every severity (both z-scores below
    5); against the numpy engine at a neighbouring severity at least one is far above
    5 (the test fails on a wrong severity)."""
    images, _ = _images(real_samples, 3, 'uint8')
    keys = ['potsdam', 'dior', 'dota']
    clean = images.astype(np.float64)
    got = {s: _from_torch(corrupt_torch(_to_torch(images), name, s, keys=keys,
                                        protocol=protocol)) for s in range(1, 6)}
    expected = {s: _numpy_engine(images, name, s, protocol, keys, None) for s in range(1, 6)}
    for severity in range(1, 6):
        z = _statistics(protocol, name, clean, got[severity], expected[severity])
        print(f'{protocol}/{name} severity {severity}: z(mean or salt) {z[0]:.2f}, '
              f'z(variance or pepper) {z[1]:.2f}')
        assert max(z) < Z_LIMIT, (severity, z)
        wrong = severity + 1 if severity < 5 else severity - 1
        z_wrong = _statistics(protocol, name, clean, got[severity], expected[wrong])
        assert max(z_wrong) > 3 * Z_LIMIT, (severity, wrong, z_wrong)


def test_statistical_fractions_match_the_severity_table():
    """Salt-and-pepper fractions and the Gaussian noise σ against the table itself."""
    images = np.full((2, 128, 128, 3), 128, np.uint8)
    for severity in (1, 5):
        amount = get_corruption('salt_pepper_noise').parameter_for(severity)
        out = _from_torch(corrupt_torch(_to_torch(images), 'salt_pepper_noise', severity,
                                        keys=[0, 1]))
        n = out.size
        for value in (255, 0):
            fraction = float(np.mean(out == value))
            assert abs(fraction - amount / 2) < Z_LIMIT * np.sqrt(amount / 2 / n), value
        sigma = get_corruption('gaussian_noise').parameter_for(severity)
        noisy = _from_torch(corrupt_torch(_to_torch(images), 'gaussian_noise', severity,
                                          keys=[0, 1])).astype(np.float64)
        assert abs(noisy.std() / 255 - sigma) < 0.01 * sigma


# ------------------------------------------------------------------------ determinism


def _synthetic(batch: int = 4, bands: int = 3, size: int = 48) -> 'torch.Tensor':
    rng = np.random.default_rng(0)
    images = cv2.GaussianBlur(rng.random((batch * size, size, bands)).astype(np.float32),
                              (0, 0), 2).reshape(batch, size, size, bands)
    return _to_torch(np.clip(images * 255, 0, 255).astype(np.uint8))


ALL = [(p, n) for p in ('reobench', 'geofm_calibration') for n in torch_corruptions(p)]


@pytest.mark.parametrize('protocol,name', ALL, ids=_ids(ALL))
def test_same_seed_and_key_same_bits_and_batch_equals_single_calls(protocol, name):
    images, keys = _synthetic(), ['a', 'b', 3, 'd']
    first = corrupt_torch(images, name, 3, keys=keys, protocol=protocol, seed=7)
    again = corrupt_torch(images, name, 3, keys=keys, protocol=protocol, seed=7)
    assert torch.equal(first, again)
    singles = torch.cat([corrupt_torch(images[i:i + 1], name, 3, keys=[keys[i]],
                                       protocol=protocol, seed=7) for i in range(4)])
    assert torch.equal(first, singles)
    assert torch.equal(corrupt_torch(images, name, 0, keys=keys, protocol=protocol), images)


# (translate draws one of four directions, so two keys may agree; its draws are tested
# in test_torch_geometric.py)
STOCHASTIC = [key for key in ALL if get_corruption(key[1], key[0]).stochastic
              and not get_corruption(key[1], key[0]).moves_labels]


@pytest.mark.parametrize('protocol,name', STOCHASTIC, ids=_ids(STOCHASTIC))
def test_other_key_or_seed_other_draws(protocol, name):
    image = _synthetic(batch=1, size=96)
    base = corrupt_torch(image, name, 5, keys=['a'], protocol=protocol)
    assert not torch.equal(base, corrupt_torch(image, name, 5, keys=['b'], protocol=protocol))
    assert not torch.equal(base, corrupt_torch(image, name, 5, keys=['a'], protocol=protocol,
                                               seed=1))
    # two samples of one batch with equal images but different keys differ too
    pair = corrupt_torch(image.repeat(2, 1, 1, 1), name, 5, keys=['a', 'b'], protocol=protocol)
    assert torch.equal(pair[0], base[0]) and not torch.equal(pair[0], pair[1])


# -------------------------------------------------------------------------- refusals


def test_refusals_name_what_is_wrong_and_what_is_valid():
    images = _synthetic(batch=2)
    with pytest.raises(ValueError, match=r"jpeg_codec must be one of \('cpu', 'device'\)"):
        corrupt_torch(images, 'compression_artifacts', 3, jpeg_codec='gpu')
    with pytest.raises(ValueError, match=r"nvJPEG on CUDA tensors.*jpeg_codec='cpu'"):
        corrupt_torch(images, 'compression_artifacts', 3, jpeg_codec='device')
    with pytest.raises(ValueError, match=r"channel_order must be 'rgb' or 'bgr'"):
        corrupt_torch(images, 'compression_artifacts', 3, channel_order='rbg')
    with pytest.raises(KeyError, match=r'valid'):
        corrupt_torch(images, 'fog', 3, keys=[0, 1])
    for severity in (6, -1, 2.5, '3', True):
        with pytest.raises(ValueError, match=r'severity must be an integer in 0\.\.5'):
            corrupt_torch(images, 'haze', severity)
    for dtype in (torch.int32, torch.int64, torch.bool):
        with pytest.raises(TypeError, match=r'unsupported dtype.*valid: torch\.uint8'):
            corrupt_torch(images.to(dtype), 'haze', 3)
    with pytest.raises(TypeError, match=r'images\.to\(torch\.uint16\)'):
        corrupt_torch(images.to(torch.int32), 'haze', 3)
    with pytest.raises(ValueError, match=r'got 3 keys for a batch of 2 images'):
        corrupt_torch(images, 'gaussian_noise', 3, keys=['a', 'b', 'c'])
    with pytest.raises(ValueError, match=r'needs one key per sample'):
        corrupt_torch(images, 'gaussian_noise', 3)
    with pytest.raises(ValueError, match=r'every sample needs a key'):
        corrupt_torch(images, 'gaussian_noise', 3, keys=['a', None])
    with pytest.raises(TypeError, match=r'keys must be a list of 2'):
        corrupt_torch(images, 'gaussian_noise', 3, keys='ab')
    with pytest.raises(TypeError, match=r'unknown options \[\'bandz\'\]; valid: \[\'bands\'\]'):
        corrupt_torch(images, 'cloud_shadow', 3, keys=[0, 1], protocol='geofm_calibration',
                      bandz=[0])
    with pytest.raises(TypeError, match=r"unknown options.*valid: \['bands'\]"):
        corrupt_torch(images, 'haze', 3, channel_order='rgb')
    with pytest.raises(ValueError, match=r'band index 3 is out of range; valid: 0\.\.2'):
        corrupt_torch(images, 'cloud_shadow', 3, keys=[0, 1], protocol='geofm_calibration',
                      bands=[3])
    with pytest.raises(ValueError, match=r'B×C×H×W'):
        corrupt_torch(images[0], 'haze', 3)
    with pytest.raises(TypeError, match=r'torch\.Tensor'):
        corrupt_torch(_from_torch(images), 'haze', 3)
    with pytest.raises(ValueError, match=r'\[0, max_value\]'):
        corrupt_torch(images.to(torch.float32), 'haze', 3)  # 0..255 floats, full scale 1
    with pytest.raises(ValueError, match=r'above max_value=4095'):
        corrupt_torch(torch.full((1, 3, 8, 8), 4096, dtype=torch.int32).to(torch.uint16), 'haze', 3,
                      max_value=4095)
    with pytest.raises(ValueError, match=r'uint8 images always have full scale 255'):
        corrupt_torch(images, 'haze', 3, max_value=4095)
    with pytest.raises(ValueError, match=r'seed'):
        corrupt_torch(images, 'haze', 3, seed=-1)


def test_dtypes_are_documented():
    assert set(TORCH_DTYPES) == {torch.uint8, torch.uint16, torch.float16, torch.float32,
                                 torch.float64}
    covered = set(torch_corruptions('reobench')) | set(torch_corruptions('geofm_calibration'))
    assert covered == {'gaussian_noise', 'salt_pepper_noise', 'gaussian_blur', 'motion_blur',
                       'brightness_contrast', 'haze', 'cloud', 'data_gaps', 'cloud_shadow',
                       'poisson_gaussian_noise', 'rotate', 'scale', 'translate',
                       'compression_artifacts'}


# ------------------------------------------------------------------- building blocks


def test_kernels_and_borders_equal_opencv():
    for ksize, sigma in [(1, 0), (3, 0), (5, 0), (7, 0), (9, 0), (11, 0), (11, 5), (13, 0)]:
        np.testing.assert_array_equal(gaussian_taps(ksize, sigma),
                                      cv2.getGaussianKernel(ksize, sigma, cv2.CV_32F).ravel())
    borders: Dict[str, int] = {'reflect': cv2.BORDER_REFLECT,
                               'reflect_101': cv2.BORDER_REFLECT_101}
    for mode, border in borders.items():
        for size, before, after in [(5, 3, 3), (1, 2, 2), (3, 10, 7), (2, 4, 1), (8, 0, 5)]:
            row = np.arange(size, dtype=np.float32)[None]
            expected = cv2.copyMakeBorder(row, 0, 0, before, after, border).ravel()
            np.testing.assert_array_equal(border_indices(size, before, after, mode), expected)


def test_perlin_field_and_quantile_equal_numpy():
    for height, width in [(64, 64), (37, 300), (1, 5)]:
        expected = fractal_perlin(height, width, 200, np.random.default_rng(5))
        got = fractal_perlin_torch(height, width, 200, np.random.default_rng(5),
                                   torch.device('cpu')).numpy()
        np.testing.assert_array_equal(got, expected)
    rng = np.random.default_rng(1)
    for count in (1, 2, 10, 1001):
        values = rng.standard_normal(count).astype(np.float32)
        for q in (0.0, 0.2, 0.4, 0.6, 0.8, 1.0):
            assert quantile_linear(torch.from_numpy(values), q) == float(np.quantile(values, q))


def test_the_input_checks_of_the_torch_engine():
    """reobench_corruptions.torch_checks: the batch's form, its values per band and the
    samples' keys, each refused with what is valid."""
    from reobench_corruptions.base import get_corruption
    from reobench_corruptions.torch_checks import (blanked, check_images, check_keys,
                                                   check_tensor)
    assert check_tensor(torch.zeros(2, 5, 4, 4)) == 5
    with pytest.raises(TypeError, match='images must be a torch.Tensor'):
        check_tensor(np.zeros((2, 3, 4, 4)))
    with pytest.raises(TypeError, match=r'int32.*convert with images.to\(torch.uint16\)'):
        check_tensor(torch.zeros(1, 3, 4, 4, dtype=torch.int32))
    batch = torch.tensor([0.0, 0.5, 1.0, 0.2]).reshape(1, 1, 2, 2).repeat(1, 2, 1, 1)
    batch[:, 1] -= 30  # a second band in dB
    with pytest.raises(ValueError, match=r'band 1.*\[-30.0, -29.0\]'):
        check_images(batch, None)
    scale, blank = check_images(batch, None, selected=[0])  # only band 0 acted on
    assert scale == 1.0 and blank == [1]
    cleared = blanked(batch, blank)
    assert (cleared[:, 1] == 0).all() and torch.equal(cleared[:, 0], batch[:, 0])
    assert blanked(batch, []) is batch
    noise = get_corruption('gaussian_noise', 'reobench')
    assert check_keys(['a.png', 3], 2, noise, 1) == ['a.png', 3]
    with pytest.raises(ValueError, match='needs one key per sample'):
        check_keys(None, 2, noise, 1)
    with pytest.raises(ValueError, match='got 1 keys for a batch of 2'):
        check_keys(['a.png'], 2, noise, 1)
