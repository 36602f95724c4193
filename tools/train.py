"""Train a segmentor (MMSegmentation) or rotated detector (MMRotate) from a config.

    python tools/train.py CONFIG [--work-dir DIR] [--resume [CHECKPOINT]] [--amp]
                          [--auto-scale-lr] [--cfg-options KEY=VALUE ...]
                          [--launcher none|pytorch|slurm|mpi]

As the toolboxes' own tools: the work dir is --work-dir, else the config's
``work_dir``, else ``work_dirs/<config stem>``; ``--resume`` alone resumes from the
latest checkpoint of the work dir, ``--resume CHECKPOINT`` from that file.
"""
import sys
import os

# The OpenMMLab imports live in the functions: MMRotate's DOTAMetric (validation)
# evaluates in a 'spawn' process pool whose workers re-import this file.


def parse_args():
    from mmengine.config import DictAction

    from reobench_cli import ToolArgumentParser

    parser = ToolArgumentParser(description='Train a segmentor or rotated detector')
    parser.add_argument('config', help='train config file path')
    parser.add_argument('--work-dir', help='the folder for logs and checkpoints')
    parser.add_argument('--resume', nargs='?', const='auto', default=None, metavar='CHECKPOINT',
                        help='resume training: from CHECKPOINT, or, without a value, from '
                        'the latest checkpoint in the work dir')
    parser.add_argument('--amp', action='store_true',
                        help='automatic mixed precision (AmpOptimWrapper)')
    parser.add_argument('--auto-scale-lr', action='store_true',
                        help="scale the learning rate by the config's auto_scale_lr")
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override config settings, KEY=VALUE (lists: key="[a,b]")')
    parser.add_argument('--launcher', choices=['none', 'pytorch', 'slurm', 'mpi'],
                        default='none', help='job launcher')
    # torch.distributed launchers pass --local-rank (torch >= 2) or --local_rank
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)
    args = parser.parse_args()
    os.environ.setdefault('LOCAL_RANK', str(args.local_rank))
    return args, parser


def main() -> None:
    args, parser = parse_args()
    from mmengine.registry import RUNNERS
    from mmengine.runner import Runner

    from reobench_mm.utils.config import prepare_train_config
    try:
        cfg = prepare_train_config(args.config, work_dir=args.work_dir, resume=args.resume,
                                   amp=args.amp, auto_scale_lr=args.auto_scale_lr,
                                   cfg_options=args.cfg_options, launcher=args.launcher)
    except (FileNotFoundError, KeyError, ValueError) as error:
        parser.error(error.args[0] if isinstance(error, KeyError) else str(error))
    runner = Runner.from_cfg(cfg) if 'runner_type' not in cfg else RUNNERS.build(cfg)
    runner.train()


if __name__ == '__main__':
    from reobench_cli import run_tool
    sys.exit(run_tool(main))
