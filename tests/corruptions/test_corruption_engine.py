"""The corruption engine: registry contracts, spec formulas, statistics, bad input."""
import subprocess
import sys

import cv2
import numpy as np
import pytest

from reobench_corruptions import (corrupt, corrupt_geometric, get_corruption,
                                     list_corruptions, resolve_corruptions)
from reobench_corruptions.appearance import (cloud_opacity, cloud_shadow_layers,
                                                data_gap_mask, gaussian_noise_uint8,
                                                reobench_motion_kernel,
                                                rounded_gaussian_alias_table)
from reobench_corruptions.base import UINT8_RELATIONS, make_rng

ALL = [(p, n) for p in ('reobench', 'geofm_calibration') for n in list_corruptions(p)]
STOCHASTIC = {'gaussian_noise', 'salt_pepper_noise', 'data_gaps', 'cloud', 'translate',
              'cloud_shadow', 'poisson_gaussian_noise'}


def _image(shape=(64, 48, 3), dtype=np.uint8, seed=0):
    rng = np.random.default_rng(seed)
    base = cv2.GaussianBlur(rng.random(shape[:2]).astype(np.float32), (0, 0), 3)
    stack = np.stack([np.roll(base, 5 * c, axis=1) for c in range(shape[2])], axis=2)
    stack = (stack - stack.min()) / (stack.max() - stack.min()) * 0.8 + 0.1
    if dtype == np.uint8:
        return np.rint(stack * 255).astype(np.uint8)
    if dtype == np.uint16:
        return np.rint(stack * 65535).astype(np.uint16)
    return stack.astype(dtype)


def test_registry_matches_the_spec_tables():
    assert list_corruptions('reobench') == [
        'gaussian_noise', 'salt_pepper_noise', 'gaussian_blur', 'motion_blur',
        'compression_artifacts', 'data_gaps', 'brightness_contrast', 'cloud', 'haze', 'rotate',
        'scale', 'translate'
    ]
    assert list_corruptions('geofm_calibration') == [
        'cloud_shadow', 'poisson_gaussian_noise', 'motion_blur'
    ]
    assert get_corruption('motion_blur').severities == (2, 4, 6, 8, 10)
    assert get_corruption('motion_blur', 'geofm_calibration').severities == (3, 5, 9, 15, 21)
    assert get_corruption('data_gaps').severities[2] == (4, 5)
    assert list_corruptions('reobench', 'geometric') == ['rotate', 'scale', 'translate']
    assert len(list_corruptions('reobench', 'environmental')) == 3
    assert len(resolve_corruptions('appearance')) == 9
    assert resolve_corruptions(['cloud', 'environmental']) == [
        'cloud', 'brightness_contrast', 'haze'
    ]
    assert all(get_corruption(n).moves_labels == (n in ('rotate', 'scale', 'translate'))
               for n in list_corruptions())


@pytest.mark.parametrize('protocol,name', ALL)
@pytest.mark.parametrize('severity', [1, 3, 5])
def test_contract_shape_dtype_finite_deterministic(protocol, name, severity):
    image = _image()
    out = corrupt(image, name, severity, protocol=protocol, seed=1, key='tile.png')
    again = corrupt(image, name, severity, protocol=protocol, seed=1, key='tile.png')
    assert out.shape == image.shape and out.dtype == image.dtype
    np.testing.assert_array_equal(out, again)
    if (name, severity) != ('brightness_contrast', 1):  # the identity by the spec's table
        assert not np.array_equal(out, image), 'severity >= 1 changes the image'
    if name in STOCHASTIC:
        other = corrupt(image, name, severity, protocol=protocol, seed=1, key='other.png')
        reseeded = corrupt(image, name, severity, protocol=protocol, seed=2, key='tile.png')
        assert not (np.array_equal(out, other) and np.array_equal(out, reseeded))


@pytest.mark.parametrize('protocol,name', ALL)
@pytest.mark.parametrize('bands,dtype', [(1, np.uint8), (4, np.uint16), (13, np.float32),
                                         (3, np.float64)])
def test_contract_any_band_count_and_dtype(protocol, name, bands, dtype):
    image = _image((40, 36, bands), dtype)
    out = corrupt(image, name, 4, protocol=protocol, key=7)
    assert out.shape == image.shape and out.dtype == image.dtype
    if np.issubdtype(dtype, np.floating):
        assert np.all(np.isfinite(out)) and out.min() >= 0 and out.max() <= 1


