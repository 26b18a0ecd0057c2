"""Twin Delayed DDPG (TD3): Fujimoto, van Hoof and Meger, 2018, https://arxiv.org/abs/1802.09477

TD3 learns a deterministic policy ``pi(s)`` for continuous actions from a replay buffer, with two critics
``Q1, Q2`` and slowly moving target copies ``pi', Q1', Q2'`` of all three networks. One train iteration
(= one call of :meth:`TD3Policy._forward_learn` on one minibatch ``(s, a, r, s', terminated)``):

1. **Target** (no gradient), with *target policy smoothing* and *clipped double-Q*::

       eps = clip(N(0, target_noise), -target_noise_clip, +target_noise_clip)
       a'  = clip(pi'(s') + eps, -1, 1)
       y   = r + gamma * (1 - terminated) * min(Q1'(s', a'), Q2'(s', a'))

   Only a real termination stops the bootstrap. A time-limit truncation is not terminal: the buffer
   stores ``terminated`` alone and ``s'`` is the true last observation, so ``y`` bootstraps from it.
2. **Critics**: one Adam step on ``MSE(Q1(s, a), y) + MSE(Q2(s, a), y)``.
3. **Delayed actor and targets**, every ``actor_update_freq`` critic updates (the 2nd, 4th, ... for the
   default 2): one Adam step on ``-mean Q1(s, pi(s))`` (the critic is frozen: gradients flow through it
   to the actor only), then Polyak averaging of *all* target networks:
   ``theta' <- theta' + tau * (theta - theta')``.

Collecting: uniformly random actions while fewer than ``learning_starts`` env steps have been collected,
then ``clip(pi(s) + N(0, exploration_noise), -1, 1)``. Evaluation: ``pi(s)``.

**Actions.** Networks work in *normalised* units: every ``Box`` action space (any shape, asymmetric bounds
included, finite bounds required) is mapped affinely onto ``[-1, 1]`` per dimension, the actor ends in
``tanh``, and the noises above are in these units -- a noise of 0.1 is 5 % of each dimension's range,
whatever the bounds. ``_forward_collect`` returns the normalised ``action`` (what the replay buffer stores
and the critics learn from) and ``env_action = low + (action + 1) * (high - low) / 2`` (what the
environment receives). ``_forward_eval`` returns environment units.

**Monitoring.** Every iteration reports ``critic_loss`` and ``critic_twin_loss`` (the MSE of ``Q1`` and
``Q2``), ``q_value`` and ``q_value_twin`` (mean ``Q1(s, a)``, ``Q2(s, a)``), ``target_q_value`` (mean
``y``), ``td_error`` (mean ``|Q(s, a) - y|`` over both critics) and ``cur_lr_critic``; actor iterations add
``actor_loss`` and ``cur_lr_actor``. The actor keys are *irregular*: they appear every
``actor_update_freq`` iterations, so the learner's window must be at least that long to show them.

**How it is computed.** The losses are written as losses and differentiated by autograd:
``F.mse_loss`` for the critics, ``-Q1(s, pi(s)).mean()`` for the actor, whose gradient reaches the actor
through the critic while the critic is :func:`~rlearn.nn.frozen` (its parameters do not require grad,
so no critic weight gradient is computed). The speed is in shared parts: the networks are
:class:`~rlearn.nn.MLP` (actor) and :class:`~rlearn.nn.EnsembleMLP` (both critics as one stacked network),
whose feature-major kernels run inside an ``autograd.Function``; :class:`~rlearn.optim.AdamStep` steps the
fused Adam optimizers without ``step()``'s Python overhead; :class:`~rlearn.nn.ThreadChooser` picks each
iteration's CPU thread count. See ``docs/speed-parts.md``.

This module is a little over rlearn's usual ~400 lines on purpose: a policy is one file a reader follows top to
bottom (docs/write-your-own-policy.md); its shared parts live under ``rlearn/``.
"""

from __future__ import annotations

