"""Phasic Policy Gradient (PPG): Cobbe, Hilton, Klimov and Schulman, 2020, https://arxiv.org/abs/2009.04416

PPG is PPO with the policy and the value function trained in separate *phases* so that they can share
features without fighting over them:

* **policy phase**, once per train iteration (= one call of :meth:`PPGPolicy._forward_learn`, one
  rollout ``[T, N]`` from ``N`` vectorised environments):

  1. GAE(lambda) advantages and value targets (:func:`compute_gae`): bootstrap with ``V(next_obs)``
     where an episode was *truncated* (time limit), use zero where it *terminated*, and never let the
     recursion run across an episode end;
  2. ``e_policy`` epochs of the PPO clipped objective plus an entropy bonus on shuffled minibatches
     (advantages normalised per minibatch, gradient norm clipped);
  3. ``e_value`` epochs of value-network regression on the value targets;
  4. the rollout's observations and value targets are kept for the auxiliary phase.

* **auxiliary phase**, every ``n_pi`` policy iterations (:meth:`PPGPolicy._auxiliary_phase`):
  the action distribution of every stored observation is recorded first (categorical logits, or the
  Gaussian mean and log-std); then ``e_aux`` epochs minimise, on the policy network,
  ``aux_value_loss + beta_clone * KL(pi_old || pi_new)`` -- the auxiliary value head distils the value
  targets into the policy's features while the KL over *full* distributions (:func:`behavioral_cloning_kl`)
  keeps the policy where it was -- and train the value network further on the same targets. Then the
  store is cleared.

The networks are *detached* (the paper's recommended architecture): a policy network (trunk, action head,
auxiliary value head, and a state-independent log-std for continuous actions) and a separate value
network. The value network has one Adam optimizer; the policy network has two, one per phase (see
``_init_learn`` for why). Discrete actions use a categorical distribution over logits; continuous ones a
diagonal Gaussian whose *unclipped* sample is stored as ``action`` (log-probabilities are computed on
it) while the environment receives ``env_action``, the sample clipped to the action bounds. Their maths
(log-probabilities, entropies, sampling, KL) is :mod:`rlearn.rl.heads`; the optimizers are
:func:`rlearn.optim.make_adam` stepped through :class:`rlearn.optim.AdamStep`.

Every policy iteration reports ``policy_loss``, ``value_loss``, ``entropy``, ``approx_kl``, ``clipfrac``,
``explained_variance`` and ``cur_lr``; only iterations that run an auxiliary phase add
``aux_value_loss``, ``behavioral_cloning_loss`` and ``auxiliary_loss``. These are *irregular metrics*:
give the learner a monitor window of at least ``n_pi`` iterations, or the auxiliary losses are missing
from most windows (see ``docs/ppg.md``).

This module is longer than rlearn's usual ~400 lines on purpose: a policy is one file a reader follows top to
bottom (docs/write-your-own-policy.md); its shared parts live under ``rlearn/`` (``rlearn.rl``...).
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence, Tuple

import numpy as np
import torch
from torch import nn

from policies.base import Policy, PolicyConfigError
from rlearn.optim import AdamStep, clip_grad_norm_, make_adam
from rlearn.rl.advantages import compute_gae, explained_variance
from rlearn.rl.heads import (
    categorical_kl, categorical_log_prob_entropy, gaussian_kl, gaussian_log_prob_entropy, sample_gaussian,
)
from rlearn.rl.policy_io import action_spec, sample_categorical
from rlearn.rl.rollout import check_rollout
from rlearn.trace import span

# ----------------------------------------------------------------------------------------------- math


def behavioral_cloning_kl(old_params: torch.Tensor, new_params: torch.Tensor, discrete: bool) -> torch.Tensor:
    """``KL(pi_old || pi_new)`` per sample between two full action distributions.

    Discrete: ``params`` are categorical logits ``[B, n]`` and the KL is
    ``sum_a p_old(a) * (log p_old(a) - log p_new(a))`` on log-softmax values (:func:`categorical_kl`).
    Those are finite for finite logits, and a probability that underflows to 0 multiplies a finite
    difference, so the result is finite by construction (``torch.distributions.kl_divergence`` instead
    returns ``inf`` as soon as one new probability underflows to exactly 0 in float32).

    Continuous: ``params`` are ``[mean, log_std]`` concatenated ``[B, 2 * act_dim]``; the closed-form
    Gaussian KL (:func:`gaussian_kl`, finite since ``std = exp(log_std) > 0``), summed over action dimensions.
    """
    if discrete:
        return categorical_kl(old_params, new_params)
    old_mean, old_log_std = old_params.chunk(2, dim=-1)
    new_mean, new_log_std = new_params.chunk(2, dim=-1)
    return gaussian_kl(old_mean, old_log_std, new_mean, new_log_std)


# ------------------------------------------------------------------------------------------- networks


def mlp(in_dim: int, hidden_sizes: Sequence[int], activation: str) -> Tuple[nn.Sequential, int]:
    """A stack of ``Linear + activation`` layers (orthogonal init, gain sqrt(2)); returns it and its width."""
    act_cls = {"tanh": nn.Tanh, "relu": nn.ReLU}[activation]
    layers: List[nn.Module] = []
    for size in hidden_sizes:
        layers += [_orthogonal(nn.Linear(in_dim, size), np.sqrt(2)), act_cls()]
        in_dim = size
    return nn.Sequential(*layers), in_dim


def _orthogonal(layer: nn.Linear, gain: float) -> nn.Linear:
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


class PolicyNetwork(nn.Module):
    """Policy trunk with two heads: action-distribution parameters and the auxiliary value.

    ``forward(obs) -> (dist_params, aux_value)``: ``dist_params`` are logits ``[B, n]`` for discrete
    actions, ``[mean, log_std]`` concatenated ``[B, 2 * act_dim]`` for continuous ones (the log-std is
    one learned vector shared by every state).
    """

    def __init__(
        self, obs_dim: int, n_outputs: int, hidden_sizes: Sequence[int], activation: str,
        continuous: bool, init_log_std: float,
    ) -> None:
        super().__init__()
        self.trunk, width = mlp(obs_dim, hidden_sizes, activation)
        self.action_head = _orthogonal(nn.Linear(width, n_outputs), 0.01)
        self.aux_value_head = _orthogonal(nn.Linear(width, 1), 1.0)
        self.log_std = nn.Parameter(torch.full((n_outputs,), float(init_log_std))) if continuous else None

    def forward(self, obs: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        features = self.trunk(obs)
        params = self.action_head(features)
        if self.log_std is not None:
            params = torch.cat([params, self.log_std.expand_as(params)], dim=-1)
        return params, self.aux_value_head(features).squeeze(-1)


class ValueNetwork(nn.Module):
    """The separate value network ``V(obs) -> [B]``."""

    def __init__(self, obs_dim: int, hidden_sizes: Sequence[int], activation: str) -> None:
        super().__init__()
        self.trunk, width = mlp(obs_dim, hidden_sizes, activation)
        self.head = _orthogonal(nn.Linear(width, 1), 1.0)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.head(self.trunk(obs)).squeeze(-1)


# --------------------------------------------------------------------------------------------- policy



class PPGPolicy(Policy):
    """Phasic Policy Gradient for ``Discrete`` and ``Box`` action spaces (see the module docstring).

    Config keys (``policy`` section of a run config; defaults in :attr:`default_config`):

    * rollout and returns: ``rollout_steps`` (steps per environment per iteration), ``gamma``,
      ``gae_lambda``, ``reward_scale`` (rewards are multiplied by it before GAE);
    * policy phase: ``e_policy`` epochs on minibatches of ``minibatch_size``, ``clip_ratio`` (scaled
      like the learning rate if ``clip_follows_lr``), ``entropy_coef``, ``max_grad_norm``; value phase:
      ``e_value`` epochs;
    * auxiliary phase: every ``n_pi`` iterations, ``e_aux`` epochs on minibatches of
      ``aux_minibatch_size``, behavioural-cloning weight ``beta_clone``;
    * networks: ``hidden_sizes``, ``activation`` (``"tanh"`` or ``"relu"``), ``init_log_std``
      (continuous actions);
    * optimisation: ``lr``, the initial learning rate of the three Adam optimizers (``policy`` for the
      PPO epochs, ``value`` for the value network, ``aux`` for the policy network in the auxiliary
      phase). To decay it, add an ``LRSchedulerHook`` to the learner (the bundled CartPole config decays
      it linearly); ``cur_lr`` reports the policy optimizer's rate in effect for the iteration.
    """

    on_policy = True
    default_config: Dict[str, Any] = dict(
        rollout_steps=32,
        gamma=0.98,
        gae_lambda=0.8,
        reward_scale=1.0,
        e_policy=10,  # the bundled configs document tuned values
        minibatch_size=256,
        clip_ratio=0.2,
        clip_follows_lr=False,
        entropy_coef=0.0,
        max_grad_norm=0.5,
        e_value=10,
        n_pi=16,
        e_aux=2,
        aux_minibatch_size=512,
        beta_clone=1.0,
        hidden_sizes=[64, 64],
        activation="tanh",
        init_log_std=0.0,
        lr=1e-3,
    )

    # ------------------------------------------------------------------------------------ setup
    def _init_learn(self) -> None:
        cfg = self.cfg
        self._check_config(cfg)
        obs_dim, spec = action_spec(self.observation_space, self.action_space, "PPGPolicy")
        self.discrete, n_outputs, self._low, self._high = spec.discrete, spec.n_outputs, spec.low, spec.high

        # Initialise the networks from the policy's seed without touching torch's global RNG.
        with torch.random.fork_rng(devices=[]):
            if self.seed is not None:
                torch.manual_seed(self.seed)
            self.policy_net = PolicyNetwork(
                obs_dim, n_outputs, cfg["hidden_sizes"], cfg["activation"], not self.discrete, cfg["init_log_std"]
            ).to(self.device)
            self.value_net = ValueNetwork(obs_dim, cfg["hidden_sizes"], cfg["activation"]).to(self.device)
        # Fused Adam where the running torch has the kernel for the device (make_adam); AdamStep calls that kernel
        # without optimizer.step()'s per-call Python, and calls step() itself wherever that could differ.
        self.policy_optimizer = make_adam(self.policy_net.parameters(), cfg["lr"], self.device, eps=1e-5)
        self.value_optimizer = make_adam(self.value_net.parameters(), cfg["lr"], self.device, eps=1e-5)
        # The auxiliary phase has its own Adam on the policy network: its losses are on the scale of the
        # returns, the policy phase's on the scale of normalised advantages. A shared Adam would carry the
        # aux phase's second moments into the policy phase (tiny PPO steps) and vice versa (huge aux steps).
        self.aux_optimizer = make_adam(self.policy_net.parameters(), cfg["lr"], self.device, eps=1e-5)
        self._policy_params = list(self.policy_net.parameters())
        self._value_params = list(self.value_net.parameters())
        self._policy_step, self._value_step, self._aux_step = (
            AdamStep(opt) for opt in (self.policy_optimizer, self.value_optimizer, self.aux_optimizer))

        self.policy_iterations = 0  # completed policy phases
        self._aux_obs: List[torch.Tensor] = []  # one [T*N, obs_dim] tensor per policy iteration
        self._aux_targets: List[torch.Tensor] = []  # one [T*N] tensor of value targets per iteration

    @staticmethod
    def _check_config(cfg: Mapping[str, Any]) -> None:
        def bad(key: str, requirement: str) -> PolicyConfigError:
            return PolicyConfigError(f"PPGPolicy: policy.{key} must be {requirement}, got {cfg[key]!r}")

        for key in ("rollout_steps", "minibatch_size", "n_pi", "aux_minibatch_size", "e_aux"):
            if isinstance(cfg[key], bool) or not isinstance(cfg[key], int) or cfg[key] < 1:
                raise bad(key, "an integer >= 1")
        for key in ("e_policy", "e_value"):
            if isinstance(cfg[key], bool) or not isinstance(cfg[key], int) or cfg[key] < 0:
                raise bad(key, "an integer >= 0")
        for key in ("gamma", "gae_lambda"):
            if not 0.0 <= float(cfg[key]) <= 1.0:
                raise bad(key, "in [0, 1]")
        for key in ("clip_ratio", "max_grad_norm", "reward_scale"):
            if not float(cfg[key]) > 0.0:
                raise bad(key, "> 0")
        for key in ("entropy_coef", "beta_clone", "lr"):
            if not float(cfg[key]) >= 0.0:
                raise bad(key, ">= 0")
        if not isinstance(cfg["clip_follows_lr"], bool):
            raise bad("clip_follows_lr", "True or False")
        if cfg["activation"] not in ("tanh", "relu"):
            raise bad("activation", "'tanh' or 'relu'")
        sizes = cfg["hidden_sizes"]
        if not isinstance(sizes, (list, tuple)) or not all(isinstance(s, int) and s >= 1 for s in sizes):
            raise bad("hidden_sizes", "a list of integers >= 1")

    def modules(self) -> Dict[str, nn.Module]:
        return {"policy_net": self.policy_net, "value_net": self.value_net}

    def optimizers(self) -> Dict[str, torch.optim.Optimizer]:
        return {"policy": self.policy_optimizer, "value": self.value_optimizer, "aux": self.aux_optimizer}

    def _log_prob_entropy(self, params: torch.Tensor, action: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """``(log pi(action), entropy)`` of the action distribution with parameters ``params`` (both ``[B]``)."""
        if self.discrete:
            return categorical_log_prob_entropy(params, action)
        mean, log_std = params.chunk(2, dim=-1)
        return gaussian_log_prob_entropy(mean, log_std, action)

    def _obs_tensor(self, obs: Any) -> torch.Tensor:
        return torch.as_tensor(np.asarray(obs), dtype=torch.float32, device=self.device)

    # ---------------------------------------------------------------------------------- collect
    def _forward_collect(self, obs: np.ndarray, envstep: int) -> Dict[str, np.ndarray]:
        """Sample actions for ``obs [N, obs_dim]``; returns ``action`` (+ ``env_action`` for continuous
        spaces), and the behaviour policy's ``log_prob`` and ``value`` that the policy phase needs.

        Sampling noise comes from the policy's own ``np_random`` (seeded, saved in checkpoints).
        """
        obs_t = self._obs_tensor(obs)
        with torch.inference_mode():
            params, _ = self.policy_net(obs_t)
            value = self.value_net(obs_t)
            if self.discrete:  # inverse-CDF sampling with the policy's own generator
                action, log_prob = sample_categorical(params, self.np_random)
                columns = [log_prob.unsqueeze(-1), value.unsqueeze(-1)]
            else:
                mean, log_std = params.chunk(2, dim=-1)
                action_t = sample_gaussian(mean, log_std, self.np_random)
                log_prob, _ = gaussian_log_prob_entropy(mean, log_std, action_t)
                columns = [log_prob.unsqueeze(-1), value.unsqueeze(-1), action_t]
            host = torch.cat(columns, dim=-1).float().cpu().numpy()  # one device-to-host copy per step
        out = {"log_prob": host[:, 0].copy(), "value": host[:, 1].copy()}
        if self.discrete:
            out["action"] = action.astype(np.int64)
        else:
            out["action"] = host[:, 2:].copy()
            out["env_action"] = np.clip(out["action"], self._low, self._high)
        return out

    # ------------------------------------------------------------------------------------- eval
    def _forward_eval(self, obs: np.ndarray) -> np.ndarray:
        """Greedy actions: the most likely class, or the Gaussian mean clipped to the bounds."""
        with torch.inference_mode():
            params, _ = self.policy_net(self._obs_tensor(obs))
        if self.discrete:
            return params.argmax(dim=-1).cpu().numpy().astype(np.int64)
        mean = params.chunk(2, dim=-1)[0].cpu().numpy().astype(np.float32)
        return np.clip(mean, self._low, self._high)

    # ------------------------------------------------------------------------------------ learn
    def _monitor_vars_learn(self) -> List[str]:
        return [
            "policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac", "explained_variance", "cur_lr",
            "aux_value_loss", "behavioral_cloning_loss", "auxiliary_loss",
        ]

    def _monitor_periods_learn(self) -> Dict[str, int]:
        return dict.fromkeys(("aux_value_loss", "behavioral_cloning_loss", "auxiliary_loss"), self.cfg["n_pi"])

    def _forward_learn(self, data: Mapping[str, Any]) -> Dict[str, float]:
        """One policy iteration on a rollout of ``[T, N, ...]`` tensors, plus the auxiliary phase every
        ``n_pi``-th call. Returns the info dict described in the module docstring."""
        rollout = self._check_rollout(data)
        T, N = rollout["reward"].shape
        cur_lr = self.policy_optimizer.param_groups[0]["lr"]  # as set by the learner's LR scheduler, if any

        # 1. advantages and value targets with the networks that collected the rollout
        with torch.no_grad():
            next_value = self.value_net(rollout["next_obs"].flatten(0, 1)).view(T, N)
            advantages, targets = compute_gae(
                rollout["reward"] * self.cfg["reward_scale"], rollout["value"], next_value,
                rollout["terminated"], rollout["truncated"], self.cfg["gamma"], self.cfg["gae_lambda"],
            )
        batch = {
            "obs": rollout["obs"].flatten(0, 1),
            "action": rollout["action"].flatten(0, 1),
            "log_prob": rollout["log_prob"].flatten(0, 1),
            "advantage": advantages.flatten(),
            "target": targets.flatten(),
        }
        info = {"explained_variance": explained_variance(rollout["value"].flatten(), batch["target"])}

        # 2.-3. policy phase: PPO epochs on the policy network, then value-network epochs
        info.update(self._policy_epochs(batch))
        info["value_loss"] = self._value_epochs(batch["obs"], batch["target"], self.cfg["e_value"])
        info["cur_lr"] = cur_lr

        # 4. keep what the auxiliary phase needs; run it every n_pi policy iterations
        self._aux_obs.append(batch["obs"])
        self._aux_targets.append(batch["target"])
        self.policy_iterations += 1
        if self.policy_iterations % self.cfg["n_pi"] == 0:
            with span("ppg/auxiliary_phase", lane="learner"):
                info.update(self._auxiliary_phase())
        return info

    def _check_rollout(self, data: Mapping[str, Any]) -> Dict[str, torch.Tensor]:
        """The rollout as float32 tensors on the device (int64 discrete actions), checked (:func:`check_rollout`)."""
        return check_rollout(data, "PPGPolicy", self.device, self.discrete)

    def _minibatches(self, size: int, minibatch_size: int) -> Sequence[torch.Tensor]:
        """A fresh random split of ``range(size)`` into minibatches (the last one may be smaller): index
        tensors on the policy's device, from one host-to-device copy of the permutation per epoch."""
        order = torch.as_tensor(self.np_random.permutation(size), device=self.device)
        return order.split(minibatch_size)

    def _step(self, loss: torch.Tensor, params: List[nn.Parameter], adam: AdamStep) -> None:
        """Backward, clip the gradient norm of ``params`` and take one Adam step."""
        with span("learner/backward", lane="learner"):
            adam.zero_grad()  # .grad = None, as optimizer.zero_grad() does
            loss.backward()
            clip_grad_norm_(params, self.cfg["max_grad_norm"])  # torch's clip, bit for bit
        with span("learner/optimizer_step", lane="learner"):
            adam.step()

    def _clip_ratio(self) -> float:
        """This iteration's PPO clip range: ``clip_ratio``, scaled by ``current lr / lr`` when
        ``clip_follows_lr`` (so a linear lr decay decays the clip range too, like rl-zoo's ``lin_0.2``)."""
        clip = float(self.cfg["clip_ratio"])
        if self.cfg["clip_follows_lr"] and self.cfg["lr"] > 0:
            clip *= self.policy_optimizer.param_groups[0]["lr"] / self.cfg["lr"]
        return clip

    def _policy_epochs(self, batch: Mapping[str, torch.Tensor]) -> Dict[str, float]:
        """``e_policy`` epochs of the clipped PPO objective; returns minibatch means of the statistics."""
        clip = self._clip_ratio()
        stats: List[torch.Tensor] = []
        for _ in range(self.cfg["e_policy"]):
            for idx_t in self._minibatches(len(batch["obs"]), self.cfg["minibatch_size"]):
                with span("learner/forward", lane="learner"):
                    params, _ = self.policy_net(batch["obs"][idx_t])
                    log_prob, entropy = self._log_prob_entropy(params, batch["action"][idx_t])
                    log_ratio = log_prob - batch["log_prob"][idx_t]
                    ratio = log_ratio.exp()
                    adv = batch["advantage"][idx_t]
                    if len(adv) > 1:
                        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                    policy_loss = -torch.min(ratio * adv, ratio.clamp(1.0 - clip, 1.0 + clip) * adv).mean()
                    entropy = entropy.mean()
                    loss = policy_loss - self.cfg["entropy_coef"] * entropy
                self._step(loss, self._policy_params, self._policy_step)
                with torch.no_grad():
                    approx_kl = ((ratio - 1.0) - log_ratio).mean()  # unbiased, non-negative KL estimator
                    clipfrac = ((ratio - 1.0).abs() > clip).float().mean()
                stats.append(torch.stack([policy_loss.detach(), entropy.detach(), approx_kl, clipfrac]))
        if not stats:  # e_policy == 0: the policy network is not trained this iteration
            return {}
        means = torch.stack(stats).mean(0).tolist()
        return dict(zip(("policy_loss", "entropy", "approx_kl", "clipfrac"), means))

    def _value_epochs(self, obs: torch.Tensor, target: torch.Tensor, epochs: int) -> float:
        """``epochs`` epochs of value regression ``0.5 * (V(obs) - target)^2``; returns the mean loss."""
        losses: List[torch.Tensor] = []
        for _ in range(epochs):
            for idx_t in self._minibatches(len(obs), self.cfg["minibatch_size"]):
                with span("learner/forward", lane="learner"):
                    loss = 0.5 * (self.value_net(obs[idx_t]) - target[idx_t]).pow(2).mean()
                self._step(loss, self._value_params, self._value_step)
                losses.append(loss.detach())
        if not losses:  # e_value == 0: report the loss of the untouched value network
            with torch.no_grad():
                return (0.5 * (self.value_net(obs) - target).pow(2).mean()).item()
        return torch.stack(losses).mean().item()

    def _auxiliary_phase(self) -> Dict[str, float]:
        """``e_aux`` epochs of auxiliary value distillation + behavioural cloning over every stored
        observation, plus value-network training on the same targets; then clears the store."""
        obs = torch.cat(self._aux_obs)
        targets = torch.cat(self._aux_targets)
        with torch.no_grad():  # pi_old: the full distribution of every stored observation, before the phase
            old_params = torch.cat([self.policy_net(chunk)[0] for chunk in obs.split(4096)])
        beta = self.cfg["beta_clone"]
        stats: List[torch.Tensor] = []
        for _ in range(self.cfg["e_aux"]):
            for idx_t in self._minibatches(len(obs), self.cfg["aux_minibatch_size"]):
                with span("learner/forward", lane="learner"):
                    params, aux_value = self.policy_net(obs[idx_t])
                    aux_value_loss = 0.5 * (aux_value - targets[idx_t]).pow(2).mean()
                    bc_loss = behavioral_cloning_kl(old_params[idx_t], params, self.discrete).mean()
                    auxiliary_loss = aux_value_loss + beta * bc_loss
                self._step(auxiliary_loss, self._policy_params, self._aux_step)
                with span("learner/forward", lane="learner"):
                    value_loss = 0.5 * (self.value_net(obs[idx_t]) - targets[idx_t]).pow(2).mean()
                self._step(value_loss, self._value_params, self._value_step)
                stats.append(torch.stack([aux_value_loss.detach(), bc_loss.detach(), auxiliary_loss.detach()]))
        self._aux_obs.clear()
        self._aux_targets.clear()
        means = torch.stack(stats).mean(0).tolist()
        return dict(zip(("aux_value_loss", "behavioral_cloning_loss", "auxiliary_loss"), means))

    # ------------------------------------------------------------------------------------ state
    def extra_state(self) -> Dict[str, Any]:
        """The iteration counter and the auxiliary store, so a run resumed mid-cycle is exact."""
        return {
            "policy_iterations": self.policy_iterations,
            "aux_obs": [t.cpu() for t in self._aux_obs],
            "aux_targets": [t.cpu() for t in self._aux_targets],
        }

    def load_extra_state(self, state: Mapping[str, Any]) -> None:
        missing = [k for k in ("policy_iterations", "aux_obs", "aux_targets") if k not in state]
        if missing:
            raise KeyError(f"PPGPolicy: checkpoint extra state is missing {missing}")
        if len(state["aux_obs"]) != len(state["aux_targets"]):
            raise ValueError("PPGPolicy: checkpoint aux store has different numbers of obs and target rollouts")
        self.policy_iterations = int(state["policy_iterations"])
        self._aux_obs = [torch.as_tensor(t).to(self.device) for t in state["aux_obs"]]
        self._aux_targets = [torch.as_tensor(t).to(self.device) for t in state["aux_targets"]]

    @property
    def aux_store_size(self) -> int:
        """Number of rollouts waiting for the next auxiliary phase (0 right after one)."""
        return len(self._aux_obs)
