"""What every dense ViT backbone of the package shares: output-block presets, frozen
stages, layer ids for layer-wise lr decay, and checked loading of official checkpoints.

A subclass builds its trunk and implements :meth:`DenseViTBackbone.forward_levels`
(the token maps of ``out_indices`` as ``B×C×h×w``), :meth:`layer_id`,
:attr:`embedding_module_names` and, beside the model in the same file, its
converter from the official checkpoint layout (:meth:`convert_official_state_dict`,
in the style of timm's ``checkpoint_filter_fn``).
"""
from __future__ import annotations

import argparse
import fnmatch
import re
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple, Union

import torch
import torch.nn.functional as F
import torch.utils.checkpoint as cp
from mmengine.logging import MMLogger
from mmengine.model import BaseModule
from torch import nn

from ...fileio import load_local_checkpoint

__all__ = [
    'OUT_INDEX_PRESETS', 'resolve_out_indices', 'PYRAMID_SOURCES', 'resolve_pyramid_source',
    'DenseViTBackbone', 'load_checkpoint_file',
    'unwrap_state_dict', 'check_state_dict', 'CONVERTED_MARKER', 'resample_position_embedding',
    'sincos_pos_embed_2d'
]

#: Named choices of the 4 blocks whose outputs feed the feature pyramid.
OUT_INDEX_PRESETS: Dict[str, Tuple[int, ...]] = {
    'vit12': (3, 5, 7, 11),  # 12-block models (ViT-B), RVSA protocol
    'vit24': (5, 11, 17, 23),  # 24-block models (ViT-L), REOBench detection
    'vit24_reobench_segmentation': (3, 5, 7, 11),  # what REOBench used for ViT-L in seg
    'vit32': (7, 15, 23, 31),  # 32-block models (ViT-H)
}

#: Where a backbone takes its 4 pyramid levels from (``pyramid_source``). ``'blocks'``:
#: the token maps of the blocks of ``out_indices``, each after the final norm when
#: ``final_norm`` is set; ``'last_block'``: all 4 levels are the last block's map after
#: the final norm (ViTDet style: the simple feature pyramid rescales that one map ×4,
#: ×2, ×1 and ×½).
PYRAMID_SOURCES = ('blocks', 'last_block')

#: ``meta['converted_by']`` of checkpoints written by
#: ``tools/model_converters/convert_checkpoint.py``.
CONVERTED_MARKER = 'reobench_mm.convert_checkpoint'


