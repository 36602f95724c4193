"""Contracts of the corruption engine on unusual and bad input.

Every case is either a documented correct result or a clear error that says what was
wrong and what is valid: value ranges and full scales per dtype, seeds, label maps
moved by geometric corruptions, unknown names, tiling on large images, and a matrix
of dtypes, band counts, tiny images, memory layouts and bad arguments over every
corruption of both protocols.
"""
import warnings

import cv2
import numpy as np
import pytest

from reobench_corruptions import (PROTOCOLS, GeometricTransform, check_ignore_index,
                                     check_image, check_max_value, check_seed, corrupt,
                                     corrupt_geometric, full_scale, get_corruption,
                                     list_corruptions, make_rng, resolve_corruptions)
from reobench_corruptions import base as engine_base
from reobench_corruptions.appearance import (CLOUD_BRIGHTNESS, CLOUD_CELL_PIXELS,
                                                CLOUD_CORE_DEPTH, SHADOW_DARKENING,
                                                SHADOW_OFFSET_FRACTION, cloud_shadow_layers)
from reobench_corruptions.base import from_float, row_tiles, to_float
from reobench_corruptions.noise import fractal_perlin, fractal_perlin_field

ALL = [(p, n) for p in PROTOCOLS for n in list_corruptions(p)]
GEOMETRIC = list_corruptions('reobench', 'geometric')
STOCHASTIC = {'gaussian_noise', 'salt_pepper_noise', 'data_gaps', 'cloud', 'translate',
              'cloud_shadow', 'poisson_gaussian_noise'}
FULL = {'uint8': 255, 'uint16': 65535, 'float16': 1.0, 'float32': 1.0, 'float64': 1.0}


def _image(shape=(12, 10, 3), dtype=np.uint8, seed=0, full=None):
    """Smooth values in 10..90 % of the full scale (``full`` overrides the dtype's)."""
    rng = np.random.default_rng(seed)
    h, w, c = shape
    values = cv2.resize(rng.random((2, 2)).astype(np.float32), (w, h))
    values = np.stack([np.roll(values, k, axis=1) for k in range(c)], axis=2)
    values = 0.1 + 0.8 * (values + rng.random((h, w, c)).astype(np.float32) * 0.2) / 1.2
    scale = FULL[np.dtype(dtype).name] if full is None else full
    if np.dtype(dtype).kind == 'u':
        return np.rint(values * scale).astype(dtype)
    return (values * scale).astype(dtype)


def _run(image, protocol, name, severity=3, **kwargs):
    kwargs.setdefault('key', 'tile')
    return corrupt(image, name, severity, protocol=protocol, **kwargs)


# ============================================================ dtype / range contracts
def test_uint16_max_value_above_its_range_is_an_error_not_a_wrap_around():
    image = np.full((8, 8), 60000, np.uint16)
    with pytest.raises(ValueError, match=r'uint16 images must be in \(0, 65535\].*70000'):
        corrupt(image, 'haze', 1, max_value=70000)
    with pytest.raises(ValueError, match=r'\(0, 65535\]'):
        full_scale(np.uint16, 65536)
    assert full_scale(np.uint16, 65535) == 65535.0
    assert corrupt(image, 'haze', 1, max_value=65535).dtype == np.uint16


def test_uint16_values_above_max_value_are_an_error_not_clipped():
    image = np.full((6, 6, 2), 1000, np.uint16)
    image[2, 3, 1] = 5000
    with pytest.raises(ValueError) as error:
        corrupt(image, 'haze', 2, max_value=4095)
    message = str(error.value)
    assert '5000' in message and 'max_value=4095' in message
    assert "sensor's full scale" in message
    # the same check at severity 0 and in to_float
    with pytest.raises(ValueError, match='5000'):
        corrupt(image, 'haze', 0, max_value=4095)
    with pytest.raises(ValueError, match='5000'):
        to_float(image, 4095)
    assert corrupt(image, 'haze', 2, max_value=5000).dtype == np.uint16


def test_float_images_in_0_255_need_max_value_255():
    grey = _image((16, 12, 3), np.uint8)
    floats = grey.astype(np.float32)  # what LoadImageFromFile(to_float32=True) gives
    with pytest.raises(ValueError) as error:
        corrupt(floats, 'haze', 1)
    message = str(error.value)
    for part in ('[0, max_value]', 'max_value=255', 'to_float32=True', 'Normalize'):
        assert part in message, part
    out = corrupt(floats, 'haze', 1, max_value=255)
    assert out.dtype == np.float32 and out.shape == floats.shape
    assert out.min() >= 0 and out.max() <= 255 and out.max() > 1.5  # not clipped to [0, 1]


@pytest.mark.parametrize('protocol,name', [
    (p, n) for p, n in ALL if get_corruption(n, p).uint8_relation == 'identical'])
def test_float_full_scale_matches_the_uint8_float_path(protocol, name):
    """A float32 image of grey levels with max_value=255 goes through the same float
    numbers as the uint8 image; rounding its result gives the uint8 result wherever the
    uint8 kernel is bit-identical to the float path."""
    grey = _image((20, 18, 3), np.uint8)
    floats = _run(grey.astype(np.float32), protocol, name, max_value=255)
    assert floats.dtype == np.float32
    np.testing.assert_array_equal(np.rint(floats).astype(np.uint8), _run(grey, protocol, name))


def test_negative_floats_point_at_normalisation():
    image = _image((8, 8, 3), np.float32) - 0.5
    with pytest.raises(ValueError, match='negative values mean the corruption runs after '
                       'normalisation.*before Normalize'):
        corrupt(image, 'cloud', 2)


