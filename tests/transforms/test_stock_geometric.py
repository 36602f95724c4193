"""Geometric corruptions through the toolboxes' own ``tools/test.py`` (from their installed
packages, in subprocesses) on configs in the toolboxes' own step order, where the labels
are loaded after ``Resize``: the image is transformed at its original size before
``Resize`` and the labels at their original size after their loading, by the same
transform. Each number is checked against an independent computation: the labels moved
outside the pipeline (mmseg), or the corrupted images and moved boxes written to disk as
a dataset of their own and evaluated clean by the same stock tool (mmrotate)."""
import glob
import json
import os.path as osp
import os
import re
import shutil

import cv2
import numpy as np
import pytest

from helpers import (DET_DEMO_CONFIG, PROJECT_ROOT, run_tools_together, stock_tool_here,
                     toolbox_file)
from reobench_corruptions import corrupt_geometric
from reobench_mm.datasets.converters.dior_r import parse_dior_xml
from sweep_helpers import untrained_checkpoint

DET_CLASSES = ('airplane', 'ship', 'storagetank', 'vehicle')



def _logged(output: str, key: str) -> float:
    """The last value of ``key`` MMEngine's logger printed at the end of a test."""
    found = re.findall(r'(?:Iter|Epoch)\(test\).*?' + re.escape(key) + r': ([0-9.]+)', output)
    assert found, output[-3000:]
    return float(found[-1])


def _ap_table(output: str) -> list:
    """The rows of the per-class table ``DOTAMetric`` prints (``| class | gts | ...``)."""
    rows = re.findall(r'^.*?(\| (?:airplane|ship|storagetank|vehicle|mAP) .*\|)\s*$', output,
                      re.MULTILINE)
    assert len(rows) == len(DET_CLASSES) + 1, output[-3000:]
    return rows


# ----------------------------------------------------------------------------- mmseg

def _stock_seg_config(path, data_root: str, test_cfg: str) -> str:
    """The tiny UperNet on mmseg's own Potsdam dataset config: its own step order, its
    own Resize to 512 (the 256-pixel demo tiles change size)."""
    path.write_text(f"""_base_ = [
    'mmseg::_base_/default_runtime.py',
    '{PROJECT_ROOT}/configs/_base_/models/upernet_r18-tiny.py',
    'mmseg::_base_/datasets/potsdam.py',
]
custom_imports = dict(imports=['reobench_mm'], allow_failed_imports=False)
test_dataloader = dict(num_workers=0, persistent_workers=False,
                       dataset=dict(data_root='{data_root}'))
test_evaluator = dict(type='IoUMetric', iou_metrics=['mIoU'])
train_dataloader = val_dataloader = val_evaluator = None
test_cfg = {test_cfg}
log_level = 'INFO'
""")
    return str(path)


def _independent_stock_miou(config: str, checkpoint: str, data_root: str, name: str,
                            severity: int) -> float:
    """mIoU of the test images under ``(name, severity)`` computed outside the pipeline:
    each image corrupted by the engine at its original size and predicted through mmseg's
    own inference API (its test pipeline resizes it), each original-size label map moved
    by the same transform (``rotate`` severity 5, a quarter turn, by ``np.rot90`` of the
    labels, the others by the transform's own label warp), IoU summed over the images as
    IoUMetric does."""
    from mmseg.apis import inference_model, init_model

    model = init_model(config, checkpoint, device='cpu')
    classes = len(model.dataset_meta['classes'])
    intersect, union = np.zeros(classes), np.zeros(classes)
    for path in sorted(glob.glob(osp.join(data_root, 'img_dir', 'val', '*.png'))):
        image = cv2.imread(path, cv2.IMREAD_COLOR)
        corrupted, geometry = corrupt_geometric(image, name, severity,
                                                key=osp.basename(path))
        predicted = inference_model(model, corrupted).pred_sem_seg.data[0].numpy()
        labels = cv2.imread(osp.join(data_root, 'ann_dir', 'val', osp.basename(path)),
                            cv2.IMREAD_UNCHANGED).astype(np.int64)
        labels = np.where(labels == 0, 255, labels - 1)  # reduce_zero_label
        if (name, severity) == ('rotate', 5):
            # about OpenCV's centre (W/2, H/2 in pixel indices): one row down; the row
            # coming from outside the image is the edge row mirrored (border 'reflect')
            turned = np.rot90(labels)
            moved = np.concatenate([turned[:1], turned[:-1]])
        else:
            moved = geometry.warp_label_map(labels.astype(np.uint8), 255).astype(np.int64)
        valid = moved != 255
        for c in range(classes):
            p, t = predicted[valid] == c, moved[valid] == c
            intersect[c] += np.sum(p & t)
            union[c] += np.sum(p | t)
    with np.errstate(invalid='ignore'):
        return float(np.nanmean(np.where(union > 0, intersect / union, np.nan)) * 100)


