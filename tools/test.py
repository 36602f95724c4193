"""Test (and evaluate) a checkpoint, clean or under one corruption.

    python tools/test.py CONFIG CHECKPOINT [--work-dir DIR] [--out PATH] [--show]
                         [--show-dir DIR] [--cfg-options KEY=VALUE ...]
                         [--launcher none|pytorch|slurm|mpi] [--partial-checkpoint]
                         [--corruption NAME --severity K [--seed S]
                          [--protocol reobench|geofm_calibration] [--border reflect|constant]]

``--corruption`` makes the test loop a ``CorruptionTestLoop`` with that condition, which
puts ``ApplyCorruption`` where it belongs in the test pipeline (right after image
loading; after the annotation loading and ``ConvertBoxType`` for geometric corruptions)
or updates (and, if misplaced, moves) the one there; ``--cfg-options
test_cfg.corruption=NAME test_cfg.severity=K`` does the same. The metrics go to
``{work_dir}/metrics_{tag}.json`` (``tag`` = ``clean`` or ``{corruption}_s{severity}``),
and ``--out``/``--show-dir`` get ``_{tag}`` as suffix. ``--out``: segmentation, a folder
for predicted label maps; rotated detection, a ``.pkl`` file of the raw predictions.

A config whose ``test_cfg`` is a ``RobustnessTestLoop`` evaluates every condition it
selects in one run (its records, ``results.json`` and report go to the work dir); the
metrics it returns go to ``{work_dir}/metrics_robustness.json``.

The checkpoint is loaded strictly, as the robustness sweep loads it: a file that cannot
be read, or whose weights do not fit the model (missing, unexpected or mis-shaped keys),
stops the run with exit code 2 and leaves the work dir as it was. ``--partial-checkpoint``
loads what fits and logs what did not.
"""
import os
import os.path as osp
import sys
import time

# The OpenMMLab imports live in the functions: MMRotate's DOTAMetric evaluates in a
# 'spawn' process pool whose workers re-import this file, and need none of them.


def parse_args():
    from mmengine.config import DictAction

    from reobench_corruptions import PROTOCOLS
    from reobench_corruptions.geometric import BORDER_MODES

    from reobench_cli import ToolArgumentParser

    parser = ToolArgumentParser(
        description='Test a segmentor or rotated detector, clean or corrupted')
    parser.add_argument('config', help='test config file path')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument('--work-dir', help='the folder for logs and the metrics file')
    parser.add_argument('--out', help='segmentation: a folder for the predicted label maps; '
                        'rotated detection: a .pkl file for the raw predictions '
                        '(suffixed with the corruption tag)')
    parser.add_argument('--show', action='store_true', help='show the predictions')
    parser.add_argument('--show-dir', help='save painted predictions in this folder '
                        '(suffixed with the corruption tag)')
    parser.add_argument('--wait-time', type=float, default=2, help='--show interval (s)')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override config settings, KEY=VALUE (lists: key="[a,b]"); '
                        'test_cfg.corruption=NAME test_cfg.severity=K sets the corruption '
                        'as --corruption/--severity do')
    parser.add_argument('--partial-checkpoint', action='store_true',
                        help='load a checkpoint that does not fit the model completely '
                        '(what does not fit is logged as a warning) instead of stopping')
    parser.add_argument('--launcher', choices=['none', 'pytorch', 'slurm', 'mpi'],
                        default='none', help='job launcher')
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)
    group = parser.add_argument_group('corruption')
    group.add_argument('--corruption', help="corruption name (or 'clean')")
    group.add_argument('--severity', type=int, help='severity 1..5 (0 = clean)')
    group.add_argument('--seed', type=int, help='seed of the corruption draws (default 0)')
    group.add_argument('--protocol', choices=PROTOCOLS,
                       help='corruption protocol (default reobench)')
    group.add_argument('--border', choices=list(BORDER_MODES),
                       help='border of rotate/translate (default reflect)')
    args = parser.parse_args()
    os.environ.setdefault('LOCAL_RANK', str(args.local_rank))
    return args, parser


def condition_from_args(args, parser):
    """The condition of the command line (a ``Condition``), or None without
    --corruption.

    Raises:
        KeyError, ValueError: an invalid condition.
    """
    from reobench_corruptions.condition import CLEAN_NAME, Condition

    extras = {k: getattr(args, k) for k in ('severity', 'seed', 'protocol', 'border')}
    if args.corruption is None:
        given = [f'--{k}' for k, v in extras.items() if v is not None]
        if given:
            parser.error(f'{", ".join(given)} given without --corruption')
        return None
    if args.severity is None and args.corruption != CLEAN_NAME:
        parser.error(f'--corruption {args.corruption} needs --severity (1..5)')
    return Condition.of(args.corruption, args.severity or 0, args.seed, args.protocol,
                        args.border)


