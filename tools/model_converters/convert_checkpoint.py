"""Convert an official backbone checkpoint into an MMEngine-ready one.

    python tools/model_converters/convert_checkpoint.py SRC DST --arch TYPE[:PRESET] [--img-size N]
        [--options KEY=VALUE ...]

Examples:
    python tools/model_converters/convert_checkpoint.py RemoteCLIP-ViT-B-32.pt remoteclip_b32.pth \\
        --arch CLIPVisionTransformer:ViT-B/32 --img-size 512
    python tools/model_converters/convert_checkpoint.py vit-b-checkpoint-1599.pth rvsa_b.pth \\
        --arch RVSA:b

The output holds ``state_dict`` (the backbone's own keys, position embeddings fitted to
``--img-size``) and ``meta`` (source file and SHA-256, backbone config, keys the source
legitimately lacked). Use it as ``init_cfg=dict(type='Pretrained', checkpoint=DST)`` in
the backbone config. A checkpoint of another architecture or size is an error naming
the first mismatching keys or shapes.
"""
import argparse
import sys


def parse_args() -> argparse.Namespace:
    from mmengine.config import DictAction

    from reobench_cli import ToolArgumentParser

    parser = ToolArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('src', help='official checkpoint file')
    parser.add_argument('dst', help='where to write the converted checkpoint')
    parser.add_argument('--arch', required=True,
                        help="backbone type, optionally with a preset: 'RVSA:b', 'SatMAE:l', "
                        "'CLIPVisionTransformer:ViT-L/14'")
    parser.add_argument('--img-size', type=int, default=None,
                        help='input size to fit position embeddings to (default: the '
                        "backbone's)")
    parser.add_argument('--options', nargs='+', action=DictAction, default={},
                        help='more backbone options, e.g. act_layer=gelu; dotted keys nest '
                        '(arch.embed_dims=384 arch.depth=12 arch.num_heads=6)')
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    from reobench_mm.models.backbones.convert import backbone_cfg_from_arch, convert_checkpoint
    cfg = backbone_cfg_from_arch(args.arch, args.img_size, args.options)
    meta = convert_checkpoint(args.src, args.dst, cfg)
    allowed = meta['missing_allowed']
    print(f'wrote {args.dst} for {cfg}'
          + (f'; not in the source (initialised by the model): {allowed}' if allowed else ''))


if __name__ == '__main__':
    from reobench_cli import run_tool
    sys.exit(run_tool(main))
