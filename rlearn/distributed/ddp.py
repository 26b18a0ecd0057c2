"""Data-parallel training of a policy's networks: ``DistributedDataParallel`` wrappers plus a
:class:`GradientAverager`, so every step on every rank uses the same averaged gradient. See docs/distributed.md.
"""

from __future__ import annotations

import contextlib
import gc
import warnings
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel

from rlearn.distributed.utils import DistributedError, collective, get_world_size, is_distributed, shutdown

__all__ = ["PolicyDDP", "GradientAverager", "DistributedPolicyState", "broadcast_module_states",
           "default_ddp_modules", "leave_process_group", "setup_policy_ddp", "teardown_policy_ddp", "unwrap_module"]


def unwrap_module(module: Any) -> Any:
    """The network inside a ``DistributedDataParallel`` wrapper, or ``module`` itself."""
    return module.module if isinstance(module, DistributedDataParallel) else module


def _by_device_and_dtype(tensors: Iterable[torch.Tensor]) -> Dict[tuple, List[torch.Tensor]]:
    groups: Dict[tuple, List[torch.Tensor]] = {}
    for tensor in tensors:
        groups.setdefault((tensor.device, tensor.dtype), []).append(tensor)
    return groups


@torch.no_grad()
def broadcast_module_states(modules: Iterable[nn.Module], src: int = 0) -> None:
    """Overwrite every rank's parameters and buffers of ``modules`` with rank ``src``'s (collective; nothing
    to do in a single process). Tensors travel as one flat tensor per (device, dtype)."""
    if not is_distributed():
        return
    unique = {id(t): t for module in modules for t in (*module.parameters(), *module.buffers())}  # shared ones once
    for (_, dtype), tensors in _by_device_and_dtype(unique.values()).items():
        wire = torch.uint8 if dtype == torch.bool else dtype  # gloo has no bool
        flat = torch.cat([t.detach().reshape(-1).to(wire) for t in tensors])
        with collective(f"broadcasting the policy's networks from rank {src} failed"):
            dist.broadcast(flat, src=src)
        for tensor, part in zip(tensors, flat.split([t.numel() for t in tensors])):
            tensor.copy_(part.view(tensor.shape).to(dtype))


