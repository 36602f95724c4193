"""REOBench's released corrupted sets (reobench_mm.datasets.converters.reobench_released):
moved DIOR boxes in the released text format -> the files DIORRDataset, DIORRXMLDataset
and MMRotate's DIORDataset read; released Potsdam label maps -> the package's label ids.

The released inputs are written here: boxes whose corners are moved by hand (numpy
formulas of rotation about the image centre, scaling about it and translation, at the
parameters of the package's severity tables), and label maps in the authors' encoding
(class-index PNGs, 0-4 the classes, 5 clutter)."""
import math
import os
import os.path as osp

import cv2
import numpy as np
import pytest
import torch

import reobench_mm  # noqa: F401  (registration)
from reobench_corruptions import get_corruption
from reobench_mm.datasets.converters import reobench_released as R
from reobench_mm.datasets.converters.dior_r import DIOR_R_CLASSES
from reobench_mm.datasets.dior_r import DIORRDataset, DIORRXMLDataset

SIZE = 800  # DIOR images are 800x800
CENTRE = np.array([SIZE / 2, SIZE / 2])
# (centre x, centre y, width, height, angle in degrees, class as written, difficulty)
BOXES = [(300.0, 250.0, 120.0, 40.0, 20.0, 'Airplane', 0),
         (610.0, 520.0, 60.0, 150.0, -35.0, 'Expressway-Service-area', 1),
         (60.0, 740.0, 90.0, 50.0, 10.0, 'vehicle', 0)]  # near the edge: moved partly out
# the folder names of the authors' DIOR configs (Detection/configs/DIOR/eval/<model>/)
DIOR_CONFIG_FOLDERS = {
    'brightness_contrast': 'brightness_contrast', 'clouds': 'cloud',
    'compression_artifacts': 'compression_artifacts', 'gaps': 'data_gaps',
    'gaussian_blur': 'gaussian_blur', 'gaussian_noise': 'gaussian_noise', 'haze': 'haze',
    'motion_blur': 'motion_blur', 'rotate': 'rotate',
    'salt_and_pepper_noise': 'salt_pepper_noise', 'scale': 'scale', 'translate': 'translate'}


def rectangle(cx, cy, w, h, degrees):
    """Corners left-top, right-top, right-bottom, left-bottom (DIOR-R's order)."""
    a = math.radians(degrees)
    u = np.array([math.cos(a), math.sin(a)]) * w / 2
    v = np.array([-math.sin(a), math.cos(a)]) * h / 2
    c = np.array([cx, cy])
    return np.stack([c - u - v, c + u - v, c + u + v, c - u + v])


def moved(corners, name, severity):
    """The corners moved by hand as the corruption moves the image content."""
    value = get_corruption(name, 'reobench').severities[severity - 1]
    d = corners - CENTRE
    if name == 'rotate':  # counter-clockwise on screen: the y axis points down
        t = math.radians(value)
        return CENTRE + np.stack([d[:, 0] * math.cos(t) + d[:, 1] * math.sin(t),
                                  -d[:, 0] * math.sin(t) + d[:, 1] * math.cos(t)], axis=1)
    if name == 'scale':  # about the centre
        return CENTRE + value * d
    return corners + np.array([value, -value])  # translate by (+t, -t)


CASES = [('rotate', 2), ('rotate', 5), ('scale', 1), ('scale', 5), ('translate', 1),
         ('translate', 4)]


def write_released_dior(root, cases=CASES, folders=None):
    """DIOR_corrupted/<folder>/<k>/ images and <k>labels/ DOTA lines of the moved boxes;
    image 11727 has the first box only, image 11728 has no label file."""
    expected = {}
    for name, severity in cases:
        folder = (folders or {}).get(name, name)
        images = osp.join(root, 'DIOR_corrupted', folder, str(severity))
        labels = images + 'labels'
        for path in (images, labels):
            os.makedirs(path, exist_ok=True)
        for image_id, boxes in (('11726', BOXES), ('11727', BOXES[:1]), ('11728', [])):
            cv2.imwrite(osp.join(images, f'{image_id}.jpg'), np.zeros((SIZE, SIZE, 3), np.uint8))
            if image_id == '11728':
                continue
            lines, objects = ['imagesource:GoogleEarth', 'gsd:null'], []
            for cx, cy, w, h, deg, cls, difficult in boxes:
                corners = moved(rectangle(cx, cy, w, h, deg), name, severity)
                lines.append(' '.join(f'{v:.6f}' for v in corners.reshape(-1))
                             + f' {cls} {difficult}')
                objects.append((corners, cls.lower(), difficult))
            with open(osp.join(labels, f'{image_id}.txt'), 'w') as handle:
                handle.write('\n'.join(lines) + '\n')
            expected[(name, severity, image_id)] = objects
    return expected


