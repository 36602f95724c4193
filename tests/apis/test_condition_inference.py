"""One image under several conditions (``reobench_mm.apis``): the predictions equal those
of ``RobustnessTestLoop`` for the same image and condition (segmentation and rotated
detection; pixel, random and geometric corruptions, the label moved with the image); an
array with its key equals the file; refused inputs; the grid; the command-line tool."""
import dataclasses
import os.path as osp
import subprocess
import sys

import mmcv
import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.runner import Runner

from reobench_corruptions.condition import Condition
from reobench_mm.apis import (ConditionPredictions, init_model, parse_conditions,
                              predict_conditions, show_conditions)
from reobench_mm.errors import SweepError
from reobench_mm.robustness.conditions.kinds import BatchContext, kind_of

from helpers import DET_DEMO_CONFIG, PROJECT_ROOT, SEG_DEMO_CONFIG, load_tool
from reobench_cli import run_tool
from sweep_helpers import untrained_checkpoint

CONDITIONS = ['clean', 'haze@3', 'gaussian_noise@2', 'rotate@2']
SEG_IMAGE = '6_10_256_0_512_256.png'
DET_IMAGE = '00008.jpg'


def _data(demo_data, task):
    return osp.join(demo_data, 'potsdam' if task == 'seg' else 'dior')


def _options(root):
    return {'test_dataloader.dataset.data_root': root, 'test_dataloader.num_workers': 0,
            'test_dataloader.persistent_workers': False, 'log_level': 'WARNING'}


@pytest.fixture(scope='module')
def seg(demo_data, tmp_path_factory):
    """``(model, checkpoint, data root)`` of the segmentation demo config."""
    checkpoint = untrained_checkpoint(SEG_DEMO_CONFIG,
                                      str(tmp_path_factory.mktemp('ci') / 'seg.pth'))
    root = _data(demo_data, 'seg')
    return init_model(SEG_DEMO_CONFIG, checkpoint, cfg_options=_options(root)), checkpoint, root


@pytest.fixture(scope='module')
def det(demo_data, tmp_path_factory):
    checkpoint = untrained_checkpoint(DET_DEMO_CONFIG,
                                      str(tmp_path_factory.mktemp('ci') / 'det.pth'))
    root = _data(demo_data, 'det')
    # fewer proposals: the same model on both sides of the comparison, faster on a CPU
    options = {**_options(root), 'model.test_cfg.rpn.nms_pre': 200,
               'model.test_cfg.rpn.max_per_img': 200}
    return init_model(DET_DEMO_CONFIG, checkpoint, cfg_options=options), checkpoint, root


@pytest.fixture(scope='module')
def seg_result(seg):
    """The segmentation image under CONDITIONS, with its label."""
    model, _, root = seg
    return predict_conditions(model, osp.join(root, 'img_dir', 'val', SEG_IMAGE), CONDITIONS,
                              label=osp.join(root, 'ann_dir', 'val', SEG_IMAGE))


@pytest.fixture(scope='module')
def det_result(det):
    model, _, root = det
    return predict_conditions(model, osp.join(root, 'JPEGImages-test', DET_IMAGE), CONDITIONS)


def _loop_predictions(config, checkpoint, root, work_dir, model, name):
    """What RobustnessTestLoop predicts for image ``name`` under each of CONDITIONS: its own
    built dataloader (the corruption step it placed, switched per condition as it switches
    it) feeds ``model``. Returns ``{key: (data sample in, prediction)}``."""
    cfg = Config.fromfile(config)
    cfg.merge_from_dict(_options(root))
    cfg.work_dir, cfg.custom_hooks, cfg.load_from = work_dir, [], checkpoint
    cfg.test_cfg = dict(type='RobustnessTestLoop', corruptions=['haze', 'gaussian_noise',
                                                                'rotate'],
                        severities=[2, 3], plots=False)
    loop = Runner.from_cfg(cfg).test_loop
    dataset = loop.dataloader.dataset
    index = next(i for i in range(len(dataset))
                 if osp.basename(dataset.get_data_info(i)['img_path']) == name)
    out = {}
    for key in CONDITIONS:
        for step in loop.switch.steps:
            step.set_condition(Condition.from_key(key))
        batch = loop.dataloader.collate_fn([dataset[index]])
        with torch.no_grad():
            out[key] = (batch['data_samples'][0], model.test_step(batch)[0])
    return out