@pytest.mark.parametrize('dtype', [np.float16, np.float32, np.float64])
def test_float_max_value_keeps_dtype_and_range(dtype):
    image = _image((10, 9, 2), dtype, full=10000.0)
    for name in ('haze', 'gaussian_noise', 'salt_pepper_noise', 'cloud'):
        out = corrupt(image, name, 5, max_value=10000, key='tile')
        assert out.dtype == dtype and out.shape == image.shape
        assert out.min() >= 0 and out.max() <= 10000 and out.max() > 1
    # awkward scales never round above max_value: the result is valid input again
    image = _image((10, 9, 2), dtype, full=0.1)
    out = corrupt(image, 'salt_pepper_noise', 5, max_value=0.1, key='tile')
    assert out.max() <= dtype(0.1)
    corrupt(out, 'haze', 1, max_value=0.1)


def test_float_to_float_and_back_divides_and_multiplies_by_max_value():
    image = np.array([[0.0, 127.5, 255.0]], np.float64)
    scaled = to_float(image, 255)
    assert scaled.dtype == np.float32 and scaled.flags.c_contiguous
    np.testing.assert_allclose(scaled[0, :, 0], [0, 0.5, 1])
    back = from_float(scaled.copy(), image, 255)
    assert back.dtype == np.float64 and back.shape == image.shape
    np.testing.assert_allclose(back, image, rtol=1e-6)


def test_uint8_full_scale_is_always_255():
    image = _image((8, 8, 3), np.uint8)
    with pytest.raises(ValueError, match='uint8 images always have full scale 255'):
        corrupt(image, 'haze', 1, max_value=1000)
    with pytest.raises(ValueError, match='uint8'):
        corrupt(image, 'haze', 0, max_value=1.0)
    np.testing.assert_array_equal(corrupt(image, 'haze', 1, max_value=255),
                                  corrupt(image, 'haze', 1))
    np.testing.assert_array_equal(corrupt(image, 'haze', 1, max_value=255.0),
                                  corrupt(image, 'haze', 1))


def test_check_max_value():
    assert check_max_value(None) is None
    assert check_max_value(4095) == 4095.0 and isinstance(check_max_value(4095), float)
    assert check_max_value(np.float32(2.5)) == 2.5
    assert check_max_value(np.uint16(255)) == 255.0
    for bad in (0, -1, 0.0, float('nan'), float('inf'), True, np.bool_(True), '255', [255]):
        with pytest.raises(ValueError, match='max_value must be None or a finite number > 0'):
            check_max_value(bad)
    for bad in (0, -3, 'abc'):  # at the first call, whatever the image
        with pytest.raises(ValueError, match='max_value'):
            corrupt(_image(), 'haze', 0, max_value=bad)


def test_check_seed():
    assert check_seed(0) == 0 and check_seed(7) == 7
    assert check_seed(np.int64(3)) == 3 and type(check_seed(np.uint8(2))) is int
    assert check_seed(2**70) == 2**70
    for bad in (1.7, 1.0, '1', True, False, np.bool_(True), None, -1, np.int32(-5),
                np.float64(1)):
        with pytest.raises(ValueError, match='seed must be an integer >= 0'):
            check_seed(bad)


@pytest.mark.parametrize('bad', [1.7, '1', True, 'abc', -1])
def test_bad_seeds_are_rejected_everywhere(bad):
    image = _image()
    for severity in (0, 2):
        with pytest.raises(ValueError, match='seed'):
            corrupt(image, 'gaussian_noise', severity, seed=bad)
        with pytest.raises(ValueError, match='seed'):
            corrupt_geometric(image, 'translate', severity, seed=bad)
    with pytest.raises(ValueError, match='seed'):
        make_rng(bad, 'reobench/haze', 1)


def test_integer_seed_types_agree_and_one_is_not_one_point_seven():
    image = _image()
    reference = corrupt(image, 'gaussian_noise', 2, seed=1, key='tile')
    np.testing.assert_array_equal(corrupt(image, 'gaussian_noise', 2, seed=np.int64(1),
                                          key='tile'), reference)
    assert not np.array_equal(corrupt(image, 'gaussian_noise', 2, seed=2, key='tile'),
                              reference)


def test_make_rng_checks_the_severity():
    with pytest.raises(ValueError, match='severity'):
        make_rng(0, 'reobench/haze', 2.5)


@pytest.mark.parametrize('value,found', [(np.nan, 'NaN'), (np.inf, 'inf'), (-np.inf, 'inf')])
@pytest.mark.parametrize('dtype', [np.float16, np.float32, np.float64])
def test_nan_and_inf_are_errors(value, found, dtype):
    image = _image((6, 5, 2), dtype)
    image[3, 2, 1] = value
    for severity in (0, 3):
        with pytest.raises(ValueError, match=f'finite.*found {found}'):
            corrupt(image, 'haze', severity)


def test_check_image_returns_the_full_scale():
    assert check_image(np.zeros((2, 2), np.uint8)) == 255.0
    assert check_image(np.zeros((2, 2), np.uint16), 4095) == 4095.0
    assert check_image(np.ones((2, 2, 3), np.float64)) == 1.0
    with pytest.raises(ValueError, match=r'\[0, 1\].*found values in \[1\.5, 1\.5\]'):
        check_image(np.full((2, 2), 1.5, np.float32))


