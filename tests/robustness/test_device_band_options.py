"""``corruption_device='model'`` with per-band settings: the step's ``max_value`` by band
name and its ``band_noise`` reach the torch engine with the sample's ``band_names`` (from
its metainfo), as the pipeline passes them.

A Sentinel-2 (× 10000) + Sentinel-1 (dB) float32 sample: ``haze`` on the device leaves
the dB bands bit-identical and gives the numpy engine's optical bands (exact parity);
``gaussian_noise`` is refused naming the SAR band; with the SAR bands in linear power, a
``max_value`` mapping and ``band_noise='sensor'`` give each band the statistics of the
numpy engine's result for the same per-band values.
"""
import numpy as np
import pytest
import torch
from mmengine.structures import BaseDataElement

import reobench_mm  # noqa: F401  (registration)
from reobench_corruptions import corrupt
from reobench_corruptions.bands import SENTINEL2_MSI_BANDS
from reobench_corruptions.condition import Condition
from reobench_mm.robustness.device_corruption import DeviceCorruption
from reobench_mm.transforms.corruption import ApplyCorruption

NAMES = list(SENTINEL2_MSI_BANDS) + ['VV', 'VH']
KEY = 'tile_5.tif'


def _image(linear: bool) -> np.ndarray:
    """15×H×W: 13 Sentinel-2 bands in 0..10000, VV and VH in dB or linear power."""
    rng = np.random.default_rng(4)
    optical = rng.integers(0, 10001, (13, 128, 128)).astype(np.float32)
    db = rng.uniform(-20.0, 5.0, (2, 128, 128)).astype(np.float32)
    return np.concatenate([optical, (10 ** (db / 10)).astype(np.float32) if linear else db])


def _apply(step: ApplyCorruption, image: np.ndarray, condition: Condition) -> np.ndarray:
    device = DeviceCorruption([step], torch.nn.Linear(1, 1))
    sample = BaseDataElement(metainfo=dict(img_path=f'/data/{KEY}', band_names=NAMES))
    batch = dict(inputs=[torch.from_numpy(image.copy())], data_samples=[sample])
    return device.apply(batch, condition)['inputs'][0].numpy()


def test_sar_in_db_passes_an_optical_corruption_and_is_refused_by_noise():
    image = _image(linear=False)
    step = ApplyCorruption(max_value=10000)
    out = _apply(step, image, Condition('haze', 3))
    np.testing.assert_array_equal(out[13:], image[13:])
    expected = corrupt(image[:13].transpose(1, 2, 0), 'haze', 3, max_value=10000)
    np.testing.assert_array_equal(out[:13], expected.transpose(2, 0, 1))
    with pytest.raises(ValueError, match=r'Bands outside their range: band 13 \(VV\) in '
                                         r'\[-\d+\.\d+, \d\.\d+\]'):
        _apply(step, image, Condition('gaussian_noise', 3))


def test_full_scales_by_name_and_noise_per_band_on_the_device():
    image = _image(linear=True)
    by_name = dict({name: 10000 for name in NAMES[:13]}, VV=4, VH=4)
    step = ApplyCorruption(max_value=by_name, corruption_options=dict(
        poisson_gaussian_noise=dict(band_noise='sensor')))
    condition = Condition('poisson_gaussian_noise', 3, protocol='geofm_calibration')
    out = _apply(step, image, condition).astype(np.float64)
    numpy_result = corrupt(image.transpose(1, 2, 0), 'poisson_gaussian_noise', 3, key=KEY,
                           protocol='geofm_calibration', max_value=by_name, band_names=NAMES,
                           band_noise='sensor').transpose(2, 0, 1).astype(np.float64)
    plain = corrupt(image.transpose(1, 2, 0), 'poisson_gaussian_noise', 3, key=KEY,
                    protocol='geofm_calibration', max_value=by_name,
                    band_names=NAMES).transpose(2, 0, 1).astype(np.float64)
    scales = np.array([10000.0] * 13 + [4.0, 4.0])
    for band in (0, 7, 13, 14):
        residuals = [(r[band] - image[band]) / scales[band] for r in (out, numpy_result, plain)]
        variances = [r.var() for r in residuals]
        # 16384 values per band: the variance within 10 % of the numpy engine's
        assert variances[0] == pytest.approx(variances[1], rel=0.1), (band, variances)
        if band >= 13:  # the SAR bands: shot noise a tenth, far below the default
            assert variances[0] < 0.5 * variances[2], (band, variances)
    assert (out[13:] <= 4).all()
