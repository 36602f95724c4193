"""Backbones, necks and checkpoint converters."""
