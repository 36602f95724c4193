"""The test and validation losses (reobench_mm.engine.losses): the robustness loops keep
what a model's test_step returns beside its predictions as MMEngine's own loops do."""
import torch
from mmengine.structures import BaseDataElement

from reobench_mm.engine.losses import update_losses


def test_a_trailing_loss_element_is_taken_off_and_recorded():
    predictions = [BaseDataElement(metainfo=dict(i=0)), BaseDataElement(metainfo=dict(i=1))]
    loss = BaseDataElement(loss=dict(ce=torch.tensor(0.5),
                                     parts=[torch.tensor(1.0), torch.tensor(3.0)]))
    losses = {}
    out, losses = update_losses(predictions + [loss], losses)
    assert out == predictions
    out, losses = update_losses(predictions + [BaseDataElement(
        loss=dict(ce=torch.tensor(1.5)))], losses)
    assert losses['ce'].mean() == 1.0 and losses['parts'].mean() == 2.0
    assert sorted(losses) == ['ce', 'parts']


def test_outputs_without_a_loss_element_are_left_as_they_are():
    predictions = [BaseDataElement(metainfo=dict(i=0))]
    out, losses = update_losses(predictions, {})
    assert out == predictions and losses == {}
