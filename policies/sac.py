"""Soft Actor-Critic (SAC): Haarnoja et al., 2018, https://arxiv.org/abs/1801.01290 and
https://arxiv.org/abs/1812.05905 (automatic entropy tuning).

The actor is a tanh-squashed Gaussian (:mod:`rlearn.rl.squashed_gaussian`). One train iteration on a replay
minibatch ``(s, a, r, s', terminated)``:

1. target (no gradient), with a fresh action ``a' ~ pi(. | s')`` of the current actor::

       y = r + gamma * (1 - terminated) * (min(Q1'(s', a'), Q2'(s', a')) - alpha * log pi(a' | s'))

2. critics: one Adam step on ``MSE(Q1(s, a), y) + MSE(Q2(s, a), y)``;
3. every ``policy_frequency`` iterations, ``policy_frequency`` times in a row (CleanRL's delayed update):
   an actor step on ``mean(alpha * log pi(a~ | s) - min_i Q_i(s, a~))`` through the frozen critics and, with
   ``autotune``, a temperature step on ``-log_alpha * (mean log pi(a~ | s) + target_entropy)``;
4. Polyak averaging of both target critics, every iteration.

Reported keys and configuration: docs/sac.md; what SAC shares with TD3:
:class:`~policies.actor_critic.OffPolicyActorCritic`.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import torch

from policies.actor_critic import CRITIC_KEYS, OffPolicyActorCritic
from policies.base import PolicyConfigError
from rlearn.config import option
from rlearn.nn import MLP, frozen
from rlearn.optim import make_adam, polyak_update_
from rlearn.registry import register_policy
from rlearn.rl.means import StepMeans
from rlearn.rl.squashed_gaussian import squashed_gaussian_sample
from rlearn.trace import span

__all__ = ["SACPolicy", "GaussianActor"]


class GaussianActor(MLP):
    """``obs [B, o] -> (mean [B, a], log_std [B, a])`` of the pre-tanh Gaussian, ``log_std`` clamped to
    ``[log_std_min, log_std_max]``: one ReLU MLP with ``2 * a`` outputs (a shared trunk with two linear heads)."""

    def __init__(self, obs_dim: int, act_dim: int, hidden_sizes: Sequence[int],
                 log_std_min: float = -20.0, log_std_max: float = 2.0) -> None:
        super().__init__([obs_dim, *hidden_sizes, 2 * act_dim])
        self.act_dim, self.log_std_min, self.log_std_max = act_dim, log_std_min, log_std_max

    def forward(self, obs: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:  # type: ignore[override]
        mean, log_std = super().forward(obs).split(self.act_dim, dim=-1)
        return mean, log_std.clamp(self.log_std_min, self.log_std_max)


@register_policy("sac")
class SACPolicy(OffPolicyActorCritic):
    """SAC for any ``Box`` action space with finite bounds (see the module docstring and :attr:`Config`)."""

    class Config(OffPolicyActorCritic.Config):
        """SAC's keys; defaults as Stable-Baselines3's SAC"""

        lr_actor: float = option(3e-4, "Adam learning rate of the actor", gt=0)
        lr_critic: float = option(3e-4, "Adam learning rate of the twin critics", gt=0)
        lr_alpha: float = option(3e-4, "Adam learning rate of the temperature (autotune)", gt=0)
        policy_frequency: int = option(2, "every that many iterations, that many actor + temperature updates", ge=1)
        autotune: bool = option(True, "learn the temperature `alpha`")
        init_alpha: float = option(1.0, "the temperature's start (or, without autotune, fixed) value", gt=0)
        target_entropy: Optional[float] = option(None, "the entropy autotune aims at", finite=True,
                                                 doc_default="None (= `-dim(A)`)")
        log_std_min: float = option(-20.0, "lower clamp of the actor's log standard deviation", finite=True)
        log_std_max: float = option(2.0, "upper clamp of the actor's log standard deviation (> `log_std_min`)",
                                    finite=True)

    def _init_learn(self) -> None:
        cfg = self.cfg
        self.learning_starts, self.policy_frequency = cfg["learning_starts"], cfg["policy_frequency"]
        self.gamma, self.tau, self.autotune = cfg["gamma"], cfg["tau"], cfg["autotune"]
        if not cfg["log_std_max"] > cfg["log_std_min"]:
            raise PolicyConfigError(f"SACPolicy: config key 'policy.log_std_max' must be > policy.log_std_min "
                                    f"({cfg['log_std_min']!r}), got {cfg['log_std_max']!r}")

        self._init_spaces()
        target = cfg["target_entropy"]
        self.target_entropy = -float(self.act_dim) if target is None else target
        self._init_networks(lambda: GaussianActor(self.obs_dim, self.act_dim, cfg["hidden_sizes"],
                                                  cfg["log_std_min"], cfg["log_std_max"]), 2 * self.act_dim)
        self.log_alpha = torch.tensor(math.log(cfg["init_alpha"]), device=self.device, requires_grad=self.autotune)
        self._online_params, self._target_params = list(self.critic.parameters()), list(self.critic_target.parameters())
        self.alpha_optimizer: Optional[torch.optim.Optimizer] = None
        if self.autotune:
            self.alpha_optimizer = make_adam([self.log_alpha], lr=cfg["lr_alpha"], device=self.device)
        self._init_threads(self.policy_frequency)

    @property
    def alpha(self) -> torch.Tensor:
        """The entropy temperature ``exp(log_alpha)``, detached (a 0-d tensor on the policy's device)."""
        return self.log_alpha.detach().exp()

    def _monitor_vars_learn(self) -> List[str]:
        return CRITIC_KEYS + self._actor_keys()

    def _monitor_periods_learn(self) -> Dict[str, int]:
        return dict.fromkeys(self._actor_keys(), self.policy_frequency)  # reported at actor updates only

    def _actor_keys(self) -> List[str]:
        return ["actor_loss", "entropy", "alpha", *(["alpha_loss"] if self.autotune else []), "cur_lr_actor"]

    def _learn_step(self, data: Mapping[str, torch.Tensor]) -> Dict[str, Any]:
        obs, action, reward, next_obs, terminated = self._check_batch(data)
        with span("learner/forward", lane="learner"):
            y = self.compute_target(reward, next_obs, terminated, self.sample_noise(action.shape[0]))
        info = self.update_critic(obs, action, y)
        self.update_count += 1
        if self.update_count % self.policy_frequency == 0:
            # CleanRL's delayed update: policy_frequency actor (and temperature) steps now, none in between
            steps = StepMeans()
            for _ in range(self.policy_frequency):
                steps.add(**self._update_actor_and_alpha(obs))
            info.update(steps.means())  # actor_loss, entropy (, alpha_loss): means over the steps
            info["alpha"] = self.alpha
            info["cur_lr_actor"] = self.actor_optimizer.param_groups[0]["lr"]
        polyak_update_(self._target_params, self._online_params, self.tau)  # the target critics, every iteration
        return info

    def sample_noise(self, batch: int) -> torch.Tensor:
        """Standard normal draws ``[batch, act_dim]`` for one batch of actor samples, from ``torch_rng``."""
        return torch.randn(batch, self.act_dim, generator=self.torch_rng, device=self.device)

    def sample_action(self, obs: torch.Tensor, noise: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """``(a [B, act_dim], log pi(a | s) [B])``: the actor's squashed Gaussian sample for ``noise``."""
        mean, log_std = self.actor(obs)
        return squashed_gaussian_sample(mean, log_std, noise)

    @torch.no_grad()
    def compute_target(self, reward: torch.Tensor, next_obs: torch.Tensor, terminated: torch.Tensor,
                       noise: torch.Tensor) -> torch.Tensor:
        """Soft target ``y = r + gamma (1 - terminated) (min_i Q_i'(s', a') - alpha log pi(a' | s'))`` with
        ``a'`` the current actor's sample for the standard normal ``noise [B, act_dim]``."""
        next_action, next_log_prob = self.sample_action(next_obs, noise)
        q_next = self.critic_target(next_obs, next_action).amin(dim=0)  # clipped double-Q
        return reward + self.gamma * (1.0 - terminated) * (q_next - self.alpha * next_log_prob)

    def _update_actor_and_alpha(self, obs: torch.Tensor) -> Dict[str, torch.Tensor]:
        """One actor step on ``mean(alpha log pi(a~|s) - min_i Q_i(s, a~))`` through the frozen critics and
        (autotune) one temperature step on ``-log_alpha (mean log pi(a~|s) + target_entropy)``."""
        with span("learner/forward", lane="learner"), frozen(self.critic):
            new_action, log_prob = self.sample_action(obs, self.sample_noise(obs.shape[0]))
            min_q = self.critic(obs, new_action).amin(dim=0)
            actor_loss = (self.alpha * log_prob - min_q).mean()
            mean_log_prob = log_prob.detach().mean()
            alpha_loss = -self.log_alpha * (mean_log_prob + self.target_entropy)
        if not self.autotune:
            self.optimize(actor_loss, self.actor_optimizer)
            return {"actor_loss": actor_loss, "entropy": -mean_log_prob}
        # the two losses share no parameter: one backward gives each its own gradients
        self.optimize(actor_loss + alpha_loss, self.actor_optimizer, self.alpha_optimizer)
        return {"actor_loss": actor_loss, "entropy": -mean_log_prob, "alpha_loss": alpha_loss}

    def _forward_collect(self, obs: np.ndarray, envstep: int) -> Dict[str, np.ndarray]:
        """Uniform actions before ``learning_starts`` env steps, then squashed Gaussian samples (noise from
        ``np_random``)."""
        return self._explore(obs, envstep, self._sampled_actions)

    def _sampled_actions(self, obs: np.ndarray) -> np.ndarray:
        mean, log_std = self._mean_log_std(obs)
        return np.tanh(mean + np.exp(log_std) * self.np_random.standard_normal(mean.shape))

    def _forward_eval(self, obs: np.ndarray) -> np.ndarray:
        """Deterministic actions ``tanh(mean)`` in environment units."""
        return self.to_env_action(np.tanh(self._mean_log_std(obs)[0]))

    def _mean_log_std(self, obs: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """``(mean, log_std)`` as float64 ``[N, act_dim]`` for observations ``[N, *obs_shape]``."""
        out = self._actor_numpy(obs)
        return out[:, :self.act_dim], out[:, self.act_dim:]

    def modules(self) -> Dict[str, torch.nn.Module]:
        return {"actor": self.actor, "critic": self.critic, "critic_target": self.critic_target}

    def optimizers(self) -> Dict[str, torch.optim.Optimizer]:
        optimizers = {"actor": self.actor_optimizer, "critic": self.critic_optimizer}
        if self.alpha_optimizer is not None:
            optimizers["alpha"] = self.alpha_optimizer
        return optimizers

    def extra_state(self) -> Dict[str, Any]:
        return {**super().extra_state(), "log_alpha": self.log_alpha.detach().cpu().clone()}

    def load_extra_state(self, state: Mapping[str, Any]) -> None:
        super().load_extra_state(state)
        if "log_alpha" in state:
            value = torch.as_tensor(state["log_alpha"], dtype=torch.float32)
            if value.numel() != 1 or not bool(torch.isfinite(value).all()):
                raise ValueError(f"SACPolicy: checkpoint 'log_alpha' must be one finite number, got {value!r}")
            with torch.no_grad():
                self.log_alpha.copy_(value.reshape(()))  # in place: the alpha optimizer holds this tensor
