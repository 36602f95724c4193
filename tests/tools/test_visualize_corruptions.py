"""tools/analysis_tools/visualize_corruptions.py and the grid behind it."""
import os
import os.path as osp

import cv2
import numpy as np
import pytest

from helpers import tool_result
from reobench_corruptions import corrupt, corrupt_geometric, list_corruptions
from reobench_corruptions.preview import (CAPTION, DEFAULT_OVERLAY_ALPHA, HEADER,
                                          POTSDAM_PALETTE, class_boundaries, corruption_grid,
                                          overlay_label_map, tile_view)

TOP = CAPTION + HEADER  # caption band + column titles


def _tool(*args):
    return tool_result('analysis_tools/visualize_corruptions.py', args)


def _label_width(names):
    return max(cv2.getTextSize(n, cv2.FONT_HERSHEY_SIMPLEX, 0.45, 1)[0][0] for n in names) + 12


def _tile(grid, names, row, severity, width, height):
    y0 = TOP + row * (height + 4)
    x0 = _label_width(names) + severity * (width + 4)
    return grid[y0:y0 + height, x0:x0 + width]


def _random_image(height, width, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)


# ----------------------------------------------------------------------------- real size
def test_default_is_a_real_size_crop_of_reasonable_width():
    """A 512-px tile is shown at real size by default, in a grid under 1000 px wide
    (the whole-image view shrank it to 160 px; 512-px tiles made it 3,215 px wide)."""
    view = tile_view((512, 512, 3))
    assert view.real_size and view.scale == (1.0, 1.0)
    assert (view.x0, view.y0, view.width, view.height) == (192, 192, 128, 128)
    image = _random_image(512, 512)
    names = list_corruptions('reobench')
    grid = corruption_grid(image, corruptions=names, key='tile.png')
    assert grid.shape == (TOP + 12 * 132, _label_width(names) + 6 * 132, 3)
    assert grid.shape[1] <= 1000
    # the downscaled view is still there, as an option
    whole = tile_view((512, 512, 3), 'whole')
    assert not whole.real_size and (whole.tile_width, whole.width) == (160, 512)


@pytest.mark.parametrize('crop', [dict(), dict(crop_size=(64, 100), crop_origin=(5, 170)),
                                  dict(crop_size=500)])
def test_crop_shows_the_corrupted_pixels_unscaled(crop):
    """Each tile is the corrupted full image's pixels, cut out, not resampled."""
    image = _random_image(300, 200, seed=1)
    names = ['gaussian_noise', 'gaussian_blur', 'compression_artifacts', 'translate']
    grid = corruption_grid(image, corruptions=names, key='a.png', **crop)
    view = tile_view(image.shape, **crop)
    if crop.get('crop_size') == 500:  # clipped to the image: all of it at real size
        assert (view.x0, view.y0, view.width, view.height) == (0, 0, 200, 300)
    for row, name in enumerate(names):
        for severity in range(6):
            if name == 'translate':
                full, _ = corrupt_geometric(image, name, severity, key='a.png')
            else:
                full = corrupt(image, name, severity, key='a.png')
            expected = full[view.y0:view.y0 + view.height, view.x0:view.x0 + view.width]
            shown = _tile(grid, names, row, severity, view.width, view.height)
            np.testing.assert_array_equal(shown, expected, err_msg=f'{name} {severity}')


def test_view_options_are_checked():
    shape = (100, 80, 3)
    assert tile_view(shape, crop_size=(30, 20), crop_origin=(50, 80)).x0 == 50
    for kwargs, message in [
            (dict(crop_origin=(51, 0), crop_size=30), 'does not fit'),
            (dict(crop_origin=(-1, 0)), 'does not fit'),
            (dict(crop_size=0), 'crop_size must be >= 1'),
            (dict(crop_size=(1, 2, 3)), 'pair of integers'),
            (dict(crop_size=2.5), 'pair of integers'),
            (dict(tile_size=64), "tiles of view='whole'"),
            (dict(view='whole', crop_origin=(0, 0)), "crop of view='crop'"),
            (dict(view='whole', tile_size=0), 'tile_size must be'),
            (dict(view='zoom'), 'view must be one of')]:
        with pytest.raises(ValueError, match=message):
            tile_view(shape, **kwargs)
    with pytest.raises(ValueError, match='overlay_alpha'):
        corruption_grid(np.zeros(shape, np.uint8), corruptions=['haze'], overlay_alpha=1.5)


