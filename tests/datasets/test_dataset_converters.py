"""Dataset converters: ISPRS Potsdam tiles -> patches, DIOR-R XML -> DOTA text.

The inputs are generated here in the official formats (small tiles instead of
6000x6000 ones), converted, and read back through real dataset objects of
MMSegmentation / MMRotate and of this package.
"""
import inspect
import os
import os.path as osp
import zipfile

import cv2
import numpy as np
import pytest

import reobench_mm  # noqa: F401  (registration)
from reobench_mm.datasets import synthetic
from reobench_mm.datasets.converters import potsdam as P
from reobench_mm.datasets.converters.dior_r import (DIOR_R_CLASSES, convert_dior_r, dota_line,
                                                    parse_dior_xml)
from reobench_mm.datasets.dior_r import DIORRDataset, DIORRXMLDataset

TILE = 1100  # -> 3x3 patches of 512 starting at 0, 512 and 588
STARTS = (0, 512, 588)
UNKNOWN_COLOUR = (12, 34, 56)


# --------------------------------------------------------------------------- Potsdam
def tile_image(tile: str, size: int = TILE) -> np.ndarray:
    """A deterministic RGB tile whose pixels encode their position and the tile."""
    a, b = (int(v) for v in tile.split('_'))
    ys, xs = np.mgrid[0:size, 0:size]
    return np.stack([(xs + a) % 256, (ys + b) % 256, (xs // 256 + 4 * (ys // 256)) * 10],
                    axis=-1).astype(np.uint8)


def tile_label_ids(size: int = TILE, eroded: bool = False) -> np.ndarray:
    """Label ids 1..6 in vertical stripes of 100 px, row 0..9 of the eroded one black (0),
    and an unknown-colour square (-1) at [1000:1050, 1000:1050]."""
    ids = (np.arange(size)[None, :].repeat(size, 0) // 100) % 6 + 1
    ids = ids.astype(np.int16)
    if eroded:
        ids[:10] = 0
    ids[1000:1050, 1000:1050] = -1
    return ids


def colourise(ids: np.ndarray) -> np.ndarray:
    lut = {0: (0, 0, 0), -1: UNKNOWN_COLOUR}
    lut.update({i + 1: P.POTSDAM_COLOURS[n] for i, n in enumerate(P.POTSDAM_CLASSES)})
    rgb = np.zeros(ids.shape + (3, ), np.uint8)
    for value, colour in lut.items():
        rgb[ids == value] = colour
    return rgb


def tif_bytes(rgb: np.ndarray) -> bytes:
    ok, buf = cv2.imencode('.tif', np.ascontiguousarray(rgb[..., ::-1]))
    assert ok
    return buf.tobytes()


def write_release(root, tiles, as_zip=True, modality='RGB', skip_labels=(), skip_images=()):
    """The official files: image, full and eroded labels, as zips or extracted folders."""
    products = {
        f'2_Ortho_{modality}' if modality == 'RGB' else '3_Ortho_IRRG':
        lambda t: (f'top_potsdam_{t}_{modality}.tif', tile_image(t)),
        '5_Labels_all': lambda t: (f'top_potsdam_{t}_label.tif', colourise(tile_label_ids())),
        '5_Labels_all_noBoundary': lambda t: (f'top_potsdam_{t}_label_noBoundary.tif',
                                              colourise(tile_label_ids(eroded=True))),
    }
    os.makedirs(root, exist_ok=True)
    for product, make in products.items():
        skip = skip_images if 'Ortho' in product else skip_labels
        members = {}
        for t in tiles:
            if t not in skip:
                name, rgb = make(t)
                members[name] = tif_bytes(rgb)
        if as_zip:
            with zipfile.ZipFile(osp.join(root, product + '.zip'), 'w') as z:
                for name, data in members.items():
                    # the image zips hold a folder, the label zips do not
                    z.writestr(f'{product}/{name}' if 'Ortho' in product else name, data)
                z.writestr(f'{product}/top_potsdam_2_10_RGB.tfw', b'0.05\n')
        else:
            os.makedirs(osp.join(root, product), exist_ok=True)
            for name, data in members.items():
                with open(osp.join(root, product, name), 'wb') as f:
                    f.write(data)


def read_png(path):
    array = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    assert array is not None, path
    return array[..., ::-1] if array.ndim == 3 else array


SPLITS = {'train': ('2_10', '6_7'), 'val': ('7_13', )}


def test_patch_grid_matches_the_paper_counts():
    starts = P.patch_starts(6000, 512)
    assert starts == list(range(0, 5121, 512)) + [5488]
    assert len(P.patch_boxes(6000, 6000, 512)) == 144
    assert len(P.POTSDAM_SPLITS['train']) == 24 and len(P.POTSDAM_SPLITS['val']) == 14
    assert not set(P.POTSDAM_SPLITS['train']) & set(P.POTSDAM_SPLITS['val'])
    assert 144 * len(P.POTSDAM_SPLITS['train']) == 3456
    assert 144 * len(P.POTSDAM_SPLITS['val']) == 2016
    assert P.patch_starts(TILE, 512) == list(STARTS)
    assert P.patch_starts(1024, 512) == [0, 512]
    with pytest.raises(ValueError, match='smaller than the patch size'):
        P.patch_starts(500, 512)


def test_label_convention_agrees_with_mmseg_and_the_synthetic_writer():
    from mmseg.datasets import PotsdamDataset
    meta = PotsdamDataset.METAINFO
    assert tuple(meta['classes']) == P.POTSDAM_CLASSES
    assert [tuple(c) for c in meta['palette']] == [P.POTSDAM_COLOURS[n] for n in P.POTSDAM_CLASSES]
    # 0 is the ignore value: the dataset reads with reduce_zero_label=True by default
    assert inspect.signature(PotsdamDataset).parameters['reduce_zero_label'].default is True
    # the synthetic writer uses ids 1..6 in the same class order, 0 ignored
    assert synthetic.POTSDAM_CLASSES == P.POTSDAM_CLASSES
    assert synthetic.POTSDAM_LABEL_IDS == {n: i + 1 for i, n in enumerate(P.POTSDAM_CLASSES)}


def test_colour_to_label_ids_and_ignore():
    colours = [P.POTSDAM_COLOURS[n] for n in P.POTSDAM_CLASSES] + [(0, 0, 0), UNKNOWN_COLOUR,
                                                                  (254, 255, 255)]
    rgb = np.array(colours, np.uint8)[None]
    assert P.colour_to_label(rgb).tolist() == [[1, 2, 3, 4, 5, 6, 0, 0, 0]]
    assert P.colour_to_label(rgb, num_classes=5).tolist() == [[1, 2, 3, 4, 5, 0, 0, 0, 0]]
    with pytest.raises(ValueError, match='num_classes'):
        P.colour_to_label(rgb, num_classes=4)


def test_real_potsdam_label_roundtrips_through_colours(real_samples):
    ids = cv2.imread(osp.join(real_samples, 'potsdam', '2_10_0_0_512_512_ann.png'),
                     cv2.IMREAD_UNCHANGED)
    assert ids.dtype == np.uint8 and set(np.unique(ids)) <= set(range(7))
    # the sample is an eroded patch: 0 marks boundaries, 1..5 are present, no clutter
    assert set(np.unique(ids)) == {0, 1, 2, 3, 4, 5}
    assert np.array_equal(P.colour_to_label(colourise(ids.astype(np.int16))), ids)


@pytest.mark.parametrize('as_zip', [True, False], ids=['zips', 'folders'])
def test_convert_potsdam_patches(tmp_path, as_zip):
    src, out = tmp_path / 'release', tmp_path / 'out'
    write_release(str(src), ['2_10', '6_7', '7_13', '3_13'], as_zip=as_zip)
    summary = P.convert_potsdam(str(src), str(out), tile_size=TILE, splits=SPLITS,
                                progress=False)
    assert summary['patches'] == {'train': 18, 'val': 9} and summary['written'] == 27
    assert not summary['missing']
    expected = {f'{t}_{x}_{y}_{x + 512}_{y + 512}.png' for t in SPLITS['train']
                for y in STARTS for x in STARTS}
    assert set(os.listdir(out / 'img_dir' / 'train')) == expected
    assert set(os.listdir(out / 'ann_dir' / 'train')) == expected
    assert len(os.listdir(out / 'img_dir' / 'val')) == 9  # 3_13 is in no split here
    full, ids = tile_image('6_7'), tile_label_ids()
    for x in STARTS:
        for y in STARTS:
            name = f'6_7_{x}_{y}_{x + 512}_{y + 512}.png'
            img = read_png(out / 'img_dir' / 'train' / name)
            ann = read_png(out / 'ann_dir' / 'train' / name)
            assert img.shape == (512, 512, 3) and ann.shape == (512, 512) and ann.dtype == np.uint8
            assert np.array_equal(img, full[y:y + 512, x:x + 512])
            assert np.array_equal(ann, np.where(ids < 1, 0, ids)[y:y + 512, x:x + 512])
    corner = read_png(out / 'ann_dir' / 'train' / '6_7_588_588_1100_1100.png')
    assert corner[1000 - 588, 1000 - 588] == 0 and corner[0, 0] == ids[588, 588]
    assert summary['unknown_pixels'] == {t: 2500 for t in ('2_10', '6_7', '7_13')}


def test_convert_potsdam_eroded_five_classes_irrg(tmp_path):
    src, out = tmp_path / 'release', tmp_path / 'out'
    write_release(str(src), ['2_10'], modality='IRRG')
    with pytest.raises(FileNotFoundError, match='no complete Potsdam tile'):
        P.convert_potsdam(str(src), str(out), tile_size=TILE, splits={'train': ('2_10', )},
                          progress=False)  # there is no RGB product
    P.convert_potsdam(str(src), str(out), modality='irrg', eroded=True, num_classes=5,
                      tile_size=TILE, splits={'train': ('2_10', )}, progress=False)
    ann = read_png(out / 'ann_dir' / 'train' / '2_10_0_0_512_512.png')
    ids = tile_label_ids(eroded=True)[:512, :512]
    expected = np.where((ids < 1) | (ids == 6), 0, ids)
    assert np.array_equal(ann, expected) and (ann[:10] == 0).all() and 6 not in ann
    img = read_png(out / 'img_dir' / 'train' / '2_10_0_0_512_512.png')
    assert np.array_equal(img, tile_image('2_10')[:512, :512])
    with pytest.raises(ValueError, match='holds a conversion with options'):
        P.convert_potsdam(str(src), str(out), modality='irrg', tile_size=TILE,
                          splits={'train': ('2_10', )}, progress=False)


def test_mmseg_potsdam_dataset_reads_the_output(tmp_path):
    from mmengine.registry import DefaultScope
    from mmseg.datasets import PotsdamDataset
    from mmseg.utils import register_all_modules
    register_all_modules(init_default_scope=False)
    src, out = tmp_path / 'release', tmp_path / 'out'
    write_release(str(src), ['7_13'])
    P.convert_potsdam(str(src), str(out), tile_size=TILE, splits={'val': ('7_13', )},
                      progress=False)
    # built in MMSeg's scope, whatever default scope an earlier Runner left current
    with DefaultScope.overwrite_default_scope('mmseg'):
        dataset = PotsdamDataset(
            data_root=str(out),
            data_prefix=dict(img_path='img_dir/val', seg_map_path='ann_dir/val'),
            pipeline=[dict(type='LoadImageFromFile'), dict(type='LoadAnnotations')])
    assert len(dataset) == 9
    names = [osp.basename(dataset.get_data_info(i)['img_path']) for i in range(len(dataset))]
    index = names.index(
        '7_13_588_588_1100_1100.png')
    gt = dataset[index]['gt_seg_map']
    ids = tile_label_ids()[588:, 588:]
    assert np.array_equal(gt, np.where(ids < 1, 255, ids - 1))  # 1..6 -> 0..5, 0 -> 255


def test_potsdam_missing_tiles_and_resume(tmp_path, capsys):
    src, out = tmp_path / 'release', tmp_path / 'out'
    write_release(str(src), ['2_10', '5_15', '6_7'], skip_labels=('6_7', ))
    with pytest.warns(UserWarning) as record:
        summary = P.convert_potsdam(str(src), str(out), tile_size=TILE, nproc=2)
    message = str(record[0].message)
    assert '36 Potsdam tile(s) are missing' in message
    assert '6_7 (label)' in message and '2_11 (image and label)' in message
    assert '  val: ' in message and '5_15' not in message.split('val: ')[1].split(',')[0]
    assert summary['missing']['6_7'] == ['label'] and len(summary['missing']) == 36
    assert summary['tiles'] == {'train': ['2_10'], 'val': ['5_15']}
    assert summary['patches'] == {'train': 9, 'val': 9}
    assert '[' in capsys.readouterr().out  # the progress bar
    # an interrupted run: a missing patch and a temporary file left behind
    os.remove(out / 'img_dir' / 'train' / '2_10_512_0_1024_512.png')
    (out / 'img_dir' / 'train' / '.2_10_0_0_512_512.png.123.tmp').write_bytes(b'partial')
    with pytest.warns(UserWarning):
        again = P.convert_potsdam(str(src), str(out), tile_size=TILE, progress=False)
    assert again['written'] == 1 and again['patches'] == {'train': 9, 'val': 9}
    assert sorted(os.listdir(out / 'img_dir' / 'train')) == sorted(
        f'2_10_{x}_{y}_{x + 512}_{y + 512}.png' for y in STARTS for x in STARTS)
    with pytest.raises(ValueError, match='expected 1000x1000'):
        P.convert_potsdam(str(src), str(tmp_path / 'other'), tile_size=1000, progress=False,
                          splits={'train': ('2_10', )})


# ---------------------------------------------------------------------------- DIOR-R
def dior_xml(objects, size=(800, 800)):
    lines = ['<?xml version="1.0" encoding="UTF-8"?>', '<annotation>',
             '  <filename>x.jpg</filename>']
    if size is not None:
        lines.append(f'  <size><width>{size[0]}</width><height>{size[1]}</height>'
                     '<depth>3</depth></size>')
    for name, corners, difficult in objects:
        lines += ['  <object>', '    <type>robndbox</type>', f'    <name>{name}</name>',
                  f'    <difficult>{difficult}</difficult>', '    <robndbox>']
        for key, (x, y) in zip(('left_top', 'right_top', 'right_bottom', 'left_bottom'),
                               corners):
            lines += [f'      <x_{key}>{x}</x_{key}>', f'      <y_{key}>{y}</y_{key}>']
        lines += ['    </robndbox>', '    <angle>30</angle>', '  </object>']
    return '\n'.join(lines + ['</annotation>', ''])


BOX_A = [(10, 20), (110, 20), (110, 60), (10, 60)]
BOX_B = [(300.5, 100), (340, 131.25), (320, 156), (280.5, 124.75)]
DIOR_OBJECTS = {
    '00001': [('airplane', BOX_A, 0), ('Expressway-Service-area', BOX_B, 1)],
    '00002': [('ship', BOX_A, 0), ('ship', BOX_B, 0), ('vehicle', BOX_A, 0)],
    '00003': [('storagetank', BOX_B, 0)],
    '00004': [],
}
DIOR_SPLITS = {'trainval': ['00001', '00002'], 'test': ['00003', '00004']}


def write_dior_release(root, objects=DIOR_OBJECTS, splits=DIOR_SPLITS, size=(800, 800),
                       no_size=()):
    ann = osp.join(root, 'Annotations', 'Oriented Bounding Boxes')
    os.makedirs(ann, exist_ok=True)
    os.makedirs(osp.join(root, 'ImageSets', 'Main'), exist_ok=True)
    for split, ids in splits.items():
        os.makedirs(osp.join(root, f'JPEGImages-{split}'), exist_ok=True)
        with open(osp.join(root, 'ImageSets', 'Main', f'{split}.txt'), 'w') as f:
            f.write(''.join(i + '\n' for i in ids))
        for i in ids:
            image = np.full((size[1], size[0], 3), int(i) * 40, np.uint8)
            cv2.imwrite(osp.join(root, f'JPEGImages-{split}', f'{i}.jpg'), image)
            with open(osp.join(ann, f'{i}.xml'), 'w') as f:
                f.write(dior_xml(objects[i], None if i in no_size else size))


def infos(dataset):
    return [dataset.get_data_info(i) for i in range(len(dataset))]


def rotated_pipeline():
    from mmrotate.utils import register_all_modules
    register_all_modules(init_default_scope=True)
    return [dict(type='mmdet.LoadImageFromFile'),
            dict(type='mmdet.LoadAnnotations', with_bbox=True, box_type='qbox'),
            dict(type='mmrotate.ConvertBoxType', box_type_mapping=dict(gt_bboxes='rbox'))]


def test_dior_r_classes_match_mmrotate():
    from mmrotate.datasets import DIORDataset
    assert DIOR_R_CLASSES == tuple(DIORDataset.METAINFO['classes'])
    assert DIORRDataset.METAINFO['classes'] == DIOR_R_CLASSES
    assert len(DIORRDataset.METAINFO['palette']) == 20


def test_parse_dior_xml_and_dota_lines():
    annotation = parse_dior_xml(dior_xml(DIOR_OBJECTS['00001']))
    assert (annotation.width, annotation.height) == (800, 800)
    assert [o.name for o in annotation.objects] == ['airplane', 'expressway-service-area']
    assert [dota_line(o) for o in annotation.objects] == [
        '10 20 110 20 110 60 10 60 airplane 0',
        '300.5 100 340 131.25 320 156 280.5 124.75 expressway-service-area 1']
    assert annotation.objects[1].raw_name == 'Expressway-Service-area'
    assert annotation.objects[0].angle == 30.0
    assert parse_dior_xml(dior_xml([], size=None)).width is None
    with pytest.raises(ValueError, match='missing <y_right_top>'):
        parse_dior_xml(dior_xml([('ship', BOX_A, 0)]).replace('<y_right_top>20</y_right_top>', ''))


@pytest.mark.parametrize('images', ['symlink', 'copy'])
def test_convert_dior_r(tmp_path, images):
    src, out = tmp_path / 'DIOR', tmp_path / 'out'
    write_dior_release(str(src))
    summary = convert_dior_r(str(src), str(out), images=images, progress=False)
    assert summary['images'] == {'trainval': 2, 'test': 2}
    assert summary['objects'] == {'trainval': 5, 'test': 1}
    assert (out / 'trainval.txt').read_text() == '00001\n00002\n'
    assert (out / 'test.txt').read_text() == '00003\n00004\n'
    lines = (out / 'trainval' / 'annfiles' / '00001.txt').read_text().splitlines()
    assert lines == ['10 20 110 20 110 60 10 60 airplane 0',
                     '300.5 100 340 131.25 320 156 280.5 124.75 expressway-service-area 1']
    assert len((out / 'trainval' / 'annfiles' / '00002.txt').read_text().splitlines()) == 3
    assert (out / 'test' / 'annfiles' / '00004.txt').read_text() == ''
    link = out / 'test' / 'images' / '00003.jpg'
    assert link.is_symlink() == (images == 'symlink')
    assert link.read_bytes() == (src / 'JPEGImages-test' / '00003.jpg').read_bytes()
    assert sorted(os.listdir(out / 'trainval' / 'annfiles')) == ['00001.txt', '00002.txt']


def test_convert_dior_r_missing_files_and_class_subset(tmp_path):
    src, out = tmp_path / 'DIOR', tmp_path / 'out'
    write_dior_release(str(src))
    os.remove(src / 'JPEGImages-test' / '00004.jpg')
    with pytest.warns(UserWarning) as record:
        summary = convert_dior_r(str(src), str(out), classes=('ship', 'airplane'),
                                 images='none', nproc=2, progress=False)
    messages = ' '.join(str(r.message) for r in record)
    assert '00004 (image)' in messages and 'Expressway-Service-area' in messages
    assert summary['missing'] == {'test': ['00004 (image)']}
    assert summary['skipped_objects'] == {'Expressway-Service-area': 1, 'vehicle': 1,
                                          'storagetank': 1}
    assert summary['objects'] == {'trainval': 3, 'test': 0}
    assert (out / 'test.txt').read_text() == '00003\n'
    assert not (out / 'trainval' / 'images').exists()
    with pytest.raises(ValueError, match='unknown DIOR-R classes'):
        convert_dior_r(str(src), str(out), classes=('plane', ), progress=False)


def test_rotated_datasets_load_the_converted_output(tmp_path):
    from mmrotate.datasets import DOTADataset
    from mmrotate.structures import RotatedBoxes
    src, out = tmp_path / 'DIOR', tmp_path / 'out'
    write_dior_release(str(src))
    convert_dior_r(str(src), str(out), progress=False)
    pipeline = rotated_pipeline()
    ours = DIORRDataset(data_root=str(out), ann_file='trainval/annfiles/',
                        data_prefix=dict(img_path='trainval/images/'), pipeline=pipeline)
    theirs = DOTADataset(data_root=str(out), ann_file='trainval/annfiles/',
                         data_prefix=dict(img_path='trainval/images/'), pipeline=pipeline,
                         metainfo=dict(classes=DIOR_R_CLASSES), img_suffix='jpg')
    assert len(ours) == len(theirs) == 2
    theirs_by_id = {theirs[i]['img_id']: theirs[i] for i in range(len(theirs))}
    for i, image_id, labels in ((0, '00001', [0, 6]), (1, '00002', [13, 13, 18])):
        result = ours[i]
        assert result['img_id'] == image_id and result['img'].shape == (800, 800, 3)
        boxes = result['gt_bboxes']
        assert isinstance(boxes, RotatedBoxes) and len(boxes) == len(labels)
        assert result['gt_bboxes_labels'].tolist() == labels
        assert np.allclose(boxes.tensor.numpy(), theirs_by_id[image_id]['gt_bboxes'].tensor.numpy())
    # box 0 of 00001: the axis-aligned 100x40 rectangle centred at (60, 40)
    cx, cy, w, h, _ = ours[0]['gt_bboxes'].tensor[0].tolist()
    assert np.allclose([cx, cy, sorted([w, h])[0], sorted([w, h])[1]], [60, 40, 40, 100])
    subset = DIORRDataset(data_root=str(out), ann_file='trainval/annfiles/',
                          data_prefix=dict(img_path='trainval/images/'), pipeline=pipeline,
                          metainfo=dict(classes=('ship', )), diff_thr=0)
    assert [len(d['instances']) for d in infos(subset)] == [0, 2]
    hard = DIORRDataset(data_root=str(out), ann_file='trainval/annfiles/',
                        data_prefix=dict(img_path='trainval/images/'), diff_thr=0)
    assert [i['ignore_flag'] for i in infos(hard)[0]['instances']] == [0, 1]
    test_set = DIORRDataset(data_root=str(out), ann_file='test/annfiles/',
                            data_prefix=dict(img_path='test/images/'), test_mode=True)
    assert [len(d['instances']) for d in infos(test_set)] == [1, 0]


def test_xml_dataset_fixes_mmrotate_dior_faults(tmp_path):
    from mmrotate.datasets import DIORDataset
    src = tmp_path / 'DIOR'
    write_dior_release(str(src), size=(320, 200), no_size=('00002', ))
    kwargs = dict(data_root=str(src), ann_file='ImageSets/Main/trainval.txt',
                  data_prefix=dict(img_path='JPEGImages-trainval'), lazy_init=False)
    # MMRotate 1.0.1: width and height swapped when an XML has no <size> ...
    mmrotate_full = DIORDataset(**kwargs)
    info = mmrotate_full.get_data_info(1)
    assert (info['width'], info['height']) == (200, 320)
    # ... and a KeyError for objects of classes outside a subset metainfo
    with pytest.raises(KeyError):
        DIORDataset(metainfo=dict(classes=('ship', )), **kwargs)

    ours = DIORRXMLDataset(**kwargs)
    sizes = [(d['width'], d['height']) for d in infos(ours)]
    assert sizes == [(320, 200), (320, 200)]
    assert [[i['bbox_label'] for i in d['instances']] for d in infos(ours)] == \
        [[0, 6], [13, 13, 18]]
    for mine, theirs in zip(infos(ours), infos(mmrotate_full)):
        assert np.allclose([i['bbox'] for i in mine['instances']],
                           [i['bbox'] for i in theirs['instances']])
    subset = DIORRXMLDataset(metainfo=dict(classes=('ship', )), **kwargs)
    assert [len(d['instances']) for d in infos(subset)] == [0, 2]
    filtered = DIORRXMLDataset(filter_cfg=dict(filter_empty_gt=True), **{
        **kwargs, 'metainfo': dict(classes=('ship', ))})
    assert [d['img_id'] for d in infos(filtered)] == ['00002']


def test_real_dior_r_sample(tmp_path, real_samples):
    from mmrotate.structures import RotatedBoxes
    src, out = tmp_path / 'DIOR', tmp_path / 'out'
    for folder in ('JPEGImages-trainval', 'Annotations/Oriented Bounding Boxes',
                   'ImageSets/Main'):
        (src / folder).mkdir(parents=True)
    # the real files are linked, not copied
    os.symlink(osp.join(real_samples, 'dior', '00001.jpg'),
               src / 'JPEGImages-trainval' / '00001.jpg')
    os.symlink(osp.join(real_samples, 'dior', '00001.xml'),
               src / 'Annotations' / 'Oriented Bounding Boxes' / '00001.xml')
    (src / 'ImageSets' / 'Main' / 'trainval.txt').write_text('00001\n')
    summary = convert_dior_r(str(src), str(out), splits=('trainval', ), progress=False)
    assert summary['objects'] == {'trainval': 1}
    assert (out / 'trainval' / 'annfiles' / '00001.txt').read_text() == \
        '133 237 684 237 684 672 133 672 golffield 0\n'
    dataset = DIORRDataset(data_root=str(out), ann_file='trainval/annfiles/',
                           data_prefix=dict(img_path='trainval/images/'),
                           pipeline=rotated_pipeline())
    result = dataset[0]
    assert result['img'].shape == (800, 800, 3)
    assert isinstance(result['gt_bboxes'], RotatedBoxes)
    assert result['gt_bboxes_labels'].tolist() == [DIOR_R_CLASSES.index('golffield')]
    cx, cy, w, h, _ = result['gt_bboxes'].tensor[0].tolist()
    assert np.allclose([cx, cy], [408.5, 454.5]) and np.allclose(sorted([w, h]), [435, 551])
    xml_set = DIORRXMLDataset(data_root=str(src), ann_file='ImageSets/Main/trainval.txt',
                              data_prefix=dict(img_path='JPEGImages-trainval'))
    assert infos(xml_set)[0]['instances'][0]['bbox'] == [133, 237, 684, 237, 684, 672, 133, 672]


def test_dota_header_lines_are_skipped(tmp_path):
    """A DOTA v1 label file starts with 'imagesource:GoogleEarth' and 'gsd:0.146': both
    are headers, not boxes (a first word ending in ':' was the only header it knew)."""
    ann = tmp_path / 'annfiles'
    ann.mkdir()
    (ann / '00001.txt').write_text('imagesource:GoogleEarth\ngsd:0.146\n\n'
                                   '10 10 50 10 50 30 10 30 ship 0\n')
    dataset = DIORRDataset(data_root=str(tmp_path), ann_file='annfiles/',
                           data_prefix=dict(img_path='images/'), lazy_init=True)
    data_list = dataset.load_data_list()
    assert [len(d['instances']) for d in data_list] == [1]
    assert data_list[0]['instances'][0]['bbox_label'] == DIOR_R_CLASSES.index('ship')
