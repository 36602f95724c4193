"""Every GPU figure of the device-side evaluation in one run, with torch, timm, numpy and
OpenCV only (no OpenMMLab), so it runs on a bare GPU machine.

    python benchmarks/gpu_device_check.py [--device cuda] [--sizes 512 800] [--batch 16]
        [--repeats 5] [--severity 3] [--out FILE.json]

Measured in the same run, medians over ``--repeats`` after a warm-up, with the device
synchronised around each timing:

1. the torch engine's images per second for every corruption it covers (both
   protocols; JPEG with both codecs), on ``--batch`` smooth RGB uint8 images of each size
   on the device, and the numpy engine's on one CPU core on the same images (ratio);
2. the forward of a ViT-B/16 (timm's ``VisionTransformer``, the trunk the package's
   timm-based ViT-B backbones build: SatMAE, Scale-MAE, the CLIP towers, the ImageNet
   ViT) at each size, in fp32 and under bf16 autocast: images per second and the ratio;
3. each corruption's share of the forward time, fp32 and bf16 (goal: at most 10 %);
4. parity on the device: for every ``exact`` corruption, the fraction of values within one
   grey level of the numpy engine and the largest difference; nvJPEG (``jpeg_codec=
   'device'``) against libjpeg.

Runs on the CPU too (``--device cpu``, small sizes) to check the script itself. Prints
tables and writes every figure as JSON (``--out``; default ``$OUT/gpu_device_check.json``
when ``OUT`` is set).
"""
import argparse
import json
import os
import os.path as osp
import platform
import sys
import time

import numpy as np
import torch

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))  # the repository root

from reobench_corruptions import corrupt  # noqa: E402
from reobench_corruptions.torch_engine import PARITY, corrupt_torch  # noqa: E402
from torch_corruption_speed import covered, images  # noqa: E402


def timed_ms(fn, repeats: int, device: torch.device) -> float:
    """Median wall time of ``fn`` in ms over ``repeats`` runs, after one warm-up, with
    the device synchronised before and after each run."""
    def sync():
        if device.type == 'cuda':
            torch.cuda.synchronize(device)

    fn()
    sync()
    times = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - start) * 1000)
    return float(np.median(times))


def vit_b16(size: int, device: torch.device) -> torch.nn.Module:
    """An untrained ViT-B/16 (patch 16, 768 wide, 12 blocks, 12 heads) for ``size``²
    inputs, without a classification head, in eval mode."""
    import timm
    model = timm.create_model('vit_base_patch16_224', pretrained=False, img_size=size,
                              num_classes=0)
    return model.eval().to(device)


def forward_ms(size: int, batch: int, repeats: int, device: torch.device,
               bf16: bool) -> float:
    """ms per image of the ViT-B/16 forward on a ``batch`` of normalised images."""
    model = vit_b16(size, device)
    x = torch.randn(batch, 3, size, size, device=device)

    def run():
        with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16,
                                             enabled=bf16):
            model.forward_features(x)

    ms = timed_ms(run, repeats, device) / batch
    del model
    return ms


