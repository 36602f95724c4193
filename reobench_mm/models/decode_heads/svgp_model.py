"""The GPyTorch side of :class:`~reobench_mm.models.decode_heads.svgp_head.SVGPHead`: one
independent sparse variational GP per class (:class:`IndependentSVGP`), its inducing
points (:func:`orthonormal_inducing_points`), the marginals of ``q(f)`` at a set of
inputs (:func:`latent_marginals`) and the variational ELBO on them
(:func:`variational_elbo`).

This module imports GPyTorch at import time; :mod:`.svgp_head` imports it only when a
head is built, so the package itself loads without GPyTorch.
"""
from __future__ import annotations

from typing import Tuple

import gpytorch
import torch
from gpytorch.distributions import MultitaskMultivariateNormal, MultivariateNormal
from gpytorch.kernels import Kernel, LinearKernel, ScaleKernel
from gpytorch.likelihoods import SoftmaxLikelihood
from gpytorch.means import ConstantMean
from gpytorch.mlls import VariationalELBO
from gpytorch.models import ApproximateGP
from gpytorch.utils.memoize import clear_cache_hook
from gpytorch.variational import (CholeskyVariationalDistribution,
                                  IndependentMultitaskVariationalStrategy, VariationalStrategy)
from linear_operator.operators import DiagLinearOperator
from torch import Tensor

__all__ = [
    'IndependentSVGP', 'orthonormal_inducing_points', 'latent_marginals', 'marginal_dist',
    'variational_elbo', 'softmax_likelihood', 'clear_caches'
]


def orthonormal_inducing_points(num_latents: int, num_inducing: int, dims: int,
                                seed: int) -> Tensor:
    """``(num_latents, num_inducing, dims)`` float32 inducing points: for each latent
    function, ``num_inducing`` orthonormal rows of a random orthogonal matrix (QR of a
    standard-normal ``dims x num_inducing`` matrix drawn from ``torch.Generator`` seeded
    with ``seed``, signs fixed so that R has a positive diagonal). With a linear kernel
    ``K_ZZ = v Z Z^T = v I``: well conditioned, whatever the features' scale.

    Raises:
        ValueError: ``num_inducing`` is not in ``1..dims`` (a linear kernel's ``K_ZZ`` has
            rank at most ``dims``, so more inducing points make it singular).
    """
    if not 1 <= num_inducing <= dims:
        raise ValueError(f'num_inducing must be in 1..{dims} (the feature dimension): with '
                         f'a linear kernel K_ZZ = v Z Z^T has rank at most {dims}, so more '
                         f'inducing points make it singular; got {num_inducing}')
    generator = torch.Generator().manual_seed(seed)
    draws = torch.randn(num_latents, dims, num_inducing, generator=generator,
                        dtype=torch.float64)
    q, r = torch.linalg.qr(draws)
    signs = torch.sign(torch.diagonal(r, dim1=-2, dim2=-1))
    signs[signs == 0] = 1.0
    return (q * signs.unsqueeze(-2)).transpose(-1, -2).contiguous().float()


