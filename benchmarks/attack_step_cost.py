"""Cost of one attack step against one clean forward, on the demo models.

    python benchmarks/attack_step_cost.py [--data-root DIR] [--repeats 7] [--images 3]

For the demo UperNet (Potsdam tiles) and the demo Oriented R-CNN (DIOR tiles), freshly
initialised with a fixed seed, in one run and on the same images it times

- a clean forward: the model's ``test_step`` on one image (the work of a clean
  evaluation per image), without gradients;
- one PGD step: the attack objective at the image (segmentation: the model's data
  preprocessor and ``predict``, the pixel cross-entropy; detection: the preprocessor and
  the training losses) and its gradient with respect to the pixels
  (:func:`torch.autograd.grad`), as :func:`reobench_mm.attacks.perturb` takes it;

each the median over ``--repeats`` rounds (the two alternate, so that a change of machine
load biases neither), and prints ``step / forward`` per task; target <= 3.5.
"""
import argparse
import os.path as osp
import statistics
import sys
import time

PROJECT_ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
CONFIGS = {
    'segmentation': ('upernet_r18-tiny_1xb4-600i_demo-potsdam-128x128.py', 'potsdam'),
    'rotated_detection': ('oriented-rcnn-le90_r18-tiny_fpn_1xb2-600i_demo-dior-256x256.py',
                          'dior'),
}
TARGET = 3.5


def _runner_parts(task, data_root):
    """``(model, batches)``: the demo model of ``task`` (eval mode) and its test batches."""
    import torch
    from mmengine.config import Config
    from mmengine.runner import Runner
    name, folder = CONFIGS[task]
    cfg = Config.fromfile(osp.join(PROJECT_ROOT, 'configs', 'demo', name))
    cfg.work_dir = osp.join('/tmp', 'attack_step_cost')
    cfg.log_level = 'WARNING'
    cfg.test_dataloader.dataset.data_root = osp.join(data_root, folder)
    cfg.test_dataloader.num_workers = 0
    cfg.test_dataloader.persistent_workers = False
    cfg.test_dataloader.batch_size = 1
    torch.manual_seed(0)
    runner = Runner.from_cfg(cfg)
    runner.model.eval()
    return runner.model, list(runner.test_dataloader)


def _time(function, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return times


def measure(task, data_root, repeats, images):
    import torch

    from reobench_mm.attacks.detection import DetectionTarget
    from reobench_mm.attacks.iterative import _gradient
    from reobench_mm.attacks.segmentation import SegmentationTarget
    model, batches = _runner_parts(task, data_root)
    batches = batches[:images]
    if task == 'segmentation':
        target = SegmentationTarget(model, 255)
        objectives = [target.objective(b['data_samples'][0], 'ce', torch.device('cpu'))
                      for b in batches]
    else:
        target = DetectionTarget(model, ('all', ))
        objectives = [target.objective(b['data_samples'][0], str(i), torch.device('cpu'))
                      for i, b in enumerate(batches)]
    pixels = [b['inputs'][0].float() for b in batches]

    def forward():
        with torch.no_grad():
            for batch in batches:
                model.test_step(batch)

    def step():
        for x, objective in zip(pixels, objectives):
            _gradient(objective, x, 0, 1)

    forward(), step()  # warm-up
    forwards, steps = [], []
    for _ in range(repeats):
        forwards += _time(forward, 1)
        steps += _time(step, 1)
    return statistics.median(forwards) / len(batches), statistics.median(steps) / len(batches)


def parse_demo_arguments(description, tasks=tuple(CONFIGS)):
    """The arguments of a benchmark on the demo models (``--data-root``, ``--repeats``,
    ``--images``, ``--tasks`` among ``tasks``), with the demo data made when absent."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument('--data-root', default=osp.join(PROJECT_ROOT, 'data', 'demo'),
                        help='the demo data (tools/make_demo_data.py; made here if absent)')
    parser.add_argument('--repeats', type=int, default=7)
    parser.add_argument('--images', type=int, default=3, help='test images per round')
    parser.add_argument('--tasks', nargs='+', default=list(tasks), choices=list(tasks))
    args = parser.parse_args()
    if not osp.isdir(osp.join(args.data_root, 'potsdam')):
        from reobench_mm.datasets.synthetic import make_demo_data
        make_demo_data(args.data_root, seed=0, num_train=2, num_test=args.images, size=256)
    return args


def main():
    args = parse_demo_arguments(__doc__.splitlines()[0])
    import torch
    torch.set_num_threads(max(torch.get_num_threads(), 1))
    print(f'one PGD step against one clean forward (median of {args.repeats}, '
          f'{args.images} images, {torch.get_num_threads()} threads, CPU)')
    worst = 0.0
    for task in args.tasks:
        forward, step = measure(task, args.data_root, args.repeats, args.images)
        ratio = step / forward
        worst = max(worst, ratio)
        print(f'{task:18s} forward {forward * 1e3:8.1f} ms/image   step {step * 1e3:8.1f} '
              f'ms/image   step/forward {ratio:5.2f}  (target <= {TARGET})')
    print(f'largest ratio {worst:.2f}: {"within" if worst <= TARGET else "ABOVE"} the target')
    return 0


if __name__ == '__main__':
    sys.exit(main())