def le90(corners):
    """(cx, cy, w, h, angle) of a rectangle's corners, width the longer side and the
    angle in [-90°, 90°) (MMRotate's le90), computed from the corners by hand."""
    e1, e2 = corners[1] - corners[0], corners[2] - corners[1]
    w, h, t = np.hypot(*e1), np.hypot(*e2), math.atan2(e1[1], e1[0])
    if w < h:
        w, h, t = h, w, t + math.pi / 2
    t = (t + math.pi / 2) % math.pi - math.pi / 2
    cx, cy = corners.mean(axis=0)
    return np.array([cx, cy, w, h, t])


def infos(dataset, diff_thr=None):
    """The dataset's samples (its data list is serialised once built)."""
    out = [dataset.get_data_info(i) for i in range(len(dataset))]
    for info in out:
        assert osp.isfile(info['img_path'])
        if diff_thr is not None:
            info['diff_thr'] = diff_thr
    return out


def check_instances(data_list, expected, name, severity, atol):
    from mmrotate.structures.bbox import QuadriBoxes
    by_id = {info['img_id']: info for info in data_list}
    assert sorted(by_id) == ['11726', '11727']  # 11728 has no labels: not evaluated
    for image_id, info in by_id.items():
        objects = expected[(name, severity, image_id)]
        assert len(info['instances']) == len(objects)
        boxes = np.array([inst['bbox'] for inst in info['instances']], np.float64)
        hand = np.stack([corners.reshape(-1) for corners, _, _ in objects])
        assert np.allclose(boxes, hand, atol=atol)
        for inst, (_, cls, difficult) in zip(info['instances'], objects):
            assert inst['bbox_label'] == DIOR_R_CLASSES.index(cls)
            if 'diff_thr' in info:  # (not every reader keeps the difficulty)
                assert inst['ignore_flag'] == difficult
        # as the oriented boxes the pipeline makes of them (ConvertBoxType qbox -> rbox)
        rboxes = QuadriBoxes(torch.tensor(boxes, dtype=torch.float32)).convert_to('rbox')
        got = rboxes.regularize_boxes('le90').numpy()
        want = np.stack([le90(corners) for corners, _, _ in objects])
        assert np.allclose(got[:, :4], want[:, :4], atol=1e-2)
        turn = (got[:, 4] - want[:, 4] + math.pi / 2) % math.pi - math.pi / 2
        assert np.abs(turn).max() < 1e-4


@pytest.mark.parametrize('name, severity', CASES)
def test_moved_boxes_read_back_through_diorr_dataset(tmp_path, name, severity):
    expected = write_released_dior(str(tmp_path), cases=[(name, severity)])
    out = str(tmp_path / 'out')
    summary = R.convert_reobench_release(str(tmp_path), out, 'dior')
    record = summary['conditions'][f'{name}@{severity}']
    assert record['labels'] == 2 and record['unlabelled'] == 1 and record['objects'] == 4
    dataset = DIORRDataset(ann_file=osp.join(out, name, str(severity), 'annfiles'),
                           data_prefix=dict(img_path=osp.join(str(tmp_path), 'DIOR_corrupted',
                                                              name, str(severity))),
                           diff_thr=0, test_mode=True)
    check_instances(infos(dataset, 0), expected, name, severity, atol=1e-5)


@pytest.mark.parametrize('name, severity', [('rotate', 5), ('scale', 5), ('translate', 4)])
def test_moved_boxes_read_back_as_dior_r_xml(tmp_path, name, severity):
    """The XML layout, read by the package's DIORRXMLDataset and MMRotate's DIORDataset."""
    from mmrotate.datasets import DIORDataset
    expected = write_released_dior(str(tmp_path), cases=[(name, severity)])
    out = str(tmp_path / 'out')
    R.convert_reobench_release(str(tmp_path), out, 'dior', label_format='xml')
    folder = osp.join(out, name, str(severity))
    with open(osp.join(folder, 'test.txt')) as handle:
        assert handle.read().split() == ['11726', '11727']
    images = dict(img_path=osp.join(str(tmp_path), 'DIOR_corrupted', name, str(severity)))
    ours = DIORRXMLDataset(ann_file=osp.join(folder, 'test.txt'), data_prefix=images,
                           ann_subdir=osp.join(folder, 'Annotations'), diff_thr=0,
                           test_mode=True)
    assert [(i['width'], i['height']) for i in infos(ours)] == [(SIZE, SIZE)] * 2
    check_instances(infos(ours, 0), expected, name, severity, atol=1e-5)
    theirs = DIORDataset(ann_file=osp.join(folder, 'test.txt'), data_prefix=images,
                         ann_subdir=osp.join(folder, 'Annotations'), data_root='',
                         metainfo=dict(classes=DIOR_R_CLASSES), test_mode=True)
    check_instances(infos(theirs), expected, name, severity, atol=1e-3)


