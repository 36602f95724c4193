"""Dataset helpers and the embedded synthetic demo data."""
from .dior_r import DIORRDataset, DIORRXMLDataset  # noqa: F401
