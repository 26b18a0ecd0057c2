"""Twin Delayed DDPG (TD3): Fujimoto, van Hoof and Meger, 2018, https://arxiv.org/abs/1802.09477

One train iteration on a replay minibatch ``(s, a, r, s', terminated)``:

1. target (no gradient), with target policy smoothing and clipped double-Q::

       eps = clip(N(0, target_noise), -target_noise_clip, +target_noise_clip)
       y   = r + gamma * (1 - terminated) * min(Q1'(s', a'), Q2'(s', a')),   a' = clip(pi'(s') + eps, -1, 1)

2. critics: one Adam step on ``MSE(Q1(s, a), y) + MSE(Q2(s, a), y)``;
3. every ``actor_update_freq`` iterations: one Adam step on ``-mean Q1(s, pi(s))`` through the frozen critic,
   then Polyak averaging of all target networks.

Networks work in normalised action units ``[-1, 1]`` (docs/td3.md); what TD3 shares with SAC:
:class:`~policies.actor_critic.OffPolicyActorCritic`.
"""

from __future__ import annotations

import copy
from typing import Any, Dict, List, Mapping, Sequence

import numpy as np
import torch

from policies.actor_critic import CRITIC_KEYS, OffPolicyActorCritic
from rlearn.config import option
from rlearn.nn import MLP, frozen
from rlearn.optim import polyak_update_
from rlearn.registry import register_policy
from rlearn.trace import span  # a shared no-op context manager while tracing is off

__all__ = ["TD3Policy", "Actor"]

ACTOR_KEYS = ("actor_loss", "cur_lr_actor")


class Actor(MLP):
    """Deterministic policy ``obs [B, o] -> action [B, a] in [-1, 1]``: a ReLU MLP with a tanh output."""

    def __init__(self, obs_dim: int, act_dim: int, hidden_sizes: Sequence[int]) -> None:
        super().__init__([obs_dim, *hidden_sizes, act_dim], output_activation="tanh")


@register_policy("td3")
class TD3Policy(OffPolicyActorCritic):
    """TD3 for any ``Box`` action space (see the module docstring and :attr:`Config`)."""

    class Config(OffPolicyActorCritic.Config):
        """TD3's keys; defaults as in the TD3 paper. Noises are in normalised action units (1 = half the range)"""

        learning_starts: int = option(
            25_000, "env steps of uniformly random actions before the actor acts (the run also waits this long "
            "before the first train iteration)", ge=0)
        actor_update_freq: int = option(2, "critic updates per actor + target update", ge=1)
        lr_actor: float = option(3e-4, "Adam learning rate of the actor", gt=0)
        lr_critic: float = option(3e-4, "Adam learning rate of the twin critics", gt=0)
        exploration_noise: float = option(0.1, "std of the Gaussian collect noise", ge=0)
        target_noise: float = option(0.2, "std of the target policy smoothing noise", ge=0)
        target_noise_clip: float = option(0.5, "the smoothing noise is clipped to +-this", ge=0)

    def _init_learn(self) -> None:
        cfg = self.cfg
        self.actor_update_freq, self.gamma, self.tau = cfg["actor_update_freq"], cfg["gamma"], cfg["tau"]
        self.learning_starts, self.exploration_noise = cfg["learning_starts"], cfg["exploration_noise"]
        self.target_noise, self.target_noise_clip = cfg["target_noise"], cfg["target_noise_clip"]

        self._init_spaces()
        self._init_networks(lambda: Actor(self.obs_dim, self.act_dim, cfg["hidden_sizes"]), self.act_dim,
                            actor_target=True)
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self._online_params = list(self.critic.parameters()) + list(self.actor.parameters())
        self._target_params = list(self.critic_target.parameters()) + list(self.actor_target.parameters())
        self._init_threads(self.actor_update_freq)

    def _monitor_vars_learn(self) -> List[str]:
        return [*CRITIC_KEYS, *ACTOR_KEYS]

    def _monitor_periods_learn(self) -> Dict[str, int]:
        return dict.fromkeys(ACTOR_KEYS, self.actor_update_freq)  # reported at actor updates only

    def _learn_step(self, data: Mapping[str, torch.Tensor]) -> Dict[str, Any]:
        """Target, critic update and, every ``actor_update_freq`` iterations, actor and target updates."""
        obs, action, reward, next_obs, terminated = self._check_batch(data)
        with span("learner/forward", lane="learner"):
            y = self.compute_target(reward, next_obs, terminated, self.smoothing_noise(action.shape))
        info = self.update_critic(obs, action, y)
        self.update_count += 1

        if self.update_count % self.actor_update_freq == 0:
            info["actor_loss"] = self._update_actor(obs)
            info["cur_lr_actor"] = self.actor_optimizer.param_groups[0]["lr"]
            polyak_update_(self._target_params, self._online_params, self.tau)  # every target network
        return info

    def _update_actor(self, obs: torch.Tensor) -> torch.Tensor:
        """One Adam step on ``-mean Q1(s, pi(s))`` through the frozen critic; returns the loss."""
        with span("learner/forward", lane="learner"), frozen(self.critic):
            actor_loss = -self.critic(obs, self.actor(obs), member=0).mean()
        self.optimize(actor_loss, self.actor_optimizer)
        return actor_loss.detach()

    def smoothing_noise(self, shape: Sequence[int]) -> torch.Tensor:
        """Target policy smoothing noise ``clip(N(0, target_noise), -target_noise_clip, target_noise_clip)``
        (normalised action units), drawn from the policy's generator ``torch_rng``."""
        noise = torch.randn(tuple(shape), generator=self.torch_rng, device=self.device)
        return noise.mul_(self.target_noise).clamp_(-self.target_noise_clip, self.target_noise_clip)

    @torch.no_grad()
    def compute_target(self, reward: torch.Tensor, next_obs: torch.Tensor, terminated: torch.Tensor,
                       noise: torch.Tensor) -> torch.Tensor:
        """TD3 target ``y = r + gamma * (1 - terminated) * min_i Q_i'(s', clip(pi'(s') + noise, -1, 1))`` for the
        (already clipped) smoothing ``noise [B, a]``."""
        next_action = (self.actor_target(next_obs) + noise).clamp(-1.0, 1.0)
        q_next = self.critic_target(next_obs, next_action).amin(dim=0)  # clipped double-Q
        return reward + self.gamma * (1.0 - terminated) * q_next

    def _forward_collect(self, obs: np.ndarray, envstep: int) -> Dict[str, np.ndarray]:
        """Uniform actions before ``learning_starts`` env steps, then ``pi(s)`` + Gaussian noise."""
        return self._explore(obs, envstep, self._noisy_actions)

    def _noisy_actions(self, obs: np.ndarray) -> np.ndarray:
        action = self._actor_numpy(obs)
        if self.exploration_noise > 0:
            action = action + self.np_random.normal(0.0, self.exploration_noise, size=action.shape)
        return action.clip(-1.0, 1.0)  # the method: np.clip's dispatch costs more than a 1-row clip

    def _forward_eval(self, obs: np.ndarray) -> np.ndarray:
        """Deterministic actions ``pi(s)`` in environment units."""
        return self.to_env_action(self._actor_numpy(obs))

    def modules(self) -> Dict[str, torch.nn.Module]:
        return {"actor": self.actor, "critic": self.critic, "actor_target": self.actor_target,
                "critic_target": self.critic_target}

    def optimizers(self) -> Dict[str, torch.optim.Optimizer]:
        return {"actor": self.actor_optimizer, "critic": self.critic_optimizer}
