"""The sparse variational GP probe head (reobench_mm.models.decode_heads.svgp_head.SVGPHead,
its GPyTorch model in svgp_model) against GPyTorch's own computations and float64
closed forms: the predictive probabilities equal ``likelihood(model(x))`` with the same
standard-normal draws (and the library's joint Monte-Carlo predictive within its error),
the latent marginals equal the whitened SVGP formulas; the loss equals GPyTorch's
``VariationalELBO`` on the same pixels (and a numpy ELBO with the same draws, and the
joint ELBO within Monte-Carlo error); the predictive has the same bits for every batch
size and run. The demo SVGP probe config trains through MMEngine's Runner and the
robustness loop's calibration metrics of its clean condition equal numpy's on the
outputs the loop evaluated."""
import copy
import math
import os.path as osp

import numpy as np
import pytest
import torch
import torch.nn.functional as F

gpytorch = pytest.importorskip(
    'gpytorch', reason='SVGPHead needs GPyTorch (requirements/runtime.txt: '
    'gpytorch>=1.15,<2), which is not installed')

from gpytorch.distributions import MultitaskMultivariateNormal  # noqa: E402
from gpytorch.kernels import LinearKernel, ScaleKernel  # noqa: E402
from gpytorch.likelihoods import SoftmaxLikelihood  # noqa: E402
from gpytorch.means import ConstantMean  # noqa: E402
from gpytorch.mlls import VariationalELBO  # noqa: E402
from gpytorch.variational import (IndependentMultitaskVariationalStrategy,  # noqa: E402
                                  VariationalStrategy)
from linear_operator.operators import DiagLinearOperator  # noqa: E402
from mmengine.config import Config  # noqa: E402
from mmengine.registry import DefaultScope  # noqa: E402
from mmengine.structures import PixelData  # noqa: E402
from mmseg.structures import SegDataSample  # noqa: E402

import reobench_mm  # noqa: F401,E402  (registration)
from calibration_reference import right_closed_bins  # noqa: E402
from helpers import PROJECT_ROOT, SEG_DEMO_CONFIG, training_options  # noqa: E402
from reobench_mm.models.decode_heads import GPYTORCH_REQUIREMENT, SVGPHead  # noqa: E402
from reobench_mm.models.decode_heads.svgp_model import (  # noqa: E402
    IndependentSVGP, orthonormal_inducing_points)
from reobench_mm.registry import MODELS  # noqa: E402

DEMO_SVGP = osp.join(PROJECT_ROOT, 'configs', 'demo',
                     'svgp-probe_r18-tiny_frozen_1xb4-600i_demo-potsdam-128x128.py')
DEMO_FPN = osp.join(PROJECT_ROOT, 'configs', 'demo',
                    'fpn-probe_r18-tiny_frozen_1xb4-600i_demo-potsdam-128x128.py')
POTSDAM_SVGP = osp.join(PROJECT_ROOT, 'configs', 'probe',
                        'svgp-probe_rvsa-b_frozen_1xb8-12e_potsdam-512x512.py')
POTSDAM_FPN = osp.join(PROJECT_ROOT, 'configs', 'probe',
                       'fpn-probe_rvsa-b_frozen_1xb8-12e_potsdam-512x512.py')
#: the small heads of the unit tests: 4 levels of 4 channels, D = 8, 6 classes
LEVEL, DIMS, CLASSES = 4, 8, 6
LEVEL_SIZES = ((12, 12), (6, 6), (3, 3), (2, 2))
OUT_SIZE = (24, 20)
#: GPyTorch's jitter of the variational strategy in float32 (K_ZZ and the prior at x)
JITTER = gpytorch.settings.variational_cholesky_jitter.value(torch.float32)


def _build(**options) -> SVGPHead:
    cfg = dict(type='SVGPHead', in_channels=[LEVEL] * 4, in_index=[0, 1, 2, 3],
               input_transform='resize_concat', channels=DIMS, num_classes=CLASSES,
               **options)
    with DefaultScope.overwrite_default_scope('mmseg'):
        return MODELS.build(cfg)


