"""The tanh-squashed Gaussian policy of SAC: reparameterised samples ``a = tanh(mu + exp(log_std) * eps)`` and
their log-density ``log pi(a | s) = sum_i [log N(u_i; mu_i, std_i) - log(1 - tanh(u_i)^2)]``.

``log(1 - tanh(u)^2)`` is computed as ``2 * (log 2 - u - softplus(-2u))``, exact and finite where ``tanh(u)``
rounds to +-1 (tested against ``torch.distributions``, values and gradients).
"""

from __future__ import annotations

import math
from typing import Tuple

import torch
import torch.nn.functional as F

__all__ = ["squashed_gaussian_sample", "tanh_log_abs_det_jacobian"]

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_LOG_2 = math.log(2.0)


def tanh_log_abs_det_jacobian(u: torch.Tensor) -> torch.Tensor:
    """``log(1 - tanh(u)^2)`` element-wise, computed stably as ``2 * (log 2 - u - softplus(-2u))``."""
    return 2.0 * (_LOG_2 - u - F.softplus(-2.0 * u))


def squashed_gaussian_sample(mean: torch.Tensor, log_std: torch.Tensor,
                             noise: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(action = tanh(mean + exp(log_std) * noise), log_prob)`` of the tanh-squashed Gaussian for the standard
    normal ``noise`` (shaped like ``mean``), the log-density summed over the last dimension; differentiable in
    ``mean`` and ``log_std`` (the reparameterisation trick), not in ``noise``."""
    if mean.shape != log_std.shape or mean.shape != noise.shape:
        raise ValueError(
            f"squashed_gaussian_sample: mean {tuple(mean.shape)}, log_std {tuple(log_std.shape)} and noise "
            f"{tuple(noise.shape)} must have the same shape"
        )
    noise = noise.detach()  # a constant of the sample (the reparameterisation trick)
    u = mean + log_std.exp() * noise
    # log N(u; mean, std) = -eps^2 / 2 - log_std - log sqrt(2 pi) and -log(1 - tanh(u)^2) = 2 (u + softplus(-2u))
    # - 2 log 2, summed: the terms in eps alone carry no gradient and are summed without recording any
    with torch.no_grad():
        constant = noise.square().sum(-1).mul_(-0.5).sub_(mean.shape[-1] * (_LOG_SQRT_2PI + 2.0 * _LOG_2))
    log_prob = ((u + F.softplus(-2.0 * u)) * 2.0 - log_std).sum(-1) + constant
    return torch.tanh(u), log_prob
