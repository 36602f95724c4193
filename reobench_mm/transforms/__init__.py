"""Pipeline transforms registered for mmseg, mmdet and mmrotate pipelines."""
from .corruption import ApplyCorruption, move_boxes

__all__ = ['ApplyCorruption', 'move_boxes']