# ----------------------------------------------------------------------------- overlays
def test_label_overlay_is_a_light_blend_with_opaque_boundaries():
    tile = _random_image(40, 50, seed=2)
    labels = np.full((40, 50), 3, np.uint8)
    labels[10:30, 20:40] = 2
    labels[:, :5] = 255  # unlabelled
    out = overlay_label_map(tile, labels)
    boundaries = class_boundaries(labels)
    # both sides of the class edge, nothing next to the unlabelled strip
    assert boundaries[10, 25] and boundaries[9, 25] and not boundaries[20, 30]
    assert not boundaries[:, 4:6].any()
    inside = (labels != 255) & ~boundaries
    assert DEFAULT_OVERLAY_ALPHA <= 0.25, 'the labels must not hide the corruption'
    colours = POTSDAM_PALETTE[np.clip(labels, 0, 6)].astype(float)
    expected = np.rint((1 - DEFAULT_OVERLAY_ALPHA) * tile + DEFAULT_OVERLAY_ALPHA * colours)
    np.testing.assert_array_equal(out[inside], expected[inside])
    np.testing.assert_array_equal(out[boundaries], POTSDAM_PALETTE[labels[boundaries]])
    np.testing.assert_array_equal(out[labels == 255], tile[labels == 255])
    # alpha 0: the image untouched but for the boundaries
    bare = overlay_label_map(tile, labels, alpha=0.0)
    np.testing.assert_array_equal(bare[~boundaries], tile[~boundaries])


def test_label_map_moves_with_the_pixels_in_a_crop():
    image = _random_image(96, 96, seed=3)
    labels = np.ones((96, 96), np.uint8)
    labels[30:60, 40:70] = 2
    crop = dict(crop_size=48, crop_origin=(30, 20))
    grid = corruption_grid(image, corruptions=['translate'], key='b.png', label_map=labels,
                           **crop)
    view = tile_view(image.shape, **crop)
    for severity in range(6):
        out, geometry = corrupt_geometric(image, 'translate', severity, key='b.png')
        moved = geometry.warp_label_map(labels, 255)
        window = (slice(20, 68), slice(30, 78))
        expected = overlay_label_map(out[window], moved[window],
                                     boundaries=class_boundaries(moved)[window])
        np.testing.assert_array_equal(_tile(grid, ['translate'], 0, severity, 48, 48),
                                      expected, err_msg=str(severity))
    assert view.real_size


def _red(tile):
    return (tile[..., 0] > 200) & (tile[..., 1] < 110) & (tile[..., 2] < 110)


def test_grid_layout_and_moving_overlays_whole_view():
    image = np.full((128, 128, 3), 90, np.uint8)
    polygons = np.array([[40, 40, 80, 40, 80, 60, 40, 60]], np.float64)
    grid = corruption_grid(image, corruptions=['haze', 'translate'], view='whole',
                           tile_size=128, polygons=polygons)
    # the label column fits the longest name ('translate') with a margin
    label = _label_width(['translate'])
    assert grid.shape == (TOP + 2 * 132, label + 6 * 132, 3)
    red = _red(grid)
    row2 = slice(TOP + 132, TOP + 132 + 128)
    clean = red[row2, label:label + 128]
    translated = red[row2, label + 132 * 5:label + 132 * 5 + 128]
    assert red[TOP:TOP + 128, label:label + 128].any() and clean.any() and translated.any()
    shift = np.argwhere(translated).mean(0) - np.argwhere(clean).mean(0)
    assert np.allclose(np.abs(shift), 35, atol=1.5), 'the box moved with the pixels'


@pytest.mark.parametrize('view', [dict(crop_size=96, crop_origin=(70, 90)),
                                  dict(view='whole', tile_size=160)])
def test_boxes_stay_on_their_objects(view):
    """The outline of a white square drawn in the image surrounds the square's pixels in
    every tile, geometric corruptions and crops included."""
    image = np.full((256, 256, 3), 90, np.uint8)
    image[120:150, 100:130] = 250
    polygons = np.array([[100, 120, 130, 120, 130, 150, 100, 150]], np.float64)
    names = ['rotate', 'scale', 'translate']
    grid = corruption_grid(image, corruptions=names, key='c.png', polygons=polygons, **view)
    shown = tile_view(image.shape, **view)
    for row, name in enumerate(names):
        for severity in range(6):
            tile = _tile(grid, names, row, severity, shown.tile_width, shown.tile_height)
            outline, square = np.argwhere(_red(tile)), np.argwhere((tile > 170).all(-1))
            assert len(outline) and len(square), (name, severity)
            # the outline's extent is the square's, to the width of the anti-aliased line
            assert (np.abs(outline.min(0) - square.min(0)) <= 2).all(), (name, severity)
            assert (np.abs(outline.max(0) - square.max(0)) <= 2).all(), (name, severity)