def test_the_folder_names_of_the_authors_code_are_one_table():
    for folder, corruption in DIOR_CONFIG_FOLDERS.items():
        assert R.corruption_of_folder(folder) == corruption
        assert R.corruption_of_folder(corruption) == corruption  # the package's own name
    assert set(DIOR_CONFIG_FOLDERS.values()) == set(R.RELEASED_FOLDER_NAMES)
    # the DIOR names come first: the option's folders='reobench' maps onto them
    assert {c: f for f, c in DIOR_CONFIG_FOLDERS.items() if f != c} == R.REOBENCH_FOLDERS
    # Potsdam configs and AID scripts
    for folder, corruption in (('translate_image', 'translate'), ('Rotate_New', 'rotate'),
                               ('scale_image', 'scale'), ('haze_update_new', 'haze'),
                               ('gaussian_noise_new', 'gaussian_noise'),
                               ('data_gaps', 'data_gaps'), ('translate_image_new', 'translate')):
        assert R.corruption_of_folder(folder) == corruption
    assert R.corruption_of_folder('fog') is None
    assert R.corruption_of_folder('fog', dict(fog='haze')) == 'haze'


def test_incomplete_and_unknown_folders_are_reported_and_left_to_synthesis(tmp_path):
    cases = [('rotate', s) for s in (1, 2, 3, 4, 5)] + [('scale', 1)]
    write_released_dior(str(tmp_path), cases=cases, folders=dict(rotate='rotate_new'))
    for severity in (1, 2, 3, 4, 5):  # cloud images, without labels (not geometric)
        folder = tmp_path / 'DIOR_corrupted' / 'clouds' / str(severity)
        folder.mkdir(parents=True)
        cv2.imwrite(str(folder / '11726.jpg'), np.zeros((8, 8, 3), np.uint8))
    translate = tmp_path / 'DIOR_corrupted' / 'translate' / '1'  # images, no labels
    translate.mkdir(parents=True)
    cv2.imwrite(str(translate / '11726.jpg'), np.zeros((8, 8, 3), np.uint8))
    (tmp_path / 'DIOR_corrupted' / 'fog' / '1').mkdir(parents=True)
    (tmp_path / 'DIOR_corrupted' / 'clouds' / '6').mkdir()
    out = str(tmp_path / 'out')
    with pytest.warns(UserWarning, match=r"no known corruption left out: "
                      r"\['clouds \(severity 6\)', 'fog'\]"):
        summary = R.convert_reobench_release(str(tmp_path / 'DIOR_corrupted'), out, 'dior')
    assert summary['complete'] == ['cloud', 'rotate']
    assert summary['incomplete']['scale'] == [f'severity {s}' for s in (2, 3, 4, 5)]
    assert summary['incomplete']['translate'][-1] == 'severity 1: no moved labels (1labels/)'
    option = summary['corruption_files']
    root = osp.abspath(str(tmp_path / 'DIOR_corrupted'))
    assert option == dict(
        dataset=dict(data_prefix=dict(img_path=osp.join(root, '{folder}', '{severity}'))),
        geometric=dict(ann_file=osp.join(osp.abspath(out), '{corruption}', '{severity}',
                                         'annfiles') + os.sep),
        folders=dict(cloud='clouds', rotate='rotate_new'), corruptions=['cloud', 'rotate'])
    namespace = {}
    with open(osp.join(out, 'corruption_files.py')) as handle:
        exec(handle.read(), namespace)  # the option file is Python a config can read
    assert namespace['corruption_files'] == option


def test_bad_released_folders_and_lines_are_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match='does not exist'):
        R.find_released_conditions(str(tmp_path / 'missing'), 'dior')
    with pytest.raises(ValueError, match="task must be one of"):
        R.find_released_conditions(str(tmp_path), 'aid')
    (tmp_path / 'other').mkdir()
    with pytest.raises(ValueError, match=r"no released dior folder .* found \['other'\]"):
        R.find_released_conditions(str(tmp_path), 'dior')
    for folder in ('rotate', 'rotate_new'):
        (tmp_path / folder / '1').mkdir(parents=True)
    with pytest.raises(ValueError, match="'rotate' and 'rotate_new' both hold rotate"):
        R.find_released_conditions(str(tmp_path), 'dior')
    with pytest.raises(ValueError, match=r"aliases name \['spin'\], not REOBench corruptions"):
        R.find_released_conditions(str(tmp_path), 'dior', aliases=dict(rot='spin'))
    label = tmp_path / 'bad.txt'
    label.write_text('1 2 3 4 5 6 7 8 airplane 0\n1 2 3 4 5 6 airplane\n')
    with pytest.raises(ValueError, match=r'bad.txt:2: expected x1 y1 \.\.\. x4 y4 class'):
        R.parse_released_labels(str(label))
    label.write_text('1 2 3 4 5 nan 7 8 airplane 0\n')
    with pytest.raises(ValueError, match='bad.txt:1: coordinates must be finite'):
        R.parse_released_labels(str(label))
    label.write_text('1 2 3 4 5 6 7 8 cat 0\n1 2 3 4 5 6 7 8 SHIP\n')
    objects, skipped = R.parse_released_labels(str(label))
    assert [(o.name, o.difficult) for o in objects] == [('ship', 0)] and skipped == {'cat': 1}


