"""The cheap checks of image and label files before a run reads them: each problem named
in words, valid files of every format OpenCV writes passed, and the reason the checks
exist: OpenCV decodes a truncated JPEG or PNG without an error."""
import os.path as osp

import cv2
import numpy as np
import pytest

from reobench_mm.datasets.image_files import (dataset_file_problems, describe_file_problems,
                                              image_file_problem)


def _image(seed=0, size=(64, 48)):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (*size, 3), dtype=np.uint8)


@pytest.mark.parametrize('suffix', ['.png', '.jpg', '.tif', '.bmp', '.webp'])
def test_valid_files_of_every_format_pass(tmp_path, suffix):
    path = str(tmp_path / f'a{suffix}')
    assert cv2.imwrite(path, _image())
    assert image_file_problem(path) is None
    label = str(tmp_path / f'label{suffix}')
    if suffix in ('.png', '.tif', '.bmp'):
        assert cv2.imwrite(label, np.arange(64 * 48, dtype=np.uint8).reshape(64, 48) % 6)
        assert image_file_problem(label) is None


def _truncated(tmp_path, suffix, keep):
    path = str(tmp_path / f'full{suffix}')
    cv2.imwrite(path, _image(1, (256, 256)))
    data = open(path, 'rb').read()
    cut = str(tmp_path / f'cut{suffix}')
    with open(cut, 'wb') as handle:
        handle.write(data[:int(len(data) * keep)])
    return cut


def test_each_problem_is_named(tmp_path):
    empty = tmp_path / 'empty.png'
    empty.write_bytes(b'')
    assert image_file_problem(str(empty)) == 'is empty (0 bytes)'
    text = tmp_path / 'text.png'
    text.write_text('version https://git-lfs.github.com/spec/v1\n')
    assert image_file_problem(str(text)).startswith("holds text (b'version https://git")
    noise = tmp_path / 'noise.jpg'
    noise.write_bytes(bytes(range(200, 256)) * 4)
    assert 'is not an image of a format OpenCV decodes (its first bytes c8 c9' in \
        image_file_problem(str(noise))
    assert image_file_problem(str(tmp_path / 'missing.png')) == 'does not exist'
    assert image_file_problem(str(tmp_path)) == 'is a folder, not a file'
    for suffix, name in (('.png', 'PNG'), ('.jpg', 'JPEG')):
        cut = _truncated(tmp_path, suffix, 0.6)
        assert image_file_problem(cut).startswith(f'is a {name} file cut short: it lacks')
    cut = _truncated(tmp_path, '.tif', 0.6)
    assert 'is a TIFF file whose first image directory lies at byte' in image_file_problem(cut)
    # a file of a format the checks do not know is not judged (another loader reads it)
    other = tmp_path / 'bands.npy'
    np.save(other, np.zeros((4, 4, 6)))
    assert image_file_problem(str(other)) is None


def test_opencv_decodes_a_truncated_jpeg_silently(tmp_path):
    """Why the end markers are checked: no error, the lost rows filled in."""
    cut = _truncated(tmp_path, '.jpg', 0.6)
    decoded = cv2.imread(cut)
    assert decoded is not None and decoded.shape == (256, 256, 3)


def test_a_datasets_files_are_counted_and_the_first_named(tmp_path):
    class Listed:
        def __init__(self, infos):
            self.infos = infos

        def __len__(self):
            return len(self.infos)

        def get_data_info(self, index):
            return dict(self.infos[index])

    good = str(tmp_path / 'good.png')
    cv2.imwrite(good, _image())
    bad = []
    for number in range(7):
        path = tmp_path / f'bad{number}.png'
        path.write_bytes(b'')
        bad.append(str(path))
    infos = [dict(img_path=good, seg_map_path=good)] + [
        dict(img_path=p, seg_map_path=good) for p in bad] + [dict(img_path='s3://b/x.png')]
    problems, count, checked = dataset_file_problems(Listed(infos))
    assert (count, checked) == (7, 16) and len(problems) == 5
    assert problems[0] == f'{osp.normpath(bad[0])} is empty (0 bytes)'
    line = describe_file_problems('shift set \'far\'', Listed(infos))
    assert line.startswith("shift set 'far': 7 of its 16 image and label files cannot be "
                           f'decoded: {bad[0]} is empty (0 bytes); ')
    assert '; and 2 more. Replace or remove them' in line
    assert describe_file_problems('x', Listed(infos[:1])) is None
    # an image and its label map of different sizes (released files mixed up)
    small = str(tmp_path / 'small.png')
    cv2.imwrite(small, np.zeros((32, 32), np.uint8))
    problems, count, _ = dataset_file_problems(Listed([dict(img_path=good,
                                                            seg_map_path=small)]))
    assert count == 1 and problems == [
        f'{osp.normpath(good)} is 64×48 but its label map {osp.normpath(small)} is 32×32 '
        '(an image and its labels must be the same size)']
    assert dataset_file_problems(object()) == ([], 0, 0)