def _base(head: SVGPHead) -> VariationalStrategy:
    return head.gp.variational_strategy.base_variational_strategy


def _randomise(head: SVGPHead, seed: int) -> SVGPHead:
    """Parameters a trained head could have: every one random, none at its
    initialisation (a mean, a bias or a covariance left out would show)."""
    generator = torch.Generator().manual_seed(seed)

    def draw(*shape):
        return torch.randn(*shape, generator=generator)

    base = _base(head)
    dist = base._variational_distribution
    with torch.no_grad():
        head.projection.weight.copy_(draw(*head.projection.weight.shape) * 0.4)
        head.projection.bias.copy_(draw(DIMS) * 0.3)
        dist.variational_mean.copy_(draw(CLASSES, head.num_inducing))
        dist.chol_variational_covar.copy_(
            torch.tril(draw(CLASSES, head.num_inducing, head.num_inducing) * 0.3)
            + 0.6 * torch.eye(head.num_inducing))
        base.inducing_points.add_(draw(*base.inducing_points.shape) * 0.2)
        head.gp.mean_module.raw_constant.copy_(draw(CLASSES))
        kernel = head.gp.covar_module
        kernel.raw_variance.copy_(draw(*kernel.raw_variance.shape) * 0.5)
    return head


def _features(seed: int, batch: int = 2):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(batch, LEVEL, *size, generator=generator) for size in LEVEL_SIZES]


def _pixels(head: SVGPHead, feats, size=OUT_SIZE) -> torch.Tensor:
    """The per-pixel feature vectors written with torch ops: the levels resized bilinearly
    to the first and concatenated, the 1x1 projection, resized bilinearly to ``size``;
    ``(B, H, W, D)``."""
    first = feats[0].shape[-2:]
    concat = torch.cat([F.interpolate(f, size=first, mode='bilinear', align_corners=False)
                        for f in feats], dim=1)
    projected = F.conv2d(concat, head.projection.weight, head.projection.bias)
    resized = F.interpolate(projected, size=size, mode='bilinear', align_corners=False)
    return resized.permute(0, 2, 3, 1)


def _closed_form_marginals(head: SVGPHead, x: torch.Tensor):
    """The whitened SVGP's marginals at ``x`` (n, D) in float64 with numpy: per class
    ``mu = b + A^T m`` and ``var = v x.x + j - |A|^2 + |L_S^T A|^2`` with
    ``A = L^-1 v Z x^T``, ``L L^T = v Z Z^T + j I`` (GPyTorch's jitter j)."""
    base = _base(head)
    z = base.inducing_points.detach().double().numpy()
    chol = torch.tril(base._variational_distribution.chol_variational_covar.detach())
    chol, m = chol.double().numpy(), \
        base._variational_distribution.variational_mean.detach().double().numpy()
    v = head.gp.covar_module.variance.detach().double().numpy().reshape(-1)
    b = head.gp.mean_module.constant.detach().double().numpy()
    x = x.detach().double().numpy()
    means, variances = [], []
    for c in range(CLASSES):
        kzz = v[c] * z[c] @ z[c].T + JITTER * np.eye(len(z[c]))
        a = np.linalg.solve(np.linalg.cholesky(kzz), v[c] * z[c] @ x.T)
        means.append(b[c] + a.T @ m[c])
        variances.append(v[c] * np.sum(x * x, 1) + JITTER - np.sum(a * a, 0)
                         + np.sum((chol[c].T @ a) ** 2, 0))
    return np.stack(means, 1), np.stack(variances, 1)


def _samples(labels: torch.Tensor):
    out = []
    for image in labels:
        sample = SegDataSample(metainfo=dict(img_shape=OUT_SIZE, ori_shape=OUT_SIZE,
                                             pad_shape=OUT_SIZE))
        sample.gt_sem_seg = PixelData(data=image.unsqueeze(0))
        out.append(sample)
    return out


