"""Deep Q-Network (DQN): Mnih et al., 2015, https://www.nature.com/articles/nature14236, with the double-DQN
target of van Hasselt, Guez and Silver, 2016 (https://arxiv.org/abs/1509.06461) as an option.

One train iteration on a replay minibatch ``(s, a, r, s', terminated)``:

1. target (no gradient)::

       plain DQN:   y = r + gamma * (1 - terminated) * max_a' Q'(s', a')
       double DQN:  y = r + gamma * (1 - terminated) * Q'(s', argmax_a' Q(s', a'))

2. one Adam step on the Huber (or squared) error between ``Q(s, a)`` and ``y``, the gradient's global norm
   clipped to ``max_grad_norm``;
3. every ``target_update_interval`` iterations: ``theta' <- theta' + tau * (theta - theta')`` (a hard copy
   for ``tau = 1``).

Collecting is epsilon-greedy with a linearly falling ``epsilon`` (a collect-side monitor key); docs/dqn.md.
"""

from __future__ import annotations

import copy
import math
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np
import torch
import torch.nn.functional as F
from gymnasium import spaces
from torch import nn

from policies.base import Policy
from rlearn.config import non_empty, one_of, option
from rlearn.nn import MLP
from rlearn.optim import foreach, make_adam, polyak_update_
from rlearn.registry import register_policy
from rlearn.rl.acting import box_observation_shape, obs_tensor
from rlearn.rl.replay_batch import check_replay_batch
from rlearn.values import check_int

__all__ = ["DQNPolicy", "linear_epsilon"]

_LOSSES = {"huber": F.smooth_l1_loss, "mse": F.mse_loss}


def linear_epsilon(envstep: int, initial: float, final: float, steps: int) -> float:
    """The exploration rate after ``envstep`` env steps: ``initial`` at 0, linearly to ``final`` at ``steps``,
    then ``final`` (``steps = 0``: ``final`` from the start)."""
    if steps <= 0 or envstep >= steps:
        return float(final)
    return float(initial + (final - initial) * (envstep / steps))


