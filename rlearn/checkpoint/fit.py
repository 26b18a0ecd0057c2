"""Does a checkpoint's policy state fit the live policy? Checked before anything is loaded, because
``torch.optim.Optimizer.load_state_dict`` does not check state shapes: an Adam ``exp_avg`` of the wrong shape
loads, and the next ``step()`` can segfault or corrupt the heap."""

from __future__ import annotations

import copy
import math
from typing import Any, Dict, List, Mapping

import torch

from rlearn.checkpoint.integrity import CheckpointError
from rlearn.values import is_int, is_real

__all__ = ["check_policy_state", "policy_state_problems", "module_problems", "optimizer_problems", "listing"]

#: param-group settings that must be finite numbers >= 0 when they are numbers (torch.optim's own checks)
_NON_NEGATIVE = frozenset({"lr", "eps", "weight_decay", "momentum", "dampening", "alpha", "lr_decay",
                           "initial_accumulator_value", "rho", "lambd", "t0", "initial_lr"})
#: per-parameter state entries that are 0-dim tensors (step counts, ASGD's eta and mu, NAdam's mu_product)
_SCALAR_STATE = frozenset({"step", "eta", "mu", "mu_product"})
#: optimizers whose per-parameter state tensors are shaped like the parameter, except :data:`_SCALAR_STATE`
_PARAM_SHAPED = (torch.optim.Adam, torch.optim.AdamW, torch.optim.SGD, torch.optim.RMSprop, torch.optim.Adagrad,
                 torch.optim.Adamax, torch.optim.NAdam, torch.optim.RAdam, torch.optim.ASGD, torch.optim.Rprop,
                 torch.optim.Adadelta)


def _shape(value: Any) -> tuple:
    return tuple(value.shape)


def module_problems(name: str, saved: Any, module: torch.nn.Module) -> List[str]:
    """Mismatches between a saved network state dict and ``module``: missing or unexpected parameters and
    buffers, shapes that differ, values that are not tensors."""
    if not isinstance(saved, Mapping):
        return [f"network {name!r} is a {type(saved).__name__} in the checkpoint, not a state dict"]
    current = module.state_dict()
    problems: List[str] = []
    for param in sorted(set(saved) | set(current)):
        if param not in saved:
            problems.append(f"{name}.{param} missing from the checkpoint")
        elif param not in current:
            problems.append(f"unexpected {name}.{param} in the checkpoint")
        elif isinstance(current[param], torch.Tensor):
            if not isinstance(saved[param], torch.Tensor):
                problems.append(f"{name}.{param} is a {type(saved[param]).__name__} in the checkpoint, not a tensor")
            elif _shape(saved[param]) != _shape(current[param]):
                problems.append(f"{name}.{param} has shape {_shape(saved[param])} in the checkpoint, "
                                f"{_shape(current[param])} in the policy")
    return problems


def _group_setting_problem(key: str, saved: Any, live: Any) -> str:
    """Why a saved param-group setting cannot replace the live one ('' when it can)."""
    if isinstance(live, bool):  # None: torch's default for flags such as fused and foreach
        ok = saved is None or isinstance(saved, bool)
        return "" if ok else f"must be a bool (or None) like the optimizer's {live!r}, got {saved!r}"
    if isinstance(live, torch.Tensor):
        ok = isinstance(saved, torch.Tensor) and _shape(saved) == _shape(live) and bool(torch.isfinite(saved).all())
        return "" if ok else f"must be a finite tensor of shape {_shape(live)}, got {saved!r}"
    if is_real(live):
        if isinstance(saved, torch.Tensor) and saved.dim() == 0 and saved.is_floating_point():
            saved = saved.item()  # a tensor learning rate (capturable or compiled optimizers)
        if not is_real(saved) or not math.isfinite(saved):
            return f"must be a finite number like the optimizer's {live!r}, got {saved!r}"
        if key in _NON_NEGATIVE and saved < 0:
            return f"must be >= 0, got {saved!r}"
        return ""
    if isinstance(live, (tuple, list)) and all(is_real(v) for v in live):
        ok = isinstance(saved, (tuple, list)) and len(saved) == len(live) and all(
            is_real(v) and math.isfinite(v) for v in saved)
        return "" if ok else f"must be {len(live)} finite numbers like the optimizer's {tuple(live)!r}, got {saved!r}"
    return ""  # None, strings and other settings torch.optim fills in or never reads in the step