def _labels(seed: int, batch: int = 2) -> torch.Tensor:
    """Random labels with an ignored band and ignored scattered pixels."""
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, CLASSES, (batch, *OUT_SIZE), generator=generator)
    labels[:, :3] = 255
    labels[torch.rand(labels.shape, generator=generator) < 0.1] = 255
    return labels


# ----------------------------------------------------------------------------- structure

def test_head_is_gpytorch_svgp_with_linear_kernel_and_softmax_likelihood():
    head = _build()
    assert isinstance(head, SVGPHead) and not hasattr(head, 'conv_seg')
    assert (head.projection.in_channels, head.projection.out_channels) == (4 * LEVEL, DIMS)
    assert head.projection.kernel_size == (1, 1) and head.projection.bias is not None
    assert isinstance(head.gp, IndependentSVGP)
    strategy = head.gp.variational_strategy
    assert isinstance(strategy, IndependentMultitaskVariationalStrategy)
    assert strategy.num_tasks == CLASSES and isinstance(_base(head), VariationalStrategy)
    inducing = _base(head).inducing_points
    assert isinstance(inducing, torch.nn.Parameter) and inducing.shape == (CLASSES, DIMS, DIMS)
    # orthonormal rows, the QR of seeded standard-normal draws (signs: R's diagonal > 0)
    gram = inducing.detach() @ inducing.detach().transpose(-1, -2)
    torch.testing.assert_close(gram, torch.eye(DIMS).expand_as(gram), atol=1e-6, rtol=0)
    draws = torch.randn(CLASSES, DIMS, DIMS, generator=torch.Generator().manual_seed(0),
                        dtype=torch.float64)
    q, r = np.linalg.qr(draws.numpy())
    q = q * np.sign(np.diagonal(r, axis1=-2, axis2=-1))[:, None, :]
    np.testing.assert_allclose(inducing.detach().numpy(), q.transpose(0, 2, 1), atol=1e-6)
    assert type(head.gp.covar_module) is LinearKernel
    assert type(head.gp.mean_module) is ConstantMean
    assert isinstance(head.likelihood, SoftmaxLikelihood)
    assert head.likelihood.mixing_weights is None and head.likelihood.num_classes == CLASSES
    # q(u) starts at the whitened prior, without random draws
    dist = _base(head)._variational_distribution
    assert not dist.variational_mean.any()
    assert torch.equal(dist.chol_variational_covar, torch.eye(DIMS).expand(CLASSES, DIMS, DIMS))
    # the predictive's draws: 128 standard normals per class from a generator seeded 0
    expected = torch.randn(128, CLASSES, generator=torch.Generator().manual_seed(0))
    assert torch.equal(head.mc_draws, expected)
    assert 'mc_draws' not in head.state_dict() and 'pixels_seen' in head.state_dict()
    scaled = _build(kernel_scale=True, num_inducing=3)
    assert type(scaled.gp.covar_module) is ScaleKernel
    assert type(scaled.gp.covar_module.base_kernel) is LinearKernel
    assert _base(scaled).inducing_points.shape == (CLASSES, 3, DIMS)


def test_gpytorch_is_a_runtime_requirement_of_the_tested_line():
    with open(osp.join(PROJECT_ROOT, 'requirements', 'runtime.txt'), encoding='utf-8') as f:
        lines = [line.strip() for line in f if not line.startswith('#')]
    assert GPYTORCH_REQUIREMENT in lines
    version = tuple(int(part) for part in gpytorch.__version__.split('.')[:2])
    assert (1, 15) <= version < (2, 0)


