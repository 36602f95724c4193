"""The temperature of a robustness run's temperature-scaled calibration.

With ``temperature_scaling`` a robustness test loop fits one temperature on clean pixels
of images it does not evaluate and reports every condition calibrated with it too
(``calib_ts/...``). :class:`TemperatureFit` is that part of the loop:

- where the images come from: a held-out split of the test set (``temperature_split``,
  :class:`~reobench_mm.datasets.HeldOutSplitDataset`, the rest is evaluated), else the
  ``val_dataloader`` when it shares no image with the test set; fitting on evaluated
  images is refused unless ``temperature_on_test`` accepts it;
- the fit itself (``TemperatureFitMetric`` over the clean images);
- its record, ``temperature.json``: the temperature, where it was fitted, the NLL before
  and after, the images, the fingerprint of the run's inputs, sealed with a SHA-256 like
  the condition records. A rerun reuses it only when it is intact (its digest matches),
  of the same inputs and its temperature is finite and positive; otherwise the
  temperature is fitted again, so one report never mixes two temperatures.
"""
from __future__ import annotations

import copy
import logging
import math
import os.path as osp
import time
from typing import Any, Dict, List, Mapping, Optional

import torch
from mmengine.logging import print_log

from ..engine.workdir import write_error
from ..errors import SweepError
from ..evaluation.keys import TEMPERATURE_METRICS, TEMPERATURE_PREFIX, metric_key
from ..fileio import dump_json_atomic, json_round_trip, read_json
from .fingerprint import dataset_fingerprint
from .options import RobustnessOptions
from .store import record_digest, seal_record

__all__ = ['TemperatureFit', 'TEMPERATURE_FILE', 'TEMPERATURE_FORMAT', 'image_names']

TEMPERATURE_FILE = 'temperature.json'
TEMPERATURE_FORMAT = 'reobench_mm.temperature/1'
#: Fields of the record that are bookkeeping, not part of what the report shows.
_BOOKKEEPING = ('format', 'fingerprint', 'digest')


def image_names(dataset: Any) -> List[str]:
    """The image paths of a dataset's samples, in order."""
    return [str(dataset.get_data_info(i).get('img_path')) for i in range(len(dataset))]


def _valid_temperature(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value) and value > 0