# ---------------------------------------------------------------------------- Potsdam
# released ids: 0-4 the five classes, 5 clutter, 255 and 9 (no label: not an id of theirs)
RELEASED_IDS = np.array([[0, 1, 2, 3, 4, 5, 255, 9]] * 3, np.uint8)


def write_released_potsdam(root, folder='translate_image', label=RELEASED_IDS):
    for severity in (1, 2, 3, 4, 5):
        base = osp.join(root, 'Potsdam_corrupted', folder, f'severity_{severity}')
        for sub in ('val', 'label'):
            os.makedirs(osp.join(base, sub), exist_ok=True)
        for name in ('2_13_0_0_512_512.png', '2_13_512_0_1024_512.png'):
            cv2.imwrite(osp.join(base, 'val', name), np.zeros(label.shape[:2] + (3, ), np.uint8))
        # one map as one grey channel, the other as RGB with equal channels
        cv2.imwrite(osp.join(base, 'label', '2_13_0_0_512_512.png'), label)
        cv2.imwrite(osp.join(base, 'label', '2_13_512_0_1024_512.png'),
                    np.repeat(label[..., None], 3, axis=2) if label.ndim == 2 else label)


@pytest.mark.parametrize('num_classes', [5, 6])
def test_released_potsdam_label_maps_decode_to_the_class_indices(tmp_path, num_classes):
    """Converted, then loaded as MMSegmentation loads the package's Potsdam labels
    (LoadAnnotations with reduce_zero_label=True): the classes 0-4, clutter 5 with six
    classes or ignored (255) with five, and the values that are no id ignored."""
    from mmseg.datasets.transforms import LoadAnnotations
    write_released_potsdam(str(tmp_path))
    out = str(tmp_path / 'out')
    summary = R.convert_reobench_release(str(tmp_path), out, 'potsdam',
                                         num_classes=num_classes)
    assert summary['complete'] == ['translate']
    assert summary['corruption_files']['folders'] == dict(translate='translate_image')
    want = np.where(RELEASED_IDS < 5, RELEASED_IDS, 255).astype(np.uint8)
    if num_classes == 6:
        want[RELEASED_IDS == 5] = 5
    for name in ('2_13_0_0_512_512.png', '2_13_512_0_1024_512.png'):
        path = osp.join(out, 'translate', '3', 'ann_dir', name)
        assert cv2.imread(path, cv2.IMREAD_UNCHANGED).ndim == 2
        loaded = LoadAnnotations(reduce_zero_label=True)(
            dict(seg_map_path=path, reduce_zero_label=True, seg_fields=[]))
        assert (loaded['gt_seg_map'] == want).all()


def test_colour_label_maps_and_images_without_labels_are_refused(tmp_path):
    colour = np.zeros((3, 4, 3), np.uint8)
    colour[:, :2] = (255, 0, 0)  # ISPRS colours: not what the authors' loader reads
    write_released_potsdam(str(tmp_path), label=colour)
    with pytest.raises(ValueError, match='is a colour image: the released label maps are '
                       'class-index PNGs'):
        R.convert_reobench_release(str(tmp_path), str(tmp_path / 'out'), 'potsdam')
    with pytest.raises(ValueError, match='num_classes must be 5'):
        R.decode_released_potsdam_mask(str(tmp_path / 'x.png'), num_classes=4)
    write_released_potsdam(str(tmp_path / 'b'), folder='rotate')
    os.remove(str(tmp_path / 'b' / 'Potsdam_corrupted' / 'rotate' / 'severity_2' / 'label'
                  / '2_13_0_0_512_512.png'))
    summary = R.convert_reobench_release(str(tmp_path / 'b'), str(tmp_path / 'out_b'),
                                         'potsdam')
    assert summary['complete'] == [] and summary['incomplete'] == {'rotate': [
        'severity 2: 1 image(s) without a label map, e.g. 2_13_0_0_512_512.png']}
    assert 'geometric' not in summary['corruption_files']
