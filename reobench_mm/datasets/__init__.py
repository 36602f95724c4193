"""Dataset helpers, dataset wrappers and the embedded synthetic demo data."""
from .dior_r import DIORRDataset, DIORRXMLDataset  # noqa: F401
from .subset import FractionDataset, HeldOutSplitDataset, apply_data_fraction  # noqa: F401
from .epoch import EpochIndexedDataset, EpochIndexSampler  # noqa: F401
from .class_mapped import ClassMappedDataset  # noqa: F401
