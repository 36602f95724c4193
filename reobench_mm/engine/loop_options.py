"""The options of ``CorruptionTestLoop`` and the one error for an option it does not have,
raised where the config is read (``tools/test.py``) and where the loop is built."""
from __future__ import annotations

import difflib
from typing import Iterable

from reobench_corruptions.condition import CONDITION_FIELDS

__all__ = ['CORRUPTION_LOOP_OPTIONS', 'other_option_error']

#: The options of CorruptionTestLoop (TestLoop's and the condition's).
CORRUPTION_LOOP_OPTIONS = ('fp16', *CONDITION_FIELDS)

#: What to do instead, for the options of the robustness loop users reach for first.
_INSTEAD = {
    'force': ('CorruptionTestLoop keeps no condition records, so each run evaluates its '
              'condition anew and there is nothing to force. To evaluate the finished '
              "conditions of a robustness run again: tools/robustness_test.py ... --force, "
              "or test_cfg.type='RobustnessTestLoop' with test_cfg.force=True"),
}


def other_option_error(names: Iterable[str]) -> ValueError:
    """The error for ``test_cfg`` keys CorruptionTestLoop does not have: the first named,
    the closest option, the loop that has them and how to switch to it."""
    names = sorted(names)
    name = names[0]
    close = difflib.get_close_matches(name, CORRUPTION_LOOP_OPTIONS, n=1)
    head = (f'{name!r} is not an option of CorruptionTestLoop'
            + (f' (test_cfg keys {names})' if len(names) > 1 else '')
            + (f' (did you mean {close[0]!r}?)' if close else '')
            + f'; its options: {", ".join(CORRUPTION_LOOP_OPTIONS)}. ')
    if name in _INSTEAD:
        return ValueError(head + _INSTEAD[name])
    return ValueError(head + 'The options of the robustness loop (corruptions, severities, '
                      "force, calibration, ...) need test_cfg.type='RobustnessTestLoop' "
                      '(--cfg-options test_cfg.type=RobustnessTestLoop)')