@pytest.mark.slow
def test_stock_mmseg_test_tool_moves_original_size_labels(demo_data, tmp_path, seg_model):
    """mmseg's own tools/test.py, from its installed package, on a config in mmseg's own
    step order with mmseg's Resize to 512 (the 256-pixel tiles change size): rotate, scale
    and translate are scored against the original-size labels moved by the image's own
    transform, as an independent computation outside the pipeline gives them."""
    stock = toolbox_file('mmseg', 'tools', 'test.py')
    data_root = osp.join(demo_data, 'potsdam')
    checkpoint = seg_model.checkpoint
    conditions = (('rotate', 5), ('scale', 5), ('translate', 3))
    configs = [_stock_seg_config(
        tmp_path / f'stock_{name}.py', data_root,
        f"dict(type='CorruptionTestLoop', corruption='{name}', severity={severity})")
        for name, severity in conditions]
    outputs = run_tools_together(*[
        [stock, config, checkpoint, '--work-dir', str(tmp_path / f'out_{i}')]
        for i, config in enumerate(configs)])
    for (name, severity), config, output in zip(conditions, configs, outputs):
        assert 'moved by ApplyCorruptionToLabels after LoadAnnotations' in output
        expected = _independent_stock_miou(config, checkpoint, data_root, name, severity)
        assert _logged(output, 'mIoU') == pytest.approx(expected, abs=6e-3), name


@pytest.mark.slow
def test_stock_mmseg_robustness_loop_with_geometric_corruptions(demo_data, tmp_path, seg_model):
    """RobustnessTestLoop through mmseg's own tools/test.py on mmseg's step order: a
    selection with a pixel and a geometric corruption runs every condition (the geometric
    one against the independent computation), and a retry with another selection reuses
    the clean condition and the corruption it shares (nothing of theirs changed)."""
    stock = toolbox_file('mmseg', 'tools', 'test.py')
    data_root = osp.join(demo_data, 'potsdam')
    checkpoint = seg_model.checkpoint
    work_dir = str(tmp_path / 'robustness')

    def run(corruptions):
        config = _stock_seg_config(
            tmp_path / f'stock_{len(corruptions)}.py', data_root,
            f"dict(type='RobustnessTestLoop', corruptions={corruptions!r}, severities=[1], "
            "plots=False)")
        return config, run_tools_together([stock, config, checkpoint, '--work-dir',
                                           work_dir])[0]

    config, output = run(['cloud', 'rotate'])
    conditions = _condition_values(work_dir)
    assert sorted(conditions) == ['clean', 'cloud@1', 'rotate@1'], sorted(conditions)
    # IoUMetric's mIoU is rounded to 2 decimals
    assert conditions['rotate@1'] == pytest.approx(
        _independent_stock_miou(config, checkpoint, data_root, 'rotate', 1), abs=5e-3)
    assert len(set(conditions.values())) == 3, conditions

    _, output = run(['cloud'])
    assert 'already finished' in output, output[-3000:]
    assert 'robustness [1/' not in output  # nothing evaluated again
    again = _condition_values(work_dir)
    assert sorted(again) == ['clean', 'cloud@1']
    assert again['clean'] == conditions['clean'] and again['cloud@1'] == conditions['cloud@1']


def _condition_values(work_dir: str) -> dict:
    """``{condition key: task metric}`` of a sweep's ``results.json``."""
    with open(osp.join(work_dir, 'results.json')) as handle:
        numbers = json.load(handle)['numbers']
    return {c['condition']: c['value'] for c in numbers['conditions']}


# ----------------------------------------------------------------------------- mmrotate

def _write_dota_split(root: str, images: dict, boxes: dict, suffix: str) -> None:
    """``root/val/images/<stem>.<suffix>`` (a file copied as it is, or an array written)
    and ``root/val/annfiles/<stem>.txt`` (DOTA's text format, the corners as exact
    decimal floats)."""
    for sub in ('images', 'annfiles'):
        os.makedirs(osp.join(root, 'val', sub), exist_ok=True)
    for stem, image in images.items():
        target = osp.join(root, 'val', 'images', f'{stem}.{suffix}')
        if isinstance(image, str):
            shutil.copy(image, target)
        else:
            assert cv2.imwrite(target, image)
        with open(osp.join(root, 'val', 'annfiles', f'{stem}.txt'), 'w') as handle:
            for name, corners in boxes[stem]:
                handle.write(' '.join(repr(float(v)) for v in corners.reshape(-1)) +
                             f' {name} 0\n')


def _stock_rot_config(path, data_root: str, suffix: str, test_cfg: str) -> str:
    """The tiny Oriented R-CNN on mmrotate's own DOTA dataset config (its validation
    pipeline, the annotations loaded after its Resize), with the demo classes."""
    path.write_text(f"""_base_ = [
    'mmrotate::_base_/default_runtime.py',
    '{PROJECT_ROOT}/configs/_base_/models/oriented-rcnn-le90_r18-tiny_fpn.py',
    'mmrotate::_base_/datasets/dota.py',
]
custom_imports = dict(imports=['reobench_mm'], allow_failed_imports=False)
test_dataloader = dict(num_workers=0, persistent_workers=False, dataset=dict(
    data_root='{data_root}', ann_file='val/annfiles/', data_prefix=dict(img_path='val/images/'),
    img_suffix='{suffix}', metainfo=dict(classes={DET_CLASSES!r})))
train_dataloader = val_dataloader = val_evaluator = None
test_cfg = {test_cfg}
log_level = 'INFO'
""")
    return str(path)