import copy
import functools
import math
import numbers
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn.functional as F
from gymnasium import spaces
from torch import nn

from policies.base import Policy
from policies.config_checks import check_bool, check_choice, check_float, check_int, check_sizes
from rlearn.nn import MLP, QEnsemble, ThreadChooser, frozen
from rlearn.optim import AdamStep, make_adam, polyak_update_
from rlearn.trace import span  # a shared no-op context manager while tracing is off


__all__ = ["TD3Policy", "Actor", "TwinCritic"]


class Actor(MLP):
    """Deterministic policy ``obs [B, o] -> action [B, a]`` in normalised units ``[-1, 1]`` (tanh output)."""

    def __init__(self, obs_dim: int, act_dim: int, hidden_sizes: Sequence[int]) -> None:
        super().__init__([obs_dim, *hidden_sizes, act_dim], output_activation="tanh")



TwinCritic = QEnsemble  # n Q-networks (obs, action) -> Q evaluated as one stacked network: rlearn.nn

_check_int = functools.partial(check_int, "TD3Policy")
_check_float = functools.partial(check_float, "TD3Policy")


# --------------------------------------------------------------------------------------------- config




_BATCH_KEYS = ("obs", "action", "reward", "next_obs", "terminated")


# --------------------------------------------------------------------------------------------- policy