class TemperatureFit:
    """The temperature-fit part of a robustness test loop (held by the loop, as it holds
    its condition store).

    Args:
        options: the run's options (``temperature_split``, ``temperature_split_seed``,
            ``temperature_on_test``, ``seed``, ``force``).
        runner: the runner (its config, seed and model).
        ignore_index: the label the task metric ignores, left out of the fit.
    """

    def __init__(self, options: RobustnessOptions, runner: Any,
                 ignore_index: Optional[int] = None) -> None:
        self.options = options
        self.runner = runner
        #: the label the task metric ignores (left out of the fit too)
        self.ignore_index = ignore_index
        self._held_out_cfg: Optional[dict] = None
        self._dataset: Any = None
        #: the fitted temperature (None until :meth:`fit`)
        self.temperature: Optional[float] = None

    # ------------------------------------------------------------------ the images
    def split(self, dataloader: Any) -> Any:
        """With ``temperature_split``, the test dataloader config restricted to the images
        not held out (the held-out ones are kept for the fit); ``dataloader`` otherwise.

        Raises:
            SweepError: a split of a built dataloader.
        """
        size = self.options.temperature_split
        if size is None:
            return dataloader
        if not isinstance(dataloader, dict):
            raise SweepError('temperature_split needs the test dataloader as a config')
        split = dict(type='HeldOutSplitDataset', dataset=dataloader['dataset'], size=size,
                     seed=self.options.temperature_split_seed)
        self._held_out_cfg = dict(copy.deepcopy(dataloader), persistent_workers=False,
                                  dataset=dict(copy.deepcopy(split), part='held_out'))
        return dict(dataloader, dataset=dict(split, part='rest'))

    def dataset(self) -> Any:
        """The dataset the temperature is fitted on when it is not the evaluated one: the
        held-out part of the split, else the ``val_dataloader``'s (None without either).
        Built once, for the check, the fingerprint and the fit."""
        if self._dataset is None:
            if self._held_out_cfg is not None:
                dataset_cfg = self._held_out_cfg['dataset']
            elif self.runner.cfg.get('val_dataloader'):
                dataset_cfg = self.runner.cfg.val_dataloader.dataset
            else:
                return None
            from mmengine.registry import DATASETS, DefaultScope
            with DefaultScope.overwrite_default_scope(self.runner.cfg.get('default_scope')):
                dataset = DATASETS.build(copy.deepcopy(dataset_cfg))
            if hasattr(dataset, 'full_init'):
                dataset.full_init()
            self._dataset = dataset
        return self._dataset

    def check_images(self, evaluated: Any) -> None:
        """Refuse a temperature that would be fitted on images of ``evaluated`` (the test
        dataset), unless a split holds images out or ``temperature_on_test`` accepts it.

        Raises:
            SweepError: the fit would see evaluated images (what to do instead is said).
        """
        if self.options.temperature_split is not None or self.options.temperature_on_test:
            return
        tested = set(image_names(evaluated))
        if self.runner.cfg.get('val_dataloader'):
            shared = tested & set(image_names(self.dataset()))
            if not shared:
                return
            what = (f'val_dataloader shares {len(shared)} of the {len(tested)} evaluated '
                    'images with the test set')
        else:
            what = 'there is no val_dataloader, so it would be the evaluated test images'
        raise SweepError(
            f'the temperature would be fitted on evaluated images ({what}): an optimistic '
            'calibration. Hold out test images instead (temperature_split=N, '
            '--temperature-split N: N images, seeded and stratified, not evaluated; the '
            'calibration study holds out 400), give a val_dataloader of other images, or '
            'accept it with temperature_on_test=True (--temperature-on-test)')

    def fingerprint_data(self) -> Optional[Dict[str, Any]]:
        """:func:`~reobench_mm.robustness.fingerprint.dataset_fingerprint` of the images
        the temperature is fitted on (None when they are the evaluated ones)."""
        dataset = self.dataset()
        return None if dataset is None else dataset_fingerprint(dataset)

    # ------------------------------------------------------------------ the record
    def record_problem(self, path: str, fingerprint: Mapping[str, Any]) -> Optional[str]:
        """Why the record at ``path`` cannot be reused for the inputs ``fingerprint``
        (None when it can)."""
        if osp.islink(path):
            return f'{path} is a symbolic link, not a record written here'
        if not osp.isfile(path):
            return f'{path} does not exist'
        record, problem = read_json(path)
        if problem is None and (not isinstance(record, dict)
                                or record.get('format') != TEMPERATURE_FORMAT):
            problem = f'is not a temperature record (format {TEMPERATURE_FORMAT!r})'
        if problem is None and record.get('digest') != record_digest(record):
            problem = 'does not match its digest (edited by hand?)'
        if problem is None and not _valid_temperature(record.get('temperature')):
            problem = f'holds temperature {record.get("temperature")!r}, not a number > 0'
        if problem is None and record.get('fingerprint') != fingerprint:
            problem = 'was fitted for other inputs'
        return None if problem is None else f'{path} {problem}'

    def recorded(self, work_dir: str, fingerprint: Mapping[str, Any]) -> Optional[dict]:
        """What the report says of the temperature (temperature, source, NLL before and
        after, pixels, images), from an intact record of these inputs; None without."""
        path = osp.join(work_dir, TEMPERATURE_FILE)
        if self.record_problem(path, fingerprint) is not None:
            return None
        record = read_json(path)[0]
        return {k: v for k, v in record.items() if k not in _BOOKKEEPING}

    # ------------------------------------------------------------------ the fit
    def fit(self, evaluated_loader: Any, work_dir: str, fingerprint: Mapping[str, Any],
            force: bool = False) -> float:
        """The temperature: from the record in ``work_dir`` when it can be reused (not
        with ``force``), else fitted on clean pixels and recorded (rank 0).

        Args:
            evaluated_loader: the test dataloader (clean between conditions), used when
                the evaluated images are accepted for the fit.

        Raises:
            SweepError: the record cannot be written, or the fit gives no usable
                temperature.
        """
        from mmengine.dist import is_main_process
        from mmengine.evaluator import Evaluator
        path = osp.join(work_dir, TEMPERATURE_FILE)
        problem = self.record_problem(path, fingerprint)
        if problem is None and not force:
            self.temperature = float(read_json(path)[0]['temperature'])
            return self.temperature
        if osp.isfile(path) and not force and is_main_process():
            print_log(f'{problem}; fitting the temperature again', logger='current',
                      level=logging.WARNING)
        runner, options = self.runner, self.options
        if self._held_out_cfg is not None:
            source = (f'held-out split of the test set ({options.temperature_split} '
                      f'images, seed {options.temperature_split_seed}; not evaluated)')
            loader = runner.build_dataloader(
                dict(self._held_out_cfg, dataset=self.dataset()), seed=runner.seed)
        elif runner.cfg.get('val_dataloader'):
            source = 'val_dataloader'
            if options.temperature_on_test:
                source += ' (may share the evaluated images: temperature_on_test)'
            loader = runner.build_dataloader(
                dict(runner.cfg.val_dataloader, dataset=self.dataset()), seed=runner.seed)
        else:  # the corruption steps are clean between conditions
            source = 'the evaluated test images, clean (temperature_on_test)'
            loader = evaluated_loader
        ignore = {} if self.ignore_index is None else dict(ignore_index=self.ignore_index)
        evaluator = Evaluator([dict(type='TemperatureFitMetric', seed=options.seed, **ignore)])
        evaluator.dataset_meta = getattr(loader.dataset, 'metainfo', None)
        model = runner.model
        model.eval()
        start = time.perf_counter()
        with torch.no_grad():
            for batch in loader:
                evaluator.process(model.test_step(batch), batch)
        metrics = evaluator.evaluate(len(loader.dataset))
        fit = {name: metrics[metric_key(TEMPERATURE_PREFIX, name)]
               for name in TEMPERATURE_METRICS}
        temperature = float(fit['temperature'])
        if not _valid_temperature(temperature):
            raise SweepError(f'the temperature fitted on {source} is {temperature!r}, not a '
                             'number > 0 (are the clean predictions all wrong or all '
                             'ignored?)')
        if is_main_process():
            print_log(f'temperature fitted on {source}: T = {temperature:.4f} (NLL '
                      f'{fit["nll_before"]:.4f} -> {fit["nll_after"]:.4f}, '
                      f'{int(fit["num_pixels"])} pixels, '
                      f'{time.perf_counter() - start:.1f} s)', logger='current')
            record = seal_record(json_round_trip(dict(
                format=TEMPERATURE_FORMAT, temperature=temperature, source=source,
                nll_before=float(fit['nll_before']), nll_after=float(fit['nll_after']),
                num_pixels=int(fit['num_pixels']), num_images=len(loader.dataset),
                images=image_names(loader.dataset), fingerprint=dict(fingerprint))))
            try:
                dump_json_atomic(record, path)
            except OSError as error:
                raise write_error(path, error) from None
        self.temperature = temperature
        return temperature