@register_policy("dqn")
class DQNPolicy(Policy):
    """DQN / double DQN for ``Discrete`` action spaces and ``Box`` observations (flattened); docs/dqn.md."""

    on_policy = False

    class Config:
        """DQN's keys; defaults as Stable-Baselines3's DQN"""

        learning_starts: int = option(100, "env steps of uniformly random actions; the learner starts after as many",
                                      ge=0)
        batch_size: int = option(32, "transitions per train iteration", ge=1)
        hidden_sizes: List[int] = option([64, 64], "hidden layers of the Q-network (ReLU)", items=dict(ge=1),
                                         check=non_empty)
        lr: float = option(1e-4, "Adam learning rate", ge=0, finite=True)
        adam_eps: float = option(1e-8, "Adam's epsilon", gt=0, finite=True)
        gamma: float = option(0.99, "discount", ge=0, le=1)
        double_q: bool = option(False, "double-DQN target: the online network picks a', the target network values it")
        loss: str = option("huber", "`\"huber\"` (smooth L1, delta 1) or `\"mse\"`", check=one_of(*_LOSSES),
                           expected='"huber" or "mse"')
        max_grad_norm: Optional[float] = option(10.0, "clip the gradient's global norm to this; None: no clipping",
                                                gt=0, finite=True)
        target_update_interval: int = option(10_000, "train iterations between two target-network updates", ge=1)
        tau: float = option(1.0, "target update `theta' <- theta' + tau (theta - theta')`: 1.0 is a hard copy",
                            gt=0, le=1)
        exploration_initial_eps: float = option(1.0, "epsilon at env step 0", ge=0, le=1)
        exploration_final_eps: float = option(0.05, "epsilon from env step `exploration_steps` on", ge=0, le=1)
        exploration_steps: int = option(100_000, "env steps over which epsilon falls linearly", ge=0)

    def _init_learn(self) -> None:
        cfg = self.cfg
        if not isinstance(self.action_space, spaces.Discrete):
            raise TypeError(f"DQNPolicy needs a Discrete action space, got {self.action_space!r}")
        self.obs_shape: Tuple[int, ...] = box_observation_shape(self.observation_space, "DQNPolicy")
        self.obs_dim = int(np.prod(self.obs_shape))
        self.n_actions = int(self.action_space.n)
        self.action_start = int(self.action_space.start)  # the env's first action; the networks index from 0
        self._env_action_dtype = self.action_space.dtype
        self.learning_starts, self.gamma, self.double_q = cfg["learning_starts"], cfg["gamma"], cfg["double_q"]
        self.loss_fn = _LOSSES[cfg["loss"]]
        self.max_grad_norm = cfg["max_grad_norm"]
        self.target_update_interval, self.tau = cfg["target_update_interval"], cfg["tau"]

        sizes = [self.obs_dim, *cfg["hidden_sizes"], self.n_actions]  # Q(s, .): a ReLU MLP
        q_parameters = MLP.parameter_count(sizes)
        self.check_network_memory(trained=q_parameters, frozen=q_parameters)
        self.q_net = MLP(sizes).to(self.device)
        self.q_target = copy.deepcopy(self.q_net).requires_grad_(False)
        self._online_params, self._target_params = list(self.q_net.parameters()), list(self.q_target.parameters())
        self.optimizer = make_adam(self.q_net.parameters(), lr=cfg["lr"], device=self.device, eps=cfg["adam_eps"])
        self.update_count = 0  # train iterations done; decides the target updates

    def _monitor_vars_learn(self) -> List[str]:
        return ["q_loss", "q_value", "target_q_value", "grad_norm", "target_sync"]

    def _monitor_vars_collect(self) -> List[str]:
        return ["epsilon"]  # returned by every _forward_collect call

    def _forward_learn(self, data: Mapping[str, torch.Tensor]) -> Dict[str, Any]:
        """One DQN iteration on a replay minibatch."""
        obs, action, reward, next_obs, terminated = check_replay_batch(
            data, "DQNPolicy", self.device, self.obs_shape, n_actions=self.n_actions)
        target_q = self.compute_target(reward, next_obs, terminated)

        q = self.q_net(obs).gather(1, action.unsqueeze(1))  # Q(s, a) as [B, 1]: no squeeze in the graph
        loss = self.loss_fn(q, target_q.unsqueeze(1))
        # the gradient's global norm before clipping (math.inf: measured, not clipped)
        grad_norm = self.optimize(loss, self.optimizer, max_grad_norm=self.max_grad_norm or math.inf)

        self.update_count += 1
        info: Dict[str, Any] = {"q_loss": loss.detach(), "q_value": q.detach().mean(),
                                "target_q_value": target_q.mean(), "grad_norm": grad_norm}
        if self.update_count % self.target_update_interval == 0:
            self.update_target()
            info["target_sync"] = 1
        return info

    @torch.no_grad()
    def compute_target(self, reward: torch.Tensor, next_obs: torch.Tensor, terminated: torch.Tensor) -> torch.Tensor:
        """``y = r + gamma (1 - terminated) Q'(s', a')`` with ``a' = argmax Q'(s', .)`` (plain DQN) or
        ``a' = argmax Q(s', .)`` (double DQN); ``reward``, ``terminated [B]``, ``next_obs [B, obs_dim]``."""
        next_q_all = self.q_target(next_obs)  # [B, n_actions]
        if self.double_q:
            next_action = self.q_net(next_obs).argmax(dim=1, keepdim=True)
            next_q = next_q_all.gather(1, next_action).squeeze(1)
        else:
            next_q = next_q_all.amax(dim=1)  # the values of max(dim=1), without its indices
        return reward + self.gamma * (1.0 - terminated) * next_q

    @torch.no_grad()
    def update_target(self) -> None:
        """``theta' <- theta' + tau (theta - theta')``: a hard copy for ``tau = 1``."""
        if self.tau == 1.0:
            foreach.copy_(self._target_params, self._online_params)
        else:
            polyak_update_(self._target_params, self._online_params, self.tau)

    def epsilon(self, envstep: int) -> float:
        """The probability of a random action at ``envstep``: 1 before ``learning_starts``, then
        :func:`linear_epsilon`."""
        if envstep < self.learning_starts:
            return 1.0
        cfg = self.cfg
        return linear_epsilon(envstep, cfg["exploration_initial_eps"], cfg["exploration_final_eps"],
                              cfg["exploration_steps"])

    def _forward_collect(self, obs: np.ndarray, envstep: int) -> Dict[str, Any]:
        """Epsilon-greedy actions: ``action`` (indices from 0, stored), ``env_action`` when the space does not
        start at 0, and ``epsilon`` (the collect-side key)."""
        n = len(obs)
        eps = self.epsilon(envstep)
        explore = self.np_random.random(n) < eps
        n_explore = int(np.count_nonzero(explore))  # one call instead of all() and any()
        if n_explore == n:
            action = self.np_random.integers(0, self.n_actions, size=n)
        else:
            action = self.greedy_actions(obs)
            if n_explore:
                action[explore] = self.np_random.integers(0, self.n_actions, size=n_explore)
        out: Dict[str, Any] = {"action": action}
        if self.action_start != 0:
            out["env_action"] = (action + self.action_start).astype(self._env_action_dtype)
        out["epsilon"] = eps
        return out

    def _forward_eval(self, obs: np.ndarray) -> np.ndarray:
        """Greedy actions ``argmax_a Q(s, a)`` in the environment's numbering."""
        return (self.greedy_actions(obs) + self.action_start).astype(self._env_action_dtype)

    def greedy_actions(self, obs: np.ndarray) -> np.ndarray:
        """``argmax_a Q(s, a)`` for a batch ``obs [N, *obs_shape]``, as int64 indices from 0."""
        with torch.inference_mode():
            # forward() directly: acting needs no module hooks, and the call machinery costs ~2 us per env step
            return self.q_net.forward(obs_tensor(obs, self.device)).argmax(dim=1).cpu().numpy()  # int64 already

    def modules(self) -> Dict[str, nn.Module]:
        return {"q_net": self.q_net, "q_target": self.q_target}

    def optimizers(self) -> Dict[str, torch.optim.Optimizer]:
        return {"q": self.optimizer}

    def extra_state(self) -> Dict[str, Any]:
        return {"update_count": self.update_count}

    def load_extra_state(self, state: Mapping[str, Any]) -> None:
        count = state.get("update_count", self.update_count)
        self.update_count = check_int("DQNPolicy: checkpoint 'update_count'", count, 0)