class TD3Policy(Policy):
    """TD3 for any ``Box`` action space; see the module docstring for the algorithm and its reports.

    Config keys (``policy`` section; defaults as in the TD3 paper):

    * ``learning_starts`` (25000): env steps of uniformly random actions before the actor acts (the
      run also waits this long before the first train iteration);
    * ``batch_size`` (256): minibatch size sampled from the replay buffer per train iteration;
    * ``actor_update_freq`` (2): critic updates per actor + target update;
    * ``hidden_sizes`` ([256, 256]): hidden layers of the actor and of each critic;
    * ``lr_actor``, ``lr_critic`` (3e-4): Adam learning rates;
    * ``gamma`` (0.99): discount; ``tau`` (0.005): Polyak coefficient of the target networks;
    * ``exploration_noise`` (0.1): std of the Gaussian collect noise, normalised units (1 = half the range);
    * ``target_noise`` (0.2), ``target_noise_clip`` (0.5): target policy smoothing, normalised units;
    * ``learn_threads`` (None): torch threads a train iteration runs with (CPU only; None: the run's own
      ``num_threads``, unchanged); see "Speed" in the module docstring;
    * ``adaptive_threads`` (True): with ``learn_threads > 1``, measure every 1000 iterations whether the
      threads pay and use one thread while they do not (:class:`ThreadChooser`). Set False for runs whose
      numbers depend only on the seed: the thread count can change a product's rounding;
    * ``precision`` ("fp32"): ``"bf16"`` runs the networks' products in bfloat16 with fp32 parameters and
      optimizers (about twice the matmul speed on CPUs with native bf16; see docs/speed-parts.md).
    """

    on_policy = False
    default_config: Dict[str, Any] = {
        "learning_starts": 25_000,
        "batch_size": 256,
        "actor_update_freq": 2,
        "hidden_sizes": [256, 256],
        "lr_actor": 3e-4,
        "lr_critic": 3e-4,
        "gamma": 0.99,
        "tau": 0.005,
        "exploration_noise": 0.1,
        "target_noise": 0.2,
        "target_noise_clip": 0.5,
        "learn_threads": None,
        "adaptive_threads": True,
        "precision": "fp32",
    }

    # ------------------------------------------------------------------------------------- learn
    def _init_learn(self) -> None:
        cfg = self.cfg
        self.learning_starts = _check_int("learning_starts", cfg["learning_starts"], 0)
        self.batch_size = _check_int("batch_size", cfg["batch_size"], 1)
        self.actor_update_freq = _check_int("actor_update_freq", cfg["actor_update_freq"], 1)
        self.hidden_sizes = check_sizes("TD3Policy", "hidden_sizes", cfg["hidden_sizes"])
        self.gamma = _check_float("gamma", cfg["gamma"], 0.0, 1.0)
        self.tau = _check_float("tau", cfg["tau"], 0.0, 1.0, low_open=True)
        self.exploration_noise = _check_float("exploration_noise", cfg["exploration_noise"], 0.0, math.inf)
        self.target_noise = _check_float("target_noise", cfg["target_noise"], 0.0, math.inf)
        self.target_noise_clip = _check_float("target_noise_clip", cfg["target_noise_clip"], 0.0, math.inf)
        lr_actor = _check_float("lr_actor", cfg["lr_actor"], 0.0, math.inf, low_open=True)
        lr_critic = _check_float("lr_critic", cfg["lr_critic"], 0.0, math.inf, low_open=True)
        threads = cfg["learn_threads"]
        self.learn_threads = None if threads is None else _check_int("learn_threads", threads, 1)
        adaptive = check_bool("TD3Policy", "adaptive_threads", cfg["adaptive_threads"])
        precision = check_choice("TD3Policy", "precision", cfg["precision"], ("fp32", "bf16"))

        self._init_spaces()
        # Networks are initialised from the policy seed without touching the global torch RNG.
        with torch.random.fork_rng(devices=[]):
            if self.seed is not None:
                torch.manual_seed(self.seed)
            self.actor = Actor(self.obs_dim, self.act_dim, self.hidden_sizes).to(self.device)
            self.critic = TwinCritic(self.obs_dim, self.act_dim, self.hidden_sizes).to(self.device)
        for net in (self.actor, self.critic):  # opt-in bf16 products (fp32 parameters): rlearn.nn.low_precision
            net.set_compute_dtype(precision)
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)

        # fused Adam where this torch has the kernel, stepped without step()'s Python overhead (rlearn.optim)
        self.actor_optimizer = make_adam(self.actor.parameters(), lr=lr_actor, device=self.device)
        self.critic_optimizer = make_adam(self.critic.parameters(), lr=lr_critic, device=self.device)
        self._actor_adam, self._critic_adam = AdamStep(self.actor_optimizer), AdamStep(self.critic_optimizer)
        self._online_params = list(self.critic.parameters()) + list(self.actor.parameters())
        self._target_params = list(self.critic_target.parameters()) + list(self.actor_target.parameters())

        # target-smoothing noise comes from the policy's own generator (saved in extra_state)
        self.torch_rng = torch.Generator(device=self.device)
        self.torch_rng.manual_seed(int(self.np_random.integers(2**62)))
        self.update_count = 0  # critic updates done; the actor and targets move when it is a multiple of the freq
        #: picks each iteration's torch thread count (None: the iteration runs with the caller's; CPU only)
        self.thread_chooser: Optional[ThreadChooser] = None
        if self.learn_threads is not None and self.device.type == "cpu":
            # probe blocks of whole actor-update cycles, so that both halves hold the same mix of iterations
            probe_len = self.actor_update_freq * max(1, math.ceil(8 / self.actor_update_freq))
            self.thread_chooser = ThreadChooser(
                self.learn_threads, adaptive=adaptive, probe_every=max(1000, 10 * probe_len), probe_len=probe_len
            )

    def _init_spaces(self) -> None:
        obs_space, act_space = self.observation_space, self.action_space
        if not isinstance(obs_space, spaces.Box):
            raise TypeError(f"TD3Policy needs a Box observation space, got {obs_space!r}")
        if not isinstance(act_space, spaces.Box):
            raise TypeError(f"TD3Policy needs a continuous (Box) action space, got {act_space!r}")
        low = np.asarray(act_space.low, dtype=np.float64).reshape(-1)
        high = np.asarray(act_space.high, dtype=np.float64).reshape(-1)
        if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high)) and np.all(high > low)):
            raise ValueError(
                f"TD3Policy needs finite action bounds with high > low in every dimension, got {act_space!r}"
            )
        self.obs_shape: Tuple[int, ...] = tuple(obs_space.shape)
        self.act_shape: Tuple[int, ...] = tuple(act_space.shape)
        self.obs_dim = int(np.prod(self.obs_shape))
        self.act_dim = int(low.size)
        self.action_low, self.action_high = low, high
        self._action_scale = (high - low) / 2.0
        self._action_center = (high + low) / 2.0
        self._env_action_dtype = act_space.dtype

    def _monitor_vars_learn(self) -> List[str]:
        return [
            "critic_loss", "critic_twin_loss", "q_value", "q_value_twin", "target_q_value", "td_error",
            "cur_lr_critic", "actor_loss", "cur_lr_actor",
        ]

    def _forward_learn(self, data: Mapping[str, torch.Tensor]) -> Dict[str, float]:
        """One TD3 iteration on a replay minibatch (the off-policy data contract of ``policies.base``), with
        the number of torch threads the :class:`~rlearn.nn.ThreadChooser` picks (``policy.learn_threads``,
        or one thread while more do not pay); the caller's thread count is restored afterwards."""
        if self.thread_chooser is None:
            return self._learn_step(data)
        return self.thread_chooser.run(self._learn_step, data)

    def _learn_step(self, data: Mapping[str, torch.Tensor]) -> Dict[str, float]:
        """Target, critic update and, every ``actor_update_freq`` iterations, actor and target updates."""
        obs, action, reward, next_obs, terminated = self._check_batch(data)
        with span("learner/forward", lane="learner"):
            y = self.compute_target(reward, next_obs, terminated, self.smoothing_noise(action.shape))
        stats = self._update_critic(obs, action, y)
        self.update_count += 1

        actor_step = self.update_count % self.actor_update_freq == 0
        if actor_step:
            actor_loss = self._update_actor(obs)
            polyak_update_(self._target_params, self._online_params, self.tau)  # every target network
            stats = torch.cat([stats, actor_loss.reshape(1)])
        values = stats.tolist()  # one host transfer for every reported number
        info = {
            "critic_loss": values[0],
            "critic_twin_loss": values[1],
            "q_value": values[2],
            "q_value_twin": values[3],
            "target_q_value": values[4],
            "td_error": 0.5 * (values[5] + values[6]),  # over both critics
            "cur_lr_critic": self.critic_optimizer.param_groups[0]["lr"],
        }
        if actor_step:
            info["actor_loss"] = values[7]
            info["cur_lr_actor"] = self.actor_optimizer.param_groups[0]["lr"]
        return info

    def _update_critic(self, obs: torch.Tensor, action: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """One Adam step on ``MSE(Q1(s, a), y) + MSE(Q2(s, a), y)``.

        Returns ``[MSE_1, MSE_2, mean Q1, mean Q2, mean y, mean |Q1 - y|, mean |Q2 - y|]`` for the reports.
        """
        with span("learner/forward", lane="learner"):
            q = self.critic(obs, action)  # [2, B]: Q1(s, a) and Q2(s, a), both critics in one stacked pass
            # one loss over both rows: twice the mean over [2, B] of squared errors = MSE(Q1, y) + MSE(Q2, y)
            critic_loss = 2.0 * F.mse_loss(q, y.expand_as(q))
        with span("learner/backward", lane="learner"):
            self._critic_adam.zero_grad()
            critic_loss.backward()
        with span("learner/optimizer_step", lane="learner"):
            self._critic_adam.step()
        with torch.no_grad():  # one mean over the stacked rows [error^2 (2), Q (2), y, |error| (2)]
            q = q.detach()
            error = q - y
            return torch.cat([error.square(), q, y.unsqueeze(0), error.abs()]).mean(1)

    def _update_actor(self, obs: torch.Tensor) -> torch.Tensor:
        """One Adam step on ``-mean Q1(s, pi(s))`` through the frozen critic (gradients reach the actor only);
        returns the loss."""
        with span("learner/forward", lane="learner"), frozen(self.critic):
            actor_loss = -self.critic(obs, self.actor(obs), member=0).mean()
        with span("learner/backward", lane="learner"):
            self._actor_adam.zero_grad()
            actor_loss.backward()
        with span("learner/optimizer_step", lane="learner"):
            self._actor_adam.step()
        return actor_loss.detach()

    def smoothing_noise(self, shape: Sequence[int]) -> torch.Tensor:
        """Target policy smoothing noise ``clip(N(0, target_noise), -target_noise_clip, target_noise_clip)``
        (normalised action units), drawn from the policy's generator ``torch_rng``."""
        noise = torch.randn(tuple(shape), generator=self.torch_rng, device=self.device)
        return noise.mul_(self.target_noise).clamp_(-self.target_noise_clip, self.target_noise_clip)

    @torch.no_grad()
    def compute_target(
        self, reward: torch.Tensor, next_obs: torch.Tensor, terminated: torch.Tensor, noise: torch.Tensor
    ) -> torch.Tensor:
        """TD3 target ``y = r + gamma * (1 - terminated) * min_i Q_i'(s', clip(pi'(s') + noise, -1, 1))``.

        ``noise [B, a]`` is the (already clipped) target-smoothing noise in normalised action units; ``next_obs
        [B, o]``, ``reward`` and ``terminated [B]``.
        """
        next_action = (self.actor_target(next_obs) + noise).clamp(-1.0, 1.0)
        q_next = self.critic_target(next_obs, next_action).amin(dim=0)  # clipped double-Q
        return reward + self.gamma * (1.0 - terminated) * q_next

    # ---------------------------------------------------------------------------------- batch
    def _check_batch(self, data: Mapping[str, torch.Tensor]) -> Tuple[torch.Tensor, ...]:
        """The five batch tensors, flattened to ``[B, dim]`` / ``[B]``; bad input raises naming the key."""
        if not isinstance(data, Mapping):
            raise TypeError(f"TD3Policy._forward_learn expects a dict of tensors, got {type(data).__name__}")
        missing = [key for key in _BATCH_KEYS if key not in data]
        if missing:
            raise KeyError(f"TD3Policy._forward_learn: batch is missing {missing} (has {sorted(data)})")
        out = []
        batch = None
        shapes = {"obs": self.obs_shape, "next_obs": self.obs_shape, "action": self.act_shape}
        for key in _BATCH_KEYS:
            value = data[key]
            if not isinstance(value, torch.Tensor) or not value.is_floating_point():
                kind = value.dtype if isinstance(value, torch.Tensor) else type(value).__name__
                raise TypeError(f"TD3Policy._forward_learn: batch[{key!r}] must be a float tensor, got {kind}")
            shape = shapes.get(key, ())
            if batch is None:
                batch = value.shape[0] if value.dim() else 0
            if tuple(value.shape) != (batch, *shape) or batch == 0:
                expected = ("B>0" if batch == 0 else batch, *shape)
                raise ValueError(
                    f"TD3Policy._forward_learn: batch[{key!r}] has shape {tuple(value.shape)}, expected {expected}"
                )
            if value.dtype != torch.float32 or value.device != self.device:  # each call costs a dispatch
                value = value.to(self.device, torch.float32, non_blocking=True)
            out.append(value.reshape(batch, -1) if len(shape) > 1 else value)
        # a NaN or inf anywhere makes its tensor's sum non-finite (one reduction per key, one host sync per
        # batch); a huge but finite batch can overflow a sum, so the element-wise check decides before
        # anything is refused
        if not bool(torch.stack([t.sum() for t in out]).isfinite().all()):
            bad = [key for key, t in zip(_BATCH_KEYS, out) if not bool(torch.isfinite(t).all())]
            if bad:
                raise ValueError(
                    f"TD3Policy._forward_learn: non-finite values (NaN/inf) in batch {bad}; nothing was updated"
                )
        return tuple(out)

    # ----------------------------------------------------------------------------------- collect
    def _forward_collect(self, obs: np.ndarray, envstep: int) -> Dict[str, np.ndarray]:
        """Exploration actions: uniform before ``learning_starts`` env steps, then ``pi(s)`` + Gaussian noise.

        Returns ``action`` (normalised, stored in the buffer) and ``env_action`` (environment units).
        """
        n = len(obs)
        if envstep < self.learning_starts:
            action = self.np_random.uniform(-1.0, 1.0, size=(n, self.act_dim))
        else:
            action = self._actor_numpy(obs)
            if self.exploration_noise > 0:
                action = action + self.np_random.normal(0.0, self.exploration_noise, size=action.shape)
            action = action.clip(-1.0, 1.0)  # the method: np.clip's dispatch costs more than a 1-row clip
        action = action.astype(np.float32)
        return {"action": action.reshape(n, *self.act_shape), "env_action": self.to_env_action(action)}

    def _forward_eval(self, obs: np.ndarray) -> np.ndarray:
        """Deterministic actions ``pi(s)`` in environment units."""
        return self.to_env_action(self._actor_numpy(obs))

    def _actor_numpy(self, obs: np.ndarray) -> np.ndarray:
        """``pi(obs)`` for a batch of observations ``[N, *obs_shape]``, as float64 ``[N, act_dim]``.

        Acting is one small forward pass per env step, where the call overhead is the cost: a float32
        observation is not copied, and without gradients the actor runs its kernels directly.
        """
        if type(obs) is np.ndarray and obs.dtype == np.float32 and obs.flags.c_contiguous and self.device.type == "cpu":
            obs_t = torch.from_numpy(obs).reshape(len(obs), -1)  # shares obs's memory: nothing writes into it
        else:
            obs_t = torch.as_tensor(np.asarray(obs), dtype=torch.float32, device=self.device).reshape(len(obs), -1)
        with torch.no_grad():
            action = self.actor(obs_t)
        return action.cpu().numpy().astype(np.float64)

    def to_env_action(self, action: np.ndarray) -> np.ndarray:
        """Normalised actions ``[N, act_dim]`` in ``[-1, 1]`` -> environment units ``[N, *act_shape]``."""
        action = np.asarray(action, dtype=np.float64).reshape(len(action), self.act_dim)
        env_action = (self._action_center + self._action_scale * action).clip(self.action_low, self.action_high)
        return env_action.astype(self._env_action_dtype).reshape(len(action), *self.act_shape)

    def to_normalized_action(self, env_action: np.ndarray) -> np.ndarray:
        """Environment units ``[N, *act_shape]`` -> normalised ``[N, *act_shape]`` in ``[-1, 1]``."""
        env_action = np.asarray(env_action, dtype=np.float64).reshape(len(env_action), self.act_dim)
        return ((env_action - self._action_center) / self._action_scale).astype(np.float32).reshape(
            len(env_action), *self.act_shape
        )

    # ------------------------------------------------------------------------------------- state
    def modules(self) -> Dict[str, nn.Module]:
        return {
            "actor": self.actor,
            "critic": self.critic,
            "actor_target": self.actor_target,
            "critic_target": self.critic_target,
        }

    def optimizers(self) -> Dict[str, torch.optim.Optimizer]:
        return {"actor": self.actor_optimizer, "critic": self.critic_optimizer}

    def extra_state(self) -> Dict[str, Any]:
        return {"update_count": self.update_count, "torch_rng": self.torch_rng.get_state()}

    def load_extra_state(self, state: Mapping[str, Any]) -> None:
        if "update_count" in state:
            count = state["update_count"]
            if isinstance(count, bool) or not isinstance(count, numbers.Integral) or count < 0:
                raise ValueError(f"TD3Policy: checkpoint 'update_count' must be an int >= 0, got {count!r}")
            self.update_count = int(count)
        if "torch_rng" in state:
            self.torch_rng.set_state(state["torch_rng"])