def _is_step_count(value: Any, reference: Any) -> bool:
    """A step count torch.optim can use: a finite number >= 0, or a 0-dim floating-point tensor holding one
    (of the live optimizer's dtype once it has stepped)."""
    if isinstance(value, torch.Tensor):
        if value.dim() != 0 or not value.is_floating_point() or (
                isinstance(reference, torch.Tensor) and value.dtype != reference.dtype):
            return False
        value = value.item()
    return is_real(value) and math.isfinite(value) and value >= 0


def _state_problems(where: str, state: Any, param: torch.Tensor, live_state: Mapping[str, Any],
                    param_shaped: bool) -> List[str]:
    if not isinstance(state, Mapping):
        return [f"{where}: the state is a {type(state).__name__}, not a dict"]
    problems: List[str] = []
    if live_state:  # the optimizer has stepped: the saved state must have the same entries
        if set(live_state) != set(state):
            problems.append(f"{where}: state entries {sorted(state)} in the checkpoint, {sorted(live_state)} in the "
                            "optimizer")
    for key, value in state.items():
        reference = live_state.get(key)
        if key == "step":
            if not _is_step_count(value, reference):
                problems.append(f"{where}: step must be a count >= 0 (a number or a 0-dim floating-point tensor "
                                f"of the optimizer's dtype), got {value!r}")
            continue
        if not isinstance(value, torch.Tensor):
            if isinstance(reference, torch.Tensor) or reference is None and param_shaped:
                problems.append(f"{where}: {key} must be a tensor, got {type(value).__name__}")
            continue
        if isinstance(reference, torch.Tensor):
            want_shape, want_dtype = _shape(reference), reference.dtype
        elif param_shaped and key in _SCALAR_STATE:
            if value.dim() != 0 or not value.is_floating_point() or not bool(torch.isfinite(value)):
                problems.append(f"{where}: {key} must be a finite 0-dim floating-point tensor, got {value!r}")
            continue
        elif param_shaped:
            want_shape, want_dtype = _shape(param), param.dtype
        else:
            continue  # an optimizer whose state layout is not known here, before its first step
        if _shape(value) != want_shape:
            problems.append(f"{where}: {key} has shape {_shape(value)}, the optimizer needs {want_shape}")
        elif value.dtype != want_dtype:
            problems.append(f"{where}: {key} has dtype {value.dtype}, the optimizer needs {want_dtype}")
    return problems


def optimizer_problems(name: str, saved: Any, optimizer: torch.optim.Optimizer) -> List[str]:
    """Mismatches between a saved optimizer state dict and ``optimizer``, found before
    ``optimizer.load_state_dict`` (which checks only the number of parameters per group)."""
    where = f"optimizer {name!r}"
    if not isinstance(saved, Mapping) or not isinstance(saved.get("param_groups"), (list, tuple)) or \
            not isinstance(saved.get("state"), Mapping):
        return [f"{where} is not an optimizer state dict (needs 'state' and a list 'param_groups')"]
    live_groups, saved_groups = optimizer.param_groups, saved["param_groups"]
    if len(saved_groups) != len(live_groups):
        return [f"{where} has {len(saved_groups)} param group(s) in the checkpoint, {len(live_groups)} in the policy"]
    problems: List[str] = []
    params: Dict[Any, tuple] = {}  # saved parameter id -> (group index, live parameter)
    for g, (saved_group, live_group) in enumerate(zip(saved_groups, live_groups)):
        if not isinstance(saved_group, Mapping) or not isinstance(saved_group.get("params"), (list, tuple)):
            problems.append(f"{where}: param group {g} is not a dict with a list 'params'")
            continue
        ids = saved_group["params"]
        if len(ids) != len(live_group["params"]):
            problems.append(f"{where}: param group {g} has {len(ids)} parameter(s) in the checkpoint, "
                            f"{len(live_group['params'])} in the policy")
            continue
        for saved_id, param in zip(ids, live_group["params"]):
            if not is_int(saved_id) or saved_id in params:
                problems.append(f"{where}: param group {g} lists {saved_id!r}, not a distinct parameter index")
            else:
                params[saved_id] = (g, param)
        for key, live in live_group.items():
            if key == "params":
                continue
            if key not in saved_group:
                # the optimizer's own numeric settings must be there; torch fills in missing flags with their
                # defaults, and LR schedulers add ``initial_lr`` themselves
                if key in optimizer.defaults and not (isinstance(live, bool) or live is None):
                    problems.append(f"{where}: param group {g} has no {key!r} in the checkpoint")
                continue
            complaint = _group_setting_problem(key, saved_group[key], live)
            if complaint:
                problems.append(f"{where}: param group {g}: {key} {complaint}")
    param_shaped = isinstance(optimizer, _PARAM_SHAPED)
    for saved_id, state in saved["state"].items():
        if saved_id not in params:
            problems.append(f"{where}: state for parameter {saved_id!r}, which no param group lists")
            continue
        g, param = params[saved_id]
        problems += _state_problems(f"{where}: parameter {saved_id} (group {g}, shape {_shape(param)})", state,
                                    param, optimizer.state.get(param, {}), param_shaped)
    if not problems and saved["state"] and type(optimizer) in _PARAM_SHAPED:
        problems += _trial_step_problems(where, saved, optimizer)
    return problems