@pytest.mark.parametrize('protocol,name', ALL)
def test_contract_severity_zero_is_identity_and_tiny_images_work(protocol, name):
    image = _image((8, 8, 3))
    np.testing.assert_array_equal(corrupt(image, name, 0, protocol=protocol), image)
    assert corrupt(image, name, 5, protocol=protocol, key='tile').shape == (8, 8, 3)
    gray = image[..., 0]
    assert corrupt(gray, name, 2, protocol=protocol, key='tile').shape == (8, 8)


def test_uint16_max_value_scales_the_range():
    image = np.full((16, 16, 2), 1000, np.uint16)  # 12-bit data with max 4095
    out = corrupt(image, 'haze', 5, max_value=4095)
    expected = np.rint((1000 / 4095 * 0.4 + 0.6) * 4095)
    assert np.all(out == expected)


# ------------------------------------------------------------------- formulas of the spec
def _float(image):
    return image.astype(np.float32) / 255


def test_gaussian_blur_is_opencv_with_derived_sigma():
    image = _image()
    for severity, k in enumerate((3, 5, 7, 9, 11), start=1):
        expected = cv2.GaussianBlur(_float(image), (k, k), 0.3 * ((k - 1) / 2 - 1) + 0.8,
                                    borderType=cv2.BORDER_REFLECT_101)
        out = corrupt(image, 'gaussian_blur', severity)
        assert np.abs(out.astype(int) - np.rint(expected * 255)).max() <= 1


def test_motion_blur_kernel_and_filter():
    kernel = reobench_motion_kernel(4)
    assert kernel[1].tolist() == [0.25] * 4 and kernel.sum() == pytest.approx(1.0)
    assert np.count_nonzero(kernel) == 4
    image = _image()
    out = corrupt(image, 'motion_blur', 2)
    # direct computation: row 1 of a 4x4 kernel averages 4 columns (anchor at the centre)
    padded = cv2.copyMakeBorder(_float(image), 2, 1, 2, 1, cv2.BORDER_REFLECT_101)
    direct = sum(padded[1:1 + 64, j:j + 48] for j in range(4)) / 4
    assert np.abs(out.astype(int) - np.rint(direct * 255)).max() <= 1


def test_wide_motion_blur_is_a_horizontal_box_filter():
    image = _image()
    out = corrupt(image, 'motion_blur', 1, protocol='geofm_calibration')  # k = 3
    padded = np.pad(_float(image), ((0, 0), (1, 1), (0, 0)), mode='symmetric')
    direct = (padded[:, :-2] + padded[:, 1:-1] + padded[:, 2:]) / 3
    assert np.abs(out.astype(int) - np.rint(direct * 255)).max() <= 1


@pytest.mark.parametrize('severity', [1, 3, 5])
def test_brightness_contrast_and_haze_formulas(severity):
    image = _image()
    offset, gain = get_corruption('brightness_contrast').parameter_for(severity)
    expected = np.clip(_float(image) * gain + offset, 0, 1)
    assert np.abs(corrupt(image, 'brightness_contrast', severity).astype(int)
                  - np.rint(expected * 255)).max() <= 1
    intensity = get_corruption('haze').parameter_for(severity)
    expected = _float(image) * (1 - intensity) + intensity
    assert np.abs(corrupt(image, 'haze', severity).astype(int)
                  - np.rint(expected * 255)).max() <= 1
    np.testing.assert_array_equal(corrupt(image, 'brightness_contrast', 1), image)


def test_compression_equals_a_direct_jpeg_round_trip():
    image = _image((64, 64, 3))
    ok, data = cv2.imencode('.jpg', image[..., ::-1], [cv2.IMWRITE_JPEG_QUALITY, 20])
    direct = cv2.imdecode(data, cv2.IMREAD_COLOR)[..., ::-1]
    np.testing.assert_array_equal(corrupt(image, 'compression_artifacts', 3), direct)
    bgr = corrupt(image[..., ::-1].copy(), 'compression_artifacts', 3, channel_order='bgr')
    np.testing.assert_array_equal(bgr[..., ::-1], direct)


