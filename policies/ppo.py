"""Proximal Policy Optimization (PPO): Schulman, Wolski, Dhariwal, Radford and Klimov, 2017,
https://arxiv.org/abs/1707.06347 (the clipped-surrogate variant, as in CleanRL and Stable-Baselines3).

One train iteration is one update on a rollout ``[T, N]``:

1. GAE(lambda) advantages and value targets (:func:`rlearn.rl.compute_gae`) of the rewards times
   ``reward_scale``;
2. ``epochs`` passes over the rollout in shuffled minibatches, each one gradient step (gradient norm clipped
   to ``max_grad_norm``) of ``loss = policy_loss - entropy_coef * entropy + value_coef * value_loss`` with
   the clipped surrogate :func:`clipped_surrogate_loss` and the (optionally clipped) :func:`value_loss`;
3. with ``target_kl``, the update stops before the first minibatch whose ``approx_kl`` exceeds
   ``1.5 * target_kl`` (averaged over the ranks of a multi-process run).

Reported keys: docs/ppo.md; what PPO shares with PPG: :class:`~policies.actor_critic.OnPolicyActorCritic`.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from policies.actor_critic import OnPolicyActorCritic
from rlearn.config import option
from rlearn.distributed.utils import is_distributed
from rlearn.nn import MLP
from rlearn.optim import make_adam
from rlearn.registry import register_policy
from rlearn.rl.advantages import explained_variance
from rlearn.rl.heads import categorical_log_prob_entropy, gaussian_log_prob_entropy
from rlearn.rl.means import StepMeans
from rlearn.trace import span


def clipped_surrogate_loss(log_prob: torch.Tensor, old_log_prob: torch.Tensor, advantage: torch.Tensor,
                           clip_ratio: float) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """PPO's clipped surrogate loss ``-mean(min(r * A, clip(r, 1-eps, 1+eps) * A))``, ``r = exp(log_prob -
    old_log_prob)``; with (no gradient) ``approx_kl = mean((r - 1) - log r)`` (Schulman's unbiased "k3" estimate
    of ``KL(pi_old || pi)``) and ``clipfrac``, the fraction of samples with ``|r - 1| > eps``.
    """
    log_ratio = log_prob - old_log_prob
    ratio = log_ratio.exp()
    loss = -torch.min(ratio * advantage, ratio.clamp(1.0 - clip_ratio, 1.0 + clip_ratio) * advantage).mean()
    with torch.no_grad():
        approx_kl = ((ratio - 1.0) - log_ratio).mean()
        clipfrac = ((ratio - 1.0).abs() > clip_ratio).to(ratio.dtype).mean()
    return loss, approx_kl, clipfrac


def value_loss(value: torch.Tensor, old_value: torch.Tensor, target: torch.Tensor,
               clip_value: Optional[float]) -> torch.Tensor:
    """``mean((value - target)^2)``; with ``clip_value = c`` the PPO reference code's pessimistic clipped loss
    ``mean(max((value - target)^2, (old_value + clip(value - old_value, -c, c) - target)^2))``."""
    if clip_value is None:
        return F.mse_loss(value, target)
    unclipped = (value - target).pow(2)
    clipped = (old_value + (value - old_value).clamp(-clip_value, clip_value) - target).pow(2)
    return torch.max(unclipped, clipped).mean()


def normalize(advantage: torch.Tensor) -> torch.Tensor:
    """``(A - mean(A)) / (std(A) + 1e-8)``; a single sample is returned unchanged (its std is undefined)."""
    if advantage.numel() < 2:
        return advantage
    return (advantage - advantage.mean()) / (advantage.std() + 1e-8)


class ActorCritic(nn.Module):
    """Separate actor (logits or Gaussian means) and critic MLPs, orthogonally initialised as in the PPO
    reference code (output gain 0.01 and 1), plus a state-independent ``log_std`` for continuous actions;
    ``forward(obs) -> (dist_params, value [B])``."""

    def __init__(self, obs_dim: int, n_outputs: int, hidden_sizes: Sequence[int], activation: str,
                 continuous: bool, init_log_std: float) -> None:
        super().__init__()
        self.actor = MLP([obs_dim, *hidden_sizes, n_outputs], activation, init="orthogonal", output_gain=0.01)
        self.critic = MLP([obs_dim, *hidden_sizes, 1], activation, init="orthogonal", output_gain=1.0)
        self.log_std = nn.Parameter(torch.full((n_outputs,), float(init_log_std))) if continuous else None

    @staticmethod
    def parameter_count(obs_dim: int, n_outputs: int, hidden_sizes: Sequence[int], continuous: bool) -> int:
        """The number of parameters of ``ActorCritic(obs_dim, n_outputs, hidden_sizes, ...)``."""
        return (MLP.parameter_count([obs_dim, *hidden_sizes, n_outputs])
                + MLP.parameter_count([obs_dim, *hidden_sizes, 1]) + (n_outputs if continuous else 0))

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(obs).squeeze(-1)

    def forward(self, obs: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        return self.actor(obs), self.value(obs)


#: reported by every update: minibatch means
_EVERY_UPDATE = ("policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac")


@register_policy("ppo")
class PPOPolicy(OnPolicyActorCritic):
    """PPO with the clipped surrogate for ``Discrete`` and 1-D ``Box`` action spaces; one Adam optimizer,
    ``"ac"``."""

    ddp_find_unused_parameters = False  # every loss term reaches every parameter (actor, critic, log_std)

    class Config(OnPolicyActorCritic.Config):
        """PPO's keys; defaults as Stable-Baselines3's `PPO`"""

        rollout_steps: int = option(2048, "steps per environment per update", ge=1)
        gamma: float = option(0.99, "discount", ge=0, le=1)
        gae_lambda: float = option(0.95, "GAE's lambda", ge=0, le=1)
        epochs: int = option(10, "passes over the rollout per update", ge=1)
        minibatch_size: int = option(64, "transitions per gradient step", ge=1)
        clip_value: Optional[float] = option(None, "clip range of the value loss around the collect-time value "
                                                   "(None: no value clipping)", gt=0, finite=True)
        value_coef: float = option(0.5, "weight of the value loss", ge=0, finite=True)
        normalize_advantage: bool = option(True, "normalise the advantages per minibatch")
        target_kl: Optional[float] = option(None, "stop an update once a minibatch's `approx_kl` exceeds 1.5 x this "
                                                  "(None: always run every epoch)", gt=0, finite=True)
        lr: float = option(3e-4, "initial learning rate of the Adam optimizer `\"ac\"`", ge=0, finite=True)

    def _init_learn(self) -> None:
        cfg = self.cfg
        obs_dim, n_outputs = self._init_spaces()
        self.check_network_memory(
            trained=ActorCritic.parameter_count(obs_dim, n_outputs, cfg["hidden_sizes"], not self.discrete))
        with self.seeded_init():
            self.ac = ActorCritic(
                obs_dim, n_outputs, cfg["hidden_sizes"], cfg["activation"], not self.discrete, cfg["init_log_std"]
            ).to(self.device)
        self.optimizer = make_adam(self.ac.parameters(), lr=cfg["lr"], device=self.device, eps=1e-5)

    def modules(self) -> Dict[str, nn.Module]:
        return {"ac": self.ac}

    def optimizers(self) -> Dict[str, torch.optim.Optimizer]:
        return {"ac": self.optimizer}

    def _log_prob_entropy(self, params: torch.Tensor, action: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        if self.discrete:
            return categorical_log_prob_entropy(params, action)
        return gaussian_log_prob_entropy(params, self.ac.log_std, action)

    def _distribution(self, obs: torch.Tensor, with_value: bool = True
                      ) -> Tuple[torch.Tensor, Optional[torch.Tensor], Optional[torch.Tensor]]:
        """``(logits or mean, log_std or None, V(obs) or None)`` for acting and evaluating."""
        if not with_value:
            return self.ac.actor(obs), self.ac.log_std, None
        params, value = self.ac(obs)
        return params, self.ac.log_std, value

    def _monitor_vars_learn(self) -> List[str]:
        """The six per-update keys, plus ``early_stop_epoch`` when ``target_kl`` is set (only then can it appear)."""
        keys = [*_EVERY_UPDATE, "explained_variance"]
        if self.cfg["target_kl"] is not None:
            keys.append("early_stop_epoch")
        return keys

    def _forward_learn(self, data: Mapping[str, Any]) -> Dict[str, Any]:
        """One PPO update on a rollout of ``[T, N, ...]`` tensors: minibatch means of the statistics (and
        ``early_stop_epoch`` if ``target_kl`` stopped the update)."""
        # 1. advantages and value targets with the critic that collected the rollout
        batch = self._advantage_batch(data, self.ac.value)
        info: Dict[str, Any] = {"explained_variance": explained_variance(batch["value"], batch["target"])}
        # 2.-3. epochs of minibatch steps, stopped early by target_kl
        cfg = self.cfg
        clip, target_kl = self._clip_ratio(), cfg["target_kl"]
        # advantages are normalised per minibatch; a rollout that is a single minibatch is normalised once
        normalize_each = cfg["normalize_advantage"] and cfg["minibatch_size"] < len(batch["obs"])
        if cfg["normalize_advantage"] and not normalize_each:
            batch = dict(batch, advantage=normalize(batch["advantage"]))
        steps = StepMeans()
        for epoch in range(cfg["epochs"]):
            for mb in self._minibatches(batch):
                with span("learner/forward", lane="learner"):
                    params, value = self.ac(mb["obs"])
                    log_prob, entropy = self._log_prob_entropy(params, mb["action"])
                    advantage = normalize(mb["advantage"]) if normalize_each else mb["advantage"]
                    policy_loss, approx_kl, clipfrac = clipped_surrogate_loss(log_prob, mb["log_prob"], advantage, clip)
                    v_loss = value_loss(value, mb["value"], mb["target"], cfg["clip_value"])
                    entropy = entropy.mean()
                    loss = policy_loss + cfg["value_coef"] * v_loss
                    if cfg["entropy_coef"]:  # (without a bonus, no backward pass through the entropy)
                        loss = loss - cfg["entropy_coef"] * entropy
                steps.add(policy_loss=policy_loss, value_loss=v_loss, entropy=entropy, approx_kl=approx_kl,
                          clipfrac=clipfrac)
                if target_kl is not None and self._kl_over_ranks(approx_kl) > 1.5 * target_kl:
                    info["early_stop_epoch"] = epoch + 1  # this minibatch is not stepped; no further epochs
                    break
                self.optimize(loss, self.optimizer, max_grad_norm=cfg["max_grad_norm"])
            if "early_stop_epoch" in info:
                break
        info.update(steps.means())  # minibatch means, by name
        return info

    @staticmethod
    def _kl_over_ranks(approx_kl: torch.Tensor) -> float:
        """The minibatch's ``approx_kl``, averaged over the ranks of a multi-process run: every rank then
        stops at the same step (DDP needs every rank to take the same steps). One process: the value."""
        if is_distributed():
            approx_kl = approx_kl.detach().clone()
            dist.all_reduce(approx_kl)
            approx_kl /= dist.get_world_size()
        return approx_kl.item()

    def _minibatches(self, batch: Mapping[str, torch.Tensor]) -> List[Dict[str, torch.Tensor]]:
        """A fresh random split of the batch into minibatches of ``minibatch_size`` (the last one may be
        smaller); a batch that fits in one minibatch is used as it is."""
        size, minibatch_size = len(batch["obs"]), self.cfg["minibatch_size"]
        if minibatch_size >= size:
            return [dict(batch)]
        return [{key: value[idx] for key, value in batch.items()}
                for idx in self._minibatch_indices(size, minibatch_size)]