@pytest.mark.parametrize('options, message', [
    (dict(num_inducing=DIMS + 1), 'num_inducing must be in 1..8'),
    (dict(num_inducing=0), 'num_inducing must be an integer >= 1'),
    (dict(num_mc_samples=0), 'num_mc_samples must be an integer >= 1'),
    (dict(num_train_pixels=2.5), 'num_train_pixels must be an integer >= 1'),
    (dict(num_data=0), 'num_data must be an integer >= 1'),
    (dict(mc_seed=-1), 'mc_seed must be an integer >= 0'),
    (dict(kernel_scale='yes'), 'kernel_scale must be True or False'),
    (dict(num_classes=1), 'num_classes must be an integer >= 2'),
])
def test_bad_arguments_are_refused_with_what_is_valid(options, message):
    cfg = dict(type='SVGPHead', in_channels=[LEVEL] * 4, in_index=[0, 1, 2, 3],
               input_transform='resize_concat', channels=DIMS, num_classes=CLASSES)
    cfg.update(options)
    with pytest.raises(ValueError, match=message.replace('.', r'\.')):
        with DefaultScope.overwrite_default_scope('mmseg'):
            MODELS.build(cfg)


def test_more_inducing_points_than_dimensions_are_refused():
    with pytest.raises(ValueError, match='rank at most 4, so more inducing points'):
        orthonormal_inducing_points(2, 5, 4, seed=0)
    assert orthonormal_inducing_points(2, 4, 4, seed=0).shape == (2, 4, 4)


# ----------------------------------------------------------------------------- prediction