def test_gaussian_noise_sigma():
    image = np.full((256, 256, 3), 128, np.uint8)
    for severity, sigma in enumerate((0.04, 0.05, 0.06, 0.07, 0.08), start=1):
        out = corrupt(image, 'gaussian_noise', severity, key=severity)
        measured = (out.astype(np.float64) - 128).std() / 255
        assert measured == pytest.approx(sigma, rel=0.03)


def test_salt_pepper_fraction():
    image = np.full((256, 256, 3), 128, np.uint8)
    for severity, amount in enumerate((0.005, 0.01, 0.02, 0.03, 0.05), start=1):
        out = corrupt(image, 'salt_pepper_noise', severity, key='grey')
        salt, pepper = np.mean(out == 255), np.mean(out == 0)
        assert salt + pepper == pytest.approx(amount, rel=0.1)
        assert salt == pytest.approx(pepper, rel=0.25)


def test_data_gaps_stripes():
    image = np.full((200, 300, 1), 200, np.uint8)
    for severity, (n, w) in enumerate(((2, 3), (3, 4), (4, 5), (5, 6), (6, 7)), start=1):
        out = corrupt(image, 'data_gaps', severity, key='x')
        spacing = np.floor(np.hypot(300, 200)) / n
        assert np.mean(out == 0) == pytest.approx(w / spacing, rel=0.15)
        assert out[0, 0, 0] == 0, 'a stripe passes through (0, 0)'


def test_cloud_grows_with_severity_and_is_grey():
    image = np.zeros((256, 256, 3), np.uint8)
    covers = []
    for severity in range(1, 6):
        out = corrupt(image, 'cloud', severity, key='scene')
        assert np.all(out[..., 0] == out[..., 1]) and out.max() <= 230
        covers.append(np.mean(out[..., 0] > 115))  # mask > 0.5
    assert covers == sorted(covers) and covers[-1] > covers[0]
    assert 0 < covers[-1] < 0.6


def test_cloud_cover_is_far_below_the_density():
    """The cover the threshold 1 − d gives (mean of the soft mask over 512×512 images):
    about 1 % at severity 1 and 13 % at severity 5, not d = 10-30 % (docs/corruptions.md
    gives the measured table)."""
    black = np.zeros((512, 512, 1), np.float32)
    covers = {severity: np.mean([corrupt(black, 'cloud', severity, key=f'img_{k}.png').mean()
                                 / 0.9 for k in range(10)]) for severity in (1, 5)}
    assert 0.003 < covers[1] < 0.02 and 0.08 < covers[5] < 0.18, covers


def test_each_severity_draws_its_own_cloud():
    """The severity is part of the seed: per image the covers of severities 4 and 5 are
    uncorrelated and severity 5 covers less in about 30 % of the images (docs), while the
    mean cover grows; the same key and seed give the same cloud (common to all models)."""
    black = np.zeros((256, 256, 1), np.float32)
    covers = {s: np.array([corrupt(black, 'cloud', s, seed=0, key=f'img_{k}').mean() / 0.9
                           for k in range(200)]) for s in (4, 5)}
    assert covers[5].mean() > covers[4].mean()
    assert 0.2 < np.mean(covers[5] < covers[4]) < 0.4
    assert abs(np.corrcoef(covers[4], covers[5])[0, 1]) < 0.2
    np.testing.assert_array_equal(corrupt(black, 'cloud', 5, seed=0, key='img_3'),
                                  corrupt(black, 'cloud', 5, seed=0, key='img_3'))


def test_cloud_shadow_cover_within_two_percent():
    for severity, coverage in enumerate((0.2, 0.4, 0.6, 0.8, 1.0), start=1):
        rng = make_rng(0, 'cloud_shadow', severity, 'k')
        opacity, shadow = cloud_shadow_layers(200, 240, coverage, rng)
        assert np.mean(opacity > 0) == pytest.approx(coverage, abs=0.02)
        assert opacity.max() == pytest.approx(1.0) and shadow.max() <= 1.0
    dark = corrupt(np.zeros((64, 64, 3), np.float32), 'cloud_shadow', 3,
                   protocol='geofm_calibration', key='dark')
    assert np.mean(dark > 0) == pytest.approx(0.6, abs=0.03)


