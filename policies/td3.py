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

**Speed.** Networks are small (Pendulum: [400, 300]) and the batch is 256, so a CPU iteration is a few dozen
medium-size matrix products. Three things make it cheap:

* both critics (and both target critics) are one :class:`TwinCritic` whose layers hold stacked weights
  ``[2, in, out]`` evaluated with one batched matmul (``torch.baddbmm``): one kernel per layer instead of
  two, for the forward and the backward;
* the actor loss evaluates ``Q1`` with *detached* critic weights, so autograd computes no critic weight
  gradients on actor steps (about one matmul in twelve saved per iteration);
* with ``learn_threads = k > 1`` the minibatch is cut into ``k`` slices whose forward and backward can run
  concurrently on ``k`` threads (PyTorch releases the GIL inside its kernels); their gradients are summed
  before a single optimizer step. This is the same mathematics as one full-batch pass (losses are sums
  over samples divided by the full batch size), with two joins per iteration instead of OpenMP's
  per-kernel barriers, which collapse when another process is busy on the second core. Threads only pay
  while the cores are free, so a :class:`SliceRunner` re-measures every 1000 iterations whether the slices
  run faster on one thread or on ``k``, and uses the faster; the slices are the same either way, so the
  numbers do not depend on that choice. Each kernel runs single-threaded: keep the run config's
  ``num_threads = 1`` (the default); with more torch threads the policy sets one, with a warning, rather
  than oversubscribe the cores.