def test_segmentation_equals_the_robustness_loop(seg, seg_result, tmp_path):
    model, checkpoint, root = seg
    result = seg_result
    assert isinstance(result, ConditionPredictions)
    assert result.keys() == CONDITIONS and result.key == SEG_IMAGE
    assert [k for k, _ in result.items()] == CONDITIONS and 'clean' in result
    assert result.values()[0] is result['clean'] and 'fog@1' not in result
    loop = _loop_predictions(SEG_DEMO_CONFIG, checkpoint, root, str(tmp_path), model,
                             SEG_IMAGE)
    for key in CONDITIONS:
        sample, expected = loop[key]
        got = result[key]
        assert torch.equal(got.prediction.pred_sem_seg.data, expected.pred_sem_seg.data), key
        assert torch.equal(got.prediction.seg_logits.data, expected.seg_logits.data), key
        assert np.array_equal(got.label, sample.gt_sem_seg.data[0].numpy()), key
        assert got.prediction.metainfo['corruption'] == got.condition.corruption
    clean, noisy, rotated = result['clean'], result['gaussian_noise@2'], result['rotate@2']
    assert not np.array_equal(clean.image, noisy.image)
    assert not np.array_equal(clean.label, rotated.label)  # the label moved with the image
    assert np.array_equal(clean.label, result['haze@3'].label)
    assert clean.image.shape == (256, 256, 3) and clean.image.dtype == np.uint8


def test_rotated_detection_equals_the_robustness_loop(det, det_result, tmp_path):
    model, checkpoint, root = det
    image = osp.join(root, 'JPEGImages-test', DET_IMAGE)
    result = det_result
    loop = _loop_predictions(DET_DEMO_CONFIG, checkpoint, root, str(tmp_path), model,
                             DET_IMAGE)
    for key in CONDITIONS:
        got = result[key].prediction.pred_instances
        expected = loop[key][1].pred_instances
        assert len(got) > 0
        for field in ('bboxes', 'scores', 'labels'):
            assert torch.equal(torch.as_tensor(getattr(got, field)),
                               torch.as_tensor(getattr(expected, field))), (key, field)
        assert result[key].label is None
    assert not torch.equal(result['clean'].prediction.pred_instances.scores,
                           result['gaussian_noise@2'].prediction.pred_instances.scores)
    with pytest.raises(ValueError, match='segmentation only'):
        predict_conditions(model, image, ['clean'], label=image)
    with pytest.raises(SweepError, match=r'attacks on one image are taken for segmentation '
                       r'models.*RobustnessTestLoop\(attacks=...\)'):
        predict_conditions(model, image, ['clean'], attacks=dict(pgd=dict(eps=[4])))


