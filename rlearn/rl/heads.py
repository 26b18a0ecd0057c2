"""Categorical and diagonal-Gaussian action heads in closed form (tested against ``torch.distributions``):
log-probabilities, entropies, sampling with the policy's own generator, KL divergences. Logits ``[B, n]`` and
indices ``[B]``; means and actions ``[B, d]``, ``log_std`` ``[d]`` or ``[B, d]``; results ``[B]``.
"""

from __future__ import annotations

import math
from typing import Tuple

import numpy as np
import torch

__all__ = [
    "categorical_log_prob_entropy", "gaussian_log_prob_entropy", "sample_gaussian", "categorical_kl", "gaussian_kl",
]

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def categorical_log_prob_entropy(logits: torch.Tensor, action: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(log pi(action), entropy)`` of a categorical over ``logits [B, n]`` for class indices ``action [B]``, from
    ``log_softmax`` values."""
    log_pi = torch.log_softmax(logits, dim=-1)
    log_prob = log_pi.gather(-1, action.long().unsqueeze(-1)).squeeze(-1)
    entropy = -(log_pi.exp() * log_pi).sum(-1)
    return log_prob, entropy


def gaussian_log_prob_entropy(mean: torch.Tensor, log_std: torch.Tensor,
                              action: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(log pi(action), entropy)`` of the diagonal Gaussian ``N(mean, exp(log_std)^2)``: sums of
    ``-(z^2 / 2 + log_std + log sqrt(2 pi))`` with ``z = (action - mean) / std`` and of ``1/2 + log sqrt(2 pi) + log_std``."""
    z = (action - mean) * torch.exp(-log_std)
    log_prob = (-0.5 * z.pow(2) - log_std - _LOG_SQRT_2PI).sum(-1)
    entropy = (0.5 + _LOG_SQRT_2PI + log_std).expand_as(mean).sum(-1)
    return log_prob, entropy


def sample_gaussian(mean: torch.Tensor, log_std: torch.Tensor, np_random: np.random.Generator) -> torch.Tensor:
    """``mean + exp(log_std) * noise``, the standard-normal noise drawn from ``np_random`` (the policy's own
    generator) and copied to ``mean``'s device in one transfer."""
    noise = torch.as_tensor(np_random.standard_normal(tuple(mean.shape)), dtype=mean.dtype)
    return mean + log_std.exp() * noise.to(mean.device)


def categorical_kl(old_logits: torch.Tensor, new_logits: torch.Tensor) -> torch.Tensor:
    """``KL(pi_old || pi_new) = sum_a p_old(a) (log p_old(a) - log p_new(a))`` per row, on ``log_softmax`` values
    (finite where ``torch.distributions`` gives ``inf`` for a new probability that underflows to 0)."""
    old_logp = torch.log_softmax(old_logits, dim=-1)
    new_logp = torch.log_softmax(new_logits, dim=-1)
    return (old_logp.exp() * (old_logp - new_logp)).sum(-1)


def gaussian_kl(old_mean: torch.Tensor, old_log_std: torch.Tensor, new_mean: torch.Tensor,
                new_log_std: torch.Tensor) -> torch.Tensor:
    """``KL(N_old || N_new)`` of two diagonal Gaussians, summed over the dimensions:
    ``log(s_new / s_old) + (s_old^2 + (m_old - m_new)^2) / (2 s_new^2) - 1/2`` (finite: ``s = exp(log_std) > 0``)."""
    var_ratio = torch.exp(2.0 * (old_log_std - new_log_std))
    mean_term = ((old_mean - new_mean) * torch.exp(-new_log_std)).pow(2)
    return (new_log_std - old_log_std + 0.5 * (var_ratio + mean_term) - 0.5).sum(-1)
