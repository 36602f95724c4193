"""Pure statistics behind the metrics, on numpy arrays and torch tensors: no MMEngine
runner, registry or data sample involved.

- :mod:`~reobench_mm.evaluation.functional.calibration`: pixel calibration and selective
  prediction from histograms (:class:`PixelCalibrationStats`);
- :mod:`~reobench_mm.evaluation.functional.detection_calibration`: rotated-box matching
  and the detection ECE;
- :mod:`~reobench_mm.evaluation.functional.streaming`: per-process sums that leave out the
  samples a distributed sampler repeated;
- :mod:`~reobench_mm.evaluation.functional.temperature`: temperature scaling;
- :mod:`~reobench_mm.evaluation.functional.representation`: CKA, token cosine and
  participation ratio of features.

Part of the evaluation layer: imports the base modules only (``fileio``) and the metric
names of :mod:`reobench_mm.evaluation.keys`.
"""
from .calibration import NLL_EPSILON, PixelCalibrationStats
from .detection_calibration import detection_ece, match_rotated_detections, score_bin_indices
from .drift_accumulators import DriftAccumulator
from .representation import (StreamingCKA, StreamingCosine, StreamingParticipationRatio,
                             hsic_unbiased, linear_cka, token_cosine_similarity)
from .streaming import RankSum, sum_rank_totals
from .temperature import fit_temperature, temperature_nll

__all__ = [
    'NLL_EPSILON', 'PixelCalibrationStats', 'detection_ece',
    'match_rotated_detections', 'score_bin_indices', 'DriftAccumulator', 'StreamingCKA',
    'StreamingCosine', 'StreamingParticipationRatio', 'hsic_unbiased', 'linear_cka',
    'token_cosine_similarity', 'RankSum', 'sum_rank_totals', 'fit_temperature',
    'temperature_nll'
]