@pytest.mark.long
@pytest.mark.slow
def test_stock_mmrotate_test_tool_moves_original_size_boxes(demo_data, tmp_path):
    """mmrotate's own tools/test.py on mmrotate's own DOTA config (boxes loaded after its
    Resize, here to 384, which changes the 256-pixel images' size): rotate, scale and translate give the mAP the
    same stock tool gives, clean, on the corrupted images and moved boxes written as a
    dataset of their own (the quarter turn of rotate severity 5 by rotating each corner
    about the image centre, the others by the transform the engine reports)."""
    stock = toolbox_file('mmrotate', 'tools', 'test.py')
    dior = osp.join(demo_data, 'dior')
    # an initialised detector: hundreds of boxes per image, some of which match, so that
    # any difference in the moved boxes changes the mAP
    checkpoint = untrained_checkpoint(DET_DEMO_CONFIG, str(tmp_path / 'model.pth'))
    originals, boxes = {}, {}
    for path in sorted(glob.glob(osp.join(dior, 'JPEGImages-test', '*.jpg'))):
        stem = osp.splitext(osp.basename(path))[0]
        originals[stem] = cv2.imread(path, cv2.IMREAD_COLOR)
        annotation = parse_dior_xml(osp.join(dior, 'Annotations', 'Oriented Bounding Boxes',
                                             f'{stem}.xml'))
        boxes[stem] = [(o.name, np.asarray(o.corners, np.float64))
                       for o in annotation.objects]
    source = str(tmp_path / 'dota')  # the demo test set in DOTA's layout, same jpg bytes
    _write_dota_split(source, {stem: osp.join(dior, 'JPEGImages-test', f'{stem}.jpg')
                               for stem in originals}, boxes, 'jpg')

    conditions = (('rotate', 5), ('scale', 5), ('translate', 3))
    # mmrotate's Resize to 1024 would do too; 384 (still not the images' 256) is 7 times
    # faster. The mAP is DOTAMetric's computed in the tool's process (InProcessDOTAMetric,
    # equal to it in tests/evaluation/test_rotated_map.py), on both sides: DOTAMetric's
    # own pool of 4 spawned interpreters per run would start 24 more here.
    resize = ['--cfg-options', 'test_dataloader.dataset.pipeline.1.scale=(384,384)',
              'test_evaluator.type=InProcessDOTAMetric']
    commands, reference_commands, references = [], [], []
    for name, severity in conditions:
        moved_images, moved_boxes = {}, {}
        for stem, image in originals.items():
            corrupted, geometry = corrupt_geometric(image, name, severity,
                                                    key=f'{stem}.jpg')
            moved_images[stem] = corrupted
            if (name, severity) == ('rotate', 5):
                # +90 degrees (counter-clockwise on screen) about OpenCV's pixel
                # (W/2, H/2), the point (W/2 + 0.5, H/2 + 0.5) in pixel-edge coordinates
                centre = image.shape[0] / 2 + 0.5
                moved_boxes[stem] = [
                    (n, np.stack([c[:, 1], 2 * centre - c[:, 0]], -1)) for n, c in boxes[stem]]
            else:
                moved_boxes[stem] = [(n, geometry.apply_to_points(c[None])[0])
                                     for n, c in boxes[stem]]
        reference = str(tmp_path / f'reference_{name}')
        _write_dota_split(reference, moved_images, moved_boxes, 'png')  # lossless
        references.append(reference)
        commands.append([stock, _stock_rot_config(
            tmp_path / f'ours_{name}.py', source, 'jpg',
            f"dict(type='CorruptionTestLoop', corruption='{name}', severity={severity})"),
            checkpoint, '--work-dir', str(tmp_path / f'ours_{name}'), *resize])
        reference_commands.append([_stock_rot_config(
            tmp_path / f'reference_{name}.py', reference, 'png', "dict(type='TestLoop')"),
            checkpoint, '--work-dir', str(tmp_path / f'reference_{name}'), *resize])
    # the references: the same stock tool in this process while the tested runs go on
    reference_outputs = []
    outputs = run_tools_together(*commands, meanwhile=lambda: reference_outputs.extend(
        stock_tool_here(stock, argv) for argv in reference_commands))
    maps = []
    for i, (name, _) in enumerate(conditions):
        ours, reference = outputs[i], reference_outputs[i]
        assert 'moved by ApplyCorruptionToLabels after ConvertBoxType' in ours, ours[-3000:]
        assert re.search(r'scale=\(\s*384,\s*384,?\s*\)', ours)  # the resize ran
        maps.append(_logged(ours, 'dota/mAP'))
        assert maps[-1] == pytest.approx(_logged(reference, 'dota/mAP'), abs=1e-9), name
        # and DOTAMetric's table: per class the objects, detections, recall and AP
        assert _ap_table(ours) == _ap_table(reference), name
    assert max(maps) > 0, maps  # the detector finds objects: the comparison means something
