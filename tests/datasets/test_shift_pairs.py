"""The real ID -> OOD pairs the configs ship: ISPRS Vaihingen (prepared by MMSegmentation's
own converter from zips generated here in the official layout), LoveDA Urban <-> Rural in
the official layout, DIOR-R <-> DOTA-v1.0 on their shared classes (the class maps, and
the real DOTA sample read through the map)."""
import os
import os.path as osp
import subprocess
import sys
import zipfile

import cv2
import numpy as np
import pytest
from mmengine.config import Config
from mmengine.registry import DefaultScope
from mmengine.runner import Runner

import reobench_mm  # noqa: F401  (registration)
from helpers import PROJECT_ROOT, SEG_DEMO_CONFIG, toolbox_file
from reobench_mm.datasets.converters.potsdam import POTSDAM_COLOURS, colour_to_label
from reobench_mm.errors import SweepError
from reobench_mm.registry import DATASETS
from sweep_helpers import untrained_checkpoint

SHIFTS = osp.join(PROJECT_ROOT, 'configs', '_base_', 'shifts')
DATASET_BASES = osp.join(PROJECT_ROOT, 'configs', '_base_', 'datasets')
REAL_DOTA = osp.join(PROJECT_ROOT, '..', 'shared', 'data', 'real_samples', 'dota')


def _shift_base(name):
    return Config.fromfile(osp.join(SHIFTS, name))


