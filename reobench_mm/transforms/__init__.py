"""Pipeline transforms registered for mmseg, mmdet and mmrotate pipelines, and the
rules of where the corruption step goes in a pipeline."""
from .corruption import ApplyCorruption, move_boxes
from .placement import Placement, corruption_position, corruption_steps, place_corruption
from .random_corruption import RandomCorruption, training_corruptions

__all__ = ['ApplyCorruption', 'RandomCorruption', 'training_corruptions', 'corruption_steps',
           'move_boxes', 'Placement', 'corruption_position', 'place_corruption']
