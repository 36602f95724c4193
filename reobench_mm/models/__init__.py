"""Backbones, necks and checkpoint converters."""
from . import backbones, necks  # noqa: F401  (registration)
from . import segmentors  # noqa: F401  (registration)
