"""Inference, as ``apis`` means in OpenMMLab: what a model predicts for one image, clean
and under corruptions (:func:`predict_conditions`), with the model built and its
checkpoint loaded strictly (:func:`init_model`), and a grid of the predictions
(:func:`show_conditions`).

Not imported by ``import reobench_mm`` (the plugin line registers modules only); import
it as ``from reobench_mm.apis import init_model, predict_conditions, show_conditions``.
"""
from .inference import (ConditionPrediction, ConditionPredictions, init_model,
                        parse_conditions, predict_conditions)
from .visualization import show_conditions

__all__ = ['ConditionPrediction', 'ConditionPredictions', 'init_model', 'parse_conditions',
           'predict_conditions', 'show_conditions']
