"""A new policy in one file: REINFORCE with a learned baseline on CartPole-v1.

This file is both a policy module and a run config (docs/write-your-own-policy.md walks through it):

    rlearn train examples/custom_policy.py                      # through the command line
    rlearn train examples/custom_policy.py --set train.max_env_steps=20000
    python examples/custom_policy.py                            # through rlearn.run.train

``rlearn train`` executes this file as a module, so ``@register_policy("reinforce_demo")`` runs and the
config's ``policy.type = "reinforce_demo"`` resolves to :class:`ReinforcePolicy`.

The algorithm (Williams, 1992), on fixed-length rollouts of ``rollout_steps`` steps from each of the
``env.num_envs`` environments:

* returns ``G[t] = r[t] + gamma * G[t+1]`` computed backwards inside each episode; where an episode is
  cut (time limit, or the end of the rollout) the return bootstraps from the baseline ``V(next_obs)``,
  where it *terminated* the future is 0;
* policy step (every iteration): minimise ``-mean(log pi(a|s) * (G - V(s)))`` minus an entropy bonus;
* baseline fit (every ``baseline_every`` iterations): ``baseline_epochs`` passes of mean-squared
  regression of ``V(s)`` on the returns of the rollouts gathered since the previous fit.

So the policy reports two kinds of keys: ``policy_loss`` and ``entropy`` every iteration, and
``baseline_loss`` only on the iterations that fit the baseline -- an *irregular metric*, averaged by
the learner over the values actually present in its window (never padded with zeros).
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping

import numpy as np
import torch
from gymnasium import spaces
from torch import nn
from torch.distributions import Categorical

from policies import Policy, register_policy


def mlp(in_dim: int, out_dim: int, hidden: int) -> nn.Sequential:
    """Two hidden tanh layers."""
    return nn.Sequential(nn.Linear(in_dim, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, out_dim))


def discounted_returns(reward: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor,
                       next_value: torch.Tensor, gamma: float) -> torch.Tensor:
    """Returns of a ``[T, N]`` rollout: bootstrap from ``next_value`` where an episode was truncated or
    the rollout ends, 0 where it terminated, and never run across an episode end."""
    returns = torch.zeros_like(reward)
    future = next_value[-1]  # the rollout ends: bootstrap
    for t in reversed(range(reward.shape[0])):
        # at an episode end the future is V(final obs) if truncated, 0 if terminated
        ended = torch.maximum(terminated[t], truncated[t])
        future = torch.where(ended > 0, next_value[t] * (1.0 - terminated[t]), future)
        returns[t] = reward[t] + gamma * future
        future = returns[t]
    return returns


@register_policy("reinforce_demo")
class ReinforcePolicy(Policy):
    """REINFORCE with a value baseline for ``Discrete`` actions (see the module docstring)."""

    on_policy = True
    default_config: Dict[str, Any] = dict(
        rollout_steps=128,  # steps per environment per train iteration
        gamma=0.99,
        lr=3e-3,  # policy network
        baseline_lr=3e-3,
        baseline_every=5,  # iterations between two baseline fits (the periodic key)
        baseline_epochs=10,
        entropy_coef=0.01,
        hidden=64,
    )

    # ------------------------------------------------------------------------------------------ learn
    def _init_learn(self) -> None:
        if not isinstance(self.action_space, spaces.Discrete):
            raise TypeError(f"ReinforcePolicy needs a Discrete action space, got {self.action_space}")
        if not isinstance(self.observation_space, spaces.Box) or len(self.observation_space.shape) != 1:
            raise TypeError(f"ReinforcePolicy needs a flat Box observation space, got {self.observation_space}")
        if self.cfg["baseline_every"] < 1:
            raise ValueError(f"policy.baseline_every must be >= 1, got {self.cfg['baseline_every']}")
        obs_dim = self.observation_space.shape[0]
        # the networks start from torch's global generator, which the run seeds from cfg.seed
        self.actor = mlp(obs_dim, int(self.action_space.n), self.cfg["hidden"]).to(self.device)
        self.baseline = mlp(obs_dim, 1, self.cfg["hidden"]).to(self.device)
        self.actor_optim = torch.optim.Adam(self.actor.parameters(), lr=self.cfg["lr"])
        self.baseline_optim = torch.optim.Adam(self.baseline.parameters(), lr=self.cfg["baseline_lr"])
        self.iterations = 0
        self._fit_obs: List[torch.Tensor] = []  # rollouts waiting for the next baseline fit
        self._fit_returns: List[torch.Tensor] = []

    def _monitor_vars_learn(self) -> List[str]:
        # every key _forward_learn may return, including the one it returns only every baseline_every calls
        return ["policy_loss", "entropy", "baseline_loss"]

    def _value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.baseline(obs).squeeze(-1)

    def _forward_learn(self, data: Mapping[str, torch.Tensor]) -> Dict[str, float]:
        obs, action = data["obs"].float(), data["action"].long()
        with torch.no_grad():
            next_value = self._value(data["next_obs"].float())
            returns = discounted_returns(data["reward"], data["terminated"], data["truncated"], next_value,
                                        self.cfg["gamma"])
            advantage = returns - self._value(obs)

        dist = Categorical(logits=self.actor(obs))
        entropy = dist.entropy().mean()
        policy_loss = -(dist.log_prob(action) * advantage).mean() - self.cfg["entropy_coef"] * entropy
        self.actor_optim.zero_grad()
        policy_loss.backward()
        self.actor_optim.step()
        info = {"policy_loss": policy_loss.detach(), "entropy": entropy.detach()}

        self.iterations += 1
        self._fit_obs.append(obs.flatten(0, 1))
        self._fit_returns.append(returns.flatten())
        if self.iterations % self.cfg["baseline_every"] == 0:
            info["baseline_loss"] = self._fit_baseline()
        return info

    def _fit_baseline(self) -> float:
        """Regress the baseline on the returns gathered since the last fit; returns the last epoch's loss."""
        obs, returns = torch.cat(self._fit_obs), torch.cat(self._fit_returns)
        self._fit_obs.clear()
        self._fit_returns.clear()
        for _ in range(self.cfg["baseline_epochs"]):
            loss = ((self._value(obs) - returns) ** 2).mean()
            self.baseline_optim.zero_grad()
            loss.backward()
            self.baseline_optim.step()
        return loss.item()

    # --------------------------------------------------------------------------------- collect / eval
    def _logits(self, obs: np.ndarray) -> torch.Tensor:
        with torch.no_grad():
            return self.actor(torch.as_tensor(obs, dtype=torch.float32, device=self.device))

    def _forward_collect(self, obs: np.ndarray, envstep: int) -> Dict[str, np.ndarray]:
        # sampled from torch's global generator: seeded by the run, saved in checkpoints
        action = Categorical(logits=self._logits(obs)).sample()
        return {"action": action.cpu().numpy()}

    def _forward_eval(self, obs: np.ndarray) -> np.ndarray:
        return self._logits(obs).argmax(-1).cpu().numpy()

    # ------------------------------------------------------------------------------------------ state
    def modules(self) -> Dict[str, nn.Module]:
        return {"actor": self.actor, "baseline": self.baseline}

    def optimizers(self) -> Dict[str, torch.optim.Optimizer]:
        return {"actor": self.actor_optim, "baseline": self.baseline_optim}

    def extra_state(self) -> Dict[str, Any]:
        return {"iterations": self.iterations, "fit_obs": list(self._fit_obs), "fit_returns": list(self._fit_returns)}

    def load_extra_state(self, state: Mapping[str, Any]) -> None:
        self.iterations = int(state["iterations"])
        self._fit_obs = list(state["fit_obs"])
        self._fit_returns = list(state["fit_returns"])


# The run config: what `rlearn train examples/custom_policy.py` trains (docs/configuration.md).
config = dict(
    exp_name="reinforce_cartpole",
    seed=0,
    env=dict(id="CartPole-v1", num_envs=4),
    policy=dict(type="reinforce_demo", rollout_steps=128, baseline_every=5),
    train=dict(max_env_steps=150_000),
    # One iteration = 4 x 128 = 512 env steps. A table every 10 iterations; the window (10 iterations)
    # holds 10 values of policy_loss and 2 of baseline_loss (one every 5 iterations).
    learner=dict(log_freq=10),
    eval=dict(freq=10_240, episodes=10, num_envs=5, stop_value=475.0),
    checkpoint=dict(freq=50, keep=2),
)


if __name__ == "__main__":
    from rlearn.run import train

    train(config)