def test_an_attack_on_one_image_is_the_loops(seg, seg_result, tmp_path):
    """predict_conditions(attacks=...): PGD at eps 4 on the image (and on its hazy
    version): the prediction RobustnessTestLoop makes for it (its batch of the image, its
    attack of the condition), an input within the budget of the image it attacks."""
    model, checkpoint, root = seg
    path = osp.join(root, 'img_dir', 'val', SEG_IMAGE)
    attacks = dict(pgd=dict(eps=[4], steps=2, corruptions=['haze'], severities=[3]))
    result = predict_conditions(model, path, ['clean', 'haze@3'], attacks=attacks,
                                label=osp.join(root, 'ann_dir', 'val', SEG_IMAGE))
    assert result.keys() == ['clean', 'haze@3', 'adv/pgd_eps4', 'adv/pgd_eps4/haze@3']
    for key, base in (('adv/pgd_eps4', 'clean'), ('adv/pgd_eps4/haze@3', 'haze@3')):
        delta = result[key].image.astype(np.float64) - result[base].image.astype(np.float64)
        assert 0 < np.abs(delta).max() <= 4 * (1 + 1e-5), key
        assert np.array_equal(result[key].label, result[base].label)
    cfg = Config.fromfile(SEG_DEMO_CONFIG)
    cfg.merge_from_dict(_options(root))
    cfg.work_dir, cfg.custom_hooks, cfg.load_from = str(tmp_path), [], checkpoint
    cfg.test_cfg = dict(type='RobustnessTestLoop', corruptions=['haze'], severities=[3],
                        attacks=attacks, plots=False)
    loop = Runner.from_cfg(cfg).test_loop
    dataset = loop.dataloader.dataset
    index = next(i for i in range(len(dataset))
                 if osp.basename(dataset.get_data_info(i)['img_path']) == SEG_IMAGE)
    for condition in loop.options.all_conditions:
        if not condition.key.startswith('adv/'):
            continue
        kind = kind_of(condition)
        loop.switch.activate(condition.base)
        batch = loop.dataloader.collate_fn([dataset[index]])
        transform = kind.batches(condition, BatchContext(
            model, loop.task, loop.evaluation.ignore_index, len(dataset.metainfo['classes'])))
        active = loop.switch.active_for(condition.base, transform=transform)
        with torch.no_grad():
            expected = model.test_step(loop.switch.prepare(0, batch, active))[0]
        got = result[condition.key].prediction
        assert torch.equal(got.seg_logits.data, expected.seg_logits.data), condition.key
    loop.switch.reset()
    assert not torch.equal(result['adv/pgd_eps4'].prediction.seg_logits.data,
                           result['clean'].prediction.seg_logits.data)
    with pytest.raises(SweepError, match="attacks need the image's label map"):
        predict_conditions(model, path, ['clean'], attacks=attacks)


def test_an_array_with_its_key_equals_the_file(seg, seg_result):
    model, _, root = seg
    path = osp.join(root, 'img_dir', 'val', SEG_IMAGE)
    conditions = ['gaussian_noise@2', 'rotate@2']
    from_file = [seg_result[key] for key in conditions]
    array = mmcv.imread(path)  # BGR, as the pipeline loads files
    from_array = predict_conditions(model, array, conditions, key=SEG_IMAGE,
                                    label=seg_result['clean'].label)  # a label as loaded
    assert from_array.source == '<array>' and from_array.key == SEG_IMAGE
    for a, b in zip(from_file, from_array):
        assert np.array_equal(a.image, b.image), a.key
        assert torch.equal(a.prediction.pred_sem_seg.data, b.prediction.pred_sem_seg.data)
        assert np.array_equal(a.label, b.label), a.key
    other = predict_conditions(model, array, ['gaussian_noise@2'], key='another.png')
    assert not np.array_equal(other[0].image, from_file[0].image)  # keyed by the key
    assert other[0].label is None


