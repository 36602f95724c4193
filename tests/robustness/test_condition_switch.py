"""The condition switch (reobench_mm.robustness.switching.ConditionSwitch): one immutable
active condition, the placed steps switched to it, and each batch prepared for it in the
order check -> device corruption -> attack. The steps are the package's real
``ApplyCorruption``; the device corruption and the attack are recording stand-ins (their
own tests are test_device_corruption.py and test_attack_conditions.py)."""
import dataclasses

import pytest
import torch
from mmengine.structures import BaseDataElement
from torch.utils.data import DataLoader

from reobench_corruptions.condition import CLEAN, Condition
from reobench_mm.robustness.switching import ActiveCondition, ConditionSwitch, Feed
from reobench_mm.transforms.corruption import ApplyCorruption

CLOUD = Condition('cloud', 3)
NOISE = Condition('gaussian_noise', 2)


class _Device:
    """Covers cloud only; records what it applied."""

    def __init__(self, calls):
        self.calls = calls

    def pipeline_condition(self, condition):
        return condition.clean() if condition.corruption == 'cloud' else condition

    def apply(self, batch, condition):
        self.calls.append(('device', condition.key))
        return dict(batch, inputs=[x + 1 for x in batch['inputs']])


class _Attack:
    def __init__(self, calls):
        self.calls = calls

    def apply(self, batch):
        self.calls.append(('attack', [float(x.sum()) for x in batch['inputs']]))
        return dict(batch, inputs=[x * 0 for x in batch['inputs']])


def _feed():
    steps = [ApplyCorruption(), ApplyCorruption()]
    return Feed(DataLoader(list(range(4)), batch_size=2), steps)


def _batch(condition):
    sample = BaseDataElement(metainfo=dict(corruption=condition.corruption,
                                           severity=condition.severity, img_path='a.png'))
    return dict(inputs=[torch.ones(1, 2, 2)], data_samples=[sample])


def test_activate_switches_every_step_and_replaces_the_active_condition():
    test = _feed()
    switch = ConditionSwitch(test, CLEAN)
    assert switch.active == ActiveCondition(CLEAN, CLEAN)
    active = switch.activate(NOISE)
    assert switch.active is active and active == ActiveCondition(NOISE, NOISE)
    assert [step.condition for step in test.steps] == [NOISE, NOISE]
    with pytest.raises(dataclasses.FrozenInstanceError):
        active.condition = CLOUD
    other = _feed()
    switch.activate(CLOUD, other)
    assert [step.condition for step in other.steps] == [CLOUD, CLOUD]
    assert [step.condition for step in test.steps] == [NOISE, NOISE]  # not this feed's
    switch.reset(other)
    assert [step.condition for step in other.steps] == [CLEAN, CLEAN]
    assert switch.active == ActiveCondition(CLEAN, CLEAN)


def test_a_device_corruption_takes_what_it_covers_unless_asked_for_the_pipeline():
    calls = []
    test = _feed()
    switch = ConditionSwitch(test, CLEAN, _Device(calls))
    covered = switch.activate(CLOUD)
    assert (covered.pipeline, covered.device) == (CLEAN, CLOUD)
    assert [step.condition for step in test.steps] == [CLEAN, CLEAN]
    kept = switch.activate(NOISE)
    assert (kept.pipeline, kept.device) == (NOISE, None)
    forced = switch.active_for(CLOUD, in_pipeline=True)
    assert (forced.pipeline, forced.device) == (CLOUD, None)
    assert switch.active is kept  # active_for switches nothing


def test_a_batch_is_checked_then_corrupted_on_the_device_then_attacked():
    calls = []
    switch = ConditionSwitch(_feed(), CLEAN, _Device(calls))
    active = switch.active_for(CLOUD, transform=_Attack(calls))
    out = switch.prepare(0, _batch(CLEAN), active)  # the pipeline made it clean
    # the attack saw the device's output (ones + 1 over 4 pixels), the model sees zeros
    assert calls == [('device', 'cloud@3'), ('attack', [8.0])]
    assert float(out['inputs'][0].sum()) == 0.0
    calls.clear()
    with pytest.raises(RuntimeError, match='was made under cloud severity 3, but the loop '
                       'evaluates clean'):
        switch.prepare(3, _batch(CLOUD), active)
    assert calls == []  # refused before anything else ran