Adam is the fused CPU/GPU implementation (``fused=True``).
"""

from __future__ import annotations

import copy
import math
import numbers
import threading
import time
import warnings
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from policies.base import Policy, PolicyConfigError
from rlearn.trace import span  # a shared no-op context manager while tracing is off


__all__ = ["TD3Policy", "Actor", "TwinCritic", "EnsembleLinear", "SliceRunner"]

# ------------------------------------------------------------------------------------------- networks


class EnsembleLinear(nn.Module):
    """``n`` independent linear layers evaluated together: ``x [n, B, in] -> [n, B, out]``.

    ``weight [n, in, out]`` and ``bias [n, 1, out]`` are initialised like :class:`torch.nn.Linear`
    (uniform in ``+-1/sqrt(in)``), independently per member; the forward pass is one
    ``torch.baddbmm(bias, x, weight)``.
    """

    def __init__(self, n: int, in_features: int, out_features: int) -> None:
        super().__init__()
        bound = 1.0 / math.sqrt(in_features)
        self.weight = nn.Parameter(torch.empty(n, in_features, out_features).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(n, 1, out_features).uniform_(-bound, bound))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.baddbmm(self.bias, x, self.weight)


class TwinCritic(nn.Module):
    """``n`` (default 2) Q-networks ``(obs, action) -> Q`` with ReLU hidden layers, evaluated as one.

    ``forward(obs [B, o], action [B, a]) -> [n, B]``: row ``i`` is ``Q_{i+1}(obs, action)``.
    """

    def __init__(self, obs_dim: int, act_dim: int, hidden_sizes: Sequence[int], n: int = 2) -> None:
        super().__init__()
        self.n = n
        sizes = [obs_dim + act_dim, *hidden_sizes, 1]
        self.layers = nn.ModuleList(EnsembleLinear(n, a, b) for a, b in zip(sizes[:-1], sizes[1:]))

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        x = torch.cat([obs, action], dim=-1).expand(self.n, -1, -1)
        for layer in self.layers[:-1]:
            x = torch.relu(layer(x))
        return self.layers[-1](x).squeeze(-1)

    def q1_frozen(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """``Q1(obs, action) [B]`` with detached weights: gradients reach ``action`` but no critic weight."""
        x = torch.cat([obs, action], dim=-1)
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            x = torch.addmm(layer.bias.detach()[0], x, layer.weight.detach()[0])
            if i < last:
                x = torch.relu(x)
        return x.squeeze(-1)


class Actor(nn.Module):
    """Deterministic policy ``obs [B, o] -> action [B, a]`` in normalised units ``[-1, 1]`` (tanh output)."""

    def __init__(self, obs_dim: int, act_dim: int, hidden_sizes: Sequence[int]) -> None:
        super().__init__()
        layers: List[nn.Module] = []
        in_dim = obs_dim
        for size in hidden_sizes:
            layers += [nn.Linear(in_dim, size), nn.ReLU()]
            in_dim = size
        layers += [nn.Linear(in_dim, act_dim), nn.Tanh()]
        self.net = nn.Sequential(*layers)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs)


# ----------------------------------------------------------------------------------- batch slices


class SliceRunner:
    """Runs a function over the slices of a minibatch on this thread alone, or on ``threads`` threads.

    Which of the two is faster depends on the machine *now*: on idle cores the threads run the slices
    concurrently (PyTorch releases the GIL inside its kernels); when another process occupies a core, a
    thread holding the GIL gets descheduled and the others wait for it, and one thread is faster. So the
    runner measures: every ``probe_every`` iterations it runs ``probe_len`` of them on one thread and
    ``probe_len`` on all threads, and keeps the mode with the lower median iteration time until the next
    probe. The slices themselves never change, so the results do not depend on the choice.

    In parallel mode every thread takes the next slice not yet taken until none is left (work sharing):
    if a worker is slow to wake up, this thread computes its slice too instead of waiting.
    """

    def __init__(self, threads: int, probe_every: int = 1000, probe_len: int = 16) -> None:
        self.threads = threads
        self.probe_every = probe_every
        self.probe_len = probe_len
        #: the mode used outside probes (True: all threads); updated after every probe
        self.parallel = True
        self._iteration = 0
        self._times: Dict[bool, List[float]] = {False: [], True: []}
        self._pool: Optional[ThreadPoolExecutor] = None

    def mode(self) -> bool:
        """Whether the current iteration runs its slices on all threads."""
        phase = self._iteration % self.probe_every
        if phase < 2 * self.probe_len:
            return phase >= self.probe_len  # probe: first on one thread, then on all
        return self.parallel

    def iteration_done(self, seconds: float, parallel: bool) -> None:
        """Record the wall time of the iteration that just ran in mode ``parallel``; decide after a probe."""
        phase = self._iteration % self.probe_every
        if phase < 2 * self.probe_len:
            self._times[parallel].append(seconds)
            if phase == 2 * self.probe_len - 1:
                serial, threaded = (float(np.median(self._times[m])) for m in (False, True))
                self.parallel = threaded < serial
                self._times = {False: [], True: []}
        self._iteration += 1

    def run(self, fn: Callable[[Any], Any], slices: Sequence[Any], parallel: bool) -> List[Any]:
        """``[fn(s) for s in slices]``, on this thread alone or shared with the worker threads."""
        if not parallel or len(slices) == 1:
            return [fn(part) for part in slices]
        if self._pool is None:
            # torch.set_num_threads is partly per thread (OpenMP and MKL keep thread-local counts): without
            # this initializer a worker's matmuls would start an OpenMP team of all cores and spin-wait
            self._pool = ThreadPoolExecutor(
                max_workers=self.threads - 1, thread_name_prefix="td3-learn",
                initializer=torch.set_num_threads, initargs=(1,),
            )
            weakref.finalize(self, self._pool.shutdown, wait=False)
        results: List[Any] = [None] * len(slices)
        todo = iter(range(len(slices)))  # next() on a shared iterator, under a lock
        lock = threading.Lock()

        def work() -> None:
            while True:
                with lock:
                    index = next(todo, None)
                if index is None:
                    return
                results[index] = fn(slices[index])

        helpers = [self._pool.submit(work) for _ in range(min(self.threads, len(slices)) - 1)]
        work()
        for helper in helpers:
            helper.result()  # re-raises a helper's exception
        return results


# --------------------------------------------------------------------------------------------- config


def _check_int(key: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise PolicyConfigError(f"TD3Policy: 'policy.{key}' must be an int >= {minimum}, got {value!r}")
    return int(value)


def _check_float(key: str, value: Any, low: float, high: float, low_open: bool = False) -> float:
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    ok = ok and (value > low if low_open else value >= low) and value <= high
    if not ok:
        interval = f"{'(' if low_open else '['}{low}, {high}]"
        raise PolicyConfigError(f"TD3Policy: 'policy.{key}' must be a number in {interval}, got {value!r}")
    return float(value)


_BATCH_KEYS = ("obs", "action", "reward", "next_obs", "terminated")
#: indices of the per-iteration statistics summed over batch slices (see ``_critic_slice``)
_STAT_KEYS = ("critic_loss", "critic_twin_loss", "q_value", "q_value_twin", "target_q_value", "td_error")


# --------------------------------------------------------------------------------------------- policy


class TD3Policy(Policy):
    """TD3 for any ``Box`` action space; see the module docstring for the algorithm and its reports.

    Config keys (``policy`` section; defaults as in the TD3 paper):

    * ``learning_starts`` (25000): env steps of uniformly random actions before the actor acts (the
      pipeline also waits this long before the first train iteration);
    * ``batch_size`` (256): minibatch size sampled from the replay buffer per train iteration;
    * ``actor_update_freq`` (2): critic updates per actor + target update;
    * ``hidden_sizes`` ([256, 256]): hidden layers of the actor and of each critic;
    * ``lr_actor``, ``lr_critic`` (3e-4): Adam learning rates;
    * ``gamma`` (0.99): discount; ``tau`` (0.005): Polyak coefficient of the target networks;
    * ``exploration_noise`` (0.1): std of the Gaussian collect noise, normalised units (1 = half the range);
    * ``target_noise`` (0.2), ``target_noise_clip`` (0.5): target policy smoothing, normalised units;
    * ``learn_threads`` (1): threads a train iteration splits its minibatch over (CPU only; see "Speed");
    * ``compile`` (False): ``torch.compile`` the four networks in place (state-dict keys unchanged). On a
      CPU with Pendulum-sized networks it costs ~8 s of compilation and gains nothing measurable (the time
      is in the matrix products; docs/td3.md); it may pay on a GPU.
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
        "learn_threads": 1,
        "compile": False,
    }

    # ------------------------------------------------------------------------------------- learn
    def _init_learn(self) -> None:
        cfg = self.cfg
        self.learning_starts = _check_int("learning_starts", cfg["learning_starts"], 0)
        self.batch_size = _check_int("batch_size", cfg["batch_size"], 1)
        self.actor_update_freq = _check_int("actor_update_freq", cfg["actor_update_freq"], 1)
        hidden = cfg["hidden_sizes"]
        if not isinstance(hidden, (list, tuple)) or not hidden:
            raise PolicyConfigError(f"TD3Policy: 'policy.hidden_sizes' must be a non-empty list of ints, got {hidden!r}")
        self.hidden_sizes = [_check_int(f"hidden_sizes[{i}]", h, 1) for i, h in enumerate(hidden)]
        self.gamma = _check_float("gamma", cfg["gamma"], 0.0, 1.0)
        self.tau = _check_float("tau", cfg["tau"], 0.0, 1.0, low_open=True)
        self.exploration_noise = _check_float("exploration_noise", cfg["exploration_noise"], 0.0, math.inf)
        self.target_noise = _check_float("target_noise", cfg["target_noise"], 0.0, math.inf)
        self.target_noise_clip = _check_float("target_noise_clip", cfg["target_noise_clip"], 0.0, math.inf)
        lr_actor = _check_float("lr_actor", cfg["lr_actor"], 0.0, math.inf, low_open=True)
        lr_critic = _check_float("lr_critic", cfg["lr_critic"], 0.0, math.inf, low_open=True)
        self.learn_threads = _check_int("learn_threads", cfg["learn_threads"], 1)
        if self.device.type != "cpu":
            self.learn_threads = 1
        if not isinstance(cfg["compile"], bool):
            raise PolicyConfigError(f"TD3Policy: 'policy.compile' must be True or False, got {cfg['compile']!r}")

        self._init_spaces()
        # Networks are initialised from the policy seed without touching the global torch RNG.
        with torch.random.fork_rng(devices=[]):
            if self.seed is not None:
                torch.manual_seed(self.seed)
            self.actor = Actor(self.obs_dim, self.act_dim, self.hidden_sizes).to(self.device)
            self.critic = TwinCritic(self.obs_dim, self.act_dim, self.hidden_sizes).to(self.device)
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        if cfg["compile"]:
            for net in (self.actor, self.critic, self.actor_target, self.critic_target):
                net.compile()  # in place: parameters and state_dict keys stay those of the eager module

        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=lr_actor, fused=True)
        self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=lr_critic, fused=True)
        self._actor_params = list(self.actor.parameters())
        self._critic_params = list(self.critic.parameters())
        self._online_params = self._critic_params + self._actor_params
        self._target_params = list(self.critic_target.parameters()) + list(self.actor_target.parameters())

        # target-smoothing noise comes from the policy's own generator (saved in extra_state)
        self.torch_rng = torch.Generator(device=self.device)
        self.torch_rng.manual_seed(int(self.np_random.integers(2**62)))
        self.update_count = 0  # critic updates done; the actor and targets move when it is a multiple of the freq
        self.slice_runner = SliceRunner(self.learn_threads)
        if self.learn_threads > 1 and torch.get_num_threads() > 1:
            warnings.warn(
                f"TD3Policy: policy.learn_threads={self.learn_threads} runs one batch slice per thread; setting "
                f"torch.set_num_threads(1) (was {torch.get_num_threads()}) so that kernels do not oversubscribe the cores",
                stacklevel=2,
            )
            torch.set_num_threads(1)

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
        return [*_STAT_KEYS, "cur_lr_critic", "actor_loss", "cur_lr_actor"]

    def _forward_learn(self, data: Mapping[str, torch.Tensor]) -> Dict[str, float]:
        """One TD3 iteration on a replay minibatch (the off-policy data contract of ``policies.base``)."""
        start = time.perf_counter()
        obs, action, reward, next_obs, terminated = self._check_batch(data)
        batch = obs.shape[0]
        noise = self.smoothing_noise(action.shape)  # for the whole batch, before it is cut into slices
        slices = self._split((obs, action, reward, next_obs, terminated, noise))
        parallel = self.slice_runner.mode()

        # critics: forward and backward per slice (concurrently), gradients summed, one Adam step
        results = self.slice_runner.run(lambda part: self._critic_slice(*part, batch_size=batch), slices, parallel)
        stats = self._set_grads(self._critic_params, results)
        with span("learner/optimizer_step", lane="learner"):
            self.critic_optimizer.step()
        self.update_count += 1
        info = dict(zip(_STAT_KEYS, (stats / batch).tolist()))
        info["cur_lr_critic"] = self.critic_optimizer.param_groups[0]["lr"]

        if self.update_count % self.actor_update_freq == 0:
            states = [(part[0],) for part in slices]
            results = self.slice_runner.run(lambda part: self._actor_slice(part[0], batch_size=batch), states, parallel)
            actor_loss = self._set_grads(self._actor_params, results)
            with span("learner/optimizer_step", lane="learner"):
                self.actor_optimizer.step()
                with torch.no_grad():  # Polyak averaging of every target network
                    for target, online in zip(self._target_params, self._online_params):
                        target.lerp_(online, self.tau)
            info["actor_loss"] = float(actor_loss)
            info["cur_lr_actor"] = self.actor_optimizer.param_groups[0]["lr"]
        self.slice_runner.iteration_done(time.perf_counter() - start, parallel)
        return info

    def _critic_slice(
        self,
        obs: torch.Tensor,
        action: torch.Tensor,
        reward: torch.Tensor,
        next_obs: torch.Tensor,
        terminated: torch.Tensor,
        noise: torch.Tensor,
        batch_size: int,
    ) -> Tuple[Tuple[torch.Tensor, ...], torch.Tensor]:
        """Critic gradients of one slice of the batch and its summed statistics (divided by the full
        ``batch_size`` later, so that slices add up to the full-batch mean)."""
        with span("learner/forward", lane="learner"):
            target_q = self.compute_target(reward, next_obs, terminated, noise)
            q = self.critic(obs, action)  # [2, b]
            error = q - target_q
            squared = error.square().sum(dim=1)  # [2]: per-critic sums of squared errors
            loss = squared.sum() / batch_size  # = MSE(Q1, y) + MSE(Q2, y) once the slices are summed
        with span("learner/backward", lane="learner"):
            grads = torch.autograd.grad(loss, self._critic_params)
        with torch.no_grad():  # in _STAT_KEYS order, as sums over the slice
            stats = torch.cat([squared, q.sum(dim=1), target_q.sum().view(1), error.abs().sum().view(1) / 2])
        return grads, stats

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

        ``noise`` is the (already clipped) target-smoothing noise in normalised action units.
        """
        next_action = (self.actor_target(next_obs) + noise).clamp_(-1.0, 1.0)
        next_q = self.critic_target(next_obs, next_action).amin(dim=0)
        return reward + self.gamma * (1.0 - terminated) * next_q

    def _actor_slice(self, obs: torch.Tensor, batch_size: int) -> Tuple[Tuple[torch.Tensor, ...], torch.Tensor]:
        """Actor gradients of ``-mean Q1(s, pi(s))`` on one slice (critic weights frozen) and its loss sum."""
        with span("learner/forward", lane="learner"):
            loss = -self.critic.q1_frozen(obs, self.actor(obs)).sum() / batch_size
        with span("learner/backward", lane="learner"):
            grads = torch.autograd.grad(loss, self._actor_params)
        return grads, loss.detach()

    # ---------------------------------------------------------------------- batch and slices
    def _check_batch(self, data: Mapping[str, torch.Tensor]) -> Tuple[torch.Tensor, ...]:
        """The five batch tensors, flattened to ``[B, dim]`` / ``[B]``; bad input raises naming the key."""
        if not isinstance(data, Mapping):
            raise TypeError(f"TD3Policy._forward_learn expects a dict of tensors, got {type(data).__name__}")
        missing = [key for key in _BATCH_KEYS if key not in data]
        if missing:
            raise KeyError(f"TD3Policy._forward_learn: batch is missing {missing} (has {sorted(data)})")
        out = []
        batch = None
        for key in _BATCH_KEYS:
            value = data[key]
            if not isinstance(value, torch.Tensor) or not value.is_floating_point():
                kind = value.dtype if isinstance(value, torch.Tensor) else type(value).__name__
                raise TypeError(f"TD3Policy._forward_learn: batch[{key!r}] must be a float tensor, got {kind}")
            shape = {"obs": self.obs_shape, "next_obs": self.obs_shape, "action": self.act_shape}.get(key, ())
            if batch is None:
                batch = value.shape[0] if value.dim() else 0
            if tuple(value.shape) != (batch, *shape) or batch == 0:
                expected = ("B>0" if batch == 0 else batch, *shape)
                raise ValueError(
                    f"TD3Policy._forward_learn: batch[{key!r}] has shape {tuple(value.shape)}, expected {expected}"
                )
            value = value.to(self.device, torch.float32, non_blocking=True)
            out.append(value.reshape(batch, -1) if shape else value)
        if not bool(torch.isfinite(torch.stack([t.sum() for t in out])).all()):
            bad = [key for key, t in zip(_BATCH_KEYS, out) if not bool(torch.isfinite(t).all())]
            raise ValueError(f"TD3Policy._forward_learn: non-finite values (NaN/inf) in batch {bad}; nothing was updated")
        return tuple(out)

    def _split(self, tensors: Sequence[torch.Tensor]) -> List[Tuple[torch.Tensor, ...]]:
        """Cut every tensor into ``learn_threads`` slices along the batch (fewer if the batch is tiny).

        One slice per thread: each slice costs about a millisecond of its own (fresh gradient tensors to
        allocate and sum, smaller products), so finer slicing for load balancing does not pay.
        """
        parts = min(self.learn_threads, tensors[0].shape[0])
        if parts == 1:
            return [tuple(tensors)]
        return list(zip(*(t.tensor_split(parts) for t in tensors)))

    @staticmethod
    def _set_grads(params: Sequence[torch.Tensor], results: Sequence[Tuple[Sequence[torch.Tensor], torch.Tensor]]) -> torch.Tensor:
        """Sum the slices' gradients into ``param.grad`` and return the summed statistics."""
        grads, stats = results[0]
        for more_grads, more_stats in results[1:]:
            for grad, more in zip(grads, more_grads):
                grad.add_(more)
            stats = stats + more_stats
        for param, grad in zip(params, grads):
            param.grad = grad
        return stats

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
            action = np.clip(action, -1.0, 1.0)
        action = action.astype(np.float32)
        return {"action": action.reshape(n, *self.act_shape), "env_action": self.to_env_action(action)}

    def _forward_eval(self, obs: np.ndarray) -> np.ndarray:
        """Deterministic actions ``pi(s)`` in environment units."""
        return self.to_env_action(self._actor_numpy(obs))

    def _actor_numpy(self, obs: np.ndarray) -> np.ndarray:
        obs_t = torch.as_tensor(np.asarray(obs), dtype=torch.float32, device=self.device).reshape(len(obs), -1)
        with torch.no_grad():
            return self.actor(obs_t).cpu().numpy().astype(np.float64)

    def to_env_action(self, action: np.ndarray) -> np.ndarray:
        """Normalised actions ``[N, act_dim]`` in ``[-1, 1]`` -> environment units ``[N, *act_shape]``."""
        action = np.asarray(action, dtype=np.float64).reshape(len(action), self.act_dim)
        env_action = np.clip(self._action_center + self._action_scale * action, self.action_low, self.action_high)
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