class IndependentSVGP(ApproximateGP):
    """``num_classes`` independent sparse variational GPs on ``dims``-dimensional inputs
    (Hensman et al. 2015, GPyTorch's whitened ``VariationalStrategy`` with learned inducing
    locations, batched over the classes by ``IndependentMultitaskVariationalStrategy``):
    called on ``(n, dims)`` inputs it returns ``q(f)`` as a ``MultitaskMultivariateNormal``
    of event shape ``(n, num_classes)``.

    Prior of each latent function: a learned constant mean (``ConstantMean``) and a linear
    kernel ``k(x, x') = v x.x'`` (``LinearKernel``, its own learned variance ``v``), wrapped
    in a ``ScaleKernel`` (one more learned output scale) when ``kernel_scale`` is set.
    Variational distribution: a full-covariance Gaussian over the whitened inducing values
    (``CholeskyVariationalDistribution``), set here to the whitened prior (mean 0,
    covariance I) rather than on the first call from the global random generator, so that
    building the model draws no random numbers.

    Args:
        num_classes (int): Number of latent functions (one per class).
        inducing_points (Tensor): ``(num_classes, num_inducing, dims)`` initial inducing
            locations (learned).
        kernel_scale (bool): Wrap the linear kernel in a ``ScaleKernel``.
    """

    def __init__(self, num_classes: int, inducing_points: Tensor, kernel_scale: bool) -> None:
        if inducing_points.ndim != 3 or inducing_points.shape[0] != num_classes:
            raise ValueError(f'inducing_points must have shape (num_classes={num_classes}, '
                             f'num_inducing, dims), got {tuple(inducing_points.shape)}')
        batch = torch.Size([num_classes])
        num_inducing = inducing_points.shape[1]
        distribution = CholeskyVariationalDistribution(num_inducing, batch_shape=batch)
        base = VariationalStrategy(self, inducing_points, distribution,
                                   learn_inducing_locations=True)
        super().__init__(IndependentMultitaskVariationalStrategy(base, num_tasks=num_classes))
        with torch.no_grad():
            distribution.variational_mean.zero_()
            distribution.chol_variational_covar.copy_(
                torch.eye(num_inducing).expand(num_classes, num_inducing, num_inducing))
        base.variational_params_initialized.fill_(1)
        self.mean_module = ConstantMean(batch_shape=batch)
        kernel: Kernel = LinearKernel(batch_shape=batch)
        self.covar_module = ScaleKernel(kernel, batch_shape=batch) if kernel_scale else kernel

    def forward(self, x: Tensor) -> MultivariateNormal:
        """The prior ``p(f)`` at ``x`` (GPyTorch's ``ApproximateGP.forward``)."""
        return MultivariateNormal(self.mean_module(x), self.covar_module(x))


def clear_caches(model: IndependentSVGP) -> None:
    """Drop what GPyTorch memoised (the Cholesky factor of ``K_ZZ``, the prior of ``u``)
    in every module of ``model``, so that the next call reads the current parameters."""
    for module in model.modules():
        clear_cache_hook(module)


def latent_marginals(model: IndependentSVGP, x: Tensor) -> Tuple[Tensor, Tensor]:
    """GPyTorch's ``q(f(x))`` marginals: ``(mean, variance)``, each ``(n, num_classes)``
    (the diagonal of the predictive covariance, computed without the ``n x n`` matrix)."""
    dist = model(x)
    return dist.mean, dist.variance


def marginal_dist(mean: Tensor, variance: Tensor) -> MultitaskMultivariateNormal:
    """The ``MultitaskMultivariateNormal`` with these ``(n, num_classes)`` marginals and no
    correlation between pixels or classes (an interleaved diagonal covariance)."""
    return MultitaskMultivariateNormal(mean, DiagLinearOperator(variance.reshape(-1)))


def softmax_likelihood(num_classes: int) -> SoftmaxLikelihood:
    """GPyTorch's softmax likelihood on ``num_classes`` latent functions, without mixing
    weights: ``p(y = c | f) = softmax(f)_c``."""
    return SoftmaxLikelihood(num_classes=num_classes, mixing_weights=False)


def variational_elbo(model: IndependentSVGP, likelihood: SoftmaxLikelihood, x: Tensor,
                     targets: Tensor, num_data: int, num_samples: int) -> Tuple[Tensor, Tensor]:
    """GPyTorch's ``VariationalELBO(likelihood, model, num_data)`` on the pixels ``x``
    ``(n, dims)`` with labels ``targets`` ``(n,)``:
    ``1/n sum_i E_q[log p(y_i | f_i)] - KL(q(u) || p(u)) / num_data``, the expectations by
    ``num_samples`` reparameterised draws from the global random generator.

    The data term is a sum of per-pixel expectations, which depend only on each pixel's
    marginal ``q(f_i)``; the ELBO is given the marginals (:func:`marginal_dist`), so the
    library draws each pixel independently instead of factorising the ``n x n``
    covariance of the joint. Returns ``(elbo, latent mean (n, num_classes))``.
    """
    mean, variance = latent_marginals(model, x)
    elbo = VariationalELBO(likelihood, model, num_data=num_data)
    with gpytorch.settings.num_likelihood_samples(num_samples):
        value = elbo(marginal_dist(mean, variance), targets)
    return value, mean
