"""Necks turning single-scale ViT token maps into feature pyramids."""
from .simple_feature_pyramid import SimpleFeaturePyramid, pyramid_scales

__all__ = ['SimpleFeaturePyramid', 'pyramid_scales']