def test_cloud_shadow_edges_are_soft():
    """Opacity is 0 at the cloud edge and grows continuously: no pixel next to a clear
    one is more than a little opaque (a jump to a fixed edge opacity such as 0.35 would
    show here), and the opacity curve starts at 0 with zero slope."""
    assert cloud_opacity(np.array([-0.3, 0.0, 1e-3, 0.25, 0.5, 0.9])).tolist() == \
        pytest.approx([0.0, 0.0, 3 * 0.002**2 - 2 * 0.002**3, 0.5, 1.0, 1.0], abs=1e-7)
    for severity, coverage in enumerate((0.2, 0.4, 0.6, 0.8), start=1):
        opacity, shadow = cloud_shadow_layers(
            200, 240, coverage, make_rng(0, 'geofm_calibration/cloud_shadow', severity, 'k'))
        covered = opacity > 0
        steps = [np.abs(np.diff(opacity, axis=axis))[np.diff(covered, axis=axis)]
                 for axis in (0, 1)]
        edge_steps = np.concatenate(steps)
        assert edge_steps.size > 50  # the cloud has edges
        # from clear to cloud in one pixel the opacity rises by a few hundredths at most
        assert edge_steps.max() < 0.1, (severity, edge_steps.max())
        assert np.median(opacity[covered]) > 0.3 and np.mean(opacity >= 0.99) > 0.02  # cores
        # the shadow, a shifted copy of the opacity, is just as soft
        shadow_steps = np.concatenate([np.abs(np.diff(shadow, axis=axis))[
            np.diff(shadow > 0, axis=axis)] for axis in (0, 1)])
        assert shadow_steps.size and shadow_steps.max() < 0.1


def _multiband(dtype, shape=(40, 36, 6)):
    image = _image(shape, np.uint8, seed=4)
    if dtype == np.uint16:
        return image.astype(np.uint16) * 257 + 3
    if dtype == np.float64:
        return image.astype(np.float64) / 255 + 1e-9  # values a float32 cannot hold
    return image


@pytest.mark.parametrize('dtype', [np.uint8, np.uint16, np.float64])
def test_cloud_shadow_band_restriction(dtype):
    """Only the chosen bands are clouded: the others are bit-identical to the input and
    the chosen ones are exactly those of the all-band result (the cloud field does not
    depend on the selection); the same inputs give the same bits."""
    image = _multiband(dtype)
    settings = dict(protocol='geofm_calibration', key='scene_3.tif', seed=2)
    full = corrupt(image, 'cloud_shadow', 4, **settings)
    optical = [0, 2, 3]
    out = corrupt(image, 'cloud_shadow', 4, bands=optical, **settings)
    assert out.dtype == image.dtype and out.shape == image.shape
    others = [1, 4, 5]
    np.testing.assert_array_equal(out[..., others], image[..., others])
    np.testing.assert_array_equal(out[..., optical], full[..., optical])
    assert not np.array_equal(out[..., optical], image[..., optical])
    np.testing.assert_array_equal(out, corrupt(image, 'cloud_shadow', 4, bands=(3, 0, 2),
                                               **settings))  # any order, any sequence
    np.testing.assert_array_equal(
        corrupt(image, 'cloud_shadow', 4, bands=list(range(6)), **settings), full)
    other_key = corrupt(image, 'cloud_shadow', 4, bands=optical,
                        **dict(settings, key='scene_4.tif'))
    assert not np.array_equal(other_key, out)
    # a one-band (2-D) image and its only band
    grey = image[..., 0]
    np.testing.assert_array_equal(corrupt(grey, 'cloud_shadow', 2, bands=[0], **settings),
                                  corrupt(grey, 'cloud_shadow', 2, **settings))


@pytest.mark.parametrize('bands,match', [
    ([6], r'band index 6 is out of range; valid: 0\.\.5 for this 6-band image'),
    ([-1], r'band index -1 is out of range; valid: 0\.\.5'),
    ([], r'selects no band'),
    ([1, 1], r'more than once'),
    (2, r'list of band indices'),
    ('rgb', r'list of band indices'),
    ([0.0, 1], r'integers counted from 0'),
    ([True], r'integers counted from 0'),
])
@pytest.mark.parametrize('severity', [0, 3])
def test_cloud_shadow_bad_bands_are_clear_errors(bands, match, severity):
    with pytest.raises(ValueError, match=match):
        corrupt(_image((8, 8, 6)), 'cloud_shadow', severity, protocol='geofm_calibration',
                bands=bands)
    with pytest.raises(TypeError, match=r'rotate is a geometric corruption.*no bands'):
        corrupt(_image((8, 8, 3)), 'rotate', 1, bands=[0])


