"""Phasic Policy Gradient (PPG): Cobbe, Hilton, Klimov and Schulman, 2020, https://arxiv.org/abs/2009.04416

PPO with the policy and the value function trained in separate phases, on detached networks (a policy
network with an auxiliary value head, and a value network):

* policy phase, every train iteration on a rollout ``[T, N]``: GAE(lambda) advantages and value targets,
  ``e_policy`` epochs of the clipped PPO objective plus an entropy bonus, ``e_value`` epochs of value
  regression; the observations and value targets are kept for the auxiliary phase;
* auxiliary phase, every ``n_pi`` iterations: ``e_aux`` epochs of ``aux_value_loss + beta_clone *
  KL(pi_old || pi_new)`` on the policy network (:func:`behavioral_cloning_kl`) and of value regression on
  the value network, over every kept observation; then the store is cleared.

The auxiliary losses are reported once per ``n_pi`` iterations: give the learner a monitor window of at least
``n_pi`` (docs/ppg.md). What PPG shares with PPO is :class:`policies.actor_critic.OnPolicyActorCritic`.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import torch
from torch import nn

from policies.actor_critic import OnPolicyActorCritic
from policies.ppo import clipped_surrogate_loss, normalize
from rlearn.config import option
from rlearn.nn import MLP
from rlearn.optim import make_adam
from rlearn.registry import register_policy
from rlearn.rl.advantages import explained_variance
from rlearn.rl.heads import categorical_kl, categorical_log_prob_entropy, gaussian_kl, gaussian_log_prob_entropy
from rlearn.rl.means import StepMeans
from rlearn.trace import span


def behavioral_cloning_kl(old_params: torch.Tensor, new_params: torch.Tensor, discrete: bool) -> torch.Tensor:
    """``KL(pi_old || pi_new)`` per sample between two action distributions: categorical logits ``[B, n]`` or
    ``[mean, log_std]`` concatenated ``[B, 2 * act_dim]``."""
    if discrete:
        return categorical_kl(old_params, new_params)
    old_mean, old_log_std = old_params.chunk(2, dim=-1)
    new_mean, new_log_std = new_params.chunk(2, dim=-1)
    return gaussian_kl(old_mean, old_log_std, new_mean, new_log_std)


class PolicyNetwork(nn.Module):
    """Policy trunk with two heads, ``forward(obs) -> (dist_params, aux_value)``: logits ``[B, n]``, or ``[mean,
    log_std]`` concatenated ``[B, 2 * act_dim]`` (one learned log-std for every state). Orthogonal initialisation
    as in the PPO reference code: gain sqrt(2) in the trunk, 0.01 for the action head, 1 for the value head.
    """

    def __init__(self, obs_dim: int, n_outputs: int, hidden_sizes: Sequence[int], activation: str,
                 continuous: bool, init_log_std: float) -> None:
        super().__init__()
        width = hidden_sizes[-1]
        self.trunk = MLP([obs_dim, *hidden_sizes], activation, output_activation=activation, init="orthogonal",
                         output_gain=math.sqrt(2.0))
        self.action_head = MLP([width, n_outputs], init="orthogonal", output_gain=0.01)
        self.aux_value_head = MLP([width, 1], init="orthogonal", output_gain=1.0)
        self.log_std = nn.Parameter(torch.full((n_outputs,), float(init_log_std))) if continuous else None

    def forward(self, obs: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        features = self.trunk(obs)
        params = self.action_head(features)
        if self.log_std is not None:
            params = torch.cat([params, self.log_std.expand_as(params)], dim=-1)
        return params, self.aux_value_head(features).squeeze(-1)


class ValueNetwork(MLP):
    """The separate value network ``V(obs) -> [B]`` (orthogonal initialisation, output gain 1)."""

    def __init__(self, obs_dim: int, hidden_sizes: Sequence[int], activation: str) -> None:
        super().__init__([obs_dim, *hidden_sizes, 1], activation, init="orthogonal", output_gain=1.0)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return super().forward(obs).squeeze(-1)



@register_policy("ppg")
class PPGPolicy(OnPolicyActorCritic):
    """Phasic Policy Gradient for ``Discrete`` and ``Box`` action spaces (see the module docstring), with three
    Adam optimizers: ``policy`` (PPO epochs), ``value`` (value network) and ``aux`` (auxiliary phase)."""

    class Config(OnPolicyActorCritic.Config):
        """PPG's keys (the bundled configs document tuned values)"""

        rollout_steps: int = option(32, "steps per environment per iteration", ge=1)
        gamma: float = option(0.98, "discount", ge=0, le=1)
        gae_lambda: float = option(0.8, "GAE's lambda", ge=0, le=1)
        e_policy: int = option(10, "PPO epochs on the policy network per iteration", ge=0)
        minibatch_size: int = option(256, "transitions per gradient step of the policy phase", ge=1)
        e_value: int = option(10, "value-network epochs per iteration", ge=0)
        n_pi: int = option(16, "policy iterations per auxiliary phase", ge=1)
        e_aux: int = option(2, "auxiliary epochs over the stored rollouts", ge=1)
        aux_minibatch_size: int = option(512, "observations per gradient step of the auxiliary phase", ge=1)
        beta_clone: float = option(1.0, "weight of the behavioural-cloning KL in the auxiliary loss", ge=0, finite=True)
        lr: float = option(1e-3, "initial learning rate of the three Adam optimizers", ge=0, finite=True)

    def _init_learn(self) -> None:
        cfg = self.cfg
        obs_dim, n_outputs = self._init_spaces()
        policy_net = MLP.parameter_count([obs_dim, *cfg["hidden_sizes"], n_outputs + 1]) + n_outputs
        value_net = MLP.parameter_count([obs_dim, *cfg["hidden_sizes"], 1])
        self.check_network_memory(trained=2 * policy_net + value_net)  # the policy network has two Adams
        with self.seeded_init():
            self.policy_net = PolicyNetwork(
                obs_dim, n_outputs, cfg["hidden_sizes"], cfg["activation"], not self.discrete, cfg["init_log_std"]
            ).to(self.device)
            self.value_net = ValueNetwork(obs_dim, cfg["hidden_sizes"], cfg["activation"]).to(self.device)
        self.policy_optimizer = make_adam(self.policy_net.parameters(), cfg["lr"], self.device, eps=1e-5)
        self.value_optimizer = make_adam(self.value_net.parameters(), cfg["lr"], self.device, eps=1e-5)
        # The auxiliary phase has its own Adam on the policy network: its losses are on the scale of the
        # returns, the policy phase's on the scale of normalised advantages. A shared Adam would carry the
        # aux phase's second moments into the policy phase (tiny PPO steps) and vice versa (huge aux steps).
        self.aux_optimizer = make_adam(self.policy_net.parameters(), cfg["lr"], self.device, eps=1e-5)

        self.policy_iterations = 0  # completed policy phases
        self._aux_obs: List[torch.Tensor] = []  # one [T*N, obs_dim] tensor per policy iteration
        self._aux_targets: List[torch.Tensor] = []  # one [T*N] tensor of value targets per iteration

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

    def _distribution(self, obs: torch.Tensor, with_value: bool = True
                      ) -> Tuple[torch.Tensor, Optional[torch.Tensor], Optional[torch.Tensor]]:
        """``(logits or mean, log_std or None, V(obs) or None)`` from the policy and value networks."""
        params, _ = self.policy_net(obs)
        mean, log_std = (params, None) if self.discrete else params.chunk(2, dim=-1)
        return mean, log_std, self.value_net(obs) if with_value else None

    def _monitor_vars_learn(self) -> List[str]:
        return [
            "policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac", "explained_variance", "cur_lr",
            "aux_value_loss", "behavioral_cloning_loss", "auxiliary_loss",
        ]

    def _monitor_periods_learn(self) -> Dict[str, int]:
        return dict.fromkeys(("aux_value_loss", "behavioral_cloning_loss", "auxiliary_loss"), self.cfg["n_pi"])

    def _forward_learn(self, data: Mapping[str, Any]) -> Dict[str, Any]:
        """One policy iteration on a rollout of ``[T, N, ...]`` tensors, plus the auxiliary phase every
        ``n_pi``-th call."""
        cur_lr = self.policy_optimizer.param_groups[0]["lr"]  # as set by the learner's LR scheduler, if any

        # 1. advantages and value targets with the networks that collected the rollout
        batch = self._advantage_batch(data, self.value_net)
        info: Dict[str, Any] = {"explained_variance": explained_variance(batch["value"], batch["target"])}

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

    def _policy_epochs(self, batch: Mapping[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """``e_policy`` epochs of the clipped PPO objective; returns minibatch means of the statistics (none
        for ``e_policy = 0``: the policy network is not trained)."""
        clip = self._clip_ratio()
        steps = StepMeans()
        for _ in range(self.cfg["e_policy"]):
            for idx_t in self._minibatch_indices(len(batch["obs"]), self.cfg["minibatch_size"]):
                with span("learner/forward", lane="learner"):
                    params, _ = self.policy_net(batch["obs"][idx_t])
                    log_prob, entropy = self._log_prob_entropy(params, batch["action"][idx_t])
                    advantage = normalize(batch["advantage"][idx_t])
                    policy_loss, approx_kl, clipfrac = clipped_surrogate_loss(
                        log_prob, batch["log_prob"][idx_t], advantage, clip)
                    entropy = entropy.mean()
                    loss = policy_loss - self.cfg["entropy_coef"] * entropy
                self.optimize(loss, self.policy_optimizer, max_grad_norm=self.cfg["max_grad_norm"])
                steps.add(policy_loss=policy_loss, entropy=entropy, approx_kl=approx_kl, clipfrac=clipfrac)
        return steps.means()

    def _value_epochs(self, obs: torch.Tensor, target: torch.Tensor, epochs: int) -> torch.Tensor:
        """``epochs`` epochs of value regression ``0.5 * (V(obs) - target)^2``; returns the mean loss."""
        losses: List[torch.Tensor] = []
        for _ in range(epochs):
            for idx_t in self._minibatch_indices(len(obs), self.cfg["minibatch_size"]):
                with span("learner/forward", lane="learner"):
                    loss = 0.5 * (self.value_net(obs[idx_t]) - target[idx_t]).pow(2).mean()
                self.optimize(loss, self.value_optimizer, max_grad_norm=self.cfg["max_grad_norm"])
                losses.append(loss.detach())
        if not losses:  # e_value == 0: report the loss of the untouched value network
            with torch.no_grad():
                return 0.5 * (self.value_net(obs) - target).pow(2).mean()
        return torch.stack(losses).mean()

    def _auxiliary_phase(self) -> Dict[str, torch.Tensor]:
        """``e_aux`` epochs of auxiliary value distillation + behavioural cloning over every stored
        observation, plus value-network training on the same targets; then clears the store."""
        obs = torch.cat(self._aux_obs)
        targets = torch.cat(self._aux_targets)
        with torch.no_grad():  # pi_old: the full distribution of every stored observation, before the phase
            old_params = torch.cat([self.policy_net(chunk)[0] for chunk in obs.split(4096)])
        beta = self.cfg["beta_clone"]
        steps = StepMeans()
        for _ in range(self.cfg["e_aux"]):
            for idx_t in self._minibatch_indices(len(obs), self.cfg["aux_minibatch_size"]):
                with span("learner/forward", lane="learner"):
                    params, aux_value = self.policy_net(obs[idx_t])
                    aux_value_loss = 0.5 * (aux_value - targets[idx_t]).pow(2).mean()
                    bc_loss = behavioral_cloning_kl(old_params[idx_t], params, self.discrete).mean()
                    auxiliary_loss = aux_value_loss + beta * bc_loss
                self.optimize(auxiliary_loss, self.aux_optimizer, max_grad_norm=self.cfg["max_grad_norm"])
                with span("learner/forward", lane="learner"):
                    value_loss = 0.5 * (self.value_net(obs[idx_t]) - targets[idx_t]).pow(2).mean()
                self.optimize(value_loss, self.value_optimizer, max_grad_norm=self.cfg["max_grad_norm"])
                steps.add(aux_value_loss=aux_value_loss, behavioral_cloning_loss=bc_loss, auxiliary_loss=auxiliary_loss)
        self._aux_obs.clear()
        self._aux_targets.clear()
        return steps.means()

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