# ============================================================== label maps (geometry)
def _labels(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 6, shape)
    return values.astype(bool) if dtype == np.bool_ else values.astype(dtype)


def _transforms(shape=(23, 19)):
    image = np.zeros(shape + (3, ), np.uint8)
    out = [corrupt_geometric(image, 'rotate', 2, border=b)[1] for b in ('reflect', 'constant')]
    out += [corrupt_geometric(image, 'translate', 3, key='k', border=b)[1]
            for b in ('reflect', 'constant')]
    out += [corrupt_geometric(image, 'scale', 4)[1], corrupt_geometric(image, 'rotate', 0)[1]]
    return out


@pytest.mark.parametrize('transform', _transforms(), ids=lambda t: f'{t.name}-{t.border}')
def test_label_map_of_another_size_is_an_error(transform):
    assert transform.source_shape == (23, 19)
    for shape in [(22, 19), (23, 20), (46, 38), (19, 23), (23, 19, 2, 1)]:
        with pytest.raises(ValueError) as error:
            transform.warp_label_map(np.zeros(shape, np.uint8), 255)
        assert str(shape) in str(error.value) and '(23, 19)' in str(error.value)


def _old_uint8_warp(transform, label_map, ignore_index):
    """The uint8 label warp as the engine did it before dtype handling was added."""
    h, w = transform.output_shape
    if transform.canvas is not None:
        top, left, nh, nw = transform.canvas
        out = np.full((h, w) + label_map.shape[2:], ignore_index, dtype=label_map.dtype)
        out[top:top + nh, left:left + nw] = cv2.resize(
            label_map, (nw, nh), interpolation=cv2.INTER_NEAREST_EXACT).reshape(
                (nh, nw) + label_map.shape[2:])
        return out
    return cv2.warpAffine(label_map, transform.opencv_matrix, (w, h), flags=cv2.INTER_NEAREST,
                          borderMode=cv2.BORDER_REFLECT if transform.border == 'reflect'
                          else cv2.BORDER_CONSTANT, borderValue=ignore_index)


@pytest.mark.parametrize('transform', _transforms(), ids=lambda t: f'{t.name}-{t.border}')
def test_uint8_label_maps_are_moved_as_before(transform):
    labels = _labels((23, 19), np.uint8)
    np.testing.assert_array_equal(transform.warp_label_map(labels, 255),
                                  _old_uint8_warp(transform, labels, 255))


LABEL_DTYPES = [np.uint8, np.int8, np.uint16, np.int16, np.int32, np.uint32, np.int64,
                np.uint64, np.float16, np.float32, np.float64, np.bool_]


