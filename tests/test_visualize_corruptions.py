"""tools/analysis_tools/visualize_corruptions.py and the grid behind it."""
import os
import os.path as osp
import subprocess
import sys

import cv2
import numpy as np
import pytest

from conftest import PROJECT_ROOT
from reobench_mm.corruptions.preview import corruption_grid


def _tool(*args):
    return subprocess.run([sys.executable, 'tools/analysis_tools/visualize_corruptions.py', *args],
                          cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)


def test_grid_layout_and_moving_overlays():
    image = np.full((128, 128, 3), 90, np.uint8)
    polygons = np.array([[40, 40, 80, 40, 80, 60, 40, 60]], np.float64)
    grid = corruption_grid(image, corruptions=['haze', 'translate'], tile_size=128,
                           polygons=polygons)
    # the label column fits the longest name ('translate') with a margin
    label = cv2.getTextSize('translate', cv2.FONT_HERSHEY_SIMPLEX, 0.45, 1)[0][0] + 12
    assert grid.shape == (22 + 2 * 132, label + 6 * 132, 3)
    red = (grid[..., 0] > 200) & (grid[..., 1] < 80)
    row2 = slice(22 + 132, 22 + 132 + 128)
    clean = red[row2, label:label + 128]
    translated = red[row2, label + 132 * 5:label + 132 * 5 + 128]
    assert red[22:150, label:label + 128].any() and clean.any() and translated.any()
    shift = np.argwhere(translated).mean(0) - np.argwhere(clean).mean(0)
    assert np.allclose(np.abs(shift), 35, atol=1.5), 'the box moved with the pixels'


def test_grid_text_fits_its_cells():
    """Row names never run into the first tile, column titles never into each other."""
    image = np.full((64, 64, 3), 90, np.uint8)
    names = ['poisson_gaussian_noise', 'cloud_shadow']
    for tile in (24, 48, 160):
        grid = corruption_grid(image, 'geofm_calibration', names, tile_size=tile)
        label = max(cv2.getTextSize(n, cv2.FONT_HERSHEY_SIMPLEX, 0.45, 1)[0][0]
                    for n in names) + 12
        assert grid.shape[1] == label + 6 * (tile + 4)
        header = grid[:22] < 128  # dark text pixels of the column titles
        for column in range(6):
            gap = label + column * (tile + 4) + tile  # the 4-pixel gap after each tile
            assert not header[:, gap:gap + 3].any(), (tile, column)
        names_area = grid[22:, :label] < 128
        assert names_area.any() and not names_area[:, -4:].any()


@pytest.mark.slow
def test_tool_with_each_annotation_format(demo_data, tmp_path):
    potsdam = osp.join(demo_data, 'potsdam')
    name = sorted(os.listdir(osp.join(potsdam, 'img_dir', 'val')))[0]
    out = tmp_path / 'seg.png'
    result = _tool(osp.join(potsdam, 'img_dir', 'val', name), '--ann',
                   osp.join(potsdam, 'ann_dir', 'val', name), '--corruptions', 'geometric',
                   'haze', '--tile-size', '64', '--out', str(out))
    assert result.returncode == 0, result.stderr
    assert '4 corruptions' in result.stdout and cv2.imread(str(out)) is not None

    dior = osp.join(demo_data, 'dior')
    out = tmp_path / 'det.png'
    first = open(osp.join(dior, 'ImageSets', 'Main', 'test.txt')).read().split()[0]
    result = _tool(osp.join(dior, 'JPEGImages-test', first + '.jpg'), '--ann',
                   osp.join(dior, 'Annotations', 'Oriented Bounding Boxes', first + '.xml'),
                   '--protocol', 'geofm_calibration', '--tile-size', '64', '--out', str(out))
    assert result.returncode == 0, result.stderr
    assert cv2.imread(str(out)).shape[0] == 22 + 3 * 68


def test_tool_on_real_dota_annotations(real_samples, tmp_path):
    out = tmp_path / 'dota.png'
    result = _tool(osp.join(real_samples, 'dota', 'demo.jpg'), '--ann',
                   osp.join(real_samples, 'dota', 'P2805__1024__0___0.txt'), '--corruptions',
                   'rotate', '--tile-size', '48', '--out', str(out))
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize('args,message', [
    (['missing.png'], 'cannot read image'),
    (['{img}', '--ann', 'nope.json'], 'does not exist'),
    (['{img}', '--ann', '{img}'], 'not a label map'),
    (['{img}', '--corruptions', 'fog'], "unknown corruption 'fog'"),
])
def test_tool_bad_input(tmp_path, args, message):
    image = tmp_path / 'x.png'
    cv2.imwrite(str(image), np.zeros((16, 24, 3), np.uint8))
    result = _tool(*[a.format(img=image) for a in args], '--out', str(tmp_path / 'o.png'))
    assert result.returncode != 0 and message in result.stderr
