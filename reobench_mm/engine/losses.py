"""The losses a model's ``test_step``/``val_step`` return beside its predictions, kept as
MMEngine's own ``TestLoop``/``ValLoop`` keep them.

MMEngine has no public function for this: its loops call the private
``mmengine.runner.loops._update_losses`` (pinned MMEngine 0.10.7). It is imported here
and nowhere else, so that this package's loops keep the losses exactly as MMEngine's do,
and an MMEngine that renames it fails in this one place with an error saying what to
pin.
"""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

__all__ = ['update_losses']


def update_losses(outputs: List[Any], losses: Dict[str, Any]) -> Tuple[List[Any], dict]:
    """``(predictions, losses)``: ``outputs`` without the trailing loss element a model
    may append (``BaseDataElement`` with only ``loss``), and ``losses`` with its values
    added to their ``HistoryBuffer`` (MMEngine's own bookkeeping)."""
    try:
        from mmengine.runner.loops import _update_losses
    except ImportError as error:  # pragma: no cover - only with another MMEngine
        raise ImportError('mmengine.runner.loops._update_losses is gone from this MMEngine '
                          f'({error}); install the pinned mmengine==0.10.7') from None
    return _update_losses(outputs, losses)
