"""Every shipped dataset config of the sets read in their official layouts through
MMSegmentation's own installed ``tools/test.py``: EarthShift's pairs (FTW Germany, its
window-A and year variants, Sen1Floods11 S2 and S1, DeepGlobe Land Cover and DFC2022 on
their 4 shared classes) and the calibration study's sets (CloudSEN12, FTW, DynamicEarthNet,
FLAIR #2, SpaceNet 2). Small fakes in the official layouts (tests/earthshift_fakes.py,
tests/calibration_fakes.py) are read through each config by a tiny untrained segmentor
(a ChannelAdapter for the band count, tests/layout_helpers.py); the stock tool runs every
config in turn in one interpreter. Each run's printed per-class IoU table and mIoU must
equal numpy's IoU of the predictions it saved (``--out``) against the labels the config's
test pipeline gives, ignored pixels left out."""
import json
import os
import os.path as osp
import re
from typing import NamedTuple, Optional, Tuple

import cv2
import numpy as np
import pytest
from mmengine.config import Config
from mmengine.registry import DefaultScope

import reobench_mm  # noqa: F401  (registration)
from calibration_fakes import (write_cloudsen12, write_dynamicearthnet, write_flair2,
                               write_ftw, write_spacenet2)
from earthshift_fakes import write_deepglobe, write_dfc2022, write_ftw_country, write_sen1floods11
from helpers import PROJECT_ROOT, run_tools_together, toolbox_file
from layout_helpers import IGNORE, loaded_samples, tiny_segmentor_config
from reobench_mm.datasets.converters.spacenet2 import write_building_masks
from reobench_mm.registry import DATASETS
from sweep_helpers import untrained_checkpoint

DATASETS_DIR = osp.join(PROJECT_ROOT, 'configs', '_base_', 'datasets')


class Case(NamedTuple):
    """A dataset config's run: the fake it reads, its bands and classes, the range the
    fake's pixel values are drawn from (the tiny model's normalisation), the size of its
    held-out test set when it holds one out, and the number of test samples."""
    fake: str
    bands: int
    classes: int
    value_range: Tuple[float, float]
    held_out: Optional[int]
    samples: int


CASES = {
    'ftw-germany_256x256.py': Case('ftw_both', 4, 3, (1, 10001), None, 2),
    'ftw-germany-window-a_256x256.py': Case('ftw', 4, 3, (1, 10001), None, 3),
    'ftw-germany-year_256x256.py': Case('ftw', 4, 3, (1, 10001), 1, 1),
    'sen1floods11-s2_512x512.py': Case('sen1floods11', 13, 2, (1, 6000), None, 2),
    'sen1floods11-s1_512x512.py': Case('sen1floods11', 2, 2, (-40, 5), None, 2),
    'deepglobe-4cls_512x512.py': Case('deepglobe', 3, 4, (0, 256), 2, 2),
    'dfc2022-4cls_512x512.py': Case('dfc2022', 3, 4, (0, 256), 2, 2),
    'cloudsen12_224x224.py': Case('cloudsen12', 13, 4, (1, 10001), None, 1),
    'ftw_224x224.py': Case('ftw_calibration', 4, 3, (1, 8000), None, 1),
    'dynamicearthnet_224x224.py': Case('dynamicearthnet', 4, 6, (1, 5000), None, 1),
    'flair2_224x224.py': Case('flair2', 5, 13, (0, 256), None, 1),
    'spacenet2_224x224.py': Case('spacenet2', 8, 2, (1, 2048), None, 1),
}
# runs the stock tool (argv[1]) on every run of the manifest (argv[2]), each between
# two marker lines; a failed run is reported and the others still run
_SCRIPT = r"""
import json, runpy, sys, traceback
stock, manifest = sys.argv[1], sys.argv[2]
with open(manifest, encoding='utf-8') as handle:
    runs = json.load(handle)
failed = []
for run in runs:
    print('@@ run ' + run['tag'], flush=True)
    sys.argv = [stock, run['config'], run['checkpoint'], '--work-dir', run['work_dir'],
                '--out', run['out']]
    try:
        runpy.run_path(stock, run_name='__main__')
    except (Exception, SystemExit):
        traceback.print_exc()
        failed.append(run['tag'])
    sys.stdout.flush()
    sys.stderr.flush()
print('@@ end', flush=True)
sys.exit('failed: ' + ', '.join(failed) if failed else 0)
"""