def corruption_rows(size: int, batch: int, repeats: int, severity: int,
                    device: torch.device, numpy_images: int) -> list:
    """Per corruption: ms per image on the device and for the numpy engine (first
    ``numpy_images`` images), and the parity of the exact ones with the numpy engine."""
    data = images(batch, size)
    keys = [f'bench{i}' for i in range(batch)]
    on_device = torch.from_numpy(data.transpose(0, 3, 1, 2).copy()).to(device)
    runs = [(p, n, label, {}) for p, n, label in covered()]
    if device.type == 'cuda':
        runs.append(('reobench', 'compression_artifacts', 'compression_artifacts (nvJPEG)',
                     {'jpeg_codec': 'device'}))
    rows = []
    for protocol, name, label, extra in runs:
        ms = timed_ms(lambda: corrupt_torch(on_device, name, severity, keys=keys,
                                            protocol=protocol, **extra),
                      repeats, device) / batch
        reference = timed_ms(lambda: [corrupt(image, name, severity, key=key,
                                              protocol=protocol)
                                      for image, key in zip(data[:numpy_images], keys)],
                             max(1, repeats // 2), torch.device('cpu')) / numpy_images
        row = dict(corruption=label, size=size, ms_per_image=ms, images_per_s=1000 / ms,
                   numpy_ms_per_image=reference, numpy_over_torch=reference / ms,
                   parity=PARITY[(protocol, name)])
        if PARITY[(protocol, name)] == 'exact':
            got = corrupt_torch(on_device[:numpy_images], name, severity,
                                keys=keys[:numpy_images], protocol=protocol, **extra)
            got = got.permute(0, 2, 3, 1).cpu().numpy().astype(np.int64)
            expected = np.stack([corrupt(image, name, severity, key=key, protocol=protocol)
                                 for image, key in zip(data[:numpy_images], keys)])
            difference = np.abs(got - expected.astype(np.int64))
            row.update(within_one_level=float(np.mean(difference <= 1)),
                       identical=float(np.mean(difference == 0)),
                       largest_difference=int(difference.max()))
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--device', default='cuda', help="'cuda' (default) or 'cpu'")
    parser.add_argument('--sizes', type=int, nargs='+', default=[512, 800])
    parser.add_argument('--batch', type=int, default=16, help='images per batch')
    parser.add_argument('--repeats', type=int, default=5)
    parser.add_argument('--severity', type=int, default=3)
    parser.add_argument('--numpy-images', type=int, default=4,
                        help='images the numpy engine is timed and compared on')
    parser.add_argument('--out', default=None, help='JSON file for every figure')
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type == 'cuda' and not torch.cuda.is_available():
        parser.error('no CUDA device here; use --device cpu (small --sizes) to check the '
                     'script')
    numpy_images = min(args.numpy_images, args.batch)
    name = torch.cuda.get_device_name(device) if device.type == 'cuda' else \
        platform.processor() or 'CPU'
    report = dict(device=name, torch=torch.__version__, batch=args.batch,
                  severity=args.severity, repeats=args.repeats, sizes={})
    start = time.perf_counter()
    for size in args.sizes:
        fp32 = forward_ms(size, args.batch, args.repeats, device, bf16=False)
        bf16 = forward_ms(size, args.batch, args.repeats, device, bf16=True)
        rows = corruption_rows(size, args.batch, args.repeats, args.severity, device,
                               numpy_images)
        for row in rows:
            row.update(share_of_fp32_forward=row['ms_per_image'] / fp32,
                       share_of_bf16_forward=row['ms_per_image'] / bf16)
        report['sizes'][str(size)] = dict(
            vit_b16_fp32_ms_per_image=fp32, vit_b16_bf16_ms_per_image=bf16,
            bf16_speed_up=fp32 / bf16, corruptions=rows)
        print(f'\n{name}, {size}x{size}, batch {args.batch}: ViT-B/16 forward '
              f'{fp32:.2f} ms/image fp32, {bf16:.2f} bf16 ({fp32 / bf16:.2f}x)')
        print(f'{"corruption":42s}{"img/s":>9s}{"numpy/torch":>12s}{"% fp32 fwd":>11s}'
              f'{"% bf16 fwd":>11s}{"within 1":>10s}{"max diff":>9s}')
        for row in rows:
            parity = (f'{row["within_one_level"]:10.5f}{row["largest_difference"]:9d}'
                      if 'within_one_level' in row else f'{"(statistical)":>19s}')
            print(f'{row["corruption"]:42s}{row["images_per_s"]:9.1f}'
                  f'{row["numpy_over_torch"]:11.1f}x{100 * row["share_of_fp32_forward"]:10.1f}%'
                  f'{100 * row["share_of_bf16_forward"]:10.1f}%{parity}')
    report['seconds'] = time.perf_counter() - start
    print(f'\n{report["seconds"]:.0f} s in all')
    out = args.out or (osp.join(os.environ['OUT'], 'gpu_device_check.json')
                       if os.environ.get('OUT') else None)
    if out:
        with open(out, 'w') as f:
            json.dump(report, f, indent=1)
        print(f'figures written to {out}')


if __name__ == '__main__':
    main()
