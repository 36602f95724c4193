"""The corruptions a model saw in training, and the held-out protocol of
corruption-aware training: scores over the corruptions it did not see."""
from __future__ import annotations

from typing import Any, List, Sequence, Union

from reobench_corruptions import list_corruptions
from reobench_corruptions.base import resolve_corruptions
from ..errors import SweepError
from ..transforms.random_corruption import training_corruptions

__all__ = ['seen_in_training', 'check_held_out']


def seen_in_training(cfg: Any, protocol: str,
                     seen: Union[None, str, Sequence[str]] = 'auto') -> List[str]:
    """The corruptions of ``protocol`` a model saw in training: ``'auto'`` reads the
    ``RandomCorruption`` pools of ``cfg``'s training pipeline (names of another protocol
    that ``protocol`` also has count), a list of names/groups is resolved, None is none.

    Raises:
        SweepError: an unknown name or group.
    """
    if seen is None:
        return []
    try:
        if isinstance(seen, str) and seen == 'auto':
            valid = list_corruptions(protocol)
            seen_names = {n for pool in training_corruptions(cfg).values() for n in pool}
            return [n for n in valid if n in seen_names]
        return resolve_corruptions(list(seen) if not isinstance(seen, str) else seen,
                                   protocol)
    except (KeyError, TypeError) as error:
        raise SweepError(f'seen_corruptions: {error}') from None


def check_held_out(corruptions: Sequence[str], seen: Sequence[str], held_out_only: bool
                   ) -> None:
    """With ``held_out_only``, refuse corruptions that were seen in training.

    Raises:
        SweepError: some of ``corruptions`` are in ``seen`` (named), or none is left.
    """
    if not isinstance(held_out_only, bool):
        raise SweepError(f'held_out_only must be True or False, got {held_out_only!r}')
    if not held_out_only:
        return
    overlap = [n for n in corruptions if n in seen]
    if overlap:
        held = [n for n in corruptions if n not in seen]
        raise SweepError(
            f'held_out_only: {", ".join(overlap)} {"was" if len(overlap) == 1 else "were"} '
            'in the training pool (RandomCorruption), so a held-out ΔTP over '
            f'{"it" if len(overlap) == 1 else "them"} would measure what the model learnt, '
            'not its robustness to unseen shifts. Evaluate only the held-out corruptions'
            + (f' ({", ".join(held)})' if held else ' (none is left)')
            + ', or set held_out_only=False to report both, seen ones marked')