def test_predictive_equals_gpytorch_likelihood_of_the_model_with_the_same_draws():
    """Exact: the head's seg logits are the log of GPyTorch's ``likelihood`` (softmax) of
    ``model(x)``'s marginals reparameterised by the library with the head's draws; and
    those marginals are the whitened SVGP's closed form."""
    head = _randomise(_build(chunk_pixels=200), seed=1).eval()
    feats = _features(seed=2)
    with torch.no_grad():
        logits = head(feats, out_size=OUT_SIZE)
        x = _pixels(head, feats).reshape(-1, DIMS)
        latent = head.gp(x)
        mean, variance = latent.mean, latent.variance
        marginals = MultitaskMultivariateNormal(mean, DiagLinearOperator(variance.reshape(-1)))
        draws = head.mc_draws.unsqueeze(1).expand(-1, x.shape[0], -1).contiguous()
        samples = marginals.rsample(base_samples=draws)
        probs = head.likelihood(samples).probs.mean(0)
    batch, height, width = 2, *OUT_SIZE
    assert logits.shape == (batch, CLASSES, height, width) and logits.dtype == torch.float32
    expected = probs.reshape(batch, height, width, CLASSES).permute(0, 3, 1, 2)
    torch.testing.assert_close(logits.exp(), expected, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(logits.softmax(1), expected, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(logits.logsumexp(1), torch.zeros(batch, height, width),
                               atol=2e-6, rtol=0)
    # the library's marginals against the closed form
    ref_mean, ref_variance = _closed_form_marginals(head, x)
    np.testing.assert_allclose(mean.numpy(), ref_mean, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(variance.numpy(), ref_variance, rtol=1e-4, atol=1e-4)
    assert ref_variance.std() > 0.1 and np.abs(ref_mean).mean() > 0.5  # not degenerate
    # with the default head: logits at the finest level's size
    with torch.no_grad():
        assert head(feats).shape == (batch, CLASSES, *LEVEL_SIZES[0])


def test_predictive_agrees_with_gpytorch_joint_monte_carlo():
    """Within Monte-Carlo error: GPyTorch's ``likelihood(model(x))`` with 20000 joint
    draws of the 40 pixels' latent functions, against the head with 20000 fixed draws."""
    head = _randomise(_build(num_mc_samples=20000, chunk_pixels=64), seed=3).eval()
    x = torch.randn(40, DIMS, generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        ours = head.predictive_log_probs(x).exp()
        torch.manual_seed(5)
        with gpytorch.settings.num_likelihood_samples(20000):
            library = head.likelihood(head.gp(x)).probs.mean(0)
    assert library.shape == ours.shape == (40, CLASSES)
    assert (ours - library).abs().max() < 0.02
    assert library.max(1).values.mean() < 0.9 and ours.min() < 0.05  # not all confident


def test_predictive_has_the_same_bits_for_every_batch_size_and_run():
    """Each image alone, or in a batch of three, through several zero-padded chunks, and a
    second head built from the same config and weights: the same bits."""
    head = _randomise(_build(chunk_pixels=150), seed=6).eval()
    feats = _features(seed=7, batch=3)
    state = copy.deepcopy(head.state_dict())
    with torch.no_grad():
        together = head(feats, out_size=OUT_SIZE)
        alone = [head([f[i:i + 1] for f in feats], out_size=OUT_SIZE) for i in range(3)]
        pairs = head([f[1:] for f in feats], out_size=OUT_SIZE)
        again = head(feats, out_size=OUT_SIZE)
    for i in range(3):
        assert torch.equal(alone[i][0], together[i])
    assert torch.equal(pairs, together[1:]) and torch.equal(again, together)
    other = _build(chunk_pixels=150)
    other.load_state_dict(state, strict=True)
    other.eval()
    with torch.no_grad():
        assert torch.equal(other(feats, out_size=OUT_SIZE), together)
    assert torch.equal(other.mc_draws, head.mc_draws)
    # another seed gives other draws, and other numbers
    seeded = _build(chunk_pixels=150, mc_seed=1)
    seeded.load_state_dict(state, strict=True)
    with torch.no_grad():
        assert not torch.equal(seeded.eval()(feats, out_size=OUT_SIZE), together)


# ----------------------------------------------------------------------------- loss

def _numpy_elbo(head: SVGPHead, x: torch.Tensor, targets: torch.Tensor, eps: np.ndarray,
                num_data: int) -> float:
    """``1/n sum_i 1/S sum_s log softmax(mu_i + sigma_i eps_si)[y_i] - sum_c KL_c / N``
    in float64, ``KL_c = 1/2 (tr S_c + m_c.m_c - M - log det S_c)`` (whitened prior)."""
    mean, variance = _closed_form_marginals(head, x)
    f = mean[None] + np.sqrt(variance)[None] * eps  # (S, n, C)
    log_softmax = f - np.log(np.exp(f - f.max(-1, keepdims=True)).sum(-1, keepdims=True)) \
        - f.max(-1, keepdims=True)
    y = targets.numpy()
    data = log_softmax[:, np.arange(len(y)), y].mean(0).mean()
    dist = _base(head)._variational_distribution
    chol = torch.tril(dist.chol_variational_covar.detach()).double().numpy()
    m = dist.variational_mean.detach().double().numpy()
    kl = 0.0
    for c in range(CLASSES):
        s = chol[c] @ chol[c].T
        kl += 0.5 * (np.trace(s) + m[c] @ m[c] - len(m[c]) - np.linalg.slogdet(s)[1])
    return float(data - kl / num_data)


def test_loss_equals_gpytorch_variational_elbo_on_the_labelled_pixels():
    """Exact: every labelled pixel (fewer than num_train_pixels), in raster order; the
    loss is minus GPyTorch's VariationalELBO on the library's marginals there with the
    same draws, and the numpy ELBO with those draws; num_data counts the labelled pixels
    of every batch so far."""
    head = _randomise(_build(num_train_pixels=10000), seed=8).train()
    feats, labels = _features(seed=9), _labels(seed=10)
    valid = labels != 255
    count = int(valid.sum())
    assert 700 < count < 2 * math.prod(OUT_SIZE)
    x = _pixels(head, feats)[valid]
    targets = labels[valid]
    for step in (1, 2):
        torch.manual_seed(11)
        losses = head.loss(feats, _samples(labels), None)
        assert int(head.pixels_seen) == step * count
        torch.manual_seed(11)
        latent = head.gp(x)
        marginals = MultitaskMultivariateNormal(latent.mean,
                                                DiagLinearOperator(latent.variance.reshape(-1)))
        with gpytorch.settings.num_likelihood_samples(10):
            elbo = VariationalELBO(head.likelihood, head.gp, num_data=step * count)
            expected = elbo(marginals, targets)
        torch.testing.assert_close(losses['loss_elbo'], -expected, atol=1e-6, rtol=1e-6)
        # the library's draws: randn(10, n * C) of the interleaved diagonal, seed 11
        torch.manual_seed(11)
        eps = torch.randn(10, count * CLASSES).double().numpy().reshape(10, count, CLASSES)
        reference = _numpy_elbo(head, x, targets, eps, step * count)
        assert float(losses['loss_elbo'].detach()) == pytest.approx(-reference, rel=1e-4,
                                                                     abs=1e-4)
    accuracy = (latent.mean.argmax(1) == targets).double().mean() * 100
    assert float(losses['acc_seg']) == pytest.approx(float(accuracy), abs=1e-4)
    losses['loss_elbo'].backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in head.parameters())


def test_loss_subsamples_the_labelled_pixels_and_takes_a_fixed_num_data():
    """More labelled pixels than num_train_pixels: the first 300 of a randperm of them,
    in raster order; num_data fixed at 10**6."""
    head = _randomise(_build(num_train_pixels=300, num_data=10 ** 6), seed=12).train()
    feats, labels = _features(seed=13), _labels(seed=14)
    valid = labels != 255
    torch.manual_seed(15)
    loss = head.loss(feats, _samples(labels), None)['loss_elbo']
    torch.manual_seed(15)
    pick = torch.randperm(int(valid.sum()))[:300].sort().values
    x, targets = _pixels(head, feats)[valid][pick], labels[valid][pick]
    latent = head.gp(x)
    marginals = MultitaskMultivariateNormal(latent.mean,
                                            DiagLinearOperator(latent.variance.reshape(-1)))
    with gpytorch.settings.num_likelihood_samples(10):
        expected = VariationalELBO(head.likelihood, head.gp, num_data=10 ** 6)(marginals,
                                                                             targets)
    torch.testing.assert_close(loss, -expected, atol=1e-6, rtol=1e-6)
    assert int(head.pixels_seen) == int(valid.sum())  # counted, though num_data is fixed


def test_loss_agrees_with_gpytorch_joint_elbo_monte_carlo():
    """Within Monte-Carlo error: GPyTorch's VariationalELBO on ``model(x)`` itself (the
    joint q(f), 20000 draws) against the head's loss (marginals, 20000 draws)."""
    head = _randomise(_build(num_train_pixels=10000, num_elbo_samples=20000), seed=16).train()
    feats = _features(seed=17, batch=1)
    labels = torch.full((1, *OUT_SIZE), 255)
    labels[0, 5, :] = torch.arange(OUT_SIZE[1]) % CLASSES  # 20 labelled pixels
    labels[0, 9, :7] = 2
    torch.manual_seed(18)
    loss = head.loss(feats, _samples(labels), None)['loss_elbo']
    valid = labels != 255
    x, targets = _pixels(head, feats)[valid], labels[valid]
    torch.manual_seed(19)
    with gpytorch.settings.num_likelihood_samples(20000):
        joint = VariationalELBO(head.likelihood, head.gp, num_data=27)(head.gp(x), targets)
    assert float(loss.detach()) == pytest.approx(-float(joint.detach()), rel=0.01)


def test_loss_without_labelled_pixels_and_with_bad_labels():
    head = _build().train()
    feats = _features(seed=20)
    labels = torch.full((2, *OUT_SIZE), 255)
    losses = head.loss(feats, _samples(labels), None)
    assert float(losses['loss_elbo'].detach()) == 0.0 and losses['loss_elbo'].requires_grad
    assert int(head.pixels_seen) == 0
    labels[0, 0, 0] = CLASSES
    with pytest.raises(ValueError, match=r'label 6 is outside \[0, 6\) and is not '
                                         r'ignore_index=255'):
        head.loss(feats, _samples(labels), None)


# ----------------------------------------------------------------------------- configs

def _config(path: str) -> Config:
    return Config.fromfile(path)


def test_svgp_probe_configs_are_the_fpn_probes_with_the_gp_head():
    """The demo and the RVSA SVGP probes: the FPN probe of the same encoder, key for key,
    except the decode head and no weight decay on the GP; the head reads the four FPN
    levels, D = 16 (demo) / 32 (Potsdam) with as many inducing points."""
    for path, fpn_path, dims, fpn in ((DEMO_SVGP, DEMO_FPN, 16, 32),
                                      (POTSDAM_SVGP, POTSDAM_FPN, 32, 256)):
        cfg, twin = _config(path), _config(fpn_path)
        head = cfg.model.decode_head
        assert head == dict(
            type='SVGPHead', in_channels=[fpn] * 4, in_index=[0, 1, 2, 3],
            input_transform='resize_concat', channels=dims, num_classes=6,
            num_inducing=dims, kernel_scale=False, num_train_pixels=4096, num_data=None,
            num_elbo_samples=10, num_mc_samples=128, mc_seed=0, inducing_seed=0,
            ignore_index=255, align_corners=False)
        model, twin_model = copy.deepcopy(cfg.model), copy.deepcopy(twin.model)
        model.pop('decode_head'), twin_model.pop('decode_head')
        assert model == twin_model
        assert cfg.optim_wrapper.paramwise_cfg == dict(
            custom_keys={'decode_head.gp.': dict(decay_mult=0.0)})
        optim, twin_optim = copy.deepcopy(cfg.optim_wrapper), twin.optim_wrapper
        optim.pop('paramwise_cfg')
        assert optim == twin_optim
        # (svgp_dims, svgp_head, svgp_custom_keys: the variables the model is written from)
        keys = set(cfg.keys()) - {'model', 'optim_wrapper', 'svgp_dims', 'svgp_head',
                                  'svgp_custom_keys'}
        assert keys == set(twin.keys()) - {'model', 'optim_wrapper'}
        for key in sorted(keys):
            assert cfg[key] == twin[key], (path, key)
        with DefaultScope.overwrite_default_scope('mmseg'):
            built = MODELS.build(head)
        assert (built.projection.in_channels, built.projection.out_channels) == (4 * fpn, dims)
        # what trains: the projection (weight, bias) and the GP; nothing of the likelihood
        count = sum(p.numel() for p in built.parameters())
        gp = 6 * (dims * dims + dims + dims * dims + 1 + 1)  # Z, m, chol, constant, v
        assert count == 4 * fpn * dims + dims + gp


# ----------------------------------------------------------------------------- demo run

@pytest.fixture(scope='module')
def encoder_checkpoint(tmp_path_factory) -> str:
    """A checkpoint of the demo UperNet (random weights), the encoder the demo probes
    load."""
    cfg = Config.fromfile(SEG_DEMO_CONFIG)
    torch.manual_seed(1)
    with DefaultScope.overwrite_default_scope('mmseg'):
        model = MODELS.build(cfg.model)
    path = str(tmp_path_factory.mktemp('svgp_encoder') / 'iter_600.pth')
    torch.save(dict(meta=dict(iter=600), state_dict=model.state_dict()), path)
    return path


def _numpy_calibration(probs: np.ndarray, labels: np.ndarray, num_bins: int = 15):
    """ECE (equal-width right-closed bins), NLL and Brier of (C, n) probabilities."""
    confidence, prediction = probs.max(0), probs.argmax(0)
    bins = right_closed_bins(confidence, np.linspace(0, 1, num_bins + 1))
    ece = sum(np.mean(bins == b) * abs(np.mean(prediction[bins == b] == labels[bins == b])
                                       - confidence[bins == b].mean())
              for b in range(num_bins) if np.any(bins == b))
    nll = -np.mean(np.log(probs[labels, np.arange(labels.size)]))
    onehot = np.eye(probs.shape[0])[labels].T
    return ece, nll, np.mean(np.sum((probs - onehot) ** 2, 0))


@pytest.mark.slow
@pytest.mark.trains('training the SVGP probe through the Runner is what it checks')
def test_demo_svgp_probe_trains_and_the_robustness_loop_measures_its_calibration(
        demo_data, encoder_checkpoint, tmp_path):
    """The demo SVGP probe config, 6 iterations through MMEngine's Runner on the demo
    data: the ELBO is finite, the GP moved, the labelled pixels were counted. Then the
    robustness loop with calibration on the clean condition (shard 0 of 2: clean only):
    its ECE, NLL and Brier equal numpy's on the seg logits the loop evaluated, which are
    log-probabilities."""
    from mmengine.hooks import Hook
    from mmengine.runner import Runner

    from reobench_mm.engine.workdir import forget_runner_instances
    from sweep_helpers import condition_records, robustness_cfg
    data_root = osp.join(demo_data, 'potsdam')
    work_dir = str(tmp_path / 'train')
    iters = 6
    cfg = Config.fromfile(DEMO_SVGP)
    cfg.work_dir = work_dir
    cfg.merge_from_dict({**training_options(data_root, iters),
                         'model.backbone.init_cfg.checkpoint': encoder_checkpoint})
    runner = Runner.from_cfg(cfg)
    before = {k: v.clone() for k, v in runner.model.decode_head.state_dict().items()}
    runner.train()
    head = runner.model.decode_head
    state = head.state_dict()
    del runner
    forget_runner_instances(work_dir)
    # 6 batches of 2 crops of 128 x 128, the boundaries (255) left out
    assert 0.5 * iters * 2 * 128 ** 2 < int(state['pixels_seen']) <= iters * 2 * 128 ** 2
    moved = [k for k, v in before.items() if v.is_floating_point()
             and not torch.equal(v, state[k]) and 'constraint' not in k]
    assert sorted(moved) == sorted(k for k, v in before.items() if v.is_floating_point()
                                   and 'constraint' not in k)
    checkpoint = osp.join(work_dir, f'iter_{iters}.pth')

    class Outputs(Hook):
        """The seg logits and labels of every sample the test loop evaluated."""

        def __init__(self):
            self.samples = []

        def after_test_iter(self, runner, batch_idx, data_batch=None, outputs=None):
            for sample in outputs:
                self.samples.append((sample.seg_logits.data.double().numpy(),
                                     sample.gt_sem_seg.data[0].numpy()))

    test_dir = str(tmp_path / 'robustness')
    test_cfg = robustness_cfg(DEMO_SVGP, data_root, test_dir, checkpoint, calibration=True,
                              corruptions=['haze'], severities=[1], shard='0/2')
    test_cfg.model.backbone.init_cfg.checkpoint = encoder_checkpoint
    runner = Runner.from_cfg(test_cfg)
    outputs = Outputs()
    runner.register_hook(outputs, priority='LOWEST')
    runner.test()
    del runner
    forget_runner_instances(test_dir)
    records = condition_records(test_dir)
    assert sorted(records) == ['clean']
    metrics = records['clean']['metrics']
    assert len(outputs.samples) == 3
    probs, labels = [], []
    for logits, label in outputs.samples:
        assert logits.shape == (6, *label.shape)
        np.testing.assert_allclose(np.exp(logits).sum(0), 1.0, atol=1e-5)
        keep = label != 255
        probs.append(np.exp(logits)[:, keep] / np.exp(logits)[:, keep].sum(0))
        labels.append(label[keep])
    probs, labels = np.concatenate(probs, 1), np.concatenate(labels)
    ece, nll, brier = _numpy_calibration(probs, labels)
    print(f'\nSVGP demo probe, {iters} iterations: clean mIoU {metrics["mIoU"]}, ECE '
          f'{ece:.4f}, NLL {nll:.4f}, Brier {brier:.4f}')
    assert metrics['calib/ECE'] == pytest.approx(ece, abs=1e-6)
    assert metrics['calib/NLL'] == pytest.approx(nll, rel=1e-5)
    assert metrics['calib/Brier'] == pytest.approx(brier, rel=1e-5)
    assert 0.0 < ece < 1.0 and labels.size > 100000