def _write_fakes(root):
    """Every fake, 2-3 test tiles at most and small sizes; returns ``{fake: (root,
    what its writer returned)}``."""
    def folder(name):
        return osp.join(root, name)

    fakes = {}
    # FTW Germany: window A of 3 test chips; the year set holds out 1 of the 2 windows of
    # its 1 training chip
    fakes['ftw'] = (folder('ftw'), write_ftw_country(folder('ftw'), 'germany',
                                                     dict(train=1, test=2), seed=5))
    # both windows: the tool saves a prediction per image file name, which both windows
    # of a chip share; so one chip keeps window A only, the other window B only
    write_ftw_country(folder('ftw_both'), 'germany', dict(test=1), seed=6)
    os.remove(osp.join(folder('ftw_both'), 'germany', 's2_images', 'window_a',
                       'ge_test_0.tif'))
    fakes['ftw_both'] = (folder('ftw_both'), None)
    fakes['sen1floods11'] = (folder('sen1floods11'), write_sen1floods11(
        folder('sen1floods11'), dict(train=['Ghana_1'], test=['Spain_4', 'Paraguay_5'])))
    fakes['deepglobe'] = (folder('deepglobe'), write_deepglobe(folder('deepglobe'),
                                                               ids=[11, 12, 13]))
    fakes['dfc2022'] = (folder('dfc2022'), write_dfc2022(folder('dfc2022'), dict(Nice=3)))
    for name, writer in (('cloudsen12', write_cloudsen12), ('ftw_calibration', write_ftw),
                         ('dynamicearthnet', write_dynamicearthnet),
                         ('flair2', write_flair2)):
        fakes[name] = (folder(name), writer(folder(name), size=32))
    fakes['spacenet2'] = (folder('spacenet2'), write_spacenet2(folder('spacenet2')))
    write_building_masks(folder('spacenet2'))
    return fakes


def _test_set(config):
    """The test dataset of a config, built in this process."""
    cfg = Config.fromfile(config).test_dataloader.dataset
    with DefaultScope.overwrite_default_scope('mmseg'):
        return DATASETS.build(cfg)


def _scored(dataset):
    """``[(image file name without extension, label map, reduce_zero_label)]`` of every
    sample of ``dataset``, through its pipeline."""
    out = []
    for info, label in loaded_samples(dataset):
        name = osp.splitext(osp.basename(info['img_path']))[0]
        out.append((name, label, bool(info.get('reduce_zero_label', False))))
    assert len({name for name, _, _ in out}) == len(out), 'two images share a file name'
    return out


def _numpy_iou(samples, predictions, num_classes):
    """Per-class IoU (%, NaN where a class is neither predicted nor labelled) of the saved
    predictions against the labels, the ignored pixels left out."""
    intersection, union = np.zeros(num_classes), np.zeros(num_classes)
    for name, label, reduce_zero_label in samples:
        saved = cv2.imread(osp.join(predictions, f'{name}.png'), cv2.IMREAD_UNCHANGED)
        assert saved is not None and saved.shape == label.shape, name
        # the tool writes prediction + 1 for a set read with reduce_zero_label
        prediction = saved.astype(np.int64) - int(reduce_zero_label)
        valid = label != IGNORE
        p, t = prediction[valid], label[valid].astype(np.int64)
        both = np.bincount(p[p == t], minlength=num_classes)
        intersection += both
        union += np.bincount(p, minlength=num_classes) + np.bincount(
            t, minlength=num_classes) - both
    with np.errstate(invalid='ignore'):
        return 100 * intersection / union


