"""Write the embedded synthetic demo datasets (Potsdam- and DIOR-R-format) and their
shifted test sets (``potsdam_shifted``, ``dior_shifted``).

    python tools/make_demo_data.py [--out data/demo] [--seed 0] [--num-train 24]
        [--num-test 8] [--num-potsdam-test 12] [--size 256]

Same seed and sizes, same bytes. See reobench_mm.datasets.synthetic and
reobench_mm.datasets.synthetic_shift.
"""
import argparse
import sys


def parse_args() -> argparse.Namespace:
    from reobench_cli import ToolArgumentParser

    parser = ToolArgumentParser(description=' '.join(__doc__.split('\n\n')[0].split()))
    parser.add_argument('--out', default='data/demo', help='output folder')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--num-train', type=int, default=24,
                        help='training images per dataset (Potsdam train, DIOR trainval)')
    parser.add_argument('--num-test', type=int, default=8,
                        help='evaluation images of DIOR test and the shifted sets')
    parser.add_argument('--num-potsdam-test', type=int, default=12,
                        help='evaluation images of Potsdam val (default: %(default)s, of which '
                        'make demo holds 2 out for the temperature)')
    parser.add_argument('--size', type=int, default=256, help='image side in pixels')
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    from reobench_mm.datasets.synthetic import make_demo_data, tree_digest
    from reobench_mm.datasets.synthetic_shift import write_shifted_demo_data
    counts = make_demo_data(args.out, seed=args.seed, num_train=args.num_train,
                            num_test=args.num_test, size=args.size,
                            num_potsdam_test=args.num_potsdam_test)
    counts.update(write_shifted_demo_data(args.out, seed=args.seed, num_test=args.num_test,
                                          size=args.size))
    for name, splits in counts.items():
        print(f'{name}: ' + ', '.join(f'{n} {split}' for split, n in splits.items()))
    print(f'written to {args.out} (digest {tree_digest(args.out)})')


if __name__ == '__main__':
    from reobench_cli import run_tool
    sys.exit(run_tool(main))
