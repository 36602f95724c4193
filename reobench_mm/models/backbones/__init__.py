"""Earth-observation ViT backbones for dense tasks, with official-checkpoint loaders, and a
channel adapter for data with another number of bands."""
from .base import (OUT_INDEX_PRESETS, DenseViTBackbone, check_state_dict,
                   load_checkpoint_file, resample_position_embedding, resolve_out_indices,
                   unwrap_state_dict)
from .channel_adapter import ChannelAdapter
from .clay import ClayV15
from .clip_vit import CLIPVisionTransformer
from .dofa import DOFA
from .imagenet_vit import ImageNetViT
from .olmoearth import OlmoEarth
from .panopticon import Panopticon
from .prithvi import PrithviV2
from .rcf import RandomConvFeatures
from .rvsa import RVSA
from .satmae import SatMAE, SatMAEPlusPlus
from .scale_mae import ScaleMAE
from .terramind import TerraMind
from .timm_features import TimmFeatureEncoder
from .timm_vit import TimmViTBackbone
from .vitae_rvsa import ViTAENCRVSA

__all__ = [
    'DenseViTBackbone', 'TimmViTBackbone', 'RVSA', 'ViTAENCRVSA', 'SatMAE', 'SatMAEPlusPlus',
    'ScaleMAE', 'ImageNetViT', 'ChannelAdapter', 'TimmFeatureEncoder', 'RandomConvFeatures',
    'PrithviV2', 'TerraMind',
    'CLIPVisionTransformer', 'ClayV15', 'DOFA', 'OUT_INDEX_PRESETS', 'resolve_out_indices',
    'load_checkpoint_file', 'unwrap_state_dict', 'check_state_dict',
    'resample_position_embedding', 'Panopticon', 'OlmoEarth'
]
