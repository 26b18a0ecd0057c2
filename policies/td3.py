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

**How the gradients are computed.** The networks are plain ReLU MLPs, so ``_forward_learn`` computes
their gradients by hand (:func:`mlp_forward` keeps each layer's output, :func:`mlp_backward` walks back
with ``dW = dz h^T``, ``db = sum dz``, ``dh = W^T dz``) instead of through autograd. That is the same
arithmetic -- the tests check it against autograd, layer by layer and for whole iterations -- with no
graph to record, the gradients written straight into the ``.grad`` buffers the optimizers read, and only
the products TD3 needs: the actor step passes its gradient *through* ``Q1`` to the action without
computing the critic's weight gradients, and no layer computes the gradient of its input where nobody uses
it. The modules (:class:`Actor`, :class:`TwinCritic`) keep an ordinary ``forward`` for acting,
evaluation and checkpoints; the learner reads their parameters through views (:class:`Dense`).

**Speed.** A Pendulum iteration ([400, 300], batch 256) is about 715 MFLOP of matrix products, so on a
CPU the time is in ``matmul``:

* the passes work *feature-major*: activations are ``[features, batch]`` and weights ``[out, in]`` (as
  in ``nn.Linear``), so every product, forward and backward, reads and writes contiguous matrices
  (``y = W x``, ``dW = dz h^T``, ``dh = W^T dz``); measured 6-13 % faster per iteration than the
  batch-major ``x W`` form with MKL on this CPU, and a critic's output layer is a fast ``[1, in] x [in, B]``
  product instead of a slow matrix-vector one;
* the twin critics' layers are stored stacked (``[2, out, in]``) and both critics (and both target
  critics) run as one batched product per layer, forward and backward; ReLU and its gradient run in place;
* ``learn_threads = k`` runs each iteration with ``k`` torch intra-op threads (the caller's count is
  restored afterwards, so collection and evaluation keep theirs). Threads pay on idle cores and cost a
  lot when another process holds a core (every kernel waits for the descheduled worker), so a
  :class:`ThreadChooser` measures every 1000 iterations whether ``k`` threads beat one *now* and uses the
  faster; ``adaptive_threads = False`` always uses ``k``.

