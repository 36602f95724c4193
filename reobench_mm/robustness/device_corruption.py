"""Corrupting on the model's device: the ``corruption_device='model'`` option.

By default (``'pipeline'``) the switchable ``ApplyCorruption`` step corrupts each image
in the data pipeline (the main process or a dataloader worker, numpy/OpenCV). With
``corruption_device='model'`` the corruptions that the torch engine implements
(:func:`reobench_corruptions.torch_engine.torch_corruptions`: noise, blurs,
brightness/contrast, haze, cloud, data gaps, cloud shadow, and the geometric ``rotate``,
``scale`` and ``translate``) are applied instead in the test step, to the raw pixels of
each batch on the model's device, before the data preprocessor normalises them; the
pipeline then delivers the clean image and its labels. A geometric corruption moves the
sample's labels there too, as the pipeline would: its label maps on the device (the same
values) and its boxes (the same boxes; see
:func:`~reobench_mm.transforms.corruption.move_sample_labels`). JPEG compression stays
in the pipeline (the CPU dataloader workers).

The draws are keyed as the pipeline keys them (the seed and the image's file name), and
the step's ``max_value`` (one, or one per band), ``ignore_index``, ``angle_version``,
``box_policy`` and ``corruption_options`` (``band_noise`` included) are used, with the
sample's ``band_names`` where its metainfo carries them. The torch engine gives the numpy
engine's bits for the geometric corruptions on ``uint8`` images, within one grey level
for the other deterministic ones and the same distribution for the noises
(``docs/corruptions.md``), so the numbers are close to, not always the same as, the
pipeline's: the option is part of the fingerprint. The image must reach the test step
at its original size (the corruption's parameters are for that size): a test pipeline
that resizes it is refused.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

from reobench_corruptions import get_corruption
from reobench_corruptions.condition import Condition
from ..errors import SweepError
from ..transforms.corruption import (ApplyCorruption, band_options, move_sample_labels,
                                     name_options)
from .conditions.kinds import is_corruption

__all__ = ['CORRUPTION_DEVICES', 'DeviceCorruption']

#: Where the corruptions are applied.
CORRUPTION_DEVICES = ('pipeline', 'model')

#: Corruptions that stay in the pipeline with ``corruption_device='model'``: the JPEG
#: codec runs on the CPU either way (libjpeg; nvJPEG is another codec), and the
#: dataloader workers run it in parallel, where the test step would run it in series.
KEPT_IN_PIPELINE = ('compression_artifacts', )


class DeviceCorruption:
    """The covered conditions, corrupted in the test step on the model's device.

    Args:
        steps: the run's ``ApplyCorruption`` steps (their ``max_value``,
            ``corruption_options``, ``ignore_index``, ``angle_version`` and ``box_policy``
            are used).
        model: the model (its device).
    """

    def __init__(self, steps: Any, model: Any) -> None:
        from reobench_corruptions.torch_engine import torch_corruptions
        # the placed steps share their settings (without one: the step's defaults)
        self.step = steps[0] if steps else ApplyCorruption()
        if self.step.reencode_jpeg_quality is not None:
            raise SweepError("corruption_device='model' with reencode_jpeg_quality: the "
                             'extra JPEG pass runs in the pipeline; corrupt in the pipeline')
        self.model = model
        self._covered: Dict[str, set] = {}
        self._names = torch_corruptions

    def covers(self, condition: Any) -> bool:
        """Whether ``condition`` is corrupted on the device (a corruption the torch engine
        implements and :data:`KEPT_IN_PIPELINE` does not list)."""
        if not is_corruption(condition) or condition.is_clean:
            return False
        protocol = condition.protocol
        if protocol not in self._covered:
            self._covered[protocol] = set(self._names(protocol)) - set(KEPT_IN_PIPELINE)
        return condition.corruption in self._covered[protocol]

    def pipeline_condition(self, condition: Any) -> Any:
        """What the pipeline applies for ``condition``: clean when the device does it."""
        return condition.clean() if self.covers(condition) else condition

    def apply(self, data_batch: Dict[str, Any], condition: Optional[Condition]
              ) -> Dict[str, Any]:
        """``data_batch`` with each image corrupted under ``condition`` on the model's
        device (as it is for a condition the device does not cover)."""
        if condition is None or not self.covers(condition):
            return data_batch
        from reobench_corruptions.torch_engine import corrupt_geometric_torch, corrupt_torch
        device = next(iter(self.model.parameters())).device
        step = self.step
        options = dict(step.corruption_options.get(condition.corruption, {}))
        common = dict(seed=condition.seed, protocol=condition.protocol,
                      max_value=step.max_value)
        spec = get_corruption(condition.corruption, condition.protocol)
        geometric = spec.moves_labels
        inputs, samples = list(data_batch['inputs']), list(data_batch['data_samples'])
        for i, (image, sample) in enumerate(zip(inputs, samples)):
            meta = sample.metainfo
            shape, original = meta.get('img_shape'), meta.get('ori_shape')
            if shape is not None and original is not None and \
                    tuple(shape[:2]) != tuple(original[:2]):
                raise SweepError(
                    f"corruption_device='model': image {meta.get('img_path', i)} reaches the "
                    f'test step at {tuple(shape[:2])}, not its original size '
                    f'{tuple(original[:2])}: the corruptions are defined at the original '
                    "size; corrupt in the pipeline (corruption_device='pipeline')")
            keys = [ApplyCorruption.sample_key(meta)]
            # the sample's band names, where a per-band max_value or band_noise needs them
            # (and to name bands in errors), as the pipeline passes them
            named = name_options(meta.get('band_names'), image.shape[0], step.max_value,
                                 options)
            if not geometric:  # an optical-only corruption on the optical bands, as in
                # the pipeline (the sample's band_names, when packed into its metainfo)
                if spec.band_domain != 'all' and meta.get('band_names') is None and \
                        image.shape[0] > 4:  # more bands than OpenCV decodes: named ones
                    raise SweepError(
                        f"corruption_device='model': {condition.corruption} acts on "
                        f'{spec.band_domain} bands only, and image {meta.get("img_path", i)} '
                        f'({image.shape[0]} bands) reaches the test step without its '
                        "band_names: add 'band_names' to the packing step's meta_keys")
                chosen = band_options(condition.corruption, spec.band_domain,
                                      f"corruption_device='model' under {condition.key}",
                                      meta.get('band_names'), image.shape[0], options)
                inputs[i] = corrupt_torch(image.to(device)[None], condition.corruption,
                                          condition.severity, keys=keys, **common, **named,
                                          **chosen)[0]
                continue
            out, (transform, ) = corrupt_geometric_torch(
                image.to(device)[None], condition.corruption, condition.severity, keys=keys,
                border=condition.border, **common, **named, **options)
            inputs[i] = out[0]
            samples[i] = move_sample_labels(sample, transform, step.ignore_index,
                                            step.angle_version, step.box_policy)
        return dict(data_batch, inputs=inputs, data_samples=samples)
