"""Backbones, necks and checkpoint converters."""
from . import backbones, necks  # noqa: F401  (registration)