def test_grid_text_fits_its_cells():
    """Row names never run into the first tile, column titles never into each other,
    the caption stays inside the grid."""
    image = np.full((64, 64, 3), 90, np.uint8)
    names = ['poisson_gaussian_noise', 'cloud_shadow']
    for kwargs, tile in [(dict(view='whole', tile_size=24), 24),
                         (dict(view='whole', tile_size=48), 48),
                         (dict(view='whole', tile_size=160), 160), (dict(crop_size=20), 20),
                         (dict(), 64)]:
        grid = corruption_grid(image, 'geofm_calibration', names, **kwargs)
        label = _label_width(names)
        assert grid.shape[1] == label + 6 * (tile + 4)
        caption = grid[:CAPTION] < 128
        assert caption.any() and not caption[:, -4:].any(), kwargs
        header = grid[CAPTION:TOP] < 128  # dark text pixels of the column titles
        for column in range(6):
            gap = label + column * (tile + 4) + tile  # the 4-pixel gap after each tile
            assert not header[:, gap:gap + 3].any(), (tile, column)
        names_area = grid[TOP:, :label] < 128
        assert names_area.any() and not names_area[:, -4:].any()


def test_caption_says_what_the_tiles_show():
    crop = tile_view((256, 300), crop_origin=(10, 20)).describe()[0]
    assert crop.startswith('real size') and '128x128 crop at x=10, y=20 of the 300x256' in crop
    whole = tile_view((256, 300), 'whole').describe()[0]
    assert 'whole 300x256 image' in whole and 'not real size' in whole


# ----------------------------------------------------------------------------- the tool
def test_tool_with_each_annotation_format(demo_data, tmp_path):
    potsdam = osp.join(demo_data, 'potsdam')
    name = sorted(os.listdir(osp.join(potsdam, 'img_dir', 'val')))[0]
    out = tmp_path / 'seg.png'
    result = _tool(osp.join(potsdam, 'img_dir', 'val', name), '--ann',
                   osp.join(potsdam, 'ann_dir', 'val', name), '--corruptions', 'geometric',
                   'haze', '--view', 'whole', '--tile-size', '64', '--ann-alpha', '0.1',
                   '--out', str(out))
    assert result.returncode == 0, result.stderr
    assert '4 corruptions' in result.stdout and 'scaled 0.25x' in result.stdout
    assert cv2.imread(str(out)).shape[:2] == (TOP + 4 * 68, _label_width(['translate']) +
                                              6 * 68)

    dior = osp.join(demo_data, 'dior')
    out = tmp_path / 'det.png'
    first = open(osp.join(dior, 'ImageSets', 'Main', 'test.txt')).read().split()[0]
    result = _tool(osp.join(dior, 'JPEGImages-test', first + '.jpg'), '--ann',
                   osp.join(dior, 'Annotations', 'Oriented Bounding Boxes', first + '.xml'),
                   '--protocol', 'geofm_calibration', '--crop-size', '100', '80',
                   '--crop-origin', '10', '150', '--out', str(out))
    assert result.returncode == 0, result.stderr
    assert 'real size: 100x80 crop at x=10, y=150 of 256x256' in result.stdout
    assert cv2.imread(str(out)).shape[0] == TOP + 3 * 84


def test_tool_on_real_dota_annotations(real_samples, tmp_path):
    out = tmp_path / 'dota.png'
    result = _tool(osp.join(real_samples, 'dota', 'demo.jpg'), '--ann',
                   osp.join(real_samples, 'dota', 'P2805__1024__0___0.txt'), '--corruptions',
                   'rotate', '--out', str(out))
    assert result.returncode == 0, result.stderr
    assert 'real size: 128x128 crop' in result.stdout


@pytest.mark.parametrize('args,message', [
    (['missing.png'], 'cannot read image'),
    (['{img}', '--ann', 'nope.json'], 'does not exist'),
    (['{img}', '--ann', '{img}'], 'not a label map'),
    (['{img}', '--corruptions', 'fog'], "unknown corruption 'fog'"),
    (['{img}', '--tile-size', '64'], '--tile-size sets the tiles of --view whole'),
    (['{img}', '--view', 'whole', '--crop-size', '8'], '--crop-size and --crop-origin'),
    (['{img}', '--crop-size', '8', '8', '8'], 'one number (a square) or WIDTH HEIGHT'),
    (['{img}', '--crop-origin', '20', '0'], 'does not fit in the 24x16 image'),
    (['{img}', '--ann-alpha', '2'], '--ann-alpha must be'),
])
def test_tool_bad_input(tmp_path, args, message):
    image = tmp_path / 'x.png'
    cv2.imwrite(str(image), np.zeros((16, 24, 3), np.uint8))
    result = _tool(*[a.format(img=image) for a in args], '--out', str(tmp_path / 'o.png'))
    assert result.returncode != 0 and message in result.stderr
    assert result.stderr.strip().startswith('error:') and 'Traceback' not in result.stderr
