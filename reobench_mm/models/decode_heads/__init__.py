"""Decode heads: the sparse variational GP classification head of the SVGP probe."""
from .svgp_head import GPYTORCH_REQUIREMENT, SVGPHead

__all__ = ['GPYTORCH_REQUIREMENT', 'SVGPHead']
