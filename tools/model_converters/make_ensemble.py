"""Combine k segmentor checkpoints into one checkpoint of their deep ensemble.

    python tools/model_converters/make_ensemble.py CONFIG_1 CHECKPOINT_1 CONFIG_2 CHECKPOINT_2
        [CONFIG_3 CHECKPOINT_3 ...] --out ENSEMBLE.pth [--out-config ENSEMBLE_CONFIG.py]

Each member checkpoint is first loaded strictly into the model of its own config (a
member that does not fit is an error naming its files and keys); the output holds the
members' weights under ``members.<i>.`` (``state_dict``) and in ``meta`` the members'
configs, checkpoints and SHA-256 and their training classes (which must agree). It loads
strictly into ``model = dict(type='SegmentationEnsemble', members=[<model of CONFIG_1>,
...])``; ``--out-config`` writes that config (the first member config with its model
replaced; the members' test pipelines must be equal), ready for ``tools/test.py`` and
``tools/robustness_test.py``.

Exit status 0 on success, 2 for bad inputs (one line on stderr says what is wrong).
"""
import argparse
import copy
import os.path as osp
import re
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    from reobench_cli import ToolArgumentParser

    parser = ToolArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('members', nargs='+', metavar='CONFIG CHECKPOINT',
                        help='k >= 2 pairs: config file of a member, then its checkpoint')
    parser.add_argument('--out', required=True, help='where to write the ensemble checkpoint')
    parser.add_argument('--out-config', default=None,
                        help='also write the ensemble config here (the first member config '
                        'with model = SegmentationEnsemble of the members)')
    args = parser.parse_args(argv)
    if len(args.members) % 2 or len(args.members) < 4:
        parser.error(f'expected k >= 2 pairs CONFIG CHECKPOINT, got {len(args.members)} '
                     f'arguments: {args.members}')
    args.members = [(args.members[i], args.members[i + 1])
                    for i in range(0, len(args.members), 2)]
    for config, _ in args.members:
        if not config.endswith('.py'):
            parser.error(f'{config!r} is not a config file (.py); the arguments are pairs '
                         'CONFIG CHECKPOINT')
    return args


def make_ensemble(members: Sequence[Tuple[str, str]], out: str,
                  out_config: Optional[str] = None) -> Dict[str, Any]:
    """Write the ensemble checkpoint of ``members`` (``(config, checkpoint)`` pairs) to
    ``out`` (and its config to ``out_config``); returns the checkpoint's ``meta``.

    Raises:
        FileNotFoundError: a config or checkpoint does not exist.
        CheckpointError: a checkpoint cannot be read, or does not fit its member's model.
        ValueError, TypeError: fewer than 2 members, members of different scopes, classes,
            data preprocessors or (for ``out_config``) test pipelines, detectors.
    """
    import torch
    from mmengine.registry import DefaultScope

    import reobench_mm  # noqa: F401  (registration)
    from reobench_mm.utils.config import read_config
    from reobench_mm.engine.checkpoint import (REVISE_KEYS, checkpoint_state_dict,
                                               load_checkpoint_strict, read_checkpoint)
    from reobench_mm.fileio import atomic_open, file_sha256
    from reobench_mm.models.segmentors import ensemble_checkpoint, ensemble_model_cfg
    from reobench_mm.registry import MODELS, ensure_custom_imports
    from reobench_mm.utils.config import get_test_pipelines

    for config, checkpoint in members:
        if not osp.isfile(config):
            raise FileNotFoundError(f'config {config!r} does not exist')
    configs = [read_config(config) for config, _ in members]
    scopes = [cfg.get('default_scope') for cfg in configs]
    if len(set(scopes)) != 1:
        raise ValueError(f'the member configs have different default scopes {scopes}; an '
                         'ensemble combines segmentors of one toolbox (mmseg)')
    model_cfg = ensemble_model_cfg([cfg.model for cfg in configs])
    if out_config is not None:
        pipelines = [_plain(get_test_pipelines(cfg)) for cfg in configs]
        for index, pipeline in enumerate(pipelines[1:], start=1):
            if pipeline != pipelines[0]:
                raise ValueError(
                    f'the test pipelines of {members[0][0]!r} and {members[index][0]!r} '
                    'differ; one data pipeline feeds every member of an ensemble, so the '
                    f'members must be tested alike ({pipelines[0]} vs {pipeline})')

    state_dicts: List[Dict[str, Any]] = []
    metas, sources = [], []
    for config, path in members:
        checkpoint = read_checkpoint(path)
        weights = checkpoint_state_dict(checkpoint, path)
        revised = {}
        for key, value in weights.items():
            for pattern, replacement in REVISE_KEYS:
                key = re.sub(pattern, replacement, key)
            revised[key] = value
        state_dicts.append(revised)
        metas.append(checkpoint.get('meta') if 'state_dict' in checkpoint else None)
        sources.append(dict(config=config, checkpoint=path,
                            checkpoint_sha256=file_sha256(path) if osp.isfile(path) else None))
    combined = ensemble_checkpoint(state_dicts, metas, sources)

    with DefaultScope.overwrite_default_scope(scopes[0]):
        model = MODELS.build(copy.deepcopy(model_cfg))
    for index, ((config, path), weights) in enumerate(zip(members, state_dicts)):
        # each member's own files named when it does not fit
        load_checkpoint_strict(model.members[index], path, config=config,
                               checkpoint={'state_dict': weights}, logger='silent')
    load_checkpoint_strict(model, out, config='the ensemble of ' + ', '.join(
        config for config, _ in members), checkpoint=combined, logger='silent')

    with atomic_open(out, 'wb') as handle:
        torch.save(combined, handle)
    if out_config is not None:
        cfg = copy.deepcopy(configs[0])
        cfg.model = model_cfg
        cfg.load_from = None
        ensure_custom_imports(cfg)
        cfg.dump(out_config)
    return combined['meta']


def _plain(value: Any) -> Any:
    """``value`` with mappings as dicts and tuples as lists (for comparing configs)."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    from reobench_mm.engine.checkpoint import CheckpointError
    try:
        meta = make_ensemble(args.members, args.out, args.out_config)
    except (FileNotFoundError, CheckpointError, ValueError, TypeError) as error:
        print(f'error: {error}', file=sys.stderr)
        return 2
    classes = meta.get('dataset_meta', {}).get('classes')
    print(f'wrote {args.out}: an ensemble of {meta["ensemble"]["num_members"]} members'
          + (f' ({len(classes)} classes)' if classes else '')
          + (f'; config {args.out_config}' if args.out_config else ''))
    return 0


if __name__ == '__main__':
    from reobench_cli import run_tool
    sys.exit(run_tool(main))