@pytest.mark.parametrize('dtype', LABEL_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize('shape', [(23, 19), (23, 19, 1), (23, 19, 2), (23, 19, 6)],
                         ids=str)
def test_label_maps_keep_dtype_shape_and_positions(dtype, shape):
    labels = _labels(shape, dtype, seed=1)
    ignore = 0 if dtype == np.bool_ else 7
    for transform in _transforms():
        moved = transform.warp_label_map(labels, ignore)
        assert moved.dtype == labels.dtype and moved.shape == transform.output_shape + shape[2:]
        reference = transform.warp_label_map(labels.astype(np.uint8), ignore)
        np.testing.assert_array_equal(moved.astype(np.uint8), reference)


def test_wide_integer_labels_survive():
    labels = _labels((23, 19), np.int64) + 2**40
    for transform in _transforms():
        moved = transform.warp_label_map(labels, -1)
        assert moved.dtype == np.int64
        reference = transform.warp_label_map((labels - 2**40).astype(np.uint8), 255)
        expected = np.where(reference == 255, -1, reference.astype(np.int64) + 2**40)
        np.testing.assert_array_equal(moved, expected)
    big = np.full((23, 19), np.iinfo(np.uint64).max, np.uint64)
    assert transform.warp_label_map(big, 0).max() == np.iinfo(np.uint64).max


def test_every_channel_of_a_label_map_gets_ignore_index_outside():
    labels = np.ones((23, 19, 3), np.uint8)
    transform = corrupt_geometric(np.zeros((23, 19, 3), np.uint8), 'rotate', 2,
                                  border='constant')[1]
    moved = transform.warp_label_map(labels, 200)
    outside = ~transform.content_mask()
    assert outside.any() and np.all(moved[outside] == 200)


@pytest.mark.parametrize('dtype,ignore,valid', [
    (np.int8, 255, '-128..127'), (np.uint8, -1, '0..255'), (np.uint8, 256, '0..255'),
    (np.uint16, 70000, '0..65535'), (np.int32, 2**31, '-2147483648..2147483647'),
    (np.bool_, 255, 'only 0 \\(False\\) and 1 \\(True\\)'),
    (np.float16, 4097, 'not exactly representable')])
def test_ignore_index_the_dtype_cannot_hold_is_an_error(dtype, ignore, valid):
    labels = _labels((23, 19), dtype)
    for transform in _transforms():
        with pytest.raises(ValueError, match=valid):
            transform.warp_label_map(labels, ignore)


def test_ignore_index_must_be_an_integer():
    with pytest.raises(ValueError, match='ignore_index must be an integer'):
        check_ignore_index(2.5, np.uint8)
    with pytest.raises(ValueError, match='ignore_index must be an integer'):
        check_ignore_index('255', np.uint8)
    with pytest.raises(TypeError, match='unsupported label map dtype'):
        check_ignore_index(0, np.complex64)
    assert check_ignore_index(True, np.bool_) is True


def test_bool_label_maps_fill_uncovered_areas_with_the_ignore_value():
    transform = corrupt_geometric(np.zeros((23, 19), np.uint8), 'scale', 5)[1]
    mask = np.ones((23, 19), bool)
    np.testing.assert_array_equal(transform.warp_label_map(mask, 0), transform.content_mask())
    assert transform.warp_label_map(mask, 1).all()
    assert transform.warp_label_map(mask, True).all()


def test_read_only_and_strided_label_maps():
    labels = _labels((46, 38, 2), np.int64)
    views = {'steps': labels[::2, ::2, 0], 'channel': labels[:23, :19, 1],
             'fortran': np.asfortranarray(labels[:23, :19, 0])}
    read_only = labels[:23, :19, 0].copy()
    read_only.flags.writeable = False
    views['read_only'] = read_only
    for transform in _transforms():
        for name, view in views.items():
            before = view.copy()
            np.testing.assert_array_equal(transform.warp_label_map(view, -1),
                                          transform.warp_label_map(view.copy(), -1), name)
            np.testing.assert_array_equal(view, before)


def test_a_transform_made_elsewhere_may_state_its_input_shape():
    transform = GeometricTransform('identity', np.array([[1.0, 0, 0], [0, 1.0, 0]]), (5, 6),
                                   'reflect', input_shape=(5, 6))
    assert transform.warp_label_map(np.ones((5, 6), np.uint8), 0).shape == (5, 6)
    legacy = GeometricTransform('identity', np.array([[1.0, 0, 0], [0, 1.0, 0]]), (5, 6),
                                'reflect')
    assert legacy.source_shape == (5, 6)
    with pytest.raises(TypeError, match='numpy array'):
        transform.warp_label_map([[1, 2]], 0)


# ========================================================================= unknown names
def test_a_name_of_the_other_protocol_says_how_to_select_it():
    with pytest.raises(KeyError) as error:
        get_corruption('cloud_shadow')
    message = str(error.value)
    assert "unknown corruption 'cloud_shadow' for protocol 'reobench'" in message
    assert "protocol='geofm_calibration'" in message
    assert '--protocol geofm_calibration' in message
    assert "valid: ['gaussian_noise'" in message
    with pytest.raises(KeyError, match="protocol='reobench'.*--protocol reobench"):
        get_corruption('rotate', 'geofm_calibration')
    with pytest.raises(KeyError, match="protocol='geofm_calibration'"):
        corrupt(_image(), 'poisson_gaussian_noise', 1)


@pytest.mark.parametrize('typo,meant', [('gausian_noise', 'gaussian_noise'),
                                        ('salt_and_pepper', 'salt_pepper_noise'),
                                        ('motionblur', 'motion_blur'),
                                        ('Haze', 'haze')])
def test_typos_get_close_matches(typo, meant):
    with pytest.raises(KeyError, match=f"did you mean '{meant}'.*valid:"):
        get_corruption(typo)


def test_a_close_match_in_the_other_protocol_is_named_with_its_protocol():
    with pytest.raises(KeyError, match="did you mean 'cloud_shadow' \\(protocol "
                       "'geofm_calibration'"):
        get_corruption('cloud_shadows')


def test_resolve_corruptions_suggests_too():
    with pytest.raises(KeyError, match="protocol='geofm_calibration'.*valid:.*groups: "):
        resolve_corruptions(['haze', 'cloud_shadow'])
    with pytest.raises(KeyError, match="did you mean 'sensor'"):
        resolve_corruptions('sensr')
    assert resolve_corruptions(['cloud_shadow'], 'geofm_calibration') == ['cloud_shadow']
    with pytest.raises(TypeError, match='strings'):
        resolve_corruptions([3])


def test_names_are_strings():
    with pytest.raises(TypeError, match='a corruption name is a string'):
        get_corruption(None)
    with pytest.raises(KeyError, match='valid:'):
        get_corruption('fog')


# ============================================================================ tiling
@pytest.fixture
def tiny_tiles(monkeypatch):
    """Make every tiled kernel cut a small image into many tiles."""
    def set_tile(elements):
        monkeypatch.setattr(engine_base, 'TILE_ELEMENTS', elements)
    return set_tile


@pytest.mark.parametrize('protocol,name', ALL)
@pytest.mark.parametrize('dtype', [np.uint8, np.float32])
def test_tiling_does_not_change_results(tiny_tiles, protocol, name, dtype):
    image = _image((45, 23, 3), dtype)  # odd row length: tiles must keep draws aligned
    results = []
    for elements in (10**9, 1, 69, 1000):
        tiny_tiles(elements)
        results.append(_run(image, protocol, name, 5, seed=4))
    for other in results[1:]:
        np.testing.assert_array_equal(other, results[0])


def test_row_tiles():
    assert list(row_tiles(5, 10)) == [(0, 5)]
    assert list(row_tiles(0, 10)) == []
    engine_base_tiles = engine_base.TILE_ELEMENTS
    try:
        engine_base.TILE_ELEMENTS = 30
        assert list(row_tiles(7, 10)) == [(0, 3), (3, 6), (6, 7)]
        assert list(row_tiles(7, 15, even=True)) == [(0, 2), (2, 4), (4, 6), (6, 7)]
        assert list(row_tiles(3, 100)) == [(0, 1), (1, 2), (2, 3)]
    finally:
        engine_base.TILE_ELEMENTS = engine_base_tiles


def test_noise_field_rows_equal_the_whole_field():
    field = fractal_perlin_field(67, 41, 20, np.random.default_rng(2))
    whole = field.image()
    np.testing.assert_array_equal(whole, fractal_perlin(67, 41, 20, np.random.default_rng(2)))
    np.testing.assert_array_equal(np.concatenate([field.rows_between(a, min(a + 9, 67))
                                                  for a in range(0, 67, 9)]), whole)


def _reference_cloud_shadow(image, coverage, rng):
    """cloud_shadow as one whole-image computation (the formula of the spec)."""
    h, w = image.shape[:2]
    thickness = fractal_perlin(h, w, CLOUD_CELL_PIXELS, rng)
    threshold = np.quantile(thickness, 1.0 - coverage)
    span = float(thickness.max() - threshold)
    depth = (thickness - threshold) / span if span > 0 else np.ones_like(thickness)
    # soft edge: 0 at the threshold, smoothstep up to 1 at CLOUD_CORE_DEPTH of the range
    ramp = np.minimum(np.maximum(depth.astype(np.float64) / CLOUD_CORE_DEPTH, 0.0), 1.0)
    opacity = (ramp * ramp * (3.0 - 2.0 * ramp)).astype(np.float32)
    dy = max(1, int(round(SHADOW_OFFSET_FRACTION * h)))
    dx = max(1, int(round(SHADOW_OFFSET_FRACTION * w)))
    # moved down-right; the uncovered top rows / left columns repeat the first row / column
    rows, cols = np.clip(np.arange(h) - dy, 0, None), np.clip(np.arange(w) - dx, 0, None)
    shadow = opacity[rows][:, cols]
    ground = image * (1.0 - (1.0 - SHADOW_DARKENING) * shadow)[..., None]
    return (ground * (1.0 - opacity[..., None])
            + np.float32(CLOUD_BRIGHTNESS) * opacity[..., None]), opacity, shadow


def _reference_poisson_gaussian(image, eta_and_sigma, rng):
    """Poisson-Gaussian noise as two whole-image draws."""
    eta, sigma = eta_and_sigma
    shot = rng.poisson(eta * image.astype(np.float64)) / eta
    return (shot + sigma * rng.standard_normal(image.shape)).astype(np.float32)


@pytest.mark.parametrize('shape', [(61, 37, 3), (1, 1, 1), (2, 9, 2), (40, 3, 4)])
@pytest.mark.parametrize('elements', [1, 57, 10**9])
def test_tiled_kernels_equal_whole_image_references(tiny_tiles, shape, elements):
    tiny_tiles(elements)
    grey = _image(shape, np.uint8)
    floats = to_float(grey)
    for severity in (1, 3, 5):
        coverage = get_corruption('cloud_shadow', 'geofm_calibration').parameter_for(severity)
        expected, opacity, shadow = _reference_cloud_shadow(
            floats, coverage, make_rng(0, 'geofm_calibration/cloud_shadow', severity, 'tile'))
        layers = cloud_shadow_layers(shape[0], shape[1], coverage,
                                     make_rng(0, 'geofm_calibration/cloud_shadow', severity,
                                              'tile'))
        np.testing.assert_array_equal(layers[0], opacity)
        np.testing.assert_array_equal(layers[1], shadow)
        np.testing.assert_array_equal(_run(floats, 'geofm_calibration', 'cloud_shadow',
                                           severity), np.clip(expected, 0, 1))
        np.testing.assert_array_equal(_run(grey, 'geofm_calibration', 'cloud_shadow', severity),
                                      from_float(expected.copy(), grey))

        parameter = get_corruption('poisson_gaussian_noise',
                                   'geofm_calibration').parameter_for(severity)
        expected = _reference_poisson_gaussian(
            floats, parameter,
            make_rng(0, 'geofm_calibration/poisson_gaussian_noise', severity, 'tile'))
        np.testing.assert_array_equal(
            _run(floats, 'geofm_calibration', 'poisson_gaussian_noise', severity),
            np.clip(expected, 0, 1))
        np.testing.assert_array_equal(
            _run(grey, 'geofm_calibration', 'poisson_gaussian_noise', severity),
            from_float(expected.copy(), grey))


def test_photon_counts_above_255_survive_the_uint8_kernel(tiny_tiles):
    """η = 200 on white pixels gives counts above 255 now and then; the uint8 kernel
    keeps them aside between its two passes."""
    tiny_tiles(5000)
    white = np.full((200, 200, 3), 255, np.uint8)
    rng = make_rng(0, 'geofm_calibration/poisson_gaussian_noise', 1, 'white')
    counts = make_rng(0, 'geofm_calibration/poisson_gaussian_noise', 1, 'white').poisson(
        200 * to_float(white).astype(np.float64))
    assert counts.max() > 255
    expected = _reference_poisson_gaussian(to_float(white), (200, 0.005), rng)
    np.testing.assert_array_equal(
        corrupt(white, 'poisson_gaussian_noise', 1, protocol='geofm_calibration', key='white'),
        from_float(expected, white))


# ================================================================ bad-input matrix
GOOD_DTYPES = [np.uint8, np.uint16, np.float16, np.float32, np.float64]
BAND_SHAPES = [(9, 11), (9, 11, 1), (9, 11, 2), (9, 11, 3), (9, 11, 4), (9, 11, 13)]


@pytest.mark.parametrize('protocol,name', ALL)
@pytest.mark.parametrize('dtype', GOOD_DTYPES, ids=lambda d: np.dtype(d).name)
def test_matrix_dtypes_and_band_counts(protocol, name, dtype):
    for shape in BAND_SHAPES:
        image = _image(shape + (1, ) if len(shape) == 2 else shape, dtype).reshape(shape)
        out = _run(image, protocol, name, 4)
        assert out.shape == image.shape and out.dtype == image.dtype, shape
        if np.dtype(dtype).kind == 'f':
            assert np.all(np.isfinite(out)) and out.min() >= 0 and out.max() <= 1
        np.testing.assert_array_equal(_run(image, protocol, name, 0), image)


@pytest.mark.parametrize('dtype', [np.int8, np.int16, np.int32, np.int64, np.uint32,
                                   np.uint64, np.bool_, np.complex64, object])
def test_matrix_rejected_dtypes(dtype):
    image = np.zeros((6, 6, 3), dtype)
    for protocol, name in ALL:
        for severity in (0, 2):
            with pytest.raises(TypeError, match='unsupported dtype.*valid: uint8, uint16, '
                               'float16, float32, float64'):
                _run(image, protocol, name, severity)


@pytest.mark.parametrize('protocol,name', ALL)
@pytest.mark.parametrize('shape', [(1, 1), (1, 7), (7, 1), (2, 2), (7, 5), (1, 1, 3),
                                   (2, 2, 13), (7, 5, 4)], ids=str)
def test_matrix_tiny_images_work(protocol, name, shape):
    """No minimum size: every corruption runs on a single pixel."""
    for dtype in (np.uint8, np.float32):
        image = _image(shape + (1, ) if len(shape) == 2 else shape, dtype).reshape(shape)
        for severity in range(1, 6):
            out = _run(image, protocol, name, severity)
            assert out.shape == image.shape and out.dtype == image.dtype


@pytest.mark.parametrize('shape', [(0, 4, 3), (4, 0), (4, 4, 0), (4, ), (2, 2, 2, 2), ()],
                         ids=str)
def test_matrix_empty_and_wrong_rank_images(shape):
    for protocol, name in ALL:
        with pytest.raises(ValueError, match='H×W or H×W×C with H, W, C >= 1'):
            _run(np.zeros(shape, np.uint8), protocol, name)


def test_matrix_non_arrays():
    with pytest.raises(TypeError, match='numpy array'):
        corrupt([[1, 2], [3, 4]], 'haze', 1)


def _views(dtype):
    """Non-contiguous views of a larger image, each of shape (10, 12, 3)."""
    big = _image((20, 24, 5), dtype, seed=3)
    return {
        'steps': big[::2, ::2, :3],
        'transposed': np.ascontiguousarray(big[:12, :10, :3]).transpose(1, 0, 2),
        'channels': big[:10, :12, 1:4],
        'reversed_channels': big[:10, :12, 2::-1],
        'fortran': np.asfortranarray(big[:10, :12, :3]),
    }


@pytest.mark.parametrize('protocol,name', ALL)
@pytest.mark.parametrize('dtype', [np.uint8, np.uint16, np.float32])
def test_matrix_views_equal_their_contiguous_copies(protocol, name, dtype):
    for label, view in _views(dtype).items():
        assert not view.flags.c_contiguous, label
        before = view.copy()
        np.testing.assert_array_equal(_run(view, protocol, name, 3),
                                      _run(np.ascontiguousarray(view), protocol, name, 3),
                                      err_msg=label)
        np.testing.assert_array_equal(view, before)


@pytest.mark.parametrize('protocol,name', ALL)
@pytest.mark.parametrize('dtype', [np.uint8, np.uint16, np.float64])
def test_matrix_read_only_input_works_and_is_never_modified(protocol, name, dtype):
    image = _image((10, 12, 3), dtype)
    frozen = image.copy()
    frozen.flags.writeable = False
    for severity in (0, 3):
        out = _run(frozen, protocol, name, severity)
        np.testing.assert_array_equal(out, _run(image, protocol, name, severity))
        assert out.flags.writeable and not np.shares_memory(out, frozen)
    np.testing.assert_array_equal(frozen, image)
    if name in GEOMETRIC:
        moved, transform = corrupt_geometric(frozen, name, 3, key='tile')
        assert moved.flags.writeable and transform.source_shape == (10, 12)


@pytest.mark.parametrize('protocol,name', ALL)
def test_matrix_out_of_range_values(protocol, name):
    cases = [(np.full((6, 6, 3), 1.5, np.float32), None, r'\[0, 1\]'),
             (np.full((6, 6, 3), -0.1, np.float64), None, 'Normalize'),
             (np.full((6, 6, 3), 300.0, np.float32), 255, r'\[0, 255\]'),
             (np.full((6, 6, 3), 4096, np.uint16), 4095, '4096'),
             (np.full((6, 6, 3), np.nan, np.float32), None, 'finite')]
    for image, max_value, match in cases:
        for severity in (0, 4):
            with pytest.raises(ValueError, match=match):
                _run(image, protocol, name, severity, max_value=max_value)


@pytest.mark.parametrize('protocol,name', ALL)
def test_matrix_severities(protocol, name):
    image = _image()
    outputs = [_run(image, protocol, name, s) for s in range(6)]
    np.testing.assert_array_equal(outputs[0], image)
    assert all(o.shape == image.shape and o.dtype == image.dtype for o in outputs)
    for severity in (np.int64(2), np.uint8(5)):
        np.testing.assert_array_equal(_run(image, protocol, name, severity),
                                      outputs[int(severity)])
    for bad in (-1, 6, 2.5, True, '3', None, np.float32(2)):
        with pytest.raises(ValueError, match=r'severity must be an integer in 0\.\.5'):
            _run(image, protocol, name, bad)


@pytest.mark.parametrize('protocol,name', ALL)
def test_matrix_seeds_and_keys(protocol, name):
    image = _image((40, 36, 3))  # data_gaps' stripes cover all of much smaller images
    first = _run(image, protocol, name, 4, seed=5)
    np.testing.assert_array_equal(_run(image, protocol, name, 4, seed=np.uint32(5)), first)
    if name in STOCHASTIC:
        others = [_run(image, protocol, name, 4, seed=s) for s in (6, 7, 8)]
        assert any(not np.array_equal(o, first) for o in others)
    for bad in (1.5, b'k', ('a', ), 2.0):
        for severity in (0, 4):
            with pytest.raises(TypeError, match='a sample key is a path'):
                _run(image, protocol, name, severity, key=bad)


def test_matrix_unknown_names_and_options():
    image = _image()
    for protocol in PROTOCOLS:
        with pytest.raises(KeyError, match='valid:'):
            corrupt(image, 'fog', 1, protocol=protocol)
    with pytest.raises(ValueError, match='unknown protocol'):
        corrupt(image, 'haze', 1, protocol='REOBench')
    with pytest.raises(TypeError, match=r"unknown options \['severity_level'\]"):
        corrupt(image, 'haze', 1, severity_level=3)
    with pytest.raises(ValueError, match='border must be one of'):
        corrupt_geometric(image, 'rotate', 0, border='wrap')


# ================================= integer full scales, extreme float scales, byte order
@pytest.mark.parametrize('max_value', [4095.5, 0.5, 65534.9, 255.0000001])
@pytest.mark.parametrize('severity', [0, 3])
def test_fractional_max_value_on_uint16_is_refused(max_value, severity):
    """A uint16 holds whole numbers, so its full scale is one: a fractional max_value
    would let results round above it (4095.5 gave 4096). Refused, with the value as
    given; a whole number written as a float is accepted and gives the same result."""
    image = np.full((8, 8, 3), 0, np.uint16)
    with pytest.raises(ValueError) as error:
        _run(image, 'reobench', 'gaussian_noise', severity, max_value=max_value)
    message = str(error.value)
    assert 'whole number' in message and repr(max_value) in message, message
    assert 'uint16' in message and '4095' in message  # what to set instead
    with pytest.raises(ValueError, match='whole number'):
        full_scale(np.uint16, max_value)
    with pytest.raises(ValueError, match='whole number'):
        check_image(image, max_value)


@pytest.mark.parametrize('protocol,name', ALL)
def test_uint16_results_never_exceed_max_value(protocol, name):
    image = _image((20, 18, 3), np.uint16, full=4095)
    image[:4] = 4095  # at full scale: noise and salt push values upwards
    for severity in (1, 5):
        out = _run(image, protocol, name, severity, max_value=4095)
        assert out.dtype == np.uint16 and out.max() <= 4095, (severity, out.max())
        np.testing.assert_array_equal(
            _run(image, protocol, name, severity, max_value=4095.0), out)
        np.testing.assert_array_equal(
            _run(image, protocol, name, severity, max_value=np.uint16(4095)), out)


@pytest.mark.parametrize('dtype,max_value,shown', [
    (np.uint8, 255.0000001, '255.0000001'),
    (np.uint8, 256, 'max_value=256'),
    (np.uint16, 65535.00001, '65535.00001'),
    (np.float16, 65505.0, '65505.0'),
    (np.float32, 3.4028235e38, '3.4028235e+38'),
])
def test_max_value_errors_show_the_value_as_given(dtype, max_value, shown):
    image = np.zeros((4, 4, 3), dtype)
    with pytest.raises(ValueError) as error:
        corrupt(image, 'haze', 1, max_value=max_value)
    assert shown in str(error.value), str(error.value)
    if dtype == np.float32:  # and the largest value, exactly: not "at most 3.40282e+38"
        assert repr(float(np.finfo(np.float32).max)) in str(error.value)


def test_value_errors_show_the_values_found_exactly():
    image = np.full((4, 4, 3), 0.5)
    image[1, 1, 1] = 1.0000000001
    with pytest.raises(ValueError, match=r'found values in \[0\.5, 1\.0000000001\]'):
        corrupt(image, 'haze', 1)
    with pytest.raises(ValueError, match=r'values up to 4096, above max_value=4095\.0'):
        corrupt(np.full((4, 4), 4096, np.uint16), 'haze', 1, max_value=4095.0)


FLOAT64_MAX = float(np.finfo(np.float64).max)
FLOAT32_MAX = float(np.finfo(np.float32).max)


@pytest.mark.parametrize('dtype,scale', [
    (np.float64, FLOAT64_MAX), (np.float64, 1e308), (np.float64, 1e200), (np.float64, 1e39),
    (np.float64, 2.0**127), (np.float64, 1e-39), (np.float64, 1e-200), (np.float64, 1e-308),
    (np.float64, 5e-324), (np.float32, FLOAT32_MAX), (np.float32, 1e38),
    (np.float32, 1e-38), (np.float32, 1e-44)],
    ids=lambda v: np.dtype(v).name if isinstance(v, type) else repr(v))
def test_float_scales_near_the_ends_of_the_float_range(dtype, scale):
    """Full scales that float32 cannot hold (or whose reciprocal it cannot) are divided in
    float64: the result is the one of the image divided by its scale, times the scale;
    finite, within [0, max_value], and without numpy warnings (it was all NaN)."""
    unit = _image((10, 9, 3), np.float64)
    image = np.minimum((unit * scale).astype(dtype), dtype(scale))
    image[0, 0, 0] = dtype(scale)  # the largest value the image may hold
    divided = image.astype(np.float64) / scale
    for protocol, name in ALL:
        with warnings.catch_warnings():
            warnings.simplefilter('error')
            out = _run(image, protocol, name, 3, max_value=scale)
        assert out.dtype == image.dtype and out.shape == image.shape
        assert np.all(np.isfinite(out)) and out.min() >= 0 and out.max() <= dtype(scale), name
        expected = np.minimum(_run(divided, protocol, name, 3) * scale, scale).astype(dtype)
        np.testing.assert_array_equal(out, expected, err_msg=name)


NON_NATIVE = [np.dtype(d).newbyteorder('S') for d in ('uint16', 'float16', 'float32', 'float64')]


@pytest.mark.parametrize('dtype', NON_NATIVE, ids=lambda d: d.str)
def test_non_native_byte_order_is_converted_and_kept(dtype):
    """Big-endian arrays on a little-endian machine (and the reverse) are corrupted as
    their native twin and returned in the caller's byte order."""
    native = dtype.newbyteorder('=')
    max_value = 4095 if native == np.uint16 else None
    twin = _image((11, 9, 3), native, full=4095 if max_value else None)
    image = twin.astype(dtype)
    assert image.dtype == dtype and image.dtype != twin.dtype
    assert check_image(image, max_value) == full_scale(native, max_value)
    for protocol, name in ALL:
        for severity in (0, 3):
            out = _run(image, protocol, name, severity, max_value=max_value)
            assert out.dtype == dtype, (name, out.dtype)
            np.testing.assert_array_equal(
                out, _run(twin, protocol, name, severity, max_value=max_value), err_msg=name)
    moved, transform = corrupt_geometric(image, 'translate', 2, key='k', max_value=max_value)
    assert moved.dtype == dtype
    np.testing.assert_array_equal(
        moved, corrupt_geometric(twin, 'translate', 2, key='k', max_value=max_value)[0])
    back = from_float(to_float(image, max_value), image, max_value)
    assert back.dtype == dtype


@pytest.mark.parametrize('dtype', ['>i4', '<i4', '>f8', '>u2'])
def test_label_maps_of_any_byte_order_keep_it(dtype):
    labels = _labels((23, 19), np.dtype(dtype))
    for transform in _transforms():
        moved = transform.warp_label_map(labels, 7)
        assert moved.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(moved, transform.warp_label_map(
            labels.astype(np.dtype(dtype).newbyteorder('=')), 7))


def test_unsupported_dtypes_in_either_byte_order_name_the_dtype():
    swapped = np.dtype('int32').newbyteorder('S')
    with pytest.raises(TypeError, match=r'unsupported dtype int32 .*valid: uint8, uint16'):
        corrupt(np.zeros((4, 4), swapped), 'haze', 1)


# =========================================================================== sample keys
RANDOM = [(p, n) for p, n in ALL if get_corruption(n, p).stochastic]
DRAW_FREE = [(p, n) for p, n in ALL if not get_corruption(n, p).stochastic]


def test_the_registry_says_which_corruptions_draw_random_numbers():
    assert {n for _, n in RANDOM} == STOCHASTIC
    assert len(RANDOM) == len(STOCHASTIC) and DRAW_FREE


@pytest.mark.parametrize('protocol,name', RANDOM)
def test_a_random_corruption_without_a_key_is_an_error(protocol, name):
    """Without a key every image got the same noise field, stripes or shift; now the
    call says to pass the sample's key. Severity 0 draws nothing and needs none."""
    image = _image((16, 14, 3))
    for severity in range(1, 6):
        with pytest.raises(ValueError) as error:
            corrupt(image, name, severity, protocol=protocol)
        message = str(error.value)
        assert name in message and 'key=' in message and 'file name' in message, message
    np.testing.assert_array_equal(corrupt(image, name, 0, protocol=protocol), image)
    if get_corruption(name, protocol).moves_labels:
        with pytest.raises(ValueError, match='key='):
            corrupt_geometric(image, name, 2, protocol=protocol)
    # with keys, two images get different draws
    other = _image((16, 14, 3), seed=5)
    noise = [corrupt(im, name, 4, protocol=protocol, key=k).astype(float) - im
             for im, k in ((image, 'a.png'), (other, 'b.png'))]
    assert not np.array_equal(*noise)


class _NoDraws:
    """Stands in for the generator: any use is a failure."""

    def __getattr__(self, attribute):
        raise AssertionError(f'a draw-free corruption used the generator ({attribute})')


@pytest.mark.parametrize('protocol,name', DRAW_FREE)
def test_corruptions_that_draw_nothing_need_no_key(protocol, name):
    image = _image((16, 14, 3))
    for severity in (1, 5):
        np.testing.assert_array_equal(corrupt(image, name, severity, protocol=protocol),
                                      corrupt(image, name, severity, protocol=protocol,
                                              key='tile.png'))
    spec = get_corruption(name, protocol)
    options = {'border': 'reflect'} if spec.moves_labels else {}
    for func in (spec.func, spec.uint8_func):
        if func is not None:  # neither path touches the generator
            func(image if func is spec.uint8_func else to_float(image),
                 spec.parameter_for(3), _NoDraws(), **options)