def test_refused_inputs(seg, tmp_path):
    model, _, root = seg
    path = osp.join(root, 'img_dir', 'val', SEG_IMAGE)
    array = mmcv.imread(path)
    with pytest.raises(ValueError, match='an image array needs key=') as refused:
        predict_conditions(model, array, ['haze@3'])
    assert 'same draws' in str(refused.value)
    with pytest.raises(ValueError, match="bad condition 'hazee@3'.*did you mean 'haze'"):
        predict_conditions(model, path, ['clean', 'hazee@3'])
    with pytest.raises(ValueError, match="bad condition 'haze'.*gaussian_noise, "):
        parse_conditions(['haze'])
    with pytest.raises(ValueError, match='given twice'):
        parse_conditions(['haze@3', Condition('haze', 3)])
    # the key of another kind of condition: one line naming the kind and its option
    for key, kind, option in (('adv/pgd_eps4', 'attack', 'attacks'),
                              ('shift/vaihingen', 'shift', 'shifts')):
        with pytest.raises(ValueError, match=f"'{key}' is a condition of kind '{kind}': "
                           rf'predict_conditions takes corruption conditions .*'
                           rf'RobustnessTestLoop\({option}=...\)'):
            parse_conditions(['clean', key])
    with pytest.raises(ValueError, match='keyed by its file name'):
        predict_conditions(model, path, ['clean'], key='other.png')
    with pytest.raises(FileNotFoundError):
        predict_conditions(model, path + '.missing', ['clean'])
    # files OpenCV would end in a traceback on (or decode cut short): named
    tmp = str(tmp_path)
    for name, data, problem in (('empty.png', b'', 'is empty'),
                                ('text.png', b'<html>404</html>', 'holds text'),
                                ('cut.png', open(path, 'rb').read()[:-200],
                                 'is a PNG file cut short')):
        with open(osp.join(tmp, name), 'wb') as handle:
            handle.write(data)
        with pytest.raises(ValueError, match=rf"image '{osp.join(tmp, name)}' {problem}"):
            predict_conditions(model, osp.join(tmp, name), ['clean'])
    with pytest.raises(ValueError, match=rf"label '{osp.join(tmp, 'empty.png')}' is empty"):
        predict_conditions(model, path, ['clean'], label=osp.join(tmp, 'empty.png'))
    # bands the model has no channels for: named, not a tensor-size message
    four = np.concatenate([array, array[..., :1]], axis=2)
    with pytest.raises(ValueError, match=r"the image has 4 band\(s\) but the model takes 3 "
                       r"channel\(s\) \(its data preprocessor's mean has one value per "
                       r"channel\): select 3 of its bands"):
        predict_conditions(model, four, ['clean'], key='a.png')
    with pytest.raises(ValueError, match='dtype int64'):
        predict_conditions(model, array.astype(np.int64), ['clean'], key='a.png')
    # conditions as objects keep their own settings
    seeded = parse_conditions([Condition('haze', 3, seed=4), 'cloud@2'], seed=1)
    assert [c.seed for c in seeded] == [4, 1]


def _png_size(path):
    image = mmcv.imread(path)
    return image.shape[1], image.shape[0]


def test_the_grid_has_one_column_per_condition(seg_result, det_result, tmp_path):
    out = show_conditions(seg_result, str(tmp_path / 'seg.png'), dpi=50)
    width, height = _png_size(out)
    panel = 2.6 * 50
    assert 4 * panel * 0.9 < width < 4 * panel * 1.3, width
    assert 3 * panel * 0.9 < height < 3 * panel * 1.5, height  # 3 rows and the legend
    # two conditions without a label: two columns, two rows
    two = dataclasses.replace(seg_result, entries=tuple(
        dataclasses.replace(e, label=None) for e in seg_result.entries[:2]))
    width2, height2 = _png_size(show_conditions(two, str(tmp_path / 'two.png'), dpi=50))
    assert 2 * panel * 0.9 < width2 < 2 * panel * 1.3 and height2 < height - panel * 0.8
    width3, height3 = _png_size(show_conditions(det_result, str(tmp_path / 'det.png'),
                                                dpi=50, score_thr=0.0))
    assert 4 * panel * 0.9 < width3 < 4 * panel * 1.3 and height3 < height - panel * 0.8
    with pytest.raises(ValueError, match='opacity'):
        show_conditions(two, str(tmp_path / 'bad.png'), opacity=2)


