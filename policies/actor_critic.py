"""What actor-critics share: :class:`OffPolicyActorCritic` (TD3, SAC: normalised action units, the twin-critic
step, exploration, thread choice, counters) and :class:`OnPolicyActorCritic` (PPO, PPG: acting from a subclass's
``_distribution``, GAE advantages of the checked rollout, shuffled minibatches, the clip range).
"""

from __future__ import annotations

import copy
import math
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn.functional as F

from policies.base import Policy
from rlearn.config import non_empty, one_of, option
from rlearn.nn import MLP, QEnsemble, ThreadChooser
from rlearn.optim import make_adam
from rlearn.rl.acting import (BoxActions, action_spec, box_observation_shape, forward_numpy, host_columns, obs_tensor,
                              sample_categorical)
from rlearn.rl.advantages import compute_gae
from rlearn.rl.heads import gaussian_log_prob_entropy, sample_gaussian
from rlearn.rl.replay_batch import check_replay_batch, check_rollout
from rlearn.trace import span
from rlearn.values import check_int

__all__ = ["OffPolicyActorCritic", "OnPolicyActorCritic", "CRITIC_KEYS"]

#: the keys every iteration of TD3 and SAC reports, from :meth:`OffPolicyActorCritic.update_critic`
CRITIC_KEYS = ["critic_loss", "critic_twin_loss", "q_value", "q_value_twin", "target_q_value", "td_error",
               "cur_lr_critic"]