def main() -> int:
    args, parser = parse_args()
    from mmengine.dist import is_main_process
    from mmengine.logging import print_log
    from mmengine.registry import RUNNERS
    from mmengine.runner import Runner

    from reobench_mm.engine.checkpoint import (CheckpointError, check_checkpoint_classes,
                                               load_checkpoint_strict, read_checkpoint)
    from reobench_mm.fileio import dump_json_atomic, plain_float
    from reobench_mm.engine.workdir import restored_on_failure, wait_for_fresh_log_folder
    from reobench_mm.evaluation.keys import SEGMENTATION
    from reobench_mm.robustness.options import robustness_options_given
    from reobench_mm.utils.config import prepare_test_config, tagged_path
    from reobench_mm.transforms.placement import condition_of, corruption_steps

    try:
        condition = condition_from_args(args, parser)
        setup = prepare_test_config(
            args.config, args.checkpoint, work_dir=args.work_dir, out=args.out,
            show=args.show, show_dir=args.show_dir, wait_time=args.wait_time,
            cfg_options=args.cfg_options, launcher=args.launcher, corruption=condition,
            robustness=condition is None and robustness_options_given(args.cfg_options))
        checkpoint = read_checkpoint(args.checkpoint)  # before anything is written
    except (FileNotFoundError, KeyError, ValueError) as error:
        if isinstance(error, CheckpointError):
            print(f'error: {error}', file=sys.stderr)
            return 2
        parser.error(error.args[0] if isinstance(error, KeyError) else str(error))
    cfg = setup.cfg
    cfg.load_from = None  # loaded strictly below, as Runner.test() would load it
    dumped = [osp.basename(cfg.filename)] if cfg.filename else []
    outputs = [tagged_path(path, setup.tag, is_dir=True) for path in (args.show_dir, )
               if path] + ([tagged_path(args.out, setup.tag, is_dir=True)]
                           if args.out and setup.task == SEGMENTATION else [])
    try:
        with restored_on_failure(cfg.work_dir, keep=dumped, outputs=outputs):
            wait_for_fresh_log_folder(cfg.work_dir)
            runner = Runner.from_cfg(cfg) if 'runner_type' not in cfg else RUNNERS.build(cfg)
            if setup.dump_file is not None:
                from mmengine.evaluator import DumpResults
                runner.test_evaluator.metrics.append(
                    DumpResults(out_file_path=setup.dump_file))
            # Runner.test(), with the checkpoint loaded strictly at the same point
            loop = runner.test_loop
            applied = condition_of(corruption_steps(loop.dataloader.dataset))
            if applied.tag != setup.tag:  # never report under another label
                raise RuntimeError(f'the built test pipeline applies {applied.settings()}, '
                                   f'but the run was prepared for {setup.corruption}')
            if len(loop.dataloader.dataset):  # a wrong placement refuses the first sample
                loop.dataloader.dataset[0]
            runner.call_hook('before_run')
            # the loops' own check, here with the file's name (the runner loads no file)
            check_checkpoint_classes(checkpoint, getattr(loop.dataloader.dataset, 'metainfo',
                                                         None), args.checkpoint)
            runner.call_hook('after_load_checkpoint', checkpoint=checkpoint)
            load_checkpoint_strict(runner.model, args.checkpoint, config=args.config,
                                   checkpoint=checkpoint, strict=not args.partial_checkpoint)
            runner.logger.info(f'Load checkpoint from {args.checkpoint}')
            if setup.robustness:  # RobustnessTestLoop: loaded here, strictly or on purpose
                loop.set_source(config=args.config, checkpoint=args.checkpoint,
                                cfg_options=args.cfg_options, checkpoint_loaded=True)
    except (CheckpointError, RuntimeError) as error:  # refused: nothing was written
        hint = ' (--partial-checkpoint loads what fits)' \
            if isinstance(error, CheckpointError) else ''
        print(f'error: {error}{hint}', file=sys.stderr)
        return 2
    label = 'robustness' if setup.robustness else setup.tag
    if not setup.robustness:
        print_log(f'corruption: {setup.tag} ({setup.corruption}), task: {setup.task}',
                  logger='current')
    start = time.time()
    metrics = loop.run()
    runner.call_hook('after_run')
    seconds = time.time() - start
    metrics = {key: plain_float(value) for key, value in metrics.items()}
    print_log(f'metrics [{label}]: ' + '  '.join(f'{k}: {v:.4f}' for k, v in metrics.items()),
              logger='current')
    if is_main_process():
        dump_json_atomic(dict(config=args.config, checkpoint=args.checkpoint, task=setup.task,
                              tag=label, **({} if setup.robustness else setup.corruption),
                              metrics=metrics,
                              test_seconds=round(seconds, 2),
                              time=time.strftime('%Y-%m-%dT%H:%M:%S')),
                         setup.metrics_file)
        print_log(f'metrics written to {setup.metrics_file}', logger='current')
    return 0


if __name__ == '__main__':
    from reobench_cli import run_tool
    sys.exit(run_tool(main))
