"""Dataset helpers, dataset wrappers and the embedded synthetic demo data."""
from .dior_r import DIORRDataset, DIORRXMLDataset  # noqa: F401
from .subset import FractionDataset, HeldOutSplitDataset, apply_data_fraction  # noqa: F401
from .epoch import EpochIndexedDataset, EpochIndexSampler  # noqa: F401
from .class_mapped import ClassMappedDataset  # noqa: F401
from .ftw import FTWDataset  # noqa: F401
from .sen1floods11 import Sen1Floods11Dataset  # noqa: F401
from .deepglobe_dfc2022 import DFC2022Dataset, DeepGlobeLandCoverDataset  # noqa: F401
# the calibration study's segmentation sets, read in their release layouts
from .cloudsen12 import CloudSEN12Dataset  # noqa: F401
from .dynamicearthnet import DynamicEarthNetDataset  # noqa: F401
from .flair2 import FLAIR2Dataset  # noqa: F401
from .spacenet2 import SpaceNet2Dataset  # noqa: F401
