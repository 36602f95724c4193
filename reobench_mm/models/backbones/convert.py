"""Official checkpoint → MMEngine-ready backbone checkpoint (library side of
``tools/model_converters/convert_checkpoint.py``)."""
from __future__ import annotations

import os.path as osp
from typing import Dict, Optional

import torch

from ...fileio import atomic_open, file_sha256
from ...registry import MODELS
from ...version import __version__
from .base import (CONVERTED_MARKER, DenseViTBackbone, check_state_dict,
                   load_checkpoint_file)

__all__ = ['backbone_cfg_from_arch', 'convert_checkpoint', 'dense_backbone_types']


def dense_backbone_types() -> Dict[str, type]:
    """Registered backbones of the package, by name."""
    import reobench_mm.models  # noqa: F401  (registration)
    return {name: cls for name, cls in MODELS.module_dict.items()
            if isinstance(cls, type) and issubclass(cls, DenseViTBackbone)}


def backbone_cfg_from_arch(arch: str, img_size: Optional[int] = None,
                           options: Optional[dict] = None) -> dict:
    """``'TYPE'`` or ``'TYPE:PRESET'`` (e.g. ``'CLIPVisionTransformer:ViT-B/32'``) → a
    backbone config; ``options`` are more keyword arguments, dotted keys nested
    (``{'arch.embed_dims': 32}`` → ``arch=dict(embed_dims=32)``)."""
    kinds = dense_backbone_types()
    name, _, preset = arch.partition(':')
    if name not in kinds:
        raise ValueError(f'unknown backbone {name!r}; valid: {sorted(kinds)} '
                         "(optionally 'TYPE:PRESET', e.g. 'CLIPVisionTransformer:ViT-L/14')")
    cfg = dict(type=name)
    if preset:
        zoo = getattr(kinds[name], 'arch_zoo', {})
        if preset not in zoo:
            raise ValueError(f'unknown preset {preset!r} of {name}; valid: {sorted(zoo)}')
        cfg['arch'] = preset
    if img_size is not None:
        cfg['img_size'] = img_size
    for key, value in (options or {}).items():  # dotted keys nest: arch.embed_dims=32
        *parents, leaf = key.split('.')
        target = cfg
        for part in parents:
            target = target.setdefault(part, {})
            if not isinstance(target, dict):
                raise ValueError(f'option {key!r}: {part!r} is {target!r}, not a dict')
        target[leaf] = value
    return cfg


def convert_checkpoint(src: str, dst: str, backbone_cfg: dict) -> dict:
    """Convert ``src`` (an official checkpoint) for the backbone ``backbone_cfg`` and
    write ``{'state_dict': …, 'meta': …}`` to ``dst`` atomically.

    The result loads with ``init_cfg=dict(type='Pretrained', checkpoint=dst)`` without
    conversion (position embeddings are still fitted to the instance's grid). Returns
    the ``meta`` written.

    Raises:
        KeyError / ValueError: the checkpoint does not fit the architecture (the
            message names the first mismatching keys or shapes).
    """
    cfg = {k: v for k, v in backbone_cfg.items() if k != 'init_cfg'}
    model = MODELS.build(cfg)
    if not isinstance(model, DenseViTBackbone):
        raise TypeError(f'{cfg["type"]} is not one of the package backbones '
                        f'{sorted(dense_backbone_types())}')
    state_dict = model.prepare_state_dict(load_checkpoint_file(src))
    allowed_missing = check_state_dict(model, state_dict, model.allowed_missing_keys, src)
    meta = dict(converted_by=CONVERTED_MARKER, backbone=cfg, source=osp.basename(src),
                source_sha256=file_sha256(src), missing_allowed=allowed_missing,
                reobench_mm_version=__version__)
    state_dict = {k: v.detach().clone().contiguous() for k, v in state_dict.items()}
    with atomic_open(dst, 'wb') as handle:
        torch.save(dict(state_dict=state_dict, meta=meta), handle)
    return meta