@pytest.mark.parametrize('severity,level', [(1, 0.2), (1, 0.6), (3, 0.3), (3, 0.6), (5, 0.5)])
def test_poisson_gaussian_variance_follows_intensity(severity, level):
    """Var = x/η + σ² (levels chosen so that clipping to [0, 1] is negligible)."""
    eta, sigma = get_corruption('poisson_gaussian_noise', 'geofm_calibration'
                                ).parameter_for(severity)
    image = np.full((128, 128, 3), level, np.float32)
    out = corrupt(image, 'poisson_gaussian_noise', severity, protocol='geofm_calibration',
                  key=f'level{level}')
    assert out.var() == pytest.approx(level / eta + sigma**2, rel=0.1)
    assert out.mean() == pytest.approx(level, abs=0.01)


# ------------------------------------------------------------------------------ geometry
def test_rotate_matches_opencv_and_moves_points_with_the_pixels():
    image = _image((60, 80, 3))
    out, transform = corrupt_geometric(image, 'rotate', 2)  # 45 degrees
    matrix = cv2.getRotationMatrix2D((40, 30), 45, 1.0)
    direct = cv2.warpAffine(_float(image), matrix, (80, 60), flags=cv2.INTER_LINEAR,
                            borderMode=cv2.BORDER_REFLECT)
    assert np.abs(out.astype(int) - np.rint(direct * 255)).max() <= 1

    dot = np.zeros((60, 80), np.uint8)
    dot[20, 50] = 255
    moved, transform = corrupt_geometric(dot, 'rotate', 5)  # 90 degrees
    y, x = np.unravel_index(np.argmax(moved), moved.shape)
    px, py = transform.apply_to_points([[50.5, 20.5]])[0]  # the pixel's centre, edge coords
    assert (int(np.floor(px)), int(np.floor(py))) == (x, y)
    # counter-clockwise on screen: a point right of and above the centre goes to its
    # upper left (right -> up, up -> left)
    assert abs(px - 30.5) < 1 and abs(py - 20.5) < 1, (px, py)


def _bilinear_shrink(image, nh, nw):
    """Bilinear resize with pixel-centre alignment (source = (i + 0.5)·size/new − 0.5,
    clamped), in float64 numpy: the resize the scale corruption uses, written out."""
    h, w = image.shape[:2]
    ys = np.clip((np.arange(nh) + 0.5) * h / nh - 0.5, 0, h - 1)
    xs = np.clip((np.arange(nw) + 0.5) * w / nw - 0.5, 0, w - 1)
    y0, x0 = np.floor(ys).astype(int), np.floor(xs).astype(int)
    y1, x1 = np.minimum(y0 + 1, h - 1), np.minimum(x0 + 1, w - 1)
    fy, fx = (ys - y0)[:, None, None], (xs - x0)[None, :, None]
    data = image.astype(np.float64)
    top = data[y0][:, x0] * (1 - fx) + data[y0][:, x1] * fx
    bottom = data[y1][:, x0] * (1 - fx) + data[y1][:, x1] * fx
    return top * (1 - fy) + bottom * fy


def _canvas_reference(content, h, w, canvas):
    """The frame around ``content`` built directly: rows/columns indexed into it."""
    nh, nw = content.shape[:2]
    top, left = (h - nh) // 2, (w - nw) // 2
    if canvas == 'black':
        out = np.zeros((h, w) + content.shape[2:], content.dtype)
        out[top:top + nh, left:left + nw] = content
        return out

    def source(size, start, count):
        position = np.arange(size) - start  # in content coordinates
        if canvas == 'replicate':  # the nearest edge pixel
            return np.clip(position, 0, count - 1)
        period = 2 * count  # mirror with the edge pixel repeated: ...cba|abc...|cba...
        folded = np.mod(position, period)
        return np.where(folded < count, folded, period - 1 - folded)

    return content[source(h, top, nh)][:, source(w, left, nw)]


