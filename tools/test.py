"""Test (and evaluate) a checkpoint, clean or under one corruption.

    python tools/test.py CONFIG CHECKPOINT [--work-dir DIR] [--out PATH] [--show]
                         [--show-dir DIR] [--cfg-options KEY=VALUE ...]
                         [--launcher none|pytorch|slurm|mpi]
                         [--corruption NAME --severity K [--seed S]
                          [--protocol reobench|geofm_calibration] [--border reflect|constant]]

``--corruption`` puts one ``ApplyCorruption`` into the test pipeline (after loading
the image, the annotations and ``ConvertBoxType``, before resizing, normalisation and
packing) or updates the one there; ``--cfg-options corruption_cfg.corruption=NAME
corruption_cfg.severity=K`` does the same for configs that include
``configs/_base_/corruptions.py``. The metrics go to ``{work_dir}/metrics_{tag}.json``
(``tag`` = ``clean`` or ``{corruption}_s{severity}``), and ``--out``/``--show-dir``
get ``_{tag}`` as suffix. ``--out``: segmentation, a folder for predicted label maps;
rotated detection, a ``.pkl`` file of the raw predictions.
"""
import argparse
import os
import time

# The OpenMMLab imports live in the functions: MMRotate's DOTAMetric evaluates in a
# 'spawn' process pool whose workers re-import this file, and need none of them.


def parse_args():
    from mmengine.config import DictAction

    from reobench_mm.corruptions import PROTOCOLS
    from reobench_mm.corruptions.geometric import BORDER_MODES

    parser = argparse.ArgumentParser(
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
                        'corruption_cfg.corruption=NAME corruption_cfg.severity=K sets the '
                        'corruption of configs that include configs/_base_/corruptions.py')
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


def corruption_from_args(args, parser):
    """The corruption settings of the command line, or None without --corruption."""
    extras = {k: getattr(args, k) for k in ('severity', 'seed', 'protocol', 'border')}
    if args.corruption is None:
        given = [f'--{k}' for k, v in extras.items() if v is not None]
        if given:
            parser.error(f'{", ".join(given)} given without --corruption')
        return None
    if args.severity is None and args.corruption != 'clean':
        parser.error(f'--corruption {args.corruption} needs --severity (1..5)')
    return dict(corruption=args.corruption, severity=args.severity or 0,
                seed=args.seed or 0, protocol=args.protocol or 'reobench',
                border=args.border or 'reflect')


def main() -> None:
    args, parser = parse_args()
    from mmengine.dist import is_main_process
    from mmengine.logging import print_log
    from mmengine.registry import RUNNERS
    from mmengine.runner import Runner

    from reobench_mm.apis import dump_json_atomic, prepare_test_config

    corruption = corruption_from_args(args, parser)
    try:
        setup = prepare_test_config(
            args.config, args.checkpoint, work_dir=args.work_dir, out=args.out,
            show=args.show, show_dir=args.show_dir, wait_time=args.wait_time,
            cfg_options=args.cfg_options, launcher=args.launcher, corruption=corruption)
    except (FileNotFoundError, KeyError, ValueError) as error:
        parser.error(error.args[0] if isinstance(error, KeyError) else str(error))
    cfg = setup.cfg
    runner = Runner.from_cfg(cfg) if 'runner_type' not in cfg else RUNNERS.build(cfg)
    if setup.dump_file is not None:
        from mmengine.evaluator import DumpResults
        runner.test_evaluator.metrics.append(DumpResults(out_file_path=setup.dump_file))
    print_log(f'corruption: {setup.tag} ({setup.corruption}), task: {setup.task}',
              logger='current')
    start = time.time()
    metrics = runner.test()
    seconds = time.time() - start
    metrics = {key: float(value) for key, value in metrics.items()}
    print_log(f'metrics [{setup.tag}]: ' + '  '.join(f'{k}: {v:.4f}' for k, v in metrics.items()),
              logger='current')
    if is_main_process():
        dump_json_atomic(dict(config=args.config, checkpoint=args.checkpoint, task=setup.task,
                              tag=setup.tag, **setup.corruption, metrics=metrics,
                              test_seconds=round(seconds, 2),
                              time=time.strftime('%Y-%m-%dT%H:%M:%S')),
                         setup.metrics_file)
        print_log(f'metrics written to {setup.metrics_file}', logger='current')


if __name__ == '__main__':
    main()