def _colour_label(rng, size):
    """A random ISPRS colour label (RGB) of blocks of the six class colours."""
    colours = np.asarray(list(POTSDAM_COLOURS.values()), np.uint8)
    blocks = rng.integers(0, len(colours), (size // 40 + 1, size // 40 + 1))
    ids = np.kron(blocks, np.ones((40, 40), int))[:size, :size]
    label = colours[ids]
    label[rng.random((size, size)) < 0.02] = 0  # eroded boundary pixels: black
    return label


def _vaihingen_zips(folder, areas, size):
    """The two official Vaihingen zips (IRRG tops in top/, eroded colour labels)."""
    rng = np.random.default_rng(0)
    os.makedirs(folder)
    tops = zipfile.ZipFile(osp.join(folder, 'ISPRS_semantic_labeling_Vaihingen.zip'), 'w')
    labels = zipfile.ZipFile(osp.join(
        folder, 'ISPRS_semantic_labeling_Vaihingen_ground_truth_eroded_COMPLETE.zip'), 'w')
    written = {}
    for area in areas:
        image = rng.integers(0, 255, (size, size, 3), dtype=np.uint8)
        label = _colour_label(rng, size)
        tops.writestr(f'top/top_mosaic_09cm_area{area}.tif',
                      cv2.imencode('.tif', image)[1].tobytes())
        labels.writestr(f'top_mosaic_09cm_area{area}_noBoundary.tif',
                        cv2.imencode('.tif', label[..., ::-1])[1].tobytes())
        written[area] = (image, label)
    tops.close()
    labels.close()
    return written


@pytest.mark.slow
def test_vaihingen_from_mmsegs_converter_is_a_shift_set_of_a_potsdam_model(demo_data,
                                                                           tmp_path):
    converter = toolbox_file('mmseg', 'tools', 'dataset_converters', 'vaihingen.py')
    written = _vaihingen_zips(str(tmp_path / 'zips'), areas=(2, 4), size=600)
    out = str(tmp_path / 'vaihingen')
    subprocess.run([sys.executable, converter, str(tmp_path / 'zips'), '-o', out],
                   check=True, capture_output=True, cwd=str(tmp_path))
    # the shift set of the shipped base reads the converter's output
    shift = _shift_base('vaihingen.py').vaihingen_shift.to_dict()
    assert shift['shift_type'] == 'geographic'
    dataset_cfg = dict(shift['dataset'], data_root=out, pipeline=[
        dict(type='LoadImageFromFile'), dict(type='LoadAnnotations', reduce_zero_label=True),
        dict(type='PackSegInputs')])
    with DefaultScope.overwrite_default_scope('mmseg'):
        dataset = DATASETS.build(dataset_cfg)
    assert len(dataset) == 2 * 4  # both test areas, four 512 px patches of a 600 px tile
    # labels: the ISPRS legend through this package's own Potsdam decoding, 0 ignored
    sample = dataset[0]
    name = osp.basename(sample['data_samples'].img_path)
    area, x0, y0, x1, y1 = name[:-4].split('_')
    _, colour = written[int(area[4:])]
    expected = colour_to_label(colour[int(y0):int(y1), int(x0):int(x1)]).astype(np.int64) - 1
    expected[expected < 0] = 255
    got = sample['data_samples'].gt_sem_seg.data.numpy()[0]
    np.testing.assert_array_equal(got, expected)
    # a Potsdam model evaluates it as a condition of its run, once both sides are scored
    # by the same label rules: its eroded labels against the demo Potsdam set's full ones
    # are refused, naming the difference and the step that reconciles them
    derived = tmp_path / 'potsdam_to_vaihingen.py'
    derived.write_text(
        f"_base_ = ['{SEG_DEMO_CONFIG}', '{osp.join(SHIFTS, 'vaihingen.py')}']\n"
        "test_cfg = dict(type='RobustnessTestLoop', corruptions=['haze'], severities=[1], "
        "plots=False, shifts=dict(vaihingen={{_base_.vaihingen_shift}}))\n")
    checkpoint = untrained_checkpoint(SEG_DEMO_CONFIG, str(tmp_path / 'model.pth'))

    def run(name, erode):
        cfg = Config.fromfile(str(derived))
        cfg.test_cfg.shifts.vaihingen.dataset.data_root = out
        cfg.work_dir = str(tmp_path / name)
        cfg.experiment_name = f'potsdam-to-vaihingen-{name}'
        cfg.log_level = 'WARNING'
        cfg.custom_hooks = []
        cfg.test_dataloader.dataset.data_root = osp.join(demo_data, 'potsdam')
        cfg.test_dataloader.num_workers = 0
        cfg.test_dataloader.persistent_workers = False
        if erode:  # the shipped pair config's way: the test set eroded, the shift set not
            steps = cfg.test_dataloader.dataset.pipeline
            cfg.test_cfg.shifts.vaihingen.dataset.pipeline = list(steps)
            cfg.test_dataloader.dataset.pipeline = steps[:2] + [cfg.vaihingen_erosion] + \
                steps[2:]
        cfg.load_from = checkpoint
        return Runner.from_cfg(cfg).test()

    with pytest.raises(SweepError, match="shift set 'vaihingen': it is scored with boundaries "
                       'eroded by 3 px, the test set with full boundaries; score the test set '
                       "alike: add dict\\(type='ErodeLabelBoundaries'"):
        run('refused', erode=False)
    metrics = run('eroded', erode=True)
    assert 'shift/vaihingen/mIoU' in metrics and 'shift/vaihingen/relative_drop' in metrics


def _isprs_eroded_by_hand(label, radius=3):
    """ISPRS's eroded reference made by hand from a stored label map: every value's region
    eroded by the disc dy² + dx² ≤ r² (scipy; the image border erodes nothing), the band
    stored as 0 (the black of the ISPRS noBoundary files, which the converters write as
    0 and the datasets load as ignored)."""
    from scipy import ndimage
    offsets = np.arange(-radius, radius + 1)
    structure = offsets[:, None] ** 2 + offsets[None, :] ** 2 <= radius ** 2
    out = label.copy()
    for value in np.unique(label):
        region = label == value
        out[region & ~ndimage.binary_erosion(region, structure=structure, border_value=1)] = 0
    return out


@pytest.mark.slow
def test_potsdam_scored_eroded_equals_iou_metric_on_labels_eroded_by_hand(seg_model,
                                                                          demo_data, tmp_path):
    """The ID side of the Vaihingen pair: the demo Potsdam test set scored through
    ErodeLabelBoundaries gives MMSegmentation's IoUMetric on label files eroded by hand."""
    potsdam = osp.join(demo_data, 'potsdam')
    eroded_dir = tmp_path / 'ann_eroded'
    eroded_dir.mkdir()
    band = []
    for name in sorted(os.listdir(osp.join(potsdam, 'ann_dir', 'val'))):
        stored = cv2.imread(osp.join(potsdam, 'ann_dir', 'val', name), cv2.IMREAD_UNCHANGED)
        eroded = _isprs_eroded_by_hand(stored)
        band.append(np.mean((eroded == 0) & (stored != 0)))
        cv2.imwrite(str(eroded_dir / name), eroded)
    assert 0.05 < np.mean(band) < 0.9

    def miou(name, labels, erode):
        cfg = Config.fromfile(seg_model.config)
        cfg.work_dir = str(tmp_path / name)
        cfg.experiment_name = f'eroded-scoring-{name}'
        cfg.log_level = 'WARNING'
        cfg.custom_hooks = []
        cfg.test_cfg = dict(type='TestLoop')  # MMEngine's own
        dataset = cfg.test_dataloader.dataset
        dataset.data_root = potsdam
        dataset.data_prefix = dict(img_path='img_dir/val', seg_map_path=labels)
        if erode:
            dataset.pipeline = dataset.pipeline[:2] + [dict(
                type='ErodeLabelBoundaries', radius=3, ignore_index=255)] + dataset.pipeline[2:]
        cfg.test_dataloader.num_workers = 0
        cfg.test_dataloader.persistent_workers = False
        cfg.load_from = seg_model.checkpoint
        return Runner.from_cfg(cfg).test()['mIoU']

    scored_eroded = miou('transform', 'ann_dir/val', erode=True)
    by_hand = miou('by-hand', str(eroded_dir), erode=False)
    full = miou('full', 'ann_dir/val', erode=False)
    assert scored_eroded == by_hand
    assert scored_eroded != full  # the boundary band changes the number


def _loveda_layout(root, count=2, size=64):
    rng = np.random.default_rng(1)
    for split in ('Train', 'Val'):
        for domain in ('Urban', 'Rural'):
            for kind in ('images_png', 'masks_png'):
                os.makedirs(osp.join(root, split, domain, kind))
            for index in range(count):
                name = f'{domain[0]}{split[0]}{index}.png'
                image = rng.integers(0, 255, (size, size, 3), dtype=np.uint8)
                mask = rng.integers(0, 8, (size, size), dtype=np.uint8)  # 0 = no data
                cv2.imwrite(osp.join(root, split, domain, 'images_png', name), image)
                cv2.imwrite(osp.join(root, split, domain, 'masks_png', name), mask)


def test_loveda_urban_and_rural_in_the_official_layout(tmp_path):
    root = str(tmp_path / 'loveDA_official')
    _loveda_layout(root)
    shifts = _shift_base('loveda.py')
    found = {}
    for domain in ('urban', 'rural'):
        base = Config.fromfile(osp.join(DATASET_BASES, f'loveda-{domain}_512x512.py'))
        for split in ('train', 'test'):
            cfg = base[f'{split}_dataloader'].dataset.to_dict()
            cfg['data_root'] = root
            with DefaultScope.overwrite_default_scope('mmseg'):
                dataset = DATASETS.build(cfg)
            found[domain, split] = sorted(osp.basename(dataset.get_data_info(i)['img_path'])
                                          for i in range(len(dataset)))
        shift = shifts[f'loveda_{domain}_shift'].to_dict()
        assert shift['shift_type'] == 'geographic'
        cfg = dict(shift['dataset'], data_root=root,
                   pipeline=[dict(type='LoadAnnotations', reduce_zero_label=True)])
        with DefaultScope.overwrite_default_scope('mmseg'):
            dataset = DATASETS.build(cfg)
        found[domain, 'shift'] = sorted(osp.basename(dataset.get_data_info(i)['img_path'])
                                        for i in range(len(dataset)))
        assert dataset.metainfo['classes'][0] == 'background' and len(dataset) == 2
    assert found['urban', 'train'] == ['UT0.png', 'UT1.png']
    assert found['urban', 'test'] == found['urban', 'shift'] == ['UV0.png', 'UV1.png']
    assert found['rural', 'test'] == found['rural', 'shift'] == ['RV0.png', 'RV1.png']
    # the labels: 1..7 become 0..6, no data (0) is ignored
    mask = cv2.imread(osp.join(root, 'Val', 'Rural', 'masks_png', 'RV0.png'), cv2.IMREAD_UNCHANGED)
    rural = dict(shifts.loveda_rural_shift.dataset.to_dict(), data_root=root,
                 pipeline=[dict(type='LoadAnnotations', reduce_zero_label=True)])
    with DefaultScope.overwrite_default_scope('mmseg'):
        dataset = DATASETS.build(rural)
    index = [osp.basename(dataset.get_data_info(i)['img_path']) for i in range(2)].index('RV0.png')
    got = dataset[index]['gt_seg_map']
    np.testing.assert_array_equal(got, np.where(mask == 0, 255, mask.astype(np.int64) - 1))


def test_the_dior_r_and_dota_class_maps_cover_both_label_sets():
    from mmrotate.datasets import DIORDataset, DOTADataset
    shifts = _shift_base('dior-r_dota.py')
    dota, dior = DOTADataset.METAINFO['classes'], DIORDataset.METAINFO['classes']
    assert tuple(shifts.dota_classes) == dota and tuple(shifts.dior_r_classes) == dior
    forward, backward = shifts.dota_to_dior_r, shifts.dior_r_to_dota
    assert set(forward) == set(dota) and set(backward) == set(dior)
    assert {v for v in forward.values() if v} <= set(dior)
    assert {v for v in backward.values() if v} <= set(dota)
    assert forward['small-vehicle'] == forward['large-vehicle'] == 'vehicle'
    assert backward['vehicle'] is None  # cannot be told apart into small and large
    # one to one on the nine classes both name alike; the maps agree on them
    pairs = {(k, v) for k, v in forward.items() if v and k not in ('small-vehicle',
                                                                   'large-vehicle')}
    assert pairs == {(v, k) for k, v in backward.items() if v}
    assert len(pairs) == 9
    assert shifts.dota_for_dior_r_shift.shift_type == 'source'


@pytest.mark.skipif(not osp.isdir(REAL_DOTA), reason='the real DOTA sample '
                    '(../shared/data/real_samples/dota) is not present in this checkout')
def test_the_real_dota_sample_through_the_class_map_of_a_dior_r_model(tmp_path):
    """The real DOTA patch (its image stored at 170 px, its labels in 1024 px coordinates)
    read by MMRotate's DOTADataset through the shipped map: its planes become DIOR-R's
    airplane; a generated annotation file with every DOTA class checks the rest."""
    shift = _shift_base('dior-r_dota.py').dota_for_dior_r_shift.dataset.to_dict()
    pipeline = [dict(type='mmdet.LoadAnnotations', with_bbox=True, box_type='qbox'),
                dict(type='mmrotate.ConvertBoxType', box_type_mapping=dict(gt_bboxes='rbox'))]
    generated = tmp_path / 'annfiles'
    generated.mkdir()
    classes = _shift_base('dior-r_dota.py').dota_classes
    (generated / 'G0.txt').write_text(''.join(
        f'{10 + 5 * i} 10 {30 + 5 * i} 10 {30 + 5 * i} 20 {10 + 5 * i} 20 {name} 0\n'
        for i, name in enumerate(classes)))
    dior = _shift_base('dior-r_dota.py').dior_r_classes
    assert 'classes' not in shift  # a shift set's map takes the model's classes
    shift['classes'] = dior  # a DIOR-R model's, as the robustness loops give them
    results = {}
    for key, ann in (('real', REAL_DOTA), ('generated', str(generated))):
        inner = dict(shift['dataset'], data_root='', ann_file=osp.abspath(ann),
                     data_prefix=dict(img_path=osp.abspath(ann)), pipeline=pipeline)
        with DefaultScope.overwrite_default_scope('mmrotate'):
            dataset = DATASETS.build(dict(shift, dataset=inner))
        assert tuple(dataset.metainfo['classes']) == tuple(dior)
        sample = dataset[0]
        results[key] = [dior[i] for i in sample['gt_bboxes_labels']]
    with open(osp.join(REAL_DOTA, 'P2805__1024__0___0.txt')) as handle:
        names = [line.split()[8] for line in handle if len(line.split()) >= 9]
    assert results['real'] == ['airplane'] * len(names) and names == ['plane'] * 4
    mapping = _shift_base('dior-r_dota.py').dota_to_dior_r
    assert results['generated'] == [mapping[c] for c in classes if mapping[c]]


def test_a_shipped_set_extended_as_the_manual_shows(tmp_path):
    """A shipped shift set with corruptions on top, in the form the manual gives (the base
    variable referenced without braces, extended in dict(...))."""
    from reobench_mm.robustness.options import RobustnessOptions
    derived = tmp_path / 'with_vaihingen.py'
    derived.write_text(
        f"_base_ = ['{SEG_DEMO_CONFIG}', "
        f"'{osp.join(PROJECT_ROOT, 'configs', '_base_', 'shifts', 'vaihingen.py')}']\n"
        "test_cfg = dict(type='RobustnessTestLoop', shifts=dict(vaihingen=dict(\n"
        "    _base_.vaihingen_shift, corruptions=['cloud', 'gaussian_noise'], "
        "severities=[3])))\n")
    shifts = Config.fromfile(str(derived)).test_cfg.shifts.to_dict()
    options = RobustnessOptions.create(dict(corruptions=['haze'], severities=[1],
                                            shifts=shifts))
    assert [c.key for c in options.conditions][-3:] == [
        'shift/vaihingen', 'shift/vaihingen/cloud@3', 'shift/vaihingen/gaussian_noise@3']
