"""What does my model do under X? One image, clean and under corruptions, as a grid.

    python tools/condition_inference.py CONFIG CHECKPOINT IMAGE --out GRID.png
        [--conditions clean haze@3 rotate@2 ...] [--label LABEL] [--device cpu]
        [--seed S] [--protocol reobench|geofm_calibration] [--border reflect|constant]
        [--opacity A] [--score-thr T] [--dpi N] [--cfg-options KEY=VALUE ...]

The model is built from CONFIG and CHECKPOINT is loaded strictly; IMAGE goes through the
config's test pipeline with the corruption step placed as the robustness loops place it,
once per condition (``clean`` or ``<corruption>@<severity>``), so each prediction is the
one ``RobustnessTestLoop`` makes for that image. The grid has one column per condition:
the corrupted input, the prediction over it and, with ``--label`` (segmentation), the
label moved with the image. One line per condition is printed (segmentation: the classes
covering most pixels; detection: the boxes with score at least ``--score-thr``).

Exit status 0 on success, 2 for bad inputs (one ``error:`` line on stderr): a bad
condition, a missing file, a checkpoint that does not fit the model.
"""
import sys


def build_parser():
    """The command-line options."""
    from mmengine.config import DictAction

    from reobench_corruptions import PROTOCOLS
    from reobench_corruptions.geometric import BORDER_MODES

    from reobench_cli import ToolArgumentParser

    parser = ToolArgumentParser(
        description='Predict one image clean and under corruptions and draw the grid')
    parser.add_argument('config', help='config file (its test pipeline is used)')
    parser.add_argument('checkpoint', help='checkpoint file (loaded strictly)')
    parser.add_argument('image', help='image file')
    parser.add_argument('--conditions', nargs='+', default=['clean'], metavar='KEY',
                        help="conditions, 'clean' or '<corruption>@<severity>' "
                        "(default: clean), e.g. clean haze@3 rotate@2")
    parser.add_argument('--out', required=True, help='the grid PNG to write')
    parser.add_argument('--label', help='label-map file (segmentation), shown moved with '
                        'the image')
    parser.add_argument('--device', default='cpu', help="device (default: cpu)")
    parser.add_argument('--seed', type=int, default=0,
                        help='seed of the corruptions\' random draws (default: 0)')
    parser.add_argument('--protocol', choices=list(PROTOCOLS), default='reobench',
                        help='corruption protocol (default: reobench)')
    parser.add_argument('--border', choices=list(BORDER_MODES), default='reflect',
                        help='border of rotate/translate (default: reflect)')
    parser.add_argument('--opacity', type=float, default=0.5,
                        help='weight of the class colours over the image (default: 0.5)')
    parser.add_argument('--score-thr', type=float, default=0.3,
                        help='lowest score of a drawn box (detection, default: 0.3)')
    parser.add_argument('--dpi', type=int, default=100,
                        help='resolution of the grid (a panel is 2.6 inches; default: 100)')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override config settings, KEY=VALUE (lists: key="[a,b]")')
    return parser


def _summary(entry, result, score_thr: float) -> str:
    """One line about a condition's prediction."""
    prediction = entry.prediction
    if result.task == 'segmentation':
        import numpy as np
        labels = prediction.pred_sem_seg.data[0].cpu().numpy().ravel()
        counts = np.bincount(labels)
        classes = result.dataset_meta.get('classes') or ()
        top = [int(i) for i in np.argsort(counts)[::-1][:3] if counts[i]]
        shares = ', '.join(f'{classes[i] if i < len(classes) else i} '
                           f'{100.0 * counts[i] / labels.size:.1f}%' for i in top)
        return f'{entry.key}: {shares}'
    scores = prediction.pred_instances.scores
    count = int((scores >= score_thr).sum())
    return f'{entry.key}: {count} box{"es" if count != 1 else ""} with score >= {score_thr:g}'


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    import os.path as osp
    from reobench_mm.apis import (init_model, parse_conditions, predict_conditions,
                                  show_conditions)
    # bad inputs are refused before the model is built
    for what, path in (('image', args.image), ('label', args.label)):
        if path is not None and not osp.isfile(path):
            raise FileNotFoundError(f'{what} {path!r} does not exist')
    conditions = parse_conditions(args.conditions, seed=args.seed, protocol=args.protocol,
                                  border=args.border)
    model = init_model(args.config, args.checkpoint, device=args.device,
                       cfg_options=args.cfg_options)
    result = predict_conditions(model, args.image, conditions, label=args.label)
    for entry in result:
        print(_summary(entry, result, args.score_thr))
    written = show_conditions(result, args.out, opacity=args.opacity,
                              score_thr=args.score_thr, dpi=args.dpi)
    print(f'grid: {written}')
    return 0


if __name__ == '__main__':
    from reobench_cli import run_tool
    sys.exit(run_tool(main))