def test_a_wide_image_gets_panels_of_its_shape(seg, tmp_path):
    """Panels as tall as the image is for its width: a 1:2 image in square panels left a
    blank band between the rows."""
    model, _, root = seg
    square = mmcv.imread(osp.join(root, 'img_dir', 'val', SEG_IMAGE))
    sizes = {}
    for name, array in (('square', square), ('wide', np.concatenate([square, square], 1))):
        result = predict_conditions(model, array, ['clean', 'haze@3'], key=f'{name}.png')
        sizes[name] = _png_size(show_conditions(result, str(tmp_path / f'{name}.png'),
                                                dpi=50))
    (square_w, square_h), (wide_w, wide_h) = sizes['square'], sizes['wide']
    assert abs(wide_w - square_w) <= 4  # the same columns
    # two rows of panels half as tall: 2 × 1.3 in of the 2 × 2.6 in less, at 50 dpi
    assert square_h - wide_h == pytest.approx(2 * 1.3 * 50, abs=8), (square_h, wide_h)


def test_the_tool_writes_the_grid(seg, tmp_path, capsys, monkeypatch):
    _, checkpoint, root = seg
    tool = load_tool('condition_inference.py')
    image = osp.join(root, 'img_dir', 'val', SEG_IMAGE)
    out = str(tmp_path / 'grid.png')
    status = run_tool(tool.main, [SEG_DEMO_CONFIG, checkpoint, image, '--conditions',
                                  'clean', 'rotate@2', '--out', out, '--label',
                                  osp.join(root, 'ann_dir', 'val', SEG_IMAGE), '--dpi', '50',
                                  '--cfg-options', f'test_dataloader.dataset.data_root={root}'])
    assert status == 0
    width, height = _png_size(out)
    assert 2 * 2.6 * 50 * 0.9 < width < 2 * 2.6 * 50 * 1.3 < height  # 2 columns, 3 rows
    printed = capsys.readouterr().out
    assert 'rotate@2: ' in printed and f'grid: {out}' in printed
    monkeypatch.delenv('REOBENCH_DEBUG', raising=False)
    for arguments, message in (
            (['--conditions', 'clean', 'haze@7'], 'severity'),
            (['--opacity', 'x'], "invalid float value: 'x'")):
        try:
            status = run_tool(tool.main, [SEG_DEMO_CONFIG, checkpoint, image, '--out', out,
                                          *arguments])
        except SystemExit as stop:  # argparse's refusal of an argument
            status = stop.code
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if line.strip()]
        assert status == 2 and len(lines) == 1 and lines[0].startswith('error: '), err
        assert message in lines[0] and 'Traceback' not in err
    # an image file that holds text: one error line naming it
    text = tmp_path / 'text.png'
    text.write_text('Not Found')
    assert run_tool(tool.main, [SEG_DEMO_CONFIG, checkpoint, str(text), '--out', out]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1].startswith(f"error: image '{text}' holds text")
    assert 'Traceback' not in err
    # an empty checkpoint: one error line naming it
    empty = tmp_path / 'empty.pth'
    empty.write_bytes(b'')
    assert run_tool(tool.main, [SEG_DEMO_CONFIG, str(empty), image, '--out', out]) == 2
    assert 'empty' in capsys.readouterr().err.splitlines()[-1]


@pytest.mark.slow
def test_the_tool_help_imports_no_openmmlab():
    script = ('import runpy, sys\n'
              'sys.argv = [sys.argv[1], "--help"]\n'
              'try:\n'
              '    runpy.run_path(sys.argv[0], run_name="__main__")\n'
              'except SystemExit as stop:\n'
              '    assert stop.code in (0, None), stop.code\n'
              'print("HEAVY", [m for m in ("torch", "mmengine.runner", "mmseg", "mmdet", '
              '"reobench_mm", "matplotlib") if m in sys.modules])\n')
    result = subprocess.run(
        [sys.executable, '-c', script, osp.join(PROJECT_ROOT, 'tools', 'condition_inference.py')],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert 'usage:' in result.stdout and 'HEAVY []' in result.stdout, result.stdout[-500:]
