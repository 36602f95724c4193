"""Label structures below both the transforms and the datasets: :class:`ClassMap`, a map
from one label set onto another (pure numpy), which the ``MapClasses`` pipeline step and
the ``ClassMappedDataset`` wrapper both apply."""
from .class_map import ClassMap, MappingLike

__all__ = ['ClassMap', 'MappingLike']
