"""Helpers for tests/distributed/test_distributed.py: a probe policy and the body of a two-process gloo check.

:class:`ProbePolicy` is a tiny on-policy policy (registered as ``dist_probe``) whose reports make the
cross-rank reduction checkable with exact numbers:

* ``loss``: every iteration, on every rank;
* ``rank_value``: ``float(rank)`` every iteration (pooled over 2 ranks: exactly 0.5);
* ``only_rank0``: ``10 + n`` at iteration ``n``, on rank 0 only (its average must be rank 0's, never
  diluted by the silent rank);
* ``rank1_only``: ``100 + n`` on rank 1 at every third iteration (declared; rank 0 must not warn that it
  was never reported).

Environment variables make it do more in end-to-end runs: ``RLEARN_TEST_FAIL_AT=<rank>:<iteration>``
raises on that rank at that iteration; ``RLEARN_TEST_DUMP_DIR=<dir>`` saves its networks to
``<dir>/rank<r>.pt`` after every iteration (to compare ranks after training).
"""

from __future__ import annotations

import os
import traceback
import warnings
from pathlib import Path
from typing import Any, Dict, List

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from policies import Policy, register_policy
from rlearn.distributed import get_rank

FAIL_ENV = "RLEARN_TEST_FAIL_AT"
DUMP_ENV = "RLEARN_TEST_DUMP_DIR"


class InjectedFailure(RuntimeError):
    """Raised by ProbePolicy where RLEARN_TEST_FAIL_AT says."""


class ProbeNet(nn.Module):
    """Logits head plus an auxiliary head that only even iterations train (exercises unused parameters)."""

    def __init__(self, obs_dim: int, n_actions: int) -> None:
        super().__init__()
        self.body = nn.Linear(obs_dim, 8)
        self.logits = nn.Linear(8, n_actions)
        self.aux = nn.Linear(8, 1)

    def forward(self, obs: torch.Tensor) -> Any:
        features = torch.tanh(self.body(obs))
        return self.logits(features), self.aux(features).squeeze(-1)


