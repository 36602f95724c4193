"""Segmentors built from other segmentors: deep ensembles."""
from .ensemble import (ENSEMBLE_TYPE, MEMBERS_PREFIX, SegmentationEnsemble, ensemble_checkpoint,
                       ensemble_model_cfg, ensemble_state_dict)

__all__ = [
    'ENSEMBLE_TYPE', 'MEMBERS_PREFIX', 'SegmentationEnsemble', 'ensemble_checkpoint',
    'ensemble_model_cfg', 'ensemble_state_dict'
]
