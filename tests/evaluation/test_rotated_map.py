"""InProcessDOTAMetric gives MMRotate's DOTAMetric numbers without its process pool."""
import numpy as np
import pytest
import torch

import reobench_mm  # noqa: F401
from reobench_mm.registry import METRICS

CLASSES = ('airplane', 'ship', 'storagetank')


def _samples(seed, count=6):
    rng = np.random.default_rng(seed)
    samples = []
    for index in range(count):
        gts = rng.uniform([20, 20, 8, 8, -1.5], [230, 230, 60, 40, 1.5], size=(5, 5))
        labels = rng.integers(0, len(CLASSES), size=5)
        jitter = rng.normal(0, [3, 3, 2, 2, 0.05], size=(5, 5))
        false = rng.uniform([20, 20, 8, 8, -1.5], [230, 230, 60, 40, 1.5], size=(3, 5))
        predictions = np.concatenate([gts + jitter, false])
        samples.append(dict(
            img_id=f'{seed}_{index}',
            gt_instances=dict(bboxes=torch.tensor(gts, dtype=torch.float32),
                              labels=torch.tensor(labels)),
            ignored_instances=dict(bboxes=torch.zeros(0, 5), labels=torch.zeros(0).long()),
            pred_instances=dict(
                bboxes=torch.tensor(predictions, dtype=torch.float32),
                scores=torch.tensor(rng.uniform(0.05, 1.0, size=8), dtype=torch.float32),
                labels=torch.tensor(np.concatenate([labels,
                                                    rng.integers(0, 3, size=3)])))))
    return samples


def _one_process_pools(monkeypatch):
    """MMRotate's mAP computes in a pool of 4 spawned interpreters (each importing torch
    and mmrotate, ~10 s on 2 cores); one gives the same numbers."""
    import functools
    from mmrotate.evaluation.functional import eval_rbbox_map
    from mmrotate.evaluation.metrics import dota_metric
    monkeypatch.setattr(dota_metric, 'eval_rbbox_map',
                        functools.partial(eval_rbbox_map, nproc=1))
    return functools.partial(eval_rbbox_map, nproc=1)


@pytest.mark.slow  # MMRotate's pool spawns an interpreter
def test_same_numbers_as_mmrotate_dotametric(monkeypatch):
    eval_mode = '11points'  # MMRotate's pools are slow to start: one comparison
    _one_process_pools(monkeypatch)
    from mmrotate.evaluation import DOTAMetric
    ours = METRICS.build(dict(type='InProcessDOTAMetric', iou_thrs=[0.5, 0.75],
                              eval_mode=eval_mode))
    theirs = DOTAMetric(iou_thrs=[0.5, 0.75], eval_mode=eval_mode)
    for metric in (ours, theirs):
        metric.dataset_meta = dict(classes=CLASSES)
        for batch in (_samples(0), _samples(1)):
            metric.process({}, batch)
    expected = theirs.evaluate(12)
    got = ours.evaluate(12)
    per_class = {k: got.pop(k) for k in list(got) if k.startswith('dota/AP.')}
    assert got == expected
    assert 0.2 < got['dota/mAP'] < 1.0
    # the per-class APs DOTAMetric only logs: averaged over the thresholds like mAP, so
    # their mean over classes is mAP
    assert sorted(per_class) == [f'dota/AP.{c}' for c in CLASSES]
    assert np.mean(list(per_class.values())) == pytest.approx(got['dota/mAP'], rel=1e-6)  # float32 APs


@pytest.mark.slow  # MMRotate's pool spawns an interpreter
def test_per_class_ap_matches_eval_rbbox_map_and_marks_classes_without_objects(monkeypatch):
    eval_rbbox_map = _one_process_pools(monkeypatch)
    classes = CLASSES + ('harbor', )  # no ground truth and no detection of 'harbor'
    metric = METRICS.build(dict(type='InProcessDOTAMetric', iou_thrs=0.5))
    plain = METRICS.build(dict(type='InProcessDOTAMetric', iou_thrs=0.5, classwise=False))
    for m in (metric, plain):
        m.dataset_meta = dict(classes=classes)
        m.process({}, _samples(2))
    processed = list(metric.results)
    got = metric.evaluate(6)
    assert plain.evaluate(6) == {k: v for k, v in got.items() if '/AP.' not in k}
    assert np.isnan(got['dota/AP.harbor'])
    gts, preds = zip(*processed)
    _, reference = eval_rbbox_map([p['pred_bbox_scores'] for p in preds], list(gts),
                                  iou_thr=0.5, use_07_metric=True, dataset=classes,
                                  logger='silent')
    for name, row in zip(CLASSES, reference):
        # the same float32 (written as its shortest decimal)
        assert np.float32(got[f'dota/AP.{name}']) == np.float32(row['ap'])


def test_options_are_checked():
    with pytest.raises(ValueError, match='eval_mode'):
        METRICS.build(dict(type='InProcessDOTAMetric', eval_mode='voc12'))
