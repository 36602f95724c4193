"""The kinds of real distribution shift between two test sets (the EarthShift study's).

A pair of test sets (in distribution, out of distribution) is tagged with one of
:data:`SHIFT_TYPES` or a name of the user's own; the robustness loops' shift sets and the
analysis across models use the same tags.
"""

__all__ = ['SHIFT_TYPES']

#: place, acquisition time, ground sampling distance, instrument, dataset conventions
SHIFT_TYPES = ('geographic', 'temporal', 'scale', 'sensor', 'source')
