"""Backbones, necks, decode heads and checkpoint converters."""
from . import backbones, decode_heads, necks  # noqa: F401  (registration)
from . import segmentors  # noqa: F401  (registration)