@register_policy("dist_probe")
class ProbePolicy(Policy):
    """See the module docstring. Learns a REINFORCE-like loss on its rollouts with a Polyak target copy."""

    on_policy = True
    default_config: Dict[str, Any] = dict(rollout_steps=4, lr=0.01, tau=0.5)

    def _init_learn(self) -> None:
        obs_dim = int(np.prod(self.observation_space.shape))
        n_actions = int(self.action_space.n)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0 if self.seed is None else self.seed)
            self.net = ProbeNet(obs_dim, n_actions)
            self.net_target = ProbeNet(obs_dim, n_actions)
        self.net_target.requires_grad_(False)
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=self.cfg["lr"])
        self.iterations = 0

    def _monitor_vars_learn(self) -> List[str]:
        return ["loss", "rank_value", "only_rank0", "rank1_only"]

    def _forward_learn(self, data: Any) -> Dict[str, float]:
        self.iterations += 1
        n, rank = self.iterations, get_rank()
        fail_at = os.environ.get(FAIL_ENV)
        if fail_at and fail_at == f"{rank}:{n}":
            raise InjectedFailure(f"probe failure injected on rank {rank} at iteration {n}")
        obs = torch.as_tensor(data["obs"], dtype=torch.float32).flatten(0, 1)
        action = torch.as_tensor(data["action"]).long().flatten()
        reward = torch.as_tensor(data["reward"], dtype=torch.float32).flatten()
        logits, aux = self.net(obs)
        logp = torch.log_softmax(logits, -1).gather(1, action[:, None]).squeeze(1)
        loss = -(logp * (reward - reward.mean())).mean() + logits.pow(2).mean() * 1e-3
        if n % 2 == 0:
            loss = loss + (aux - reward).pow(2).mean()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        with torch.no_grad():
            for target, online in zip(self.net_target.parameters(), self.net.parameters()):
                target.lerp_(online, self.cfg["tau"])
        info = {"loss": loss.item(), "rank_value": float(rank)}
        if rank == 0:
            info["only_rank0"] = 10.0 + n
        if rank == 1 and n % 3 == 0:
            info["rank1_only"] = 100.0 + n
        self._dump()
        return info

    def teardown_distributed(self) -> bool:
        """Also records, in the dump directory, what the run's teardown found and left (net types, group)."""
        before = type(self.net).__name__
        undone = super().teardown_distributed()
        directory = os.environ.get(DUMP_ENV)
        if directory:
            import torch.distributed as tdist

            record = {"before": before, "after": type(self.net).__name__, "undone": undone,
                      "group_active": tdist.is_initialized()}
            torch.save(record, Path(directory) / f"teardown_rank{get_rank()}.pt")
        return undone

    def _dump(self) -> None:
        directory = os.environ.get(DUMP_ENV)
        if directory:
            state = {name: {k: v.clone() for k, v in m.state_dict().items()} for name, m in self.modules().items()}
            path = Path(directory) / f"rank{get_rank()}.pt"
            torch.save({"iterations": self.iterations, "modules": state}, path.with_suffix(".tmp"))
            os.replace(path.with_suffix(".tmp"), path)

    def _forward_collect(self, obs: np.ndarray, envstep: int) -> Dict[str, np.ndarray]:
        with torch.no_grad():
            logits, _ = self.net(torch.as_tensor(obs, dtype=torch.float32))
            probs = torch.softmax(logits, -1).numpy().astype(np.float64)
        u = self.np_random.random((len(obs), 1))
        action = (probs.cumsum(-1) < u).sum(-1).clip(max=probs.shape[1] - 1)
        return {"action": action.astype(np.int64)}

    def _forward_eval(self, obs: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            logits, _ = self.net(torch.as_tensor(obs, dtype=torch.float32))
        return logits.argmax(-1).numpy().astype(np.int64)

    def modules(self) -> Dict[str, nn.Module]:
        return {"net": self.net, "net_target": self.net_target}

    def optimizers(self) -> Dict[str, torch.optim.Optimizer]:
        return {"net": self.optimizer}

    def extra_state(self) -> Dict[str, Any]:
        return {"iterations": self.iterations}

    def load_extra_state(self, state: Dict[str, Any]) -> None:
        self.iterations = int(state.get("iterations", 0))


# --------------------------------------------------------------------------- regression reference
class Regression(Policy):
    """Linear regression with SGD, the gradient computed by ``backward()`` (``manual=False``, through
    DDP) or by ``torch.autograd.grad`` assigned to ``.grad`` (``manual=True``, invisible to DDP)."""

    default_config = dict(manual=False, lr=0.1)

    def _init_learn(self) -> None:
        torch.manual_seed(100 + (self.seed or 0))  # a different initialisation on every rank
        self.net = nn.Linear(3, 2)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=self.cfg["lr"])

    def _forward_learn(self, data: Any) -> Dict[str, float]:
        x, y = data
        loss = (self.net(x) - y).pow(2).mean()
        self.opt.zero_grad(set_to_none=True)
        if self.cfg["manual"]:
            params = list(self.net.parameters())
            for p, g in zip(params, torch.autograd.grad(loss, params)):
                p.grad = g
        else:
            loss.backward()
        self.opt.step()
        return {"loss": loss.item()}

    def _monitor_vars_learn(self) -> List[str]:
        return ["loss"]

    def _forward_collect(self, obs, envstep):
        raise NotImplementedError

    def _forward_eval(self, obs):
        raise NotImplementedError

    def modules(self) -> Dict[str, nn.Module]:
        return {"net": self.net}

    def optimizers(self) -> Dict[str, torch.optim.Optimizer]:
        return {"net": self.opt}


def regression_data(rank: int, step: int):
    g = torch.Generator().manual_seed(1000 * rank + step)
    x = torch.randn(5, 3, generator=g)
    return x, x @ torch.tensor([[1.0, -2.0], [0.5, 0.0], [3.0, 1.0]]) + 0.1 * rank


def regression_reference(init_state: Dict[str, torch.Tensor], steps: int, lr: float, world: int) -> Dict[str, torch.Tensor]:
    """Single-process SGD on the mean of the ranks' losses (what averaged gradients must reproduce)."""
    net = nn.Linear(3, 2)
    net.load_state_dict(init_state)
    opt = torch.optim.SGD(net.parameters(), lr=lr)
    for step in range(steps):
        opt.zero_grad()
        loss = sum((net(x) - y).pow(2).mean() for x, y in (regression_data(r, step) for r in range(world))) / world
        loss.backward()
        opt.step()
    return {k: v.detach().clone() for k, v in net.state_dict().items()}


# ------------------------------------------------------------------------------- the two-rank body
def flat_state(modules: Dict[str, nn.Module]) -> Dict[str, torch.Tensor]:
    return {f"{name}.{k}": v.detach().clone() for name, m in modules.items() for k, v in m.state_dict().items()}


def _probe_rollout(rank: int, n: int, T: int = 4, N: int = 2) -> Dict[str, np.ndarray]:
    rng = np.random.default_rng(1000 * rank + n)
    return {
        "obs": rng.normal(size=(T, N, 4)).astype(np.float32),
        "action": rng.integers(0, 2, size=(T, N)),
        "reward": rng.normal(size=(T, N)).astype(np.float32),
    }