class OffPolicyActorCritic(Policy):
    """Base of TD3 and SAC; subclasses build their networks with :meth:`_init_networks` and implement
    ``_learn_step(data)``."""

    on_policy = False

    class Config:
        """The keys every off-policy actor-critic has"""

        learning_starts: int = option(100, "env steps of uniformly random actions; the learner starts after as many",
                                      ge=0)
        batch_size: int = option(256, "minibatch size sampled from the replay buffer per train iteration", ge=1)
        hidden_sizes: List[int] = option([256, 256], "hidden layers of the actor and of each critic",
                                         items=dict(ge=1), check=non_empty)
        gamma: float = option(0.99, "discount", ge=0, le=1)
        tau: float = option(0.005, "Polyak coefficient of the target networks", gt=0, le=1)
        learn_threads: Optional[int] = option(
            None, "torch threads a train iteration runs with (CPU only; None: the run's own `num_threads`)", ge=1)
        adaptive_threads: bool = option(
            True, "with `learn_threads > 1`, measure every 1000 iterations whether the threads pay and use one "
            "thread while they do not; False for runs whose numbers depend only on the seed (the thread count can "
            "change a product's rounding)")
        precision: str = option(
            "fp32", "`\"bf16\"` runs the networks' products in bfloat16 with fp32 parameters and optimizers (about "
            "twice the matmul speed on CPUs with native bf16; docs/speed-parts.md)", check=one_of("fp32", "bf16"),
            expected='"fp32" or "bf16"')

    def _init_spaces(self) -> None:
        """The spaces (``obs_shape``, ``obs_dim``, ``actions``, ``act_shape``, ``act_dim``), the learner's generator
        ``torch_rng`` (seeded from ``np_random``) and ``update_count``."""
        owner = type(self).__name__
        self.obs_shape: Tuple[int, ...] = box_observation_shape(self.observation_space, owner)
        self.obs_dim = int(np.prod(self.obs_shape))
        self.actions = BoxActions(self.action_space, owner)
        self.act_shape, self.act_dim = self.actions.shape, self.actions.dim
        self.torch_rng = torch.Generator(device=self.device)
        self.torch_rng.manual_seed(int(self.np_random.integers(2**62)))
        self.update_count = 0  # critic updates done

    def _init_networks(self, make_actor: Callable[[], torch.nn.Module], actor_outputs: int,
                       actor_target: bool = False) -> None:
        """``actor`` (``make_actor()``), the twin ``critic``, ``critic_target`` and their Adams, from the policy seed,
        once :meth:`check_network_memory` accepts them (with an actor target network for ``actor_target``)."""
        cfg = self.cfg
        actor = MLP.parameter_count([self.obs_dim, *cfg["hidden_sizes"], actor_outputs])
        critic = MLP.parameter_count([self.obs_dim + self.act_dim, *cfg["hidden_sizes"], 1], ensemble=2)
        self.check_network_memory(trained=actor + critic, frozen=critic + (actor if actor_target else 0))
        with self.seeded_init():
            self.actor = make_actor().to(self.device)
            self.critic = QEnsemble(self.obs_dim, self.act_dim, cfg["hidden_sizes"]).to(self.device)
        for net in (self.actor, self.critic):  # opt-in bf16 products (fp32 parameters): rlearn.nn.low_precision
            net.set_compute_dtype(cfg["precision"])
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.actor_optimizer = make_adam(self.actor.parameters(), lr=cfg["lr_actor"], device=self.device)
        self.critic_optimizer = make_adam(self.critic.parameters(), lr=cfg["lr_critic"], device=self.device)

    def _init_threads(self, period: int) -> None:
        """``thread_chooser`` (None off the CPU or without ``learn_threads``), probing whole ``period``-iteration
        cycles."""
        self.thread_chooser: Optional[ThreadChooser] = None
        if self.cfg["learn_threads"] is not None and self.device.type == "cpu":
            probe_len = period * max(1, math.ceil(8 / period))
            self.thread_chooser = ThreadChooser(self.cfg["learn_threads"], adaptive=self.cfg["adaptive_threads"],
                                                probe_every=max(1000, 10 * probe_len), probe_len=probe_len)

    def _forward_learn(self, data: Mapping[str, torch.Tensor]) -> Dict[str, Any]:
        """``_learn_step(data)`` on the threads :attr:`thread_chooser` picks."""
        if self.thread_chooser is None:
            return self._learn_step(data)
        return self.thread_chooser.run(self._learn_step, data)

    def _learn_step(self, data: Mapping[str, torch.Tensor]) -> Dict[str, Any]:
        raise NotImplementedError

    def _check_batch(self, data: Mapping[str, torch.Tensor]) -> Tuple[torch.Tensor, ...]:
        """``(obs [B, o], action [B, a], reward [B], next_obs [B, o], terminated [B])``, checked."""
        return check_replay_batch(data, type(self).__name__, self.device, self.obs_shape, self.act_shape)

    def update_critic(self, obs: torch.Tensor, action: torch.Tensor, y: torch.Tensor) -> Dict[str, Any]:
        """One step of the critic optimizer on ``MSE(Q1(s, a), y) + MSE(Q2(s, a), y)``; returns the
        :data:`CRITIC_KEYS`."""
        with span("learner/forward", lane="learner"):
            q = self.critic(obs, action)  # [2, B]: Q1(s, a) and Q2(s, a), both critics in one stacked pass
            # one loss over both rows: twice the mean over [2, B] of squared errors = MSE(Q1, y) + MSE(Q2, y)
            critic_loss = 2.0 * F.mse_loss(q, y.expand_as(q))
        self.optimize(critic_loss, self.critic_optimizer)
        with torch.no_grad():
            q = q.detach()
            error = q - y
            mse, q_mean, abs_error = torch.stack([error.square(), q, error.abs()]).mean(-1)  # each [2]: per critic
        return {"critic_loss": mse[0], "critic_twin_loss": mse[1], "q_value": q_mean[0], "q_value_twin": q_mean[1],
                "target_q_value": y.mean(), "td_error": abs_error.mean(),  # td_error: over both critics
                "cur_lr_critic": self.critic_optimizer.param_groups[0]["lr"]}

    def _actor_numpy(self, obs: np.ndarray) -> np.ndarray:
        """The actor's output (a tuple concatenated) for ``obs [N, *obs_shape]``, float64, without gradient."""
        return forward_numpy(self.actor, obs, self.device)

    def _explore(self, obs: np.ndarray, envstep: int, act: Callable[[np.ndarray], np.ndarray]
                 ) -> Dict[str, np.ndarray]:
        """Uniform normalised actions before ``learning_starts`` env steps, then ``act(obs)``; returns ``action``
        (normalised, stored) and ``env_action`` (environment units)."""
        n = len(obs)
        if envstep < self.learning_starts:
            action = self.np_random.uniform(-1.0, 1.0, size=(n, self.act_dim))
        else:
            action = act(obs)
        action = action.astype(np.float32)
        return {"action": action.reshape(n, *self.act_shape), "env_action": self.to_env_action(action)}

    def to_env_action(self, action: np.ndarray) -> np.ndarray:
        """Normalised actions ``[N, act_dim]`` in ``[-1, 1]`` -> environment units ``[N, *act_shape]``."""
        return self.actions.to_env(action)

    def to_normalized_action(self, env_action: np.ndarray) -> np.ndarray:
        """Environment units ``[N, *act_shape]`` -> normalised ``[N, *act_shape]`` in ``[-1, 1]``."""
        return self.actions.to_normalized(env_action)

    def extra_state(self) -> Dict[str, Any]:
        return {"update_count": self.update_count, "torch_rng": self.torch_rng.get_state()}

    def load_extra_state(self, state: Mapping[str, Any]) -> None:
        count = state.get("update_count", self.update_count)
        self.update_count = check_int(f"{type(self).__name__}: checkpoint 'update_count'", count, 0)
        if "torch_rng" in state:
            self.torch_rng.set_state(state["torch_rng"])