Adam is the fused CPU/GPU implementation (``fused=True``), stepped through :class:`~policies.adam_step.AdamStep`
(the same kernel without ``step()``'s per-call Python overhead).

This module is longer than rlearn's usual ~400 lines on purpose: a policy is one file a reader follows top to
bottom (docs/write-your-own-policy.md); its shared parts live under ``rlearn/`` (``rlearn.rl``...).
"""

from __future__ import annotations

import copy
import math
import numbers
import time
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from policies.adam_step import AdamStep
from policies.base import Policy, PolicyConfigError
from rlearn import trace
from rlearn.trace import span  # a shared no-op context manager while tracing is off


__all__ = ["TD3Policy", "Actor", "TwinCritic", "EnsembleLinear", "Dense", "ThreadChooser", "linear", "mlp_forward", "mlp_backward"]

# ------------------------------------------------------------------------------------------- networks


class Dense(NamedTuple):
    """One dense layer as the learner's hand-written passes see it, *feature-major*: ``y = weight @ x + bias``
    with activations ``x [in, B]``, ``y [out, B]`` (one column per sample).

    Either a single layer (``weight [out, in]`` as in ``nn.Linear``, ``bias [out, 1]``) or ``n`` stacked
    ones evaluated together (``weight [n, out, in]``, ``bias [n, out, 1]``, e.g. both critics at once). The
    tensors are usually *views* of a module's parameters (or of their ``.grad`` buffers), so that reading
    them costs nothing and writing into them fills the module's tensors.
    """

    weight: torch.Tensor
    bias: torch.Tensor


def linear(x: torch.Tensor, layer: Dense) -> torch.Tensor:
    """``layer.weight @ x + layer.bias``, feature-major: a single layer (``x [in, B]`` -> ``[out, B]``) or
    stacked layers (``x [in, B]`` shared by every member, or ``[n, in, B]`` -> ``[n, out, B]``)."""
    weight, bias = layer
    if weight.dim() == 3:
        return torch.baddbmm(bias, weight, x.expand(weight.shape[0], -1, -1) if x.dim() == 2 else x)
    return torch.addmm(bias, weight, x)


class EnsembleLinear(nn.Module):
    """``n`` independent linear layers evaluated together: ``x [n, B, in]`` (or ``[B, in]``, shared) ``->
    [n, B, out]``.

    ``weight [n, out, in]`` (member ``i`` is laid out like ``nn.Linear.weight``) and ``bias [n, out, 1]``
    are initialised like :class:`torch.nn.Linear` (uniform in ``+-1/sqrt(in)``), independently per member;
    the forward pass is one batched product.
    """

    def __init__(self, n: int, in_features: int, out_features: int) -> None:
        super().__init__()
        bound = 1.0 / math.sqrt(in_features)
        self.weight = nn.Parameter(torch.empty(n, out_features, in_features).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(n, out_features, 1).uniform_(-bound, bound))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x.transpose(-1, -2), Dense(self.weight, self.bias)).transpose(-1, -2)

    def dense(self, grad: bool = False) -> Dense:
        """All members as one detached :class:`Dense` view of the parameters (``grad=True``: of their gradients)."""
        weight, bias = (self.weight.grad, self.bias.grad) if grad else (self.weight, self.bias)
        return Dense(weight.detach(), bias.detach())

    def member(self, i: int) -> Dense:
        """Member ``i`` alone as a detached :class:`Dense` view (``[out, in]``, ``[out, 1]``) of the parameters."""
        return Dense(self.weight.detach()[i], self.bias.detach()[i])


class TwinCritic(nn.Module):
    """``n`` (default 2) Q-networks ``(obs, action) -> Q`` with ReLU hidden layers, evaluated as one.

    ``forward(obs [B, o], action [B, a]) -> [n, B]``: row ``i`` is ``Q_{i+1}(obs, action)``. Every layer
    holds the ``n`` networks' weights stacked (``[n, out, in]``) and runs as one batched product.
    """

    def __init__(self, obs_dim: int, act_dim: int, hidden_sizes: Sequence[int], n: int = 2) -> None:
        super().__init__()
        self.n = n
        sizes = [obs_dim + act_dim, *hidden_sizes, 1]
        self.layers = nn.ModuleList(EnsembleLinear(n, a, b) for a, b in zip(sizes[:-1], sizes[1:]))

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        x = torch.cat([obs, action], dim=-1).t()  # feature-major, as in the learner's passes
        for layer in self.layers[:-1]:
            x = linear(x, Dense(layer.weight, layer.bias)).relu_()  # in place: no second activation buffer
        last = self.layers[-1]
        return linear(x, Dense(last.weight, last.bias)).squeeze(-2)

    def dense(self, grad: bool = False) -> List[Dense]:
        """All ``n`` Q-networks as stacked :class:`Dense` views of the layers (``grad=True``: of the gradients)."""
        return [layer.dense(grad) for layer in self.layers]

    def member(self, i: int) -> List[Dense]:
        """Q-network ``i`` alone (0 is ``Q1``) as :class:`Dense` views (``[out, in]``) of its layers."""
        return [layer.member(i) for layer in self.layers]


class Actor(nn.Module):
    """Deterministic policy ``obs [B, o] -> action [B, a]`` in normalised units ``[-1, 1]`` (tanh output)."""

    def __init__(self, obs_dim: int, act_dim: int, hidden_sizes: Sequence[int]) -> None:
        super().__init__()
        layers: List[nn.Module] = []
        in_dim = obs_dim
        for size in hidden_sizes:
            layers += [nn.Linear(in_dim, size), nn.ReLU(inplace=True)]
            in_dim = size
        layers += [nn.Linear(in_dim, act_dim), nn.Tanh()]
        self.net = nn.Sequential(*layers)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs)

    def dense(self, grad: bool = False) -> List[Dense]:
        """The layers as detached :class:`Dense` views (``[out, in]``, ``[out, 1]``) of the ``nn.Linear``
        parameters (or of their gradients)."""
        linears = [m for m in self.net if isinstance(m, nn.Linear)]
        if grad:
            return [Dense(m.weight.grad, m.bias.grad.unsqueeze(1)) for m in linears]
        return [Dense(m.weight.detach(), m.bias.detach().unsqueeze(1)) for m in linears]


# ------------------------------------------------------------------------------- hand-written passes


def relu_backward_(grad: torch.Tensor, output: torch.Tensor) -> torch.Tensor:
    """``grad * (output > 0)``, in place in ``grad`` and in one kernel: the gradient through a ReLU given
    its *output*. (In place because writing a fresh activation-sized buffer costs more than the arithmetic.)"""
    return torch.ops.aten.threshold_backward.grad_input(grad, output, 0.0, grad_input=grad)


def mlp_forward(x: torch.Tensor, layers: Sequence[Dense], tanh_output: bool = False) -> List[torch.Tensor]:
    """Forward pass of a ReLU MLP keeping what the backward pass needs: ``[x, h_1, ..., h_L]``.

    Feature-major (``x [in, B]``, see :class:`Dense`): ``h_i = relu(W_i h_{i-1} + b_i)`` for the hidden
    layers; the last layer is linear, or ``tanh`` with ``tanh_output``. The layers may be stacked
    (``[n, out, in]``: ``n`` networks at once, ``x`` shared). Call it under ``torch.no_grad()``: the
    gradients come from :func:`mlp_backward`.
    """
    outputs = [x]
    last = len(layers) - 1
    for i, layer in enumerate(layers):
        h = linear(outputs[-1], layer)
        if i < last:
            h = h.relu_()
        elif tanh_output:
            h = h.tanh_()
        outputs.append(h)
    return outputs


def mlp_backward(
    outputs: Sequence[torch.Tensor],
    grad_output: torch.Tensor,
    layers: Sequence[Dense],
    tanh_output: bool = False,
    weight_grads: Optional[Sequence[Dense]] = None,
    input_grad: bool = False,
) -> Optional[torch.Tensor]:
    """Backward pass through :func:`mlp_forward`, given ``grad_output = dL/dh_L`` for a scalar loss ``L``.

    For every layer, from the last: ``dz = dh * act'`` (``act'`` from the stored outputs: ``h > 0`` for
    ReLU, ``1 - h^2`` for tanh), then ``dW = dz @ h_{i-1}^T``, ``db = sum_batch dz`` and
    ``dh_{i-1} = W^T @ dz`` (feature-major, per member for stacked layers). The weight and bias gradients are *written*
    into ``weight_grads`` (tensors of the layers' shapes, e.g. views of ``.grad`` buffers); with
    ``weight_grads=None`` they are not computed at all (a frozen network that only passes gradients on).
    Returns ``dL/dx`` if ``input_grad``, else None (and then the first layer's input gradient is not
    computed either).
    """
    grad = grad_output
    if tanh_output:
        grad = grad * (1.0 - outputs[-1].square())
    for i in range(len(layers) - 1, -1, -1):
        weight = layers[i].weight
        if i < len(layers) - 1:
            grad = relu_backward_(grad, outputs[i + 1])  # grad is a fresh product here: ours to overwrite
        if weight_grads is not None:
            _weight_gradient(outputs[i], grad, weight_grads[i])
        if i > 0 or input_grad:
            if weight.shape[-2] == 1:  # an outer product: elementwise is faster than a k=1 matmul
                grad = weight.transpose(-1, -2) * grad
            else:
                grad = torch.matmul(weight.transpose(-1, -2), grad)
    return grad if input_grad else None


#: input widths below which a single layer's weight gradient is computed transposed (see _weight_gradient)
_NARROW_INPUT = 16


def _weight_gradient(h: torch.Tensor, grad: torch.Tensor, out: Dense) -> None:
    """Write ``grad @ h^T`` into ``out.weight`` and ``sum_batch grad`` into ``out.bias`` (batched if stacked)."""
    stacked = out.weight.dim() == 3
    if not stacked and h.shape[0] < _NARROW_INPUT:
        # a layer with few inputs (the actor's first: obs_dim of them): MKL's [out, B] x [B, in] product is
        # slow for such a narrow result (~95 us for [400, 256] x [256, 3] here); [in, B] x [B, out] is fast
        # (~30 us), so compute the transpose and copy it into place
        out.weight.copy_(torch.mm(h.contiguous(), grad.t()).t())
        torch.sum(grad, dim=-1, keepdim=True, out=out.bias)
        return
    if stacked and h.dim() == 2:
        h = h.expand(out.weight.shape[0], -1, -1)  # the input shared by every member
    (torch.bmm if stacked else torch.mm)(grad, h.transpose(-1, -2), out=out.weight)
    torch.sum(grad, dim=-1, keepdim=True, out=out.bias)


# --------------------------------------------------------------------------------------- threads


class ThreadChooser:
    """How many torch threads a train iteration runs with: ``threads``, or 1 while more do not pay.

    PyTorch's intra-op threads split every product over the cores. On idle cores that is the fastest way
    to run an iteration; but when another process occupies a core, every kernel waits at its barrier for
    the descheduled worker, and one thread is several times faster. Which case holds changes during a
    run, so the chooser measures (``adaptive=True``): every ``probe_every`` iterations it runs
    ``probe_len`` of them on one thread, then ``probe_len`` on ``threads``, and keeps the mode with the
    lower mean iteration time until the next probe. Iterations of one algorithm can differ in cost (TD3's
    actor steps), so ``probe_len`` should be a multiple of their cycle: both halves of the probe then hold
    the same mix. A multi-thread probe iteration slower than twice the slowest one-thread iteration ends
    the probe at once: under heavy load those are the expensive ones.

    The first ``probe_len`` iterations of each period run in the current mode, as a warm-up. With
    ``adaptive=False`` every iteration uses ``threads``. ``decisions`` keeps the last probes' outcomes
    ``(iteration, one-thread mean s, multi-thread mean s, threads chosen)``; each decision is also a
    ``learn_threads`` counter in the timeline trace.
    """

    def __init__(self, threads: int, adaptive: bool = True, probe_every: int = 1000, probe_len: int = 8) -> None:
        if threads < 1 or probe_every < 3 * probe_len:
            raise ValueError(f"ThreadChooser: need threads >= 1 and probe_every >= 3 * probe_len, got "
                             f"{threads}, {probe_every}, {probe_len}")
        self.threads = threads
        self.adaptive = adaptive and threads > 1 and probe_len > 0
        self.probe_every = probe_every
        self.probe_len = probe_len
        #: threads used outside probes; updated after every probe
        self.chosen = threads
        self.decisions: List[Tuple[int, float, float, int]] = []
        self._iteration = 0
        self._times: Dict[int, List[float]] = {1: [], threads: []}
        self._decided = False  # whether this period's probe has already decided

    def _probing(self, phase: int) -> Optional[int]:
        """The thread count this period's probe runs at ``phase``, or None outside the probe."""
        if not self.adaptive or self._decided or phase < self.probe_len or phase >= 3 * self.probe_len:
            return None
        return 1 if phase < 2 * self.probe_len else self.threads

    def threads_now(self) -> int:
        """Threads for the iteration about to run."""
        probe = self._probing(self._iteration % self.probe_every)
        return self.chosen if probe is None else probe

    def iteration_done(self, seconds: float) -> None:
        """Record the wall time of the iteration that just ran (with :meth:`threads_now` threads)."""
        phase = self._iteration % self.probe_every
        self._iteration += 1
        if phase == 0:
            self._decided = False
        probe = self._probing(phase)
        if probe is None:
            return
        self._times[probe].append(seconds)
        if probe == 1:
            return
        serial, multi = self._times[1], self._times[self.threads]
        too_slow = seconds > 2.0 * max(serial)  # ends the probe early: that is all we need to know
        if too_slow or phase == 3 * self.probe_len - 1:
            serial_mean, multi_mean = sum(serial) / len(serial), sum(multi) / len(multi)
            if too_slow:
                multi_mean = max(multi_mean, seconds)
            self.chosen = self.threads if multi_mean < serial_mean else 1
            self.decisions = self.decisions[-99:] + [(self._iteration, serial_mean, multi_mean, self.chosen)]
            trace.counter("learn_threads", self.chosen)
            self._times = {1: [], self.threads: []}
            self._decided = True


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


class _NetworkViews(NamedTuple):
    """What the hand-written passes read and write, layer by layer (see ``TD3Policy._views``).

    The critics are stacked (``[2, out, in]``: both at once); ``q1`` is ``Q1`` alone, for the actor step.
    """

    critic: List[Dense]
    critic_grads: List[Dense]
    q1: List[Dense]
    actor: List[Dense]
    actor_grads: List[Dense]
    critic_target: List[Dense]
    actor_target: List[Dense]


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
      numbers depend only on the seed: the thread count can change a product's rounding.
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
        threads = cfg["learn_threads"]
        self.learn_threads = None if threads is None else _check_int("learn_threads", threads, 1)
        adaptive = cfg["adaptive_threads"]
        if not isinstance(adaptive, bool):
            raise PolicyConfigError(f"TD3Policy: 'policy.adaptive_threads' must be true or false, got {adaptive!r}")

        self._init_spaces()
        # Networks are initialised from the policy seed without touching the global torch RNG.
        with torch.random.fork_rng(devices=[]):
            if self.seed is not None:
                torch.manual_seed(self.seed)
            self.actor = Actor(self.obs_dim, self.act_dim, self.hidden_sizes).to(self.device)
            self.critic = TwinCritic(self.obs_dim, self.act_dim, self.hidden_sizes).to(self.device)
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)

        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=lr_actor, fused=True)
        self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=lr_critic, fused=True)
        # the same update as .step(), without its per-call Python overhead (see policies.adam_step)
        self._actor_adam, self._critic_adam = AdamStep(self.actor_optimizer), AdamStep(self.critic_optimizer)
        self._actor_params = list(self.actor.parameters())
        self._critic_params = list(self.critic.parameters())
        self._online_params = self._critic_params + self._actor_params
        self._target_params = list(self.critic_target.parameters()) + list(self.actor_target.parameters())

        # target-smoothing noise comes from the policy's own generator (saved in extra_state)
        self.torch_rng = torch.Generator(device=self.device)
        self.torch_rng.manual_seed(int(self.np_random.integers(2**62)))
        self.update_count = 0  # critic updates done; the actor and targets move when it is a multiple of the freq
        #: picks each iteration's torch thread count (None: the iteration runs with the caller's)
        self.thread_chooser: Optional[ThreadChooser] = None
        if self.learn_threads is not None and self.device.type == "cpu":
            # probe blocks of whole actor-update cycles, so that both halves hold the same mix of iterations
            probe_len = self.actor_update_freq * max(1, math.ceil(8 / self.actor_update_freq))
            self.thread_chooser = ThreadChooser(
                self.learn_threads, adaptive=adaptive, probe_every=max(1000, 10 * probe_len), probe_len=probe_len
            )
        self._cached_views: Optional[Tuple[List[torch.Tensor], _NetworkViews]] = None
        self._cached_actor_layers: Optional[List[Dense]] = None

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
        """One TD3 iteration on a replay minibatch (the off-policy data contract of ``policies.base``).

        Runs with the number of torch threads the :class:`ThreadChooser` picks (``policy.learn_threads``,
        or one thread while more do not pay), then restores the caller's thread count.
        """
        threads = self.thread_chooser.threads_now() if self.thread_chooser is not None else None
        outer = torch.get_num_threads()
        switch = threads is not None and threads != outer
        if switch:
            torch.set_num_threads(threads)
        start = time.perf_counter()
        try:
            info = self._learn_step(data)
        finally:
            if switch:
                torch.set_num_threads(outer)
        if self.thread_chooser is not None:
            self.thread_chooser.iteration_done(time.perf_counter() - start)
        return info

    def _learn_step(self, data: Mapping[str, torch.Tensor]) -> Dict[str, float]:
        """Target, critic update and, every ``actor_update_freq`` iterations, actor and target updates."""
        obs, action, reward, next_obs, terminated = self._check_batch(data)
        views = self._views()
        with span("learner/forward", lane="learner"):
            target_q = self.compute_target(reward, next_obs, terminated, self.smoothing_noise(action.shape))
        obs = obs.t()  # feature-major [obs_dim, B] from here on (see Dense)
        stats = self._critic_backward(views, obs, action.t(), target_q)
        with span("learner/optimizer_step", lane="learner"):
            self._critic_adam()
        self.update_count += 1

        actor_step = self.update_count % self.actor_update_freq == 0
        if actor_step:
            actor_loss = self._actor_backward(views, obs)
            with span("learner/optimizer_step", lane="learner"):
                self._actor_adam()
                with torch.no_grad():  # Polyak averaging of every target network
                    torch._foreach_lerp_(self._target_params, self._online_params, self.tau)
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

    def _views(self) -> "_NetworkViews":
        """Detached :class:`Dense` views of the networks and of the online networks' ``.grad`` buffers.

        Built once (creating the views costs more than a small layer's arithmetic) and rebuilt when a
        gradient buffer was dropped or replaced (e.g. ``zero_grad(set_to_none=True)``). Optimizer steps,
        Polyak updates and ``load_state_dict`` update the parameters in place, so the views stay valid.
        """
        cached = self._cached_views
        if cached is not None and all(param.grad is grad for param, grad in zip(self._online_params, cached[0])):
            return cached[1]
        for param in self._online_params:
            if param.grad is None:
                param.grad = torch.zeros_like(param)
        with torch.no_grad():
            views = _NetworkViews(
                critic=self.critic.dense(),
                critic_grads=self.critic.dense(grad=True),
                q1=self.critic.member(0),
                actor=self.actor.dense(),
                actor_grads=self.actor.dense(grad=True),
                critic_target=self.critic_target.dense(),
                actor_target=self.actor_target.dense(),
            )
        self._cached_views = ([param.grad for param in self._online_params], views)
        return views

    @torch.no_grad()
    def _critic_backward(
        self, views: "_NetworkViews", obs: torch.Tensor, action: torch.Tensor, target_q: torch.Tensor
    ) -> torch.Tensor:
        """Both critics' gradients of ``MSE(Q1, y) + MSE(Q2, y)`` (``dL/dQ_i = 2 (Q_i - y) / B``), written into
        the critic's ``.grad`` buffers; both critics run as one stacked network. ``obs [o, B]`` and
        ``action [a, B]`` are feature-major, ``target_q [B]``.

        Returns ``[MSE_1, MSE_2, mean Q1, mean Q2, mean y, mean |Q1 - y|, mean |Q2 - y|]`` for the reports
        (one reduction over the stacked rows).
        """
        with span("learner/forward", lane="learner"):
            outputs = mlp_forward(torch.cat([obs, action]), views.critic)
            q = outputs[-1].squeeze(-2)  # [2, B]
            error = q - target_q
        with span("learner/backward", lane="learner"):
            grad_q = error.mul(2.0 / q.shape[1]).unsqueeze(-2)
            mlp_backward(outputs, grad_q, views.critic, weight_grads=views.critic_grads)
        return torch.cat([error.square(), q, target_q.unsqueeze(0), error.abs()]).mean(1)

    @torch.no_grad()
    def _actor_backward(self, views: "_NetworkViews", obs: torch.Tensor) -> torch.Tensor:
        """The gradient of ``-mean Q1(s, pi(s))``, written into the actor's ``.grad`` buffers; returns the loss.

        The gradient flows back through ``Q1`` to the action only (no critic weight gradients), then
        through the actor. ``obs [o, B]`` is feature-major.
        """
        with span("learner/forward", lane="learner"):
            actor_outputs = mlp_forward(obs, views.actor, tanh_output=True)
            q_outputs = mlp_forward(torch.cat([obs, actor_outputs[-1]]), views.q1)
        with span("learner/backward", lane="learner"):
            grad_q = torch.full_like(q_outputs[-1], -1.0 / obs.shape[1])
            grad_action = mlp_backward(q_outputs, grad_q, views.q1, input_grad=True)[self.obs_dim:]
            mlp_backward(actor_outputs, grad_action, views.actor, tanh_output=True, weight_grads=views.actor_grads)
        return q_outputs[-1].mean().neg()

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
        views = self._views()
        next_obs = next_obs.t()  # feature-major (see Dense)
        next_action = mlp_forward(next_obs, views.actor_target, tanh_output=True)[-1]
        next_action = next_action.add_(noise.t()).clamp_(-1.0, 1.0)  # [a, B]
        q_next = mlp_forward(torch.cat([next_obs, next_action]), views.critic_target)[-1]  # [2, 1, B]
        return reward + self.gamma * (1.0 - terminated) * q_next.amin(dim=0).squeeze(0)

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
        # a NaN or inf anywhere makes its tensor's sum non-finite (one reduction per key); a huge but finite
        # batch can overflow a sum, so the element-wise check decides before anything is refused
        if not all(math.isfinite(t.sum().item()) for t in out):
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

        Acting is one small forward pass per env step, where the call overhead is the cost: the layers
        are read through cached views (no ``nn.Module`` call machinery) and, as they are detached, the
        pass records no autograd graph without a ``no_grad`` context.
        """
        if type(obs) is np.ndarray and obs.dtype == np.float32 and obs.flags.c_contiguous and self.device.type == "cpu":
            obs_t = torch.from_numpy(obs).reshape(len(obs), -1)  # shares obs's memory: nothing writes into it
        else:
            obs_t = torch.as_tensor(np.asarray(obs), dtype=torch.float32, device=self.device).reshape(len(obs), -1)
        action = mlp_forward(obs_t.t(), self._acting_layers(), tanh_output=True)[-1]  # [a, N]
        return action.t().cpu().numpy().astype(np.float64)

    def _acting_layers(self) -> List[Dense]:
        """The actor's layers as detached views, built once (``load_state_dict`` and the optimizer update the
        parameters in place, so the views stay valid)."""
        if self._cached_actor_layers is None:
            self._cached_actor_layers = self.actor.dense()
        return self._cached_actor_layers

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
