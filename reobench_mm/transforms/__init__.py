"""Pipeline transforms registered for mmseg, mmdet and mmrotate pipelines, and the
rules of where the corruption step goes in a pipeline."""
from .class_map import MapClasses
from .label_erosion import ErodeLabelBoundaries, erode_label_boundaries
from .corruption import ApplyCorruption, ApplyCorruptionToLabels, move_boxes, move_labels
from .placement import Placement, corruption_position, corruption_steps, place_corruption
from .random_corruption import RandomCorruption, training_corruptions
from .raster_loading import IgnoreNodataLabels, LoadMultiBandImageFromFile
from .onehot_labels import LoadOneHotAnnotations
from .colour_labels import LoadAnnotationsFromColours
from .nodata_fill import FillNodata

__all__ = ['ApplyCorruption', 'MapClasses', 'ApplyCorruptionToLabels', 'RandomCorruption',
           'training_corruptions', 'corruption_steps', 'move_boxes', 'move_labels',
           'Placement', 'corruption_position', 'place_corruption', 'ErodeLabelBoundaries',
           'erode_label_boundaries', 'LoadMultiBandImageFromFile', 'IgnoreNodataLabels',
           'LoadAnnotationsFromColours', 'FillNodata', 'LoadOneHotAnnotations']
