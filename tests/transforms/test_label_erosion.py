"""ErodeLabelBoundaries: ISPRS's eroded-reference rule against an independent erosion with
scipy.ndimage (per label value, a Euclidean disc, nothing eroded from the image border)."""
import numpy as np
import pytest
from scipy import ndimage

import reobench_mm  # noqa: F401  (registration)
from reobench_mm.registry import TRANSFORMS
from reobench_mm.transforms.label_erosion import (ErodeLabelBoundaries, disc,
                                                  erode_label_boundaries)


def _reference(label, radius, ignore_index):
    """Erode every value's region by the disc dy² + dx² ≤ r² (scipy; outside the image
    counts as the region), the removed band set to ``ignore_index``."""
    offsets = np.arange(-radius, radius + 1)
    structure = offsets[:, None] ** 2 + offsets[None, :] ** 2 <= radius ** 2
    out = label.copy()
    for value in np.unique(label):
        region = label == value
        kept = ndimage.binary_erosion(region, structure=structure, border_value=1)
        out[region & ~kept] = ignore_index
    return out


def _blocks(rng, shape, values, block, dtype):
    coarse = rng.integers(0, values, (shape[0] // block + 1, shape[1] // block + 1))
    return np.kron(coarse, np.ones((block, block), int))[:shape[0], :shape[1]].astype(dtype)


@pytest.mark.parametrize('radius', [1, 2, 3, 5])
@pytest.mark.parametrize('dtype', [np.uint8, np.int64])
def test_equals_scipy_erosion_per_region(radius, dtype):
    rng = np.random.default_rng(radius)
    label = _blocks(rng, (61, 47), 7, 9, dtype)
    label[rng.random(label.shape) < 0.01] = 3  # single pixels: regions thinner than a disc
    got = erode_label_boundaries(label, radius, 255)
    assert got.dtype == label.dtype
    np.testing.assert_array_equal(got, _reference(label, radius, 255))
    assert 0 < (got == 255).mean() < 1


def test_many_label_values_and_the_ignored_label_as_a_region():
    rng = np.random.default_rng(0)
    label = _blocks(rng, (80, 80), 400, 4, np.uint16)  # more values than uint8 can rank
    label[:10, :10] = 255  # an ignored area: its edge is a boundary like any other
    np.testing.assert_array_equal(erode_label_boundaries(label, 2, 1000),
                                  _reference(label, 2, 1000))


def test_the_image_border_erodes_nothing_and_one_region_is_unchanged():
    label = np.zeros((20, 30), np.uint8)
    label[:, 15:] = 4  # two regions meeting at a vertical line, both touching the border
    got = erode_label_boundaries(label, 3, 255)
    np.testing.assert_array_equal(np.flatnonzero((got == 255).all(axis=0)),
                                  np.arange(12, 18))  # 3 px on each side, every row
    assert (got[:, :12] == 0).all() and (got[:, 18:] == 4).all()
    np.testing.assert_array_equal(erode_label_boundaries(np.full((5, 5), 2, np.uint8)),
                                  np.full((5, 5), 2))


def test_the_disc():
    assert disc(3).sum() == 29 and disc(1).sum() == 5
    assert disc(3)[0, 3] == 1 and disc(3)[0, 2] == 0  # (3, 0) in, (3, 1) out: 10 > 9


def test_the_transform_from_a_pipeline_config():
    step = TRANSFORMS.build(dict(type='ErodeLabelBoundaries', radius=2, ignore_index=255))
    label = _blocks(np.random.default_rng(1), (30, 30), 4, 6, np.uint8)
    out = step(dict(gt_seg_map=label.copy(), img_path='a.png'))
    np.testing.assert_array_equal(out['gt_seg_map'], _reference(label, 2, 255))
    assert repr(step) == 'ErodeLabelBoundaries(radius=2, ignore_index=255)'


@pytest.mark.parametrize('kwargs, message', [
    (dict(radius=0), 'radius must be an integer in 1..255, got 0'),
    (dict(radius=2.5), 'radius must be an integer'),
    (dict(ignore_index=-1), 'ignore_index must be an integer in 0..65535'),
    (dict(ignore_index=True), 'ignore_index must be an integer'),
])
def test_bad_settings(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ErodeLabelBoundaries(**kwargs)


def test_bad_input():
    with pytest.raises(ValueError, match='needs gt_seg_map: put it after the annotation'):
        ErodeLabelBoundaries()(dict(img_path='x.png'))
    with pytest.raises(ValueError, match='2-D integer array'):
        erode_label_boundaries(np.zeros((4, 4), np.float32))
    with pytest.raises(ValueError, match='ignore_index must be an integer in 0..255'):
        erode_label_boundaries(np.zeros((4, 4), np.uint8), 3, 300)