def _check_regression(rank: int, world: int, manual: bool) -> Dict[str, Any]:
    policy = Regression({"manual": manual}, None, None, seed=rank)
    before = flat_state(policy.modules())
    policy.setup_distributed()
    init = {k: v.clone() for k, v in policy.modules()["net"].state_dict().items()}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for step in range(3):
            policy._forward_learn(regression_data(rank, step))
            with torch.no_grad():  # an evaluation-like pass on rank 0 only must not block anything
                if rank == 0:
                    policy.net(torch.zeros(1, 3))
    return {
        "before": before,
        "init": init,
        "after": flat_state(policy.modules()),
        "reference": regression_reference(init, 3, policy.cfg["lr"], world),
        "wrapped": type(policy.net).__name__,
        "modules_types": [type(m).__name__ for m in policy.modules().values()],
        "state_keys": sorted(policy.state_dict()["modules"]["net"]),
        "fallback_steps": policy._distributed.averager.fallback_steps,
        "warnings": [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)],
    }


def _check_teardown(rank: int) -> Dict[str, Any]:
    """setup_distributed, one averaged step, teardown_distributed, then steps on each rank's own data: after
    the teardown nothing is averaged (the ranks drift apart) and no collective runs (rank 1 alone takes an
    extra step: a collective would hang it)."""
    policy = Regression({"manual": False}, None, None, seed=rank)
    policy.setup_distributed()
    wrapper_type = type(policy.net).__name__
    policy._forward_learn(regression_data(rank, 0))
    averaged = flat_state(policy.modules())
    undone = [policy.teardown_distributed(), policy.teardown_distributed()]
    plain = policy.net
    for step in range(1, 3 + rank):
        policy._forward_learn(regression_data(rank, step))
    return {
        "wrapper_type": wrapper_type,
        "undone": undone,
        "net_type": type(plain).__name__,
        "distributed_state": getattr(policy, "_distributed", "missing"),
        "averaged": averaged,
        "after": flat_state(policy.modules()),
        "optimizer_hooks": len(policy.opt._optimizer_step_pre_hooks),
    }


def _check_td3(rank: int) -> Dict[str, Any]:
    """TD3 on different minibatches per rank. Its hand-written backward never runs the DDP wrappers' forward,
    so the gradient averager must average both networks before every step, warning once per network."""
    from policies.td3 import TD3Policy

    obs_space = spaces.Box(-1.0, 1.0, (3,), dtype=np.float32)
    act_space = spaces.Box(-2.0, 2.0, (1,), dtype=np.float32)
    policy = TD3Policy({"hidden_sizes": [16, 16], "learning_starts": 0, "batch_size": 8}, obs_space, act_space, seed=7 + rank)
    before = flat_state(policy.modules())
    policy.setup_distributed()
    init = flat_state(policy.modules())
    g = torch.Generator().manual_seed(50 + rank)
    infos = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(4):
            batch = {
                "obs": torch.rand(8, 3, generator=g) * 2 - 1,
                "action": torch.rand(8, 1, generator=g) * 2 - 1,
                "reward": torch.randn(8, generator=g),
                "next_obs": torch.rand(8, 3, generator=g) * 2 - 1,
                "terminated": (torch.rand(8, generator=g) < 0.2).float(),
            }
            infos.append({k: float(v) for k, v in policy._forward_learn(batch).items()})
            policy._forward_collect(np.zeros((2, 3), dtype=np.float32), envstep=10)
    return {"before": before, "init": init, "after": flat_state(policy.modules()),
            "keys": [sorted(info) for info in infos], "infos": infos,
            "wrapped": {name: type(getattr(policy, name)).__name__ for name in ("actor", "critic", "actor_target")},
            "fallback_steps": policy._distributed.averager.fallback_steps,
            # every Python warning of any category (DDP's C++ reducer notes go to stderr, not here)
            "warnings": [(w.category.__name__, str(w.message)) for w in caught]}


def _check_ppg(rank: int) -> Dict[str, Any]:
    from policies.ppg import PPGPolicy

    cfg = dict(rollout_steps=8, minibatch_size=8, aux_minibatch_size=16, e_policy=2, e_value=1, e_aux=1, n_pi=2,
               hidden_sizes=[16])
    policy = PPGPolicy(cfg, spaces.Box(-1.0, 1.0, (4,), dtype=np.float32), spaces.Discrete(2), seed=3 + rank)
    policy.setup_distributed()
    rng = np.random.default_rng(rank)
    infos = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):  # the second iteration runs the auxiliary phase
            obs = rng.uniform(-1, 1, size=(8, 2, 4)).astype(np.float32)
            collected = [policy._forward_collect(o, 0) for o in obs]
            rollout = {
                "obs": obs,
                "action": np.stack([c["action"] for c in collected]),
                "log_prob": np.stack([c["log_prob"] for c in collected]),
                "value": np.stack([c["value"] for c in collected]),
                "reward": rng.normal(size=(8, 2)).astype(np.float32),
                "next_obs": rng.uniform(-1, 1, size=(8, 2, 4)).astype(np.float32),
                "terminated": np.zeros((8, 2), np.float32),
                "truncated": np.zeros((8, 2), np.float32),
            }
            infos.append(sorted(policy._forward_learn(rollout)))
        policy._forward_eval(np.zeros((1, 4), dtype=np.float32))
    return {"after": flat_state(policy.modules()), "keys": infos,
            "fallback_steps": policy._distributed.averager.fallback_steps,
            "warnings": [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]}