def _printed(output, classes):
    """The per-class IoU table and mIoU the tool printed (the last of each)."""
    table = output.rsplit('per class results:', 1)[1]
    rows = re.findall(r'^\|\s*([^|]*?)\s*\|\s*([0-9.]+|nan)\s*\|', table, re.MULTILINE)
    rows = [(name, float(value)) for name, value in rows if name != 'Class']
    assert [name for name, _ in rows] == list(classes), rows
    found = re.findall(r'Iter\(test\).*?mIoU: ([0-9.]+)', output)
    assert found, output[-3000:]
    return np.array([value for _, value in rows]), float(found[-1])


@pytest.mark.slow
def test_stock_mmseg_test_tool_scores_every_official_layout_config(tmp_path):
    """MMSegmentation's own tools/test.py (its installed copy), every config in one
    interpreter: per config, the printed per-class IoU and mIoU are numpy's on the
    predictions it saved and the test pipeline's labels; for FTW window A and CloudSEN12
    those labels are also the fakes' files under the label rules, computed with numpy."""
    stock = toolbox_file('mmseg', 'tools', 'test.py')
    fakes = _write_fakes(str(tmp_path / 'data'))
    runs, checkpoints = [], {}
    for config, case in CASES.items():
        tag = osp.splitext(config)[0]
        data_root = dict(data_root=fakes[case.fake][0])
        path = tiny_segmentor_config(
            str(tmp_path / f'tiny_{tag}.py'), osp.join(DATASETS_DIR, config), case.bands,
            case.classes, case.value_range,
            data_root if case.held_out is None else dict(size=case.held_out,
                                                         dataset=data_root))
        model = case.bands, case.classes  # the normalisation is not in the weights
        if model not in checkpoints:
            checkpoints[model] = untrained_checkpoint(
                path, str(tmp_path / 'untrained_{}_{}.pth'.format(*model)))
        runs.append(dict(tag=tag, config=path, checkpoint=checkpoints[model],
                         work_dir=str(tmp_path / 'work' / tag),
                         out=str(tmp_path / 'predictions' / tag)))
    manifest = tmp_path / 'runs.json'
    manifest.write_text(json.dumps(runs))
    test_sets = {}

    def load_test_sets():  # while the tool runs
        for run in runs:
            test_sets[run['tag']] = _test_set(run['config'])

    (output, ) = run_tools_together(['-u', '-c', _SCRIPT, stock, str(manifest)],
                                    meanwhile=load_test_sets)
    segments = dict(re.findall(r'^@@ run (\S+)\n(.*?)(?=^@@ )', output,
                               re.MULTILINE | re.DOTALL))
    assert list(segments) == [run['tag'] for run in runs]
    for run in runs:
        dataset = test_sets[run['tag']]
        classes = dataset.metainfo['classes']
        samples = _scored(dataset)
        assert len(samples) == CASES[run['tag'] + '.py'].samples, run['tag']
        assert len(os.listdir(run['out'])) == len(samples) > 0, run['tag']
        iou = _numpy_iou(samples, run['out'], len(classes))
        printed, miou = _printed(segments[run['tag']], classes)
        assert np.nanmax(iou) > 0, run['tag']
        np.testing.assert_allclose(printed, iou, atol=0.006, err_msg=run['tag'])
        assert miou == pytest.approx(np.nanmean(iou), abs=0.006), run['tag']
    both = loaded_samples(test_sets['ftw-germany_256x256'])
    assert [info['window'] for info, _ in both] == ['a', 'b']  # both windows were scored
    # the labels scored are the fakes' own under the sets' rules, computed here with numpy:
    # FTW's unlabelled 3 and window A's all-zero frame, CloudSEN12's all-zero pixels
    ftw, cloudsen12 = fakes['ftw'][1], fakes['cloudsen12'][1]
    for info, label in loaded_samples(test_sets['ftw-germany-window-a_256x256']):
        chip = ftw[info['aoi_id']]
        no_data = (chip['a'] == 0).all(axis=0)
        np.testing.assert_array_equal(
            label, np.where((chip['mask3'] == 3) | no_data, IGNORE, chip['mask3']))
    for info, label in loaded_samples(test_sets['cloudsen12_224x224']):
        sample = info['sample_id']
        np.testing.assert_array_equal(
            label, np.where(cloudsen12.nodata[sample], IGNORE, cloudsen12.labels[sample]))
