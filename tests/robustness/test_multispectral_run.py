"""A multispectral set through the robustness loop: Fields of The World's window-A chips
(4 uint16 Sentinel-2 bands, an all-zero nodata frame) in their official layout, read by
LoadMultiBandImageFromFile, the nodata pixels ignored by IgnoreNodataLabels.

Against numpy on the fake's files: the per-image statistics (each class's labelled
pixels), the calibration statistics and the temperature fit count exactly the labelled
pixels outside the nodata frame; conditions joined in one pass (fan-out) give the
records of one condition at a time; corrupting on the model's device runs on the same
bands and gives the pipeline's numbers for the exact corruptions."""
import os.path as osp

import numpy as np
import pytest

from earthshift_fakes import FTW_FRAME, write_ftw_country
from helpers import PROJECT_ROOT
from layout_helpers import tiny_segmentor_config
from sweep_helpers import (assert_same_up_to_batching, condition_records, robustness_cfg,
                           untrained_checkpoint)

DATASET = osp.join(PROJECT_ROOT, 'configs', '_base_', 'datasets',
                   'ftw-germany-window-a_256x256.py')
#: FTW's unlabelled value (loaded as the ignored label).
UNLABELLED = 3


def _scored(entry):
    """The pixels a window-A chip is scored on: labelled, outside the nodata frame."""
    scored = entry['mask3'] != UNLABELLED
    scored[:FTW_FRAME] = False
    scored[:, :FTW_FRAME] = False
    return scored


@pytest.mark.slow  # three robustness runs of a tiny model: about 15 s
def test_a_multispectral_set_through_the_robustness_loop(tmp_path):
    from mmengine.runner import Runner

    from reobench_mm.evaluation.functional.condition_stats import read_stats_file
    from reobench_mm.fileio import read_json
    root = str(tmp_path / 'ftw')
    written = write_ftw_country(root, 'germany', dict(train=1, test=4), seed=3)
    config = tiny_segmentor_config(str(tmp_path / 'tiny.py'), DATASET, 4, 3, (0, 10000))
    checkpoint = untrained_checkpoint(config, str(tmp_path / 'model.pth'))
    options = dict(corruptions=['cloud', 'haze', 'gaussian_noise'], severities=[2],
                   calibration=True, temperature_scaling=True, temperature_split=1,
                   bootstrap=0)

    def run(name, **extra):
        work = str(tmp_path / name)
        Runner.from_cfg(robustness_cfg(config, root, work, checkpoint,
                                       **dict(options, **extra))).test()
        return work, condition_records(work)

    work, records = run('one_at_a_time')
    assert sorted(records) == ['clean', 'cloud@2', 'gaussian_noise@2', 'haze@2']
    # the temperature: fitted on the held-out chip's labelled pixels outside the frame
    temperature, _ = read_json(osp.join(work, 'temperature.json'))
    (held_out, ) = [osp.splitext(osp.basename(p))[0] for p in temperature['images']]
    assert temperature['num_pixels'] == int(_scored(written[held_out]).sum())
    # per image: the labelled pixels of each class, and the calibration's pixel counts
    stats = read_stats_file(osp.join(work, 'conditions', records['clean']['images']['file']))
    names = [osp.splitext(i)[0] for i in stats.image_ids]
    assert held_out not in names and len(names) == 4
    areas = stats.task.to_arrays()['areas']  # image x class x (intersection, pred, label)
    for index, name in enumerate(names):
        entry = written[name]
        scored = _scored(entry)
        expected = np.bincount(entry['mask3'][scored], minlength=3)
        np.testing.assert_array_equal(areas[index][:, 2], expected)
        for key in ('calib', 'calib_ts'):
            counted = stats.calibration[key].to_arrays()['bins'][index, :, 0].sum()
            assert counted == scored.sum(), (name, key)
        # (the frame holds labelled pixels: counting it would differ)
        assert (entry['mask3'] != UNLABELLED).sum() > scored.sum()
    # fan-out: the same records as one condition at a time
    joined_work, joined = run('joined', fan_out=2)
    assert_same_up_to_batching(records, work, joined, joined_work)
    # corrupting on the model's device: the same bands (all four optical), and for the
    # exact corruptions the pipeline's numbers
    device_work, on_device = run('device', corruption_device='model')
    assert sorted(on_device) == sorted(records)
    for key in ('clean', 'cloud@2', 'haze@2'):
        assert on_device[key]['metrics']['mIoU'] == pytest.approx(
            records[key]['metrics']['mIoU'], abs=0.05), key