def _check_ppo(rank: int, continuous: bool) -> Dict[str, Any]:
    """PPO with a target_kl on different data per rank: the ranks must stop at the same step (or DDP hangs)."""
    from policies.ppo import PPOPolicy

    cfg = dict(rollout_steps=8, minibatch_size=4, epochs=4, hidden_sizes=[16], target_kl=0.002, lr=3e-2)
    act_space = spaces.Box(-2.0, 2.0, (2,), dtype=np.float32) if continuous else spaces.Discrete(2)
    policy = PPOPolicy(cfg, spaces.Box(-1.0, 1.0, (4,), dtype=np.float32), act_space, seed=3 + rank)
    policy.setup_distributed()
    rng = np.random.default_rng(rank)
    infos = []
    for _ in range(2):
        obs = rng.uniform(-1, 1, size=(8, 2, 4)).astype(np.float32)
        collected = [policy._forward_collect(o, 0) for o in obs]
        rollout = {
            "obs": obs,
            "action": np.stack([c["action"] for c in collected]),
            "log_prob": np.stack([c["log_prob"] for c in collected]),
            "value": np.stack([c["value"] for c in collected]),
            "reward": rng.normal(size=(8, 2)).astype(np.float32) * (1 + 5 * rank),
            "next_obs": rng.uniform(-1, 1, size=(8, 2, 4)).astype(np.float32),
            "terminated": np.zeros((8, 2), np.float32),
            "truncated": np.zeros((8, 2), np.float32),
        }
        infos.append(policy._forward_learn(rollout).get("early_stop_epoch"))
    return {"after": flat_state(policy.modules()), "early_stop_epochs": infos}


def _check_learner(rank: int, world: int, work_dir: str) -> Dict[str, Any]:
    import logging

    from rlearn.hooks import LogShowHook
    from rlearn.learner import BaseLearner

    class Keep(logging.Handler):
        def __init__(self) -> None:
            super().__init__()
            self.messages: List[str] = []

        def emit(self, record: logging.LogRecord) -> None:
            self.messages.append(record.levelname + " " + record.getMessage())

    logger = logging.getLogger(f"rlearn.test.dist.rank{rank}")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    keep = Keep()
    logger.addHandler(keep)
    policy = ProbePolicy(None, spaces.Box(-1.0, 1.0, (4,), dtype=np.float32), spaces.Discrete(2), seed=rank)
    policy.setup_distributed()
    learner = BaseLearner(policy, dict(log_freq=5, monitor_window=5), work_dir=work_dir, logger=logger,
                          rank=rank, world_size=world)
    hook = LogShowHook(width=2000)
    learner.register_hook(hook)
    learner.call_hook("before_run")
    for n in range(1, 11):
        learner.train(_probe_rollout(rank, n), envstep=8 * world * n)
    learner.call_hook("after_run")
    tables = [m for m in keep.messages if m.startswith("INFO train_iter")]
    return {"after": flat_state(policy.modules()), "tables": tables, "messages": keep.messages}


def two_rank_checks(rank: int, world: int, port: int, work_dir: str) -> None:
    """Body of each spawned rank: join the group, run every check, save the results (or the traceback) to
    ``<work_dir>/results_rank<r>.pt``."""
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    torch.set_num_threads(1)
    from rlearn.distributed import init_distributed, shutdown

    results: Dict[str, Any] = {}
    try:
        assert init_distributed(timeout_s=60)
        results["backward"] = _check_regression(rank, world, manual=False)
        results["manual"] = _check_regression(rank, world, manual=True)
        results["td3"] = _check_td3(rank)
        results["ppg"] = _check_ppg(rank)
        results["ppo"] = _check_ppo(rank, continuous=False)
        results["ppo_continuous"] = _check_ppo(rank, continuous=True)
        results["learner"] = _check_learner(rank, world, work_dir)
        results["teardown"] = _check_teardown(rank)
    except BaseException:  # report instead of hanging the parent
        results["error"] = traceback.format_exc()
    finally:
        torch.save(results, Path(work_dir) / f"results_rank{rank}.pt")
        shutdown()