class OnPolicyActorCritic(Policy):
    """Base of PPO and PPG, whose ``Config`` declares ``rollout_steps``, ``gamma``, ``gae_lambda``,
    ``minibatch_size`` and ``lr`` (their defaults differ)."""

    on_policy = True

    class Config:
        """The keys every on-policy actor-critic has"""

        reward_scale: float = option(1.0, "rewards are multiplied by it before GAE", gt=0, finite=True)
        clip_ratio: float = option(0.2, "PPO clip range `eps` of the ratio `pi / pi_collect`", gt=0, finite=True)
        clip_follows_lr: bool = option(False, "scale the clip range by `current lr / lr` (a linear lr decay decays "
                                              "it too, like rl-zoo's `lin_0.2`)")
        entropy_coef: float = option(0.0, "weight of the entropy bonus", ge=0, finite=True)
        max_grad_norm: float = option(0.5, "the gradient's global norm is clipped to this before each Adam step",
                                      gt=0, finite=True)
        hidden_sizes: List[int] = option([64, 64], "hidden layers of each network", items=dict(ge=1), check=non_empty)
        activation: str = option("tanh", "`\"tanh\"` or `\"relu\"`", check=one_of("tanh", "relu"),
                                 expected='"tanh" or "relu"')
        init_log_std: float = option(0.0, "initial log-std of the Gaussian (continuous actions)", finite=True)

    def _init_spaces(self) -> Tuple[int, int]:
        """``discrete``, ``_low`` / ``_high`` (Box bounds); returns ``(obs_dim, n_outputs)`` of the action head."""
        obs_dim, spec = action_spec(self.observation_space, self.action_space, type(self).__name__)
        self.discrete, self._low, self._high = spec.discrete, spec.low, spec.high
        return obs_dim, spec.n_outputs

    def _distribution(self, obs: torch.Tensor, with_value: bool = True
                      ) -> Tuple[torch.Tensor, Optional[torch.Tensor], Optional[torch.Tensor]]:
        """``(logits [B, n] or mean [B, d], log_std [d] or [B, d] (None for discrete actions), V(obs) [B] or None
        without ``with_value``)`` of the current policy."""
        raise NotImplementedError

    def _forward_collect(self, obs: np.ndarray, envstep: int) -> Dict[str, np.ndarray]:
        """Sampled ``action`` (+ ``env_action`` clipped to the bounds for continuous spaces), with the behaviour
        policy's ``log_prob`` and ``value``; the noise comes from ``np_random``."""
        with torch.inference_mode():
            params, log_std, value = self._distribution(obs_tensor(obs, self.device))
            if self.discrete:  # inverse-CDF sampling with the policy's own generator
                action, log_prob = sample_categorical(params, self.np_random)
                out = host_columns(log_prob=log_prob, value=value)  # one device-to-host copy per step
                out["action"] = action.astype(np.int64)
                return out
            action_t = sample_gaussian(params, log_std, self.np_random)
            log_prob, _ = gaussian_log_prob_entropy(params, log_std, action_t)
            out = host_columns(log_prob=log_prob, value=value, action=action_t)
        out["env_action"] = np.clip(out["action"], self._low, self._high)
        return out

    def _forward_eval(self, obs: np.ndarray) -> np.ndarray:
        """Greedy actions: the most likely class, or the Gaussian mean clipped to the bounds."""
        with torch.inference_mode():
            params = self._distribution(obs_tensor(obs, self.device), with_value=False)[0]
        if self.discrete:
            return params.argmax(dim=-1).cpu().numpy().astype(np.int64)
        return np.clip(params.cpu().numpy().astype(np.float32), self._low, self._high)

    def _advantage_batch(self, data: Mapping[str, Any], value: Callable[[torch.Tensor], torch.Tensor]
                         ) -> Dict[str, torch.Tensor]:
        """The checked rollout flattened to ``[T*N, ...]`` with the GAE(lambda) ``advantage`` and ``target`` of the
        rewards times ``reward_scale``, bootstrapped with ``value(next_obs)``."""
        rollout = check_rollout(data, type(self).__name__, self.device, self.discrete)
        T, N = rollout["reward"].shape
        cfg = self.cfg
        with torch.no_grad():
            next_value = value(rollout["next_obs"].flatten(0, 1)).view(T, N)
            advantages, targets = compute_gae(
                rollout["reward"] * cfg["reward_scale"], rollout["value"], next_value,
                rollout["terminated"], rollout["truncated"], cfg["gamma"], cfg["gae_lambda"],
            )
        batch = {key: rollout[key].flatten(0, 1) for key in ("obs", "action", "log_prob", "value")}
        batch.update(advantage=advantages.flatten(), target=targets.flatten())
        return batch

    def _minibatch_indices(self, size: int, minibatch_size: int) -> Sequence[torch.Tensor]:
        """A fresh random split of ``range(size)`` into minibatches of index tensors on the policy's device (one
        copy of a permutation from ``np_random``)."""
        order = torch.as_tensor(self.np_random.permutation(size), device=self.device)
        return order.split(minibatch_size)

    def _clip_ratio(self) -> float:
        """This update's clip range: ``clip_ratio``, times ``current lr / lr`` of the first optimizer with
        ``clip_follows_lr``."""
        clip = float(self.cfg["clip_ratio"])
        if self.cfg["clip_follows_lr"] and self.cfg["lr"] > 0:
            clip *= next(iter(self.optimizers().values())).param_groups[0]["lr"] / self.cfg["lr"]
        return clip