def _trial_step_problems(where: str, saved: Mapping[str, Any], optimizer: torch.optim.Optimizer) -> List[str]:
    """One step of a copy of ``optimizer`` (copied parameters, zero gradients) loaded with a copy of ``saved``:
    the saved settings decide which state a step reads (``amsgrad=True`` reads ``max_exp_avg_sq``), and torch
    loads a state that lacks it without a word."""
    groups = [{**{key: value for key, value in group.items() if key != "params"},
               "params": [param.detach().clone().requires_grad_(param.requires_grad) for param in group["params"]]}
              for group in optimizer.param_groups]
    try:
        trial = type(optimizer)(groups)
        trial.load_state_dict(copy.deepcopy(dict(saved)))
        for group in trial.param_groups:
            for param in group["params"]:
                param.grad = torch.zeros_like(param)
        trial.step()
    except KeyError as exc:
        return [f"{where}: a step with the checkpoint's settings needs state entry {exc.args[0]!r}, which the "
                "checkpoint lacks"]
    except Exception as exc:  # noqa: BLE001 - whatever torch.optim refuses, the real step would refuse too
        return [f"{where}: cannot take a step with the checkpoint's state and settings ({type(exc).__name__}: {exc})"]
    return []


def policy_state_problems(policy: Any, saved: Any, networks_only: bool = False) -> List[str]:
    """Every way the saved ``policy.state_dict()`` ``saved`` does not fit ``policy`` (networks and, unless
    ``networks_only``, optimizers, with a trial step on copies); empty when it fits."""
    if not isinstance(saved, Mapping):
        return [f"the policy state is a {type(saved).__name__}, not a dict"]
    problems: List[str] = []
    sections = [("modules", policy.modules(), module_problems)]
    if not networks_only:
        sections.append(("optimizers", policy.optimizers(), optimizer_problems))
    for section, owned, check in sections:
        saved_section = saved.get(section, {})
        if not isinstance(saved_section, Mapping):
            problems.append(f"policy section {section!r} is a {type(saved_section).__name__}, not a dict")
            continue
        kind = "network" if section == "modules" else "optimizer"
        for name in sorted(set(owned) | set(saved_section)):
            if name not in saved_section:
                problems.append(f"{kind} {name!r} missing from the checkpoint")
            elif name not in owned:
                problems.append(f"unexpected {kind} {name!r} in the checkpoint")
            else:
                problems += check(name, saved_section[name], owned[name])
    return problems


def listing(problems: List[str], shown: int = 5) -> str:
    """The first ``shown`` problems joined with '; ', and how many more there are."""
    more = f"; and {len(problems) - shown} more" if len(problems) > shown else ""
    return "; ".join(problems[:shown]) + more


def check_policy_state(path: Any, policy: Any, saved: Any, networks_only: bool = False) -> None:
    """Raise :class:`CheckpointError` naming checkpoint ``path`` and every mismatch
    (:func:`policy_state_problems`) unless ``saved`` fits ``policy``."""
    problems = policy_state_problems(policy, saved, networks_only)
    if problems:
        raise CheckpointError(f"checkpoint {path} does not fit policy {type(policy).__qualname__}: {listing(problems)}")
