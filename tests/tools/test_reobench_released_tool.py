"""tools/dataset_converters/reobench_released.py: from a released DIOR layout (generated
here from the demo data in the authors' folder names and label format) to a config that
the sweep runs with every released condition read from files."""
import glob
import os
import os.path as osp

import cv2
import pytest
from mmengine.config import Config

from helpers import DET_DEMO_CONFIG, PROJECT_ROOT, tool_result
from reobench_corruptions import corrupt, corrupt_geometric
from reobench_mm.datasets.converters.dior_r import parse_dior_xml
from reobench_mm.evaluation.functional.condition_stats import read_stats_file
from reobench_mm.robustness.conditions.released import parse_corruption_files
from sweep_helpers import condition_records, untrained_checkpoint

TOOL = 'dataset_converters/reobench_released.py'
DIOR_R_CONFIG = osp.join(PROJECT_ROOT, 'configs', 'oriented_rcnn',
                         'oriented-rcnn-le90_rvsa-b_sfp-fpn_1xb1-12e_dior-r-800x800.py')


def write_release(demo_dior, root):
    """DIOR_corrupted/clouds/<k>/ (cloud at 5 in every severity) and rotate/<k>/ with
    <k>labels/: DOTA lines of the boxes moved with the images, the last box of the first
    image left out (so that labels read from the files are told apart from moved ones)."""
    first = True
    for path in sorted(glob.glob(osp.join(demo_dior, 'JPEGImages-test', '*.jpg'))):
        image_id = osp.splitext(osp.basename(path))[0]
        image = cv2.imread(path, cv2.IMREAD_COLOR)
        objects = parse_dior_xml(osp.join(demo_dior, 'Annotations', 'Oriented Bounding Boxes',
                                          f'{image_id}.xml')).objects
        objects, first = (objects[:-1] if first else objects), False
        for severity in (1, 2, 3, 4, 5):
            clouds = osp.join(root, 'clouds', str(severity))
            os.makedirs(clouds, exist_ok=True)
            cv2.imwrite(osp.join(clouds, f'{image_id}.jpg'),
                        corrupt(image, 'cloud', 5, key=image_id))
            rotated, transform = corrupt_geometric(image, 'rotate', severity, key=image_id)
            folder = osp.join(root, 'rotate', str(severity))
            for path in (folder, folder + 'labels'):
                os.makedirs(path, exist_ok=True)
            cv2.imwrite(osp.join(folder, f'{image_id}.jpg'), rotated)
            lines = [' '.join(f'{v:.4f}' for v in transform.apply_to_points(o.corners).ravel())
                     + f' {o.raw_name} {o.difficult}' for o in objects]
            with open(osp.join(folder + 'labels', f'{image_id}.txt'), 'w') as handle:
                handle.write('\n'.join(lines) + '\n')


def test_the_tool_writes_the_option_and_a_config_of_the_labels_the_config_reads(
        demo_data, tmp_path):
    released = str(tmp_path / 'DIOR_corrupted')
    write_release(osp.join(demo_data, 'dior'), released)
    out = str(tmp_path / 'out')
    # the demo config reads MMRotate's DIORDataset: DIOR-R XML
    result = tool_result(TOOL, ['dior', released, '-o', out, '--config', DET_DEMO_CONFIG])
    assert result.returncode == 0, result.stderr
    derived = osp.join(out, osp.basename(DET_DEMO_CONFIG)[:-3] + '_released.py')
    assert f'tools/robustness_test.py {derived} CHECKPOINT' in result.stdout
    assert 'read from files: cloud, rotate' in result.stdout
    assert 'rotate@2 (rotate): 3 images, 3 label files' in result.stdout
    option = Config.fromfile(derived).test_cfg.corruption_files.to_dict()
    assert option['geometric']['ann_subdir'] == osp.join(osp.abspath(out), '{corruption}',
                                                         '{severity}', 'Annotations')
    assert len(glob.glob(osp.join(out, 'rotate', '2', 'Annotations', '*.xml'))) == 3
    files = parse_corruption_files(option)
    assert files.folders == dict(cloud='clouds') and files.corruptions == ('cloud', 'rotate')
    # a config reading DIORRDataset gets DOTA text; a contradicting flag is refused
    result = tool_result(TOOL, ['dior', released, '-o', out, '--config', DIOR_R_CONFIG])
    assert result.returncode == 0, result.stderr
    assert len(glob.glob(osp.join(out, 'rotate', '2', 'annfiles', '*.txt'))) == 3
    result = tool_result(TOOL, ['dior', released, '-o', out, '--config', DIOR_R_CONFIG,
                                '--label-format', 'xml'])
    assert result.returncode == 2
    assert '--label-format xml does not fit' in result.stderr and 'reads dota' in result.stderr
    result = tool_result(TOOL, ['potsdam', released, '--config', DIOR_R_CONFIG])
    assert result.returncode == 2 and 'the test dataset is DIORRDataset' in result.stderr
    result = tool_result(TOOL, ['dior', released, '-o', out, '--alias', 'rot=spin'])
    assert result.returncode == 2 and 'spin' in result.stderr


@pytest.mark.slow  # a sweep of the demo detector: 25-45 s on 2 CPU cores
def test_the_written_config_sweeps_every_condition_from_the_files(demo_data, tmp_path):
    from reobench_mm.robustness.sweep import RobustnessSweep
    demo_dior = osp.join(demo_data, 'dior')
    released = str(tmp_path / 'DIOR_corrupted')
    write_release(demo_dior, released)
    out = str(tmp_path / 'out')
    assert tool_result(TOOL, ['dior', released, '-o', out, '--config',
                              DET_DEMO_CONFIG]).returncode == 0
    derived = osp.join(out, osp.basename(DET_DEMO_CONFIG)[:-3] + '_released.py')
    checkpoint = untrained_checkpoint(DET_DEMO_CONFIG, str(tmp_path / 'model.pth'))
    loader = {'test_dataloader.dataset.data_root': demo_dior,
              'test_dataloader.num_workers': 0, 'test_dataloader.persistent_workers': False}
    RobustnessSweep(derived, checkpoint, work_dir=str(tmp_path / 'files'), cfg_options=loader,
                    corruptions=['cloud', 'rotate', 'haze'], severities=[2], plots=False).run()
    records = condition_records(str(tmp_path / 'files'))
    assert records['cloud@2']['source'] == 'files' and records['rotate@2']['source'] == 'files'
    assert 'source' not in records['haze@2']  # not released here: synthesised
    assert records['rotate@2']['fingerprint']['data']['file_set']['samples'] == 3
    # the ground truth of rotate@2 is the released one: the clean boxes less the left-out
    gts = {key: read_stats_file(osp.join(str(tmp_path / 'files'), 'conditions',
                                         records[key]['images']['file'])).task.to_arrays()
           ['num_gts'] for key in ('clean', 'rotate@2')}
    with open(osp.join(demo_dior, 'ImageSets', 'Main', 'test.txt')) as handle:
        ids = handle.read().split()
    with open(osp.join(out, 'rotate', '2', 'test.txt')) as handle:
        assert handle.read().split() == sorted(ids)
    first = sorted(ids)[0]
    dropped = parse_dior_xml(osp.join(demo_dior, 'Annotations', 'Oriented Bounding Boxes',
                                      f'{first}.xml')).objects[-1].name
    want = gts['clean'][[ids.index(i) for i in sorted(ids)]].astype(int)
    want[0, Config.fromfile(DET_DEMO_CONFIG).metainfo['classes'].index(dropped)] -= 1
    assert (gts['rotate@2'] == want).all()
