"""Soft Actor-Critic (SAC): Haarnoja et al., 2018, https://arxiv.org/abs/1801.01290 and
https://arxiv.org/abs/1812.05905 (automatic entropy tuning).

SAC learns a *stochastic* policy for continuous actions that maximises reward plus entropy, from a replay
buffer, with two critics ``Q1, Q2``, their slowly moving target copies ``Q1', Q2'`` and a temperature
``alpha`` that weighs the entropy. The actor is a tanh-squashed Gaussian: it outputs a mean and a
log-std (clamped to ``[log_std_min, log_std_max]``) and ``a = tanh(mean + std * eps)``, with the
log-density ``log pi(a | s)`` of :mod:`rlearn.rl.squashed_gaussian`. One train iteration (one call of
:meth:`SACPolicy._forward_learn` on one minibatch ``(s, a, r, s', terminated)``):

1. **Target** (no gradient), a soft clipped double-Q target with a fresh action from the *current* actor::

       a' ~ pi(. | s')
       y  = r + gamma * (1 - terminated) * (min(Q1'(s', a'), Q2'(s', a')) - alpha * log pi(a' | s'))

   Only a real termination stops the bootstrap (a time-limit truncation bootstraps from the true ``s'``).
2. **Critics**: one Adam step on ``MSE(Q1(s, a), y) + MSE(Q2(s, a), y)``.
3. **Delayed actor and temperature** (CleanRL's ``policy_frequency``): every ``policy_frequency``
   iterations, ``policy_frequency`` times in a row (so the actor gets one update per iteration on average,
   as in Stable-Baselines3), on the same minibatch:

   * actor: ``a~ ~ pi(. | s)``, one Adam step on ``mean(alpha * log pi(a~ | s) - min(Q1(s, a~), Q2(s, a~)))``
     through the frozen critics (gradients reach the actor only);
   * temperature (``autotune``): one Adam step on ``-log_alpha * (mean log pi(a~ | s) + target_entropy)``
     (``log pi`` of the same sample, detached; ``target_entropy`` defaults to ``-dim(A)``).
4. **Targets**: Polyak averaging ``theta' <- theta' + tau * (theta - theta')`` of both critics, every iteration.

Collecting: uniformly random actions while fewer than ``learning_starts`` env steps have been collected,
then samples of the squashed Gaussian. Evaluation: the deterministic action ``tanh(mean)``. Networks and
the buffer work in normalised action units (every ``Box`` is mapped affinely onto ``[-1, 1]``), as TD3's.

**Monitoring.** Every iteration: ``critic_loss``, ``critic_twin_loss`` (the MSE of ``Q1``, ``Q2``),
``q_value``, ``q_value_twin``, ``target_q_value``, ``td_error`` and ``cur_lr_critic``. Actor iterations add
``actor_loss``, ``entropy`` (``-mean log pi``), ``alpha`` (after the update), ``alpha_loss`` (autotune only;
each the mean over the ``policy_frequency`` updates) and ``cur_lr_actor``: these keys are *sparse*, so the
learner's window must cover at least ``policy_frequency`` iterations to show them.

**How it is computed.** Losses are written as losses and differentiated by autograd; the speed is in the
shared parts (:class:`~rlearn.nn.MLP`, :class:`~rlearn.nn.EnsembleMLP` for both critics as one network,
:class:`~rlearn.optim.AdamStep`, :func:`~rlearn.optim.polyak_update_`, :class:`~rlearn.nn.ThreadChooser`;
see ``docs/speed-parts.md`` and ``docs/sac.md``). Random draws come from the policy's own generators
(``torch_rng`` for the learner, ``np_random`` for collection), which checkpoints carry.
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
from rlearn.rl.squashed_gaussian import squashed_gaussian_sample
from rlearn.trace import span

__all__ = ["SACPolicy", "GaussianActor", "TwinCritic"]


class GaussianActor(MLP):
    """``obs [B, o] -> (mean [B, a], log_std [B, a])`` of the pre-tanh Gaussian, ``log_std`` clamped to
    ``[log_std_min, log_std_max]``. One ReLU MLP whose last layer has ``2 * a`` outputs (mean, then log-std):
    the same function as a shared trunk with two linear heads."""

    def __init__(self, obs_dim: int, act_dim: int, hidden_sizes: Sequence[int],
                 log_std_min: float = -20.0, log_std_max: float = 2.0) -> None:
        super().__init__([obs_dim, *hidden_sizes, 2 * act_dim])
        self.act_dim, self.log_std_min, self.log_std_max = act_dim, log_std_min, log_std_max

    def forward(self, obs: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:  # type: ignore[override]
        mean, log_std = super().forward(obs).split(self.act_dim, dim=-1)
        return mean, log_std.clamp(self.log_std_min, self.log_std_max)


TwinCritic = QEnsemble  # n Q-networks (obs, action) -> Q evaluated as one stacked network: rlearn.nn

_check_int = functools.partial(check_int, "SACPolicy")
_check_float = functools.partial(check_float, "SACPolicy")
_check_bool = functools.partial(check_bool, "SACPolicy")





_BATCH_KEYS = ("obs", "action", "reward", "next_obs", "terminated")
_CRITIC_KEYS = ["critic_loss", "critic_twin_loss", "q_value", "q_value_twin", "target_q_value", "td_error",
                "cur_lr_critic"]


class SACPolicy(Policy):
    """SAC for any ``Box`` action space with finite bounds; see the module docstring.

    Config keys (``policy`` section; defaults as Stable-Baselines3's SAC):

    * ``learning_starts`` (100): env steps of uniformly random actions; the learner starts after as many;
    * ``batch_size`` (256); ``hidden_sizes`` ([256, 256]) of the actor and of each critic;
    * ``lr_actor``, ``lr_critic``, ``lr_alpha`` (3e-4): Adam learning rates;
    * ``gamma`` (0.99); ``tau`` (0.005): Polyak coefficient of the target critics (every iteration);
    * ``policy_frequency`` (2): every that many iterations, that many actor + temperature updates;
    * ``autotune`` (True): learn ``alpha``; ``init_alpha`` (1.0): its start (or fixed) value;
      ``target_entropy`` (None = ``-dim(A)``);
    * ``log_std_min``, ``log_std_max`` (-20, 2): clamp of the actor's log standard deviation;
    * ``learn_threads`` (None), ``adaptive_threads`` (True): CPU threads of a train iteration, as TD3's;
    * ``precision`` ("fp32"): ``"bf16"`` runs the networks' products in bfloat16 with fp32 parameters, as TD3's.
    """

    on_policy = False
    default_config: Dict[str, Any] = {
        "learning_starts": 100,
        "batch_size": 256,
        "hidden_sizes": [256, 256],
        "lr_actor": 3e-4,
        "lr_critic": 3e-4,
        "lr_alpha": 3e-4,
        "gamma": 0.99,
        "tau": 0.005,
        "policy_frequency": 2,
        "autotune": True,
        "init_alpha": 1.0,
        "target_entropy": None,
        "log_std_min": -20.0,
        "log_std_max": 2.0,
        "learn_threads": None,
        "adaptive_threads": True,
        "precision": "fp32",
    }

    # ------------------------------------------------------------------------------------- learn
    def _init_learn(self) -> None:
        cfg = self.cfg
        self.learning_starts = _check_int("learning_starts", cfg["learning_starts"], 0)
        self.batch_size = _check_int("batch_size", cfg["batch_size"], 1)
        self.policy_frequency = _check_int("policy_frequency", cfg["policy_frequency"], 1)
        self.hidden_sizes = check_sizes("SACPolicy", "hidden_sizes", cfg["hidden_sizes"])
        self.gamma = _check_float("gamma", cfg["gamma"], 0.0, 1.0)
        self.tau = _check_float("tau", cfg["tau"], 0.0, 1.0, low_open=True)
        lrs = {key: _check_float(key, cfg[key], 0.0, math.inf, low_open=True)
               for key in ("lr_actor", "lr_critic", "lr_alpha")}
        self.autotune = _check_bool("autotune", cfg["autotune"])
        init_alpha = _check_float("init_alpha", cfg["init_alpha"], 0.0, math.inf, low_open=True)
        log_std_min = _check_float("log_std_min", cfg["log_std_min"], -math.inf, math.inf)
        log_std_max = _check_float("log_std_max", cfg["log_std_max"], log_std_min, math.inf, low_open=True)
        threads = cfg["learn_threads"]
        self.learn_threads = None if threads is None else _check_int("learn_threads", threads, 1)
        adaptive = _check_bool("adaptive_threads", cfg["adaptive_threads"])
        precision = check_choice("SACPolicy", "precision", cfg["precision"], ("fp32", "bf16"))

        self._init_spaces()
        target = cfg["target_entropy"]
        self.target_entropy = -float(self.act_dim) if target is None else _check_float(
            "target_entropy", target, -math.inf, math.inf)
        with torch.random.fork_rng(devices=[]):  # networks from the policy seed, global RNG untouched
            if self.seed is not None:
                torch.manual_seed(self.seed)
            self.actor = GaussianActor(self.obs_dim, self.act_dim, self.hidden_sizes, log_std_min, log_std_max)
            self.actor = self.actor.to(self.device)
            self.critic = TwinCritic(self.obs_dim, self.act_dim, self.hidden_sizes).to(self.device)
        for net in (self.actor, self.critic):  # opt-in bf16 products (fp32 parameters): rlearn.nn.low_precision
            net.set_compute_dtype(precision)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.log_alpha = torch.tensor(math.log(init_alpha), device=self.device, requires_grad=self.autotune)

        self.actor_optimizer = make_adam(self.actor.parameters(), lr=lrs["lr_actor"], device=self.device)
        self.critic_optimizer = make_adam(self.critic.parameters(), lr=lrs["lr_critic"], device=self.device)
        self._actor_adam, self._critic_adam = AdamStep(self.actor_optimizer), AdamStep(self.critic_optimizer)
        self._online_params, self._target_params = list(self.critic.parameters()), list(self.critic_target.parameters())
        self.alpha_optimizer: Optional[torch.optim.Optimizer] = None
        if self.autotune:
            self.alpha_optimizer = make_adam([self.log_alpha], lr=lrs["lr_alpha"], device=self.device)
            self._alpha_adam = AdamStep(self.alpha_optimizer)

        # the learner's random draws (target and actor samples) come from the policy's own generator
        self.torch_rng = torch.Generator(device=self.device)
        self.torch_rng.manual_seed(int(self.np_random.integers(2**62)))
        self.update_count = 0  # critic updates done; the actor moves when it is a multiple of policy_frequency
        self.thread_chooser: Optional[ThreadChooser] = None
        if self.learn_threads is not None and self.device.type == "cpu":
            probe_len = self.policy_frequency * max(1, math.ceil(8 / self.policy_frequency))
            self.thread_chooser = ThreadChooser(
                self.learn_threads, adaptive=adaptive, probe_every=max(1000, 10 * probe_len), probe_len=probe_len)

    def _init_spaces(self) -> None:
        obs_space, act_space = self.observation_space, self.action_space
        if not isinstance(obs_space, spaces.Box):
            raise TypeError(f"SACPolicy needs a Box observation space, got {obs_space!r}")
        if not isinstance(act_space, spaces.Box):
            raise TypeError(f"SACPolicy needs a continuous (Box) action space, got {act_space!r}")
        low = np.asarray(act_space.low, dtype=np.float64).reshape(-1)
        high = np.asarray(act_space.high, dtype=np.float64).reshape(-1)
        if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high)) and np.all(high > low)):
            raise ValueError(f"SACPolicy needs finite action bounds with high > low in every dimension, got {act_space!r}")
        self.obs_shape: Tuple[int, ...] = tuple(obs_space.shape)
        self.act_shape: Tuple[int, ...] = tuple(act_space.shape)
        self.obs_dim, self.act_dim = int(np.prod(self.obs_shape)), int(low.size)
        self.action_low, self.action_high = low, high
        self._action_scale, self._action_center = (high - low) / 2.0, (high + low) / 2.0
        self._env_action_dtype = act_space.dtype

    @property
    def alpha(self) -> torch.Tensor:
        """The entropy temperature ``exp(log_alpha)``, detached (a 0-d tensor on the policy's device)."""
        return self.log_alpha.detach().exp()

    def _monitor_vars_learn(self) -> List[str]:
        sparse = ["actor_loss", "entropy", "alpha", *(["alpha_loss"] if self.autotune else []), "cur_lr_actor"]
        return _CRITIC_KEYS + sparse

    def _forward_learn(self, data: Mapping[str, torch.Tensor]) -> Dict[str, float]:
        """One SAC iteration on a replay minibatch, on the threads the :class:`ThreadChooser` picks."""
        if self.thread_chooser is None:
            return self._learn_step(data)
        return self.thread_chooser.run(self._learn_step, data)

    def _learn_step(self, data: Mapping[str, torch.Tensor]) -> Dict[str, float]:
        obs, action, reward, next_obs, terminated = self._check_batch(data)
        with span("learner/forward", lane="learner"):
            y = self.compute_target(reward, next_obs, terminated, self.sample_noise(action.shape[0]))
        stats = [self._update_critic(obs, action, y)]
        self.update_count += 1
        actor_step = self.update_count % self.policy_frequency == 0
        if actor_step:
            # CleanRL's delayed update: policy_frequency actor (and temperature) steps now, none in between
            stats += [self._update_actor_and_alpha(obs) for _ in range(self.policy_frequency)]
        polyak_update_(self._target_params, self._online_params, self.tau)  # the target critics, every iteration

        values = torch.cat(stats + ([self.alpha.reshape(1)] if actor_step else [])).tolist()  # one host transfer
        info = dict(zip(_CRITIC_KEYS[:5], values[:5]))
        info["td_error"] = 0.5 * (values[5] + values[6])  # over both critics
        info["cur_lr_critic"] = self.critic_optimizer.param_groups[0]["lr"]
        if actor_step:
            per_update = np.asarray(values[7:-1]).reshape(self.policy_frequency, 3).mean(0)
            info["actor_loss"], info["entropy"] = float(per_update[0]), float(per_update[1])
            info["alpha"] = values[-1]
            if self.autotune:
                info["alpha_loss"] = float(per_update[2])
            info["cur_lr_actor"] = self.actor_optimizer.param_groups[0]["lr"]
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

    def _update_critic(self, obs: torch.Tensor, action: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """One Adam step on ``MSE(Q1(s, a), y) + MSE(Q2(s, a), y)``; returns ``[MSE_1, MSE_2, mean Q1,
        mean Q2, mean y, mean |Q1 - y|, mean |Q2 - y|]``."""
        with span("learner/forward", lane="learner"):
            q = self.critic(obs, action)  # [2, B]: Q1(s, a) and Q2(s, a), both critics in one stacked pass
            # one loss over both rows: twice the mean over [2, B] of squared errors = MSE(Q1, y) + MSE(Q2, y)
            critic_loss = 2.0 * F.mse_loss(q, y.expand_as(q))
        with span("learner/backward", lane="learner"):
            self._critic_adam.zero_grad()
            critic_loss.backward()
        with span("learner/optimizer_step", lane="learner"):
            self._critic_adam.step()
        with torch.no_grad():
            error = q.detach() - y
            return torch.cat([error.square().mean(1), q.detach().mean(1), y.mean().reshape(1), error.abs().mean(1)])

    def _update_actor_and_alpha(self, obs: torch.Tensor) -> torch.Tensor:
        """One actor step on ``mean(alpha log pi(a~|s) - min_i Q_i(s, a~))`` through the frozen critics, then
        (autotune) one temperature step on ``-log_alpha (mean log pi(a~|s) + target_entropy)``; returns
        ``[actor_loss, entropy, alpha_loss]`` (``alpha_loss`` is not reported without autotune)."""
        with span("learner/forward", lane="learner"), frozen(self.critic):
            new_action, log_prob = self.sample_action(obs, self.sample_noise(obs.shape[0]))
            min_q = self.critic(obs, new_action).amin(dim=0)
            actor_loss = (self.alpha * log_prob - min_q).mean()
            mean_log_prob = log_prob.detach().mean()
            alpha_loss = -self.log_alpha * (mean_log_prob + self.target_entropy)
        with span("learner/backward", lane="learner"):
            self._actor_adam.zero_grad()
            if self.autotune:  # the two losses share no parameter: one backward gives each its own gradients
                self._alpha_adam.zero_grad()
                (actor_loss + alpha_loss).backward()
            else:
                actor_loss.backward()
        with span("learner/optimizer_step", lane="learner"):
            self._actor_adam.step()
            if self.autotune:
                self._alpha_adam.step()
        return torch.stack([actor_loss.detach(), -mean_log_prob, alpha_loss.detach()])

    # ---------------------------------------------------------------------------------- batch
    def _check_batch(self, data: Mapping[str, torch.Tensor]) -> Tuple[torch.Tensor, ...]:
        """The five batch tensors, flattened to ``[B, dim]`` / ``[B]``; bad input raises naming the key."""
        if not isinstance(data, Mapping):
            raise TypeError(f"SACPolicy._forward_learn expects a dict of tensors, got {type(data).__name__}")
        missing = [key for key in _BATCH_KEYS if key not in data]
        if missing:
            raise KeyError(f"SACPolicy._forward_learn: batch is missing {missing} (has {sorted(data)})")
        out, batch = [], None
        for key in _BATCH_KEYS:
            value = data[key]
            if not isinstance(value, torch.Tensor) or not value.is_floating_point():
                kind = value.dtype if isinstance(value, torch.Tensor) else type(value).__name__
                raise TypeError(f"SACPolicy._forward_learn: batch[{key!r}] must be a float tensor, got {kind}")
            shape = {"obs": self.obs_shape, "next_obs": self.obs_shape, "action": self.act_shape}.get(key, ())
            if batch is None:
                batch = value.shape[0] if value.dim() else 0
            if tuple(value.shape) != (batch, *shape) or batch == 0:
                expected = ("B>0" if batch == 0 else batch, *shape)
                raise ValueError(
                    f"SACPolicy._forward_learn: batch[{key!r}] has shape {tuple(value.shape)}, expected {expected}")
            if value.dtype != torch.float32 or value.device != self.device:  # each call costs a dispatch
                value = value.to(self.device, torch.float32, non_blocking=True)
            out.append(value.reshape(batch, -1) if len(shape) > 1 else value)  # [B, o] and [B] are kept as they are
        if not bool(torch.stack([t.sum() for t in out]).isfinite().all()):  # one host sync per batch
            bad = [key for key, t in zip(_BATCH_KEYS, out) if not bool(torch.isfinite(t).all())]
            if bad:  # a huge finite batch can overflow a sum: the element-wise check decides
                raise ValueError(f"SACPolicy._forward_learn: non-finite values (NaN/inf) in batch {bad}; nothing was updated")
        return tuple(out)

    # ----------------------------------------------------------------------------------- collect
    def _forward_collect(self, obs: np.ndarray, envstep: int) -> Dict[str, np.ndarray]:
        """Uniform actions before ``learning_starts`` env steps, then squashed Gaussian samples (noise from
        ``np_random``). Returns ``action`` (normalised, stored) and ``env_action`` (environment units)."""
        n = len(obs)
        if envstep < self.learning_starts:
            action = self.np_random.uniform(-1.0, 1.0, size=(n, self.act_dim))
        else:
            mean, log_std = self._actor_numpy(obs)
            action = np.tanh(mean + np.exp(log_std) * self.np_random.standard_normal(mean.shape))
        action = action.astype(np.float32)
        return {"action": action.reshape(n, *self.act_shape), "env_action": self.to_env_action(action)}

    def _forward_eval(self, obs: np.ndarray) -> np.ndarray:
        """Deterministic actions ``tanh(mean)`` in environment units."""
        return self.to_env_action(np.tanh(self._actor_numpy(obs)[0]))

    def _actor_numpy(self, obs: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """``(mean, log_std)`` as float64 ``[N, act_dim]`` for observations ``[N, *obs_shape]`` (no copy of a
        float32 observation on the CPU; no gradient, so the actor runs its kernels directly)."""
        if type(obs) is np.ndarray and obs.dtype == np.float32 and obs.flags.c_contiguous and self.device.type == "cpu":
            obs_t = torch.from_numpy(obs).reshape(len(obs), -1)
        else:
            obs_t = torch.as_tensor(np.asarray(obs), dtype=torch.float32, device=self.device).reshape(len(obs), -1)
        with torch.no_grad():
            out = torch.cat(self.actor(obs_t), dim=-1).cpu().numpy().astype(np.float64)
        return out[:, :self.act_dim], out[:, self.act_dim:]

    def to_env_action(self, action: np.ndarray) -> np.ndarray:
        """Normalised actions ``[N, act_dim]`` in ``[-1, 1]`` -> environment units ``[N, *act_shape]``."""
        action = np.asarray(action, dtype=np.float64).reshape(len(action), self.act_dim)
        env_action = (self._action_center + self._action_scale * action).clip(self.action_low, self.action_high)
        return env_action.astype(self._env_action_dtype).reshape(len(action), *self.act_shape)

    # ------------------------------------------------------------------------------------- state
    def modules(self) -> Dict[str, nn.Module]:
        return {"actor": self.actor, "critic": self.critic, "critic_target": self.critic_target}

    def optimizers(self) -> Dict[str, torch.optim.Optimizer]:
        optimizers = {"actor": self.actor_optimizer, "critic": self.critic_optimizer}
        if self.alpha_optimizer is not None:
            optimizers["alpha"] = self.alpha_optimizer
        return optimizers

    def extra_state(self) -> Dict[str, Any]:
        return {"update_count": self.update_count, "torch_rng": self.torch_rng.get_state(),
                "log_alpha": self.log_alpha.detach().cpu().clone()}

    def load_extra_state(self, state: Mapping[str, Any]) -> None:
        if "update_count" in state:
            count = state["update_count"]
            if isinstance(count, bool) or not isinstance(count, numbers.Integral) or count < 0:
                raise ValueError(f"SACPolicy: checkpoint 'update_count' must be an int >= 0, got {count!r}")
            self.update_count = int(count)
        if "log_alpha" in state:
            value = torch.as_tensor(state["log_alpha"], dtype=torch.float32)
            if value.numel() != 1 or not bool(torch.isfinite(value).all()):
                raise ValueError(f"SACPolicy: checkpoint 'log_alpha' must be one finite number, got {value!r}")
            with torch.no_grad():
                self.log_alpha.copy_(value.reshape(()))  # in place: the alpha optimizer holds this tensor
        if "torch_rng" in state:
            self.torch_rng.set_state(state["torch_rng"])