class PolicyDDP(DistributedDataParallel):
    """``DistributedDataParallel`` adapted to RL code: a forward pass without gradient (collection, evaluation,
    TD targets) runs the network directly, with no collective, so ranks may run different numbers of them; and
    attributes DDP lacks come from the network, so helper methods (``self.critic.q1(...)``) keep working (their
    gradients bypass DDP and :class:`GradientAverager` averages them instead)."""

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        if not torch.is_grad_enabled():
            return self.module(*args, **kwargs)
        return super().forward(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            modules = self.__dict__.get("_modules", {})
            if "module" not in modules:
                raise
            return getattr(modules["module"], name)


def _mark_reduced_hook(state, bucket):  # no annotations: DDP checks them against real classes
    """DDP communication hook ``(GradientAverager, dist.GradBucket) -> Future[Tensor]``: DDP's own average
    (``allreduce_hook``), noting which parameters it covers."""
    state._reduced.update(id(p) for p in bucket.parameters())
    return default_hooks.allreduce_hook(None, bucket)


class GradientAverager:
    """Makes every step of ``optimizers`` (name -> optimizer) use gradients averaged over all ranks.

    A DDP communication hook on ``wrappers`` (name -> :class:`PolicyDDP`) marks the parameters DDP averaged (a
    later local ``backward()`` clears the mark); before a step, the unmarked gradients are averaged in one flat
    ``all_reduce`` with a presence flag each (some ranks only: ``sum / world_size`` as in DDP; none: stays
    ``None``). Every rank must step the same optimizers in the same order. ``owner`` names the policy in messages.
    """

    def __init__(self, optimizers: Mapping[str, torch.optim.Optimizer], wrappers: Mapping[str, DistributedDataParallel],
                 owner: str) -> None:
        self.owner = owner
        self.world_size = get_world_size()
        self.fallback_steps = 0  # steps that needed the flat all_reduce
        self._reduced: set = set()  # ids of parameters whose gradient DDP averaged since their last step
        self._ddp_owner: Dict[int, str] = {}  # parameter id -> name of its DDP-wrapped network
        self._warned: set = set()
        self._handles: List[Any] = []
        for name, wrapper in wrappers.items():
            wrapper.register_comm_hook(self, _mark_reduced_hook)
            for param in wrapper.module.parameters():
                if param.requires_grad:
                    self._ddp_owner[id(param)] = name
                    self._handles.append(param.register_post_accumulate_grad_hook(
                        lambda p: self._reduced.discard(id(p))))
        for name, optimizer in optimizers.items():
            self._handles.append(optimizer.register_step_pre_hook(
                lambda opt, args, kwargs, name=name: self.average(opt, name)))

    @torch.no_grad()
    def average(self, optimizer: torch.optim.Optimizer, name: str = "optimizer") -> None:
        """Average the gradients of ``optimizer``'s parameters that DDP did not (collective if any)."""
        params = [p for group in optimizer.param_groups for p in group["params"] if p.requires_grad]
        pending = [p for p in params if id(p) not in self._reduced]
        self._reduced.difference_update(id(p) for p in params)
        if not pending:
            return
        self._warn_bypassed(pending, name)
        self.fallback_steps += 1
        for (device, dtype), group in _by_device_and_dtype(pending).items():
            parts = [p.grad.reshape(-1) if p.grad is not None else torch.zeros(p.numel(), device=device, dtype=dtype)
                     for p in group]
            parts.append(torch.tensor([p.grad is not None for p in group], device=device, dtype=dtype))
            flat = torch.cat(parts)
            with collective(f"averaging the gradients of {self.owner} optimizer {name!r} failed (another rank "
                            "died, or the ranks stepped different optimizers)"):
                dist.all_reduce(flat)
            *sums, present = flat.split([p.numel() for p in group] + [len(group)])
            for param, total, count in zip(group, sums, present.tolist()):
                if count > 0:
                    mean = total.view_as(param).div_(self.world_size)
                    param.grad = mean.clone() if param.grad is None else param.grad.copy_(mean)

    def _warn_bypassed(self, pending: List[torch.Tensor], optimizer_name: str) -> None:
        networks = sorted({self._ddp_owner[id(p)] for p in pending if id(p) in self._ddp_owner and p.grad is not None})
        new = [n for n in networks if n not in self._warned]
        if not new:
            return
        self._warned.update(new)
        warnings.warn(
            f"{self.owner}: gradients of {', '.join(repr(n) for n in new)} reached optimizer {optimizer_name!r} "
            "without being averaged by DistributedDataParallel (computed without loss.backward() through the "
            "network's forward, e.g. torch.autograd.grad or a helper method); rlearn averages them before the "
            "step instead. Leave these networks out of ddp_modules() to skip DDP's overhead.",
            RuntimeWarning, stacklevel=2)

    def remove(self) -> None:
        """Detach the optimizer and gradient hooks (the DDP communication hooks stay with their wrappers)."""
        for handle in self._handles:
            handle.remove()
        self._handles.clear()


@dataclass
class DistributedPolicyState:
    """What :func:`setup_policy_ddp` did to a policy (``policy._distributed``): per network name its
    :class:`PolicyDDP` and the policy attribute holding it, and the ``averager``."""

    wrappers: Dict[str, PolicyDDP]
    attributes: Dict[str, str]
    averager: GradientAverager


def default_ddp_modules(policy: Any) -> List[str]:
    """Names in ``policy.modules()`` with a trainable parameter that one of ``policy.optimizers()`` updates
    (so target networks, which follow their online network, and frozen networks are left out)."""
    optimized = {id(p) for opt in policy.optimizers().values() for group in opt.param_groups for p in group["params"]}
    return [name for name, module in policy.modules().items()
            if any(p.requires_grad and id(p) in optimized for p in unwrap_module(module).parameters())]


def _check_ddp_names(policy: Any, names: Any, modules: Mapping[str, nn.Module]) -> List[str]:
    owner = type(policy).__name__
    if isinstance(names, str) or not isinstance(names, (list, tuple)):
        raise TypeError(f"{owner}.ddp_modules() must return a list of names from modules(), got {names!r}")
    names = list(names)
    for name in names:
        if name not in modules:
            raise ValueError(f"{owner}.ddp_modules() names {name!r}, which is not in modules() ({sorted(modules)})")
        if not any(p.requires_grad for p in modules[name].parameters()):
            raise ValueError(f"{owner}.ddp_modules() names {name!r}, which has no trainable parameter")
    if len(set(names)) != len(names):
        raise ValueError(f"{owner}.ddp_modules() lists a network twice: {names}")
    seen: Dict[int, str] = {}
    for name in names:
        for param in modules[name].parameters():
            other = seen.setdefault(id(param), name)
            if other != name:
                raise ValueError(
                    f"{owner}.ddp_modules(): {other!r} and {name!r} share parameters; wrap only one of them "
                    "(DDP would average the shared gradients twice)")
    return names


def _holding_attribute(policy: Any, name: str, module: nn.Module) -> str:
    holders = [attr for attr, value in vars(policy).items() if value is module]
    if len(holders) != 1:
        where = "no attribute" if not holders else f"several attributes ({', '.join(holders)})"
        raise ValueError(
            f"{type(policy).__name__}: network {name!r} of modules() is held by {where} of the policy; "
            "setup_distributed() replaces the one attribute holding a network by its DDP wrapper. Keep each "
            "network in one attribute (self.<name> = ...), or leave it out of ddp_modules()")
    return holders[0]


def setup_policy_ddp(policy: Any) -> bool:
    """Implementation of :meth:`policies.Policy.setup_distributed` (collective): True when the policy is now set
    up for several processes (again: a no-op), False in a single process (nothing is changed)."""
    if not is_distributed():
        return False
    if getattr(policy, "_distributed", None) is not None:
        return True
    modules = {name: unwrap_module(m) for name, m in policy.modules().items()}
    broadcast_module_states(modules.values())
    names = _check_ddp_names(policy, policy.ddp_modules(), modules)
    attributes = {name: _holding_attribute(policy, name, modules[name]) for name in names}
    # Buffers (running statistics...) stay rank-local after the broadcast: syncing them on every forward would be
    # a collective that rank 0's extra evaluation passes would deadlock on. init_sync: the broadcast did it.
    kwargs: Dict[str, Any] = {"find_unused_parameters": bool(getattr(policy, "ddp_find_unused_parameters", True)),
                              "forward_sync_buffers": False, "init_sync": False}
    wrappers: Dict[str, PolicyDDP] = {}
    for name in names:
        device = next(modules[name].parameters()).device
        ids = [torch.cuda.current_device() if device.index is None else device.index] if device.type == "cuda" else None
        try:
            wrappers[name] = PolicyDDP(modules[name], device_ids=ids, **kwargs)
        except Exception as exc:  # noqa: BLE001 - re-raised with context
            raise DistributedError(
                f"{type(policy).__name__}: wrapping {name!r} in DistributedDataParallel failed: {exc}") from exc
        setattr(policy, attributes[name], wrappers[name])
    averager = GradientAverager(policy.optimizers(), wrappers, type(policy).__name__)
    policy._distributed = DistributedPolicyState(wrappers, attributes, averager)
    return True


def teardown_policy_ddp(policy: Any) -> bool:
    """Undo :func:`setup_policy_ddp` (not collective): hooks removed, plain networks back in their attributes
    (so no wrapper keeps the process group alive). Returns whether something was undone."""
    state = getattr(policy, "_distributed", None)
    if state is None:
        return False
    state.averager.remove()
    for name, attribute in state.attributes.items():
        if getattr(policy, attribute, None) is state.wrappers[name]:
            setattr(policy, attribute, state.wrappers[name].module)
    policy._distributed = None
    return True


def leave_process_group(policy: Any) -> None:
    """End of a multi-process run on this rank: ``policy.teardown_distributed()``, collect the wrappers while the
    interpreter is whole (a DDP reducer holds the group), then leave the process group."""
    teardown = getattr(policy, "teardown_distributed", None)
    if callable(teardown):
        with contextlib.suppress(Exception):  # leaving must never hide the error that ended the run
            teardown()
    gc.collect()
    shutdown()