@pytest.mark.parametrize('canvas', ['replicate', 'reflect', 'black'])
@pytest.mark.parametrize('shape,severity', [((50, 40, 3), 5), ((33, 61, 5), 2), ((7, 9, 1), 3)])
def test_scale_canvases_equal_a_direct_construction(canvas, shape, severity):
    image = _image(shape)
    ratio = get_corruption('scale').parameter_for(severity)
    h, w = shape[:2]
    nh, nw = int(h * ratio), int(w * ratio)
    out, transform = corrupt_geometric(image, 'scale', severity, canvas=canvas)
    assert transform.canvas == ((h - nh) // 2, (w - nw) // 2, nh, nw)
    assert transform.canvas_fill == canvas
    # float path: the frame exactly as built directly around OpenCV's bilinear resize
    floats = image.astype(np.float32) / 255
    resized = cv2.resize(floats, (nw, nh), interpolation=cv2.INTER_LINEAR).reshape(
        nh, nw, shape[2])
    expected = _canvas_reference(resized, h, w, canvas)
    got = corrupt_geometric(floats, 'scale', severity, canvas=canvas)[0]
    np.testing.assert_array_equal(got, expected)
    # and the resize itself against a bilinear resize written out: within 1e-5 (float)
    # and one grey level (uint8 kernel, OpenCV's fixed-point weights)
    direct = _canvas_reference(_bilinear_shrink(floats, nh, nw), h, w, canvas)
    assert np.abs(got - direct).max() < 1e-5
    assert np.abs(out.astype(float) - np.rint(direct * 255)).max() <= 1
    # corrupt() gives the same image
    np.testing.assert_array_equal(corrupt(image, 'scale', severity, canvas=canvas), out)


def test_scale_default_canvas_is_edge_replication():
    image = _image((50, 40, 3))
    default, transform = corrupt_geometric(image, 'scale', 4)
    assert transform.canvas_fill == 'replicate'
    np.testing.assert_array_equal(default,
                                  corrupt_geometric(image, 'scale', 4, canvas='replicate')[0])


@pytest.mark.parametrize('canvas', ['replicate', 'reflect', 'black'])
def test_scale_labels_move_alike_under_every_canvas(canvas):
    """Points and boxes follow the content; label maps get the ignore index around it
    whatever fills the image's frame (that area holds no labelled objects)."""
    image = _image((50, 40, 3))
    out, transform = corrupt_geometric(image, 'scale', 5, canvas=canvas)  # 0.5
    assert transform.canvas == (12, 10, 25, 20)
    if canvas == 'black':
        assert np.all(out[:12] == 0) and np.all(out[:, :10] == 0)
    else:
        assert out[:12].any() and out[:, :10].any()
    np.testing.assert_allclose(transform.apply_to_points([[0, 0], [40, 50]]),
                               [[10, 12], [30, 37]])
    labels = np.full((50, 40), 3, np.uint8)
    moved = transform.warp_label_map(labels, ignore_index=255)
    assert np.all(moved[12:37, 10:30] == 3) and np.mean(moved == 255) == pytest.approx(0.75)
    np.testing.assert_array_equal(transform.content_mask(), moved == 3)
    # a labelled square lands where its pixels land, in the image and the label map
    square = np.zeros((50, 40), np.uint8)
    square[20:30, 16:26] = 1
    picture = np.repeat(square[..., None] * 200, 3, axis=2).astype(np.uint8)
    moved_picture = corrupt_geometric(picture, 'scale', 5, canvas=canvas)[0][..., 0]
    moved_labels = transform.warp_label_map(square, ignore_index=255)
    inside = transform.content_mask()
    np.testing.assert_array_equal(moved_labels[inside] == 1, moved_picture[inside] >= 100)
    corners = transform.apply_to_points([[16, 20], [26, 30]])
    np.testing.assert_allclose(corners, [[18, 22], [23, 27]])
    assert np.all(moved_labels[22:27, 18:23] == 1)


@pytest.mark.parametrize('canvas', ['edge', 'zeros', None, 1])
@pytest.mark.parametrize('severity', [0, 2])
def test_scale_bad_canvas_is_a_clear_error(canvas, severity):
    with pytest.raises(ValueError, match=r"canvas .* must be one of \['replicate', 'reflect', "
                                         r"'black'\]"):
        corrupt_geometric(_image((8, 8, 3)), 'scale', severity, canvas=canvas)
    with pytest.raises(TypeError, match=r"unknown options \['canvas'\]"):
        corrupt_geometric(_image((8, 8, 3)), 'rotate', 1, canvas='black')


@pytest.mark.parametrize('border', ['reflect', 'constant'])
def test_translate_is_an_exact_diagonal_shift(border):
    image = _image((40, 40, 3))
    out, transform = corrupt_geometric(image, 'translate', 1, key='a', border=border)
    dx, dy = transform.matrix[:, 2]
    assert abs(dx) == abs(dy) == 15
    sx, sy = int(dx), int(dy)
    np.testing.assert_array_equal(out[max(sy, 0):40 + min(sy, 0), max(sx, 0):40 + min(sx, 0)],
                                  image[max(-sy, 0):40 - max(sy, 0), max(-sx, 0):40 - max(sx, 0)])
    labels = np.ones((40, 40), np.uint8)
    moved = transform.warp_label_map(labels, ignore_index=255)
    if border == 'constant':
        assert np.mean(moved == 255) == pytest.approx(1 - (25 * 25) / 1600)
        np.testing.assert_array_equal(transform.content_mask(), moved == 1)
    else:
        assert np.all(moved == 1), 'reflected content keeps its (reflected) labels'
        assert transform.content_mask().all()


# --------------------------------------------------------------------------- determinism
@pytest.mark.slow
def test_same_bits_in_another_process():
    image = _image()
    here = corrupt(image, 'cloud', 4, seed=3, key='scene.png')
    code = ('import numpy as np, sys; from reobench_corruptions import corrupt; '
            'img = np.load(sys.argv[1]); '
            'sys.stdout.buffer.write(corrupt(img, "cloud", 4, seed=3, key="scene.png")'
            '.tobytes())')
    import tempfile
    with tempfile.NamedTemporaryFile(suffix='.npy') as f:
        np.save(f.name, image)
        there = subprocess.run([sys.executable, '-c', code, f.name], capture_output=True,
                               check=True, timeout=120).stdout
    assert here.tobytes() == there


def test_key_and_order_independence():
    images = [_image(seed=i) for i in range(3)]
    forward = [corrupt(im, 'gaussian_noise', 2, key=i) for i, im in enumerate(images)]
    backward = [corrupt(images[i], 'gaussian_noise', 2, key=i) for i in (2, 1, 0)][::-1]
    for a, b in zip(forward, backward):
        np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------------------- bad input
@pytest.mark.parametrize('severity', [-1, 6, 2.5, True, '3'])
def test_bad_severity(severity):
    with pytest.raises(ValueError, match=r'severity must be an integer in 0\.\.5'):
        corrupt(_image(), 'haze', severity)


def test_unknown_names_list_the_valid_ones():
    with pytest.raises(KeyError, match="valid: .*'gaussian_noise'"):
        corrupt(_image(), 'fog', 1)
    with pytest.raises(ValueError, match='unknown protocol'):
        corrupt(_image(), 'haze', 1, protocol='imagenet-c')
    with pytest.raises(KeyError, match="'cloud_shadow'"):
        corrupt(_image(), 'rotate', 1, protocol='geofm_calibration')
    with pytest.raises(TypeError, match="unknown options \\['quality'\\]"):
        corrupt(_image(), 'compression_artifacts', 1, quality=50)
    with pytest.raises(ValueError, match='not a geometric corruption'):
        corrupt_geometric(_image(), 'haze', 1)
    with pytest.raises(ValueError, match='border must be one of'):
        corrupt_geometric(_image(), 'rotate', 1, border='wrap')


@pytest.mark.parametrize('image,match', [
    (np.zeros((4, 4, 3), np.int32), 'unsupported dtype'),
    (np.zeros((4, 4, 3, 1), np.uint8), 'H×W or H×W×C'),
    (np.zeros((0, 4, 3), np.uint8), 'H×W or H×W×C'),
    (np.full((4, 4, 3), np.nan, np.float32), 'finite'),
])
def test_bad_images(image, match):
    with pytest.raises((TypeError, ValueError), match=match):
        corrupt(image, 'haze', 1)


@pytest.mark.parametrize('period', [200, 25, 6.25, 3])
def test_separable_perlin_equals_per_pixel_perlin(period):
    from reobench_corruptions.noise import perlin, perlin_per_pixel
    fast = perlin(37, 53, period, np.random.default_rng(4))
    slow = perlin_per_pixel(37, 53, period, np.random.default_rng(4))
    np.testing.assert_allclose(fast, slow, atol=2e-6)
    assert np.abs(slow).max() > 0.05


# ------------------------------------------------------------------------ uint8 fast paths
WITH_UINT8_KERNEL = [(p, n) for p, n in ALL if get_corruption(n, p).uint8_func is not None]


def test_the_common_corruptions_have_uint8_kernels():
    assert {n for p, n in WITH_UINT8_KERNEL if p == 'reobench'} == set(list_corruptions())
    for protocol, name in WITH_UINT8_KERNEL:
        assert get_corruption(name, protocol).uint8_relation in UINT8_RELATIONS


@pytest.mark.parametrize('protocol,name', WITH_UINT8_KERNEL)
@pytest.mark.parametrize('bands', [1, 3, 5, 13])
def test_uint8_kernel_keeps_its_promise_against_the_float_path(protocol, name, bands):
    image = _image((72, 60, bands))
    relation = get_corruption(name, protocol).uint8_relation
    for severity in (1, 3, 5):
        fast = corrupt(image, name, severity, protocol=protocol, key='k')
        reference = np.rint(corrupt(_float(image), name, severity, protocol=protocol,
                                    key='k') * 255).astype(np.int16)
        assert fast.dtype == np.uint8 and fast.shape == image.shape
        difference = np.abs(fast.astype(np.int16) - reference)
        if relation == 'identical':
            assert difference.max() == 0
        elif relation == 'within_one_level':
            assert difference.max() <= 1 and difference.mean() < 0.2
        else:  # same distribution, other draws: compare the added noise's moments
            noise_fast = fast.astype(np.float64) - image
            noise_reference = reference - image.astype(np.float64)
            assert noise_fast.std() == pytest.approx(noise_reference.std(), rel=0.1)


@pytest.mark.parametrize('sigma', [0.04, 0.08])
def test_uint8_gaussian_noise_draws_the_rounded_normal_exactly(sigma):
    from scipy.special import ndtr
    from scipy.stats import chisquare
    image = np.full((500, 400, 3), 128, np.uint8)
    offsets = gaussian_noise_uint8(image, sigma, make_rng(0, 'chi2', 1)).astype(int) - 128
    scale = 255 * sigma
    support = np.arange(offsets.min(), offsets.max() + 1)
    expected = ndtr((support + 0.5) / scale) - ndtr((support - 0.5) / scale)
    observed = np.bincount(offsets.ravel() - support[0], minlength=len(support))
    enough = expected * offsets.size > 5  # chi-square needs populated cells
    expected = expected[enough] * observed[enough].sum() / expected[enough].sum()
    assert chisquare(observed[enough], expected).pvalue > 1e-3
    table = rounded_gaussian_alias_table(scale)
    assert table[1].max() <= 2**(32 - table[0])


def test_fractal_perlin_is_the_sum_of_per_pixel_octaves():
    from reobench_corruptions.noise import fractal_perlin, perlin_per_pixel
    fast = fractal_perlin(45, 70, 40, np.random.default_rng(9))
    rng = np.random.default_rng(9)
    slow = sum(0.5**o * perlin_per_pixel(45, 70, 40 / 2**o, rng) for o in range(6))
    np.testing.assert_allclose(fast, slow, atol=2e-6)


def test_data_gap_mask_equals_the_spec_formula_per_pixel():
    for seed in range(5):
        height, width, n, w = 97, 131, 4, 5
        mask = data_gap_mask(height, width, n, w, np.random.default_rng(seed))
        theta = np.deg2rad(np.random.default_rng(seed).uniform(0.0, 180.0))
        spacing = np.floor(np.sqrt(width**2 + height**2)) / n
        y, x = np.mgrid[:height, :width]
        direct = np.mod(x * np.cos(theta) + y * np.sin(theta), spacing) < w
        assert (mask != direct).sum() == 0