def resolve_out_indices(out_indices: Union[None, str, Sequence[int]],
                        depth: int) -> Tuple[int, ...]:
    """Block indices to output: None picks the preset for ``depth`` (12, 24 or 32
    blocks), a string names a preset of :data:`OUT_INDEX_PRESETS`, a sequence is taken
    as given (increasing, each in ``0..depth-1``)."""
    if out_indices is None:
        by_depth = {12: 'vit12', 24: 'vit24', 32: 'vit32'}
        if depth not in by_depth:
            out_indices = tuple(depth * (k + 1) // 4 - 1 for k in range(4))
        else:
            out_indices = OUT_INDEX_PRESETS[by_depth[depth]]
    elif isinstance(out_indices, str):
        if out_indices not in OUT_INDEX_PRESETS:
            raise ValueError(f'unknown out_indices preset {out_indices!r}; valid: '
                             f'{sorted(OUT_INDEX_PRESETS)} or a list of block indices')
        out_indices = OUT_INDEX_PRESETS[out_indices]
    indices = tuple(int(i) for i in out_indices)
    if not indices or any(not 0 <= i < depth for i in indices) \
            or list(indices) != sorted(set(indices)):
        raise ValueError(f'out_indices must be increasing block indices in 0..{depth - 1}, '
                         f'got {tuple(out_indices)}')
    return indices


def resolve_pyramid_source(pyramid_source: str, out_indices: Union[None, str, Sequence[int]],
                           final_norm: Optional[bool], depth: int
                           ) -> Tuple[Union[None, str, Sequence[int]], bool]:
    """``(out_indices, final_norm)`` for a :data:`PYRAMID_SOURCES` choice: unchanged
    for ``'blocks'`` (``final_norm`` None meaning False); the last block and the final
    norm for ``'last_block'``, which takes no ``out_indices`` and needs the norm.

    Raises:
        ValueError: an unknown source, or ``'last_block'`` with ``out_indices`` or with
            ``final_norm=False``.
    """
    if pyramid_source not in PYRAMID_SOURCES:
        raise ValueError(f'pyramid_source must be one of {PYRAMID_SOURCES}, '
                         f'got {pyramid_source!r}')
    if pyramid_source == 'blocks':
        return out_indices, bool(final_norm)
    if out_indices is not None:
        raise ValueError("pyramid_source='last_block' takes all 4 levels from the last "
                         f'block; leave out_indices unset (got {out_indices!r}) or use '
                         "pyramid_source='blocks'")
    if final_norm is False:
        raise ValueError("pyramid_source='last_block' takes the levels after the final "
                         'norm; final_norm must be True or unset')
    return (depth - 1, ), True


# --------------------------------------------------------------------------- checkpoints
def load_checkpoint_file(path: str) -> dict:
    """Load an official or converted checkpoint with ``weights_only=True``.

    Besides tensors and MMEngine's own types, ``argparse.Namespace`` is allowed: MAE-style
    training scripts (SatMAE, Scale-MAE, RVSA's pretraining) store their ``args`` in it.
    """
    loaded = load_local_checkpoint(path, map_location='cpu', extra_globals=[argparse.Namespace])
    if not isinstance(loaded, dict):
        raise TypeError(f'{path}: expected a dict (a state dict or a checkpoint holding one), '
                        f'got {type(loaded).__name__}')
    return loaded


def unwrap_state_dict(checkpoint: dict) -> Tuple[Dict[str, torch.Tensor], dict]:
    """``(state_dict, meta)`` from the usual wrappers: ``{'state_dict': …}``,
    ``{'model': …}``, ``{'module': …}`` and ``module.`` key prefixes (DDP)."""
    meta = checkpoint.get('meta', {}) if isinstance(checkpoint.get('meta'), dict) else {}
    state = checkpoint
    for wrapper in ('state_dict', 'model', 'module'):
        if isinstance(state.get(wrapper), dict):
            state = state[wrapper]
            break
    tensors = {k: v for k, v in state.items() if isinstance(v, torch.Tensor)}
    if not tensors:
        raise ValueError('no tensors found in the checkpoint (looked at the top level and '
                         f"under 'state_dict', 'model', 'module'); keys: {list(state)[:10]}")
    if all(k.startswith('module.') for k in tensors):
        tensors = {k[len('module.'):]: v for k, v in tensors.items()}
    return tensors, meta


def check_state_dict(module: nn.Module, state_dict: Dict[str, torch.Tensor],
                     allowed_missing: Iterable[str] = (), source: str = 'checkpoint',
                     max_listed: int = 8) -> List[str]:
    """Check ``state_dict`` against ``module`` before loading it.

    Every parameter/buffer of ``module`` must be present unless it matches a pattern
    of ``allowed_missing`` (``fnmatch`` style); every key of ``state_dict`` must exist
    in ``module`` with the same shape. Returns the allowed missing keys.

    Raises:
        KeyError: keys are missing or unexpected (a wrong architecture, or a file of
            another model); the message names the first ones of each kind.
        ValueError: shapes differ.
    """
    expected = module.state_dict()
    missing = [k for k in expected if k not in state_dict]
    not_allowed = [k for k in missing
                   if not any(fnmatch.fnmatchcase(k, p) for p in allowed_missing)]
    unexpected = [k for k in state_dict if k not in expected]
    problems = []
    if not_allowed:
        problems.append(f'{len(not_allowed)} missing keys, first: {not_allowed[:max_listed]}')
    if unexpected:
        problems.append(f'{len(unexpected)} unexpected keys, first: {unexpected[:max_listed]}')
    if problems:
        raise KeyError(f'{source} does not fit {type(module).__name__}: '
                       + '; '.join(problems)
                       + '. Is it the checkpoint of this architecture and size?')
    shapes = [f'{k}: checkpoint {tuple(v.shape)} vs model {tuple(expected[k].shape)}'
              for k, v in state_dict.items() if v.shape != expected[k].shape]
    if shapes:
        raise ValueError(f'{source} does not fit {type(module).__name__}: '
                         f'{len(shapes)} shape mismatches, first: {shapes[:max_listed]}')
    return [k for k in missing if k not in not_allowed]


# ------------------------------------------------------------------------------ backbone
def freeze_module(module: nn.Module) -> None:
    """Put ``module`` in evaluation mode and stop gradients to all its parameters."""
    module.eval()
    for param in module.parameters():
        param.requires_grad_(False)


def load_init_checkpoint(module: BaseModule) -> bool:
    """Load ``module.init_cfg``'s ``dict(type='Pretrained', checkpoint=PATH)`` through
    its ``load_pretrained`` and mark it initialised; False (nothing loaded) for any other
    ``init_cfg``.

    Raises:
        ValueError: the ``Pretrained`` entry has other keys than ``checkpoint``.
    """
    init_cfg = module.init_cfg
    if not (isinstance(init_cfg, dict) and init_cfg.get('type') == 'Pretrained'):
        return False
    unknown = set(init_cfg) - {'type', 'checkpoint'}
    if unknown:
        raise ValueError(f'init_cfg Pretrained takes only checkpoint=PATH here, '
                         f'got also {sorted(unknown)}')
    module.load_pretrained(init_cfg['checkpoint'])
    module._is_init = True
    return True


class DenseViTBackbone(BaseModule):
    """Base of the package's ViT backbones for dense tasks.

    Args:
        depth: number of transformer blocks (for ``out_indices`` presets).
        out_indices: blocks whose token maps are returned with ``pyramid_source='blocks'``
            (see :func:`resolve_out_indices`); must be left unset with ``'last_block'``.
        final_norm: apply the trunk's final norm to every returned level (None: False
            with ``'blocks'``, True, and required, with ``'last_block'``).
        frozen_stages: -1 trains everything; 0 freezes the embeddings (patch, position,
            class token and any pre-norm); ``k > 0`` also the first ``k`` blocks.
        with_cp: gradient checkpointing of the blocks while training.
        init_cfg: ``dict(type='Pretrained', checkpoint=PATH)`` loads an official or
            converted checkpoint through :meth:`load_pretrained` (checked keys,
            position embeddings interpolated to the model's grid).
        pyramid_source: one of :data:`PYRAMID_SOURCES`: the maps of ``out_indices``
            (``'blocks'``) or the last block's normalised map for all 4 levels
            (``'last_block'``).
    """

    #: fnmatch patterns of model keys an official checkpoint does not provide.
    allowed_missing_keys: Tuple[str, ...] = ()
    #: name of the architecture family, recorded in converted checkpoints.
    arch_family: str = ''
    #: keywords of parameter names that get no weight decay (besides 1-D parameters).
    no_weight_decay_keywords: Tuple[str, ...] = ('pos_embed', 'cls_token')

    def __init__(self, depth: int, out_indices: Union[None, str, Sequence[int]] = None,
                 final_norm: Optional[bool] = False, frozen_stages: int = -1,
                 with_cp: bool = False, init_cfg: Optional[dict] = None,
                 pyramid_source: str = 'blocks') -> None:
        super().__init__(init_cfg=init_cfg)
        out_indices, final_norm = resolve_pyramid_source(pyramid_source, out_indices,
                                                         final_norm, depth)
        self.depth = depth
        self.pyramid_source = pyramid_source
        self.out_indices = resolve_out_indices(out_indices, depth)
        self.final_norm = final_norm
        if not -1 <= frozen_stages <= depth:
            raise ValueError(f'frozen_stages must be in -1..{depth}, got {frozen_stages}')
        self.frozen_stages = frozen_stages
        self.with_cp = with_cp

    # ---- to implement
    def forward_levels(self, x: torch.Tensor) -> List[torch.Tensor]:
        """The ``B×C×h×w`` token maps (prefix tokens dropped) of ``out_indices``."""
        raise NotImplementedError

    @property
    def embedding_module_names(self) -> Tuple[str, ...]:
        """Attribute paths of the embedding parameters/modules (frozen stage 0, layer
        decay group 0)."""
        raise NotImplementedError

    @property
    def block_prefix(self) -> str:
        """The state-dict prefix of block ``i`` is ``f'{block_prefix}{i}.'``."""
        return 'blocks.'

    @property
    def blocks_list(self) -> nn.ModuleList:
        module = self
        for part in self.block_prefix.rstrip('.').split('.'):
            module = getattr(module, part)
        return module

    @classmethod
    def convert_official_state_dict(cls, state_dict: Dict[str, torch.Tensor]
                                    ) -> Dict[str, torch.Tensor]:
        """Official checkpoint keys → this model's keys (drop decoders, heads, text
        towers; rename). The default keeps everything."""
        return dict(state_dict)

    def adapt_state_dict(self, state_dict: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """Fit converted weights to this instance (e.g. interpolate position embeddings
        to its grid). The default changes nothing."""
        return state_dict

    # ---- shared behaviour
    def run_blocks(self, tokens: torch.Tensor,
                   to_map: Callable[[int, torch.Tensor], torch.Tensor]) -> List[torch.Tensor]:
        """Run :attr:`blocks_list` over ``tokens`` up to the last of ``out_indices`` (each
        block under gradient checkpointing when ``with_cp``, training, with gradients) and
        return ``to_map(index, tokens)`` for every block of ``out_indices``, in order."""
        levels = []
        for index, block in enumerate(self.blocks_list):
            if self.with_cp and self.training and tokens.requires_grad:
                tokens = cp.checkpoint(block, tokens, use_reentrant=False)
            else:
                tokens = block(tokens)
            if index in self.out_indices:
                levels.append(to_map(index, tokens))
            if index == self.out_indices[-1]:
                break
        return levels

    def forward(self, x: torch.Tensor) -> Tuple[torch.Tensor, ...]:
        """The 4 pyramid inputs: the maps of ``out_indices``, or with
        ``pyramid_source='last_block'`` the last block's normalised map 4 times."""
        levels = tuple(self.forward_levels(x))
        if self.pyramid_source == 'last_block':
            return levels * 4
        return levels

    @property
    def num_layers(self) -> int:
        """Layer-decay groups: embeddings (0), one per block, everything after."""
        return self.depth + 2

    def layer_id(self, param_name: str) -> int:
        """Layer-decay group of a parameter of this backbone (name relative to it)."""
        if any(param_name == n or param_name.startswith(n + '.')
               for n in self.embedding_module_names):
            return 0
        match = re.match(re.escape(self.block_prefix) + r'(\d+)\.', param_name)
        if match:
            return int(match.group(1)) + 1
        return self.num_layers - 1

    def no_weight_decay_names(self) -> Set[str]:
        """Parameters without weight decay: 1-D ones (norms, biases, class token) and
        those named by :attr:`no_weight_decay_keywords`."""
        return {
            name for name, param in self.named_parameters()
            if param.ndim <= 1 or name.endswith('.bias')
            or any(k in name for k in self.no_weight_decay_keywords)
        }

    def _frozen_modules(self) -> List[Union[nn.Module, nn.Parameter]]:
        if self.frozen_stages < 0:
            return []
        found = []
        for name in self.embedding_module_names:
            target = self
            for part in name.split('.'):
                target = getattr(target, part, None)
            if target is not None:
                found.append(target)
        found.extend(self.blocks_list[:self.frozen_stages])
        return found

    def _freeze_stages(self) -> None:
        for target in self._frozen_modules():
            if isinstance(target, nn.Parameter):
                target.requires_grad_(False)
            else:
                freeze_module(target)

    def train(self, mode: bool = True) -> 'DenseViTBackbone':
        super().train(mode)
        self._freeze_stages()
        return self

    def init_weights(self) -> None:
        if not load_init_checkpoint(self):
            super().init_weights()

    def load_pretrained(self, path: str) -> List[str]:
        """Load an official checkpoint (converted on the fly) or one written by
        ``tools/model_converters/convert_checkpoint.py``; returns the allowed missing
        keys."""
        state_dict = self.prepare_state_dict(load_checkpoint_file(path))
        allowed = check_state_dict(self, state_dict, self.allowed_missing_keys, source=path)
        self.load_state_dict(state_dict, strict=False)  # checked just above
        logger = MMLogger.get_current_instance()
        logger.info(f'{type(self).__name__}: loaded {len(state_dict)} tensors from {path}'
                    + (f'; not in the checkpoint (allowed): {allowed}' if allowed else ''))
        return allowed

    def prepare_state_dict(self, checkpoint: dict) -> Dict[str, torch.Tensor]:
        """Unwrap, convert (unless already converted) and adapt a loaded checkpoint."""
        state_dict, meta = unwrap_state_dict(checkpoint)
        if meta.get('converted_by') != CONVERTED_MARKER:
            state_dict = self.convert_official_state_dict(state_dict)
        return self.adapt_state_dict(state_dict)


def resample_position_embedding(pos_embed: torch.Tensor, new_grid: Tuple[int, int],
                                num_prefix_tokens: int, antialias: bool = True,
                                old_grid: Optional[Tuple[int, int]] = None) -> torch.Tensor:
    """Resample a ``(1, P + h·w, C)`` position embedding to ``new_grid``.

    The ``P`` prefix rows (class token) are kept apart and unchanged; the ``h×w`` grid
    rows are resampled with ``torch.nn.functional.interpolate(mode='bicubic',
    align_corners=False, antialias=antialias)`` in float32 and cast back.

    ``antialias=True`` is timm's ``resample_abs_pos_embed`` default and open_clip's
    ``resize_pos_embed``; ``antialias=False`` is the MAE/DeiT ``interpolate_pos_embed``
    that the SatMAE and SatMAE++ code carries. The two differ when the grid shrinks and,
    less, when it grows.

    Args:
        pos_embed: ``(1, P + h·w, C)`` or ``(P + h·w, C)``.
        new_grid: ``(rows, columns)`` of the output grid.
        num_prefix_tokens: ``P``.
        antialias: antialiased bicubic (see above).
        old_grid: ``(h, w)`` of the input grid; None infers a square one.

    Returns:
        ``(1, P + rows·columns, C)`` in the dtype of ``pos_embed`` (the input itself,
        with a batch axis, when the grid is unchanged).

    Raises:
        ValueError: the rows do not form ``old_grid`` (or a square grid).
    """
    if pos_embed.ndim == 2:
        pos_embed = pos_embed[None]
    tokens = pos_embed.shape[1] - num_prefix_tokens
    if old_grid is None:
        side = int(round(max(tokens, 0)**0.5))
        old_grid = (side, side)
    old_grid = (int(old_grid[0]), int(old_grid[1]))
    if tokens <= 0 or old_grid[0] * old_grid[1] != tokens:
        raise ValueError(f'position embedding with {tokens} grid rows is not a '
                         f'{old_grid[0]}x{old_grid[1]} grid (shape {tuple(pos_embed.shape)}, '
                         f'{num_prefix_tokens} prefix rows)')
    new_grid = (int(new_grid[0]), int(new_grid[1]))
    if old_grid == new_grid:
        return pos_embed
    prefix, grid = pos_embed[:, :num_prefix_tokens], pos_embed[:, num_prefix_tokens:]
    channels = grid.shape[-1]
    grid = grid.float().reshape(1, old_grid[0], old_grid[1], channels).permute(0, 3, 1, 2)
    grid = F.interpolate(grid, size=new_grid, mode='bicubic', align_corners=False,
                         antialias=antialias)
    grid = grid.permute(0, 2, 3, 1).reshape(1, new_grid[0] * new_grid[1], channels)
    return torch.cat([prefix, grid.to(pos_embed.dtype)], dim=1)


def sincos_pos_embed_2d(embed_dims: int, grid: Tuple[int, int],
                        ratio: Union[float, Tuple[float, float]] = 1.0,
                        dtype: torch.dtype = torch.float32,
                        device: Optional[torch.device] = None) -> torch.Tensor:
    """The MAE-family fixed 2-D sin-cos position embedding of an ``h×w`` grid, ``(h·w, D)``
    in row-major order, without a class row.

    Patch ``(i, j)`` (row ``i``, column ``j``) sits at ``(x, y) = (j·r_x, i·r_y)``; with
    ``ω_k = 10000^(-k/(D/4))``, ``k = 0..D/4-1``, its embedding is
    ``[sin(x·ω), cos(x·ω), sin(y·ω), cos(y·ω)]`` (the first half encodes the column).
    ``ratio = 1`` is MAE's / SatMAE's ``get_2d_sincos_pos_embed``; Scale-MAE scales the
    positions by its GSD ratio.

    Args:
        embed_dims: ``D``, divisible by 4.
        grid: ``(h, w)``.
        ratio: one position scale, or ``(row, column)`` scales.
        dtype: the precision of the computation and of the result (MAE and SatMAE compute
            in float64 and store float32; Scale-MAE computes in float32).
        device: where to compute.

    Raises:
        ValueError: ``embed_dims`` is not divisible by 4.
    """
    if embed_dims % 4:
        raise ValueError(f'the 2-D sin-cos position embedding needs embed_dims divisible by 4, '
                         f'got {embed_dims}')
    rows, cols = int(grid[0]), int(grid[1])
    ratio_y, ratio_x = (ratio, ratio) if isinstance(ratio, (int, float)) else ratio
    quarter = embed_dims // 4
    omega = torch.arange(quarter, dtype=dtype, device=device) / quarter
    omega = 1.0 / 10000**omega
    y = torch.arange(rows, dtype=dtype, device=device) * ratio_y
    x = torch.arange(cols, dtype=dtype, device=device) * ratio_x
    ang_x = torch.outer(x, omega)  # (w, D/4)
    ang_y = torch.outer(y, omega)  # (h, D/4)
    emb_x = torch.cat([ang_x.sin(), ang_x.cos()], dim=1)[None].expand(rows, cols, -1)
    emb_y = torch.cat([ang_y.sin(), ang_y.cos()], dim=1)[:, None].expand(rows, cols, -1)
    return torch.cat([emb_x, emb_y], dim=-1).reshape(rows * cols, embed_dims)
