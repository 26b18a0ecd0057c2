"""``LRSchedulerHook``: a torch LR scheduler stepped once per train iteration, plus an optional warmup (the
formulas of mmcv's ``LrUpdaterHook``, in :func:`warmup_factor`). See docs/hooks.md.
"""

from __future__ import annotations

import contextlib
import inspect
import warnings
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

import torch
from torch.optim import lr_scheduler as torch_schedulers

from rlearn.hooks.base import Hook
from rlearn.registry import HOOKS
from rlearn.values import check_int, is_real

__all__ = ["LRSchedulerHook", "WARMUP_MODES", "warmup_factor"]

#: valid values of ``warmup`` (besides None)
WARMUP_MODES = ("constant", "linear", "exp")
_VALID_WARMUPS = "None, " + ", ".join(repr(m) for m in WARMUP_MODES)

# torch schedulers that cannot be built from a config dict and stepped once per iteration
_UNSUPPORTED = {
    "ReduceLROnPlateau": "its step() needs a validation metric",
    "ChainedScheduler": "it takes scheduler objects; pass a callable that builds it",
    "SequentialLR": "it takes scheduler objects; pass a callable that builds it",
    "LRScheduler": "it is the abstract base class",
    "_LRScheduler": "it is the abstract base class",
}

SchedulerSpec = Union[None, Mapping[str, Any], Callable[[torch.optim.Optimizer], Any]]


def warmup_factor(mode: Optional[str], i: int, warmup_iters: int, warmup_ratio: float) -> float:
    """The factor applied to the regular lr in iteration ``i`` (0-based; 1.0 outside the warmup)."""
    if mode is None or i >= warmup_iters:
        return 1.0
    if mode == "constant":
        return warmup_ratio
    if mode == "linear":
        return 1.0 - (1.0 - i / warmup_iters) * (1.0 - warmup_ratio)
    if mode == "exp":
        return warmup_ratio ** (1.0 - i / warmup_iters)
    raise ValueError(f"unknown warmup {mode!r}; valid values: {_VALID_WARMUPS}")


@HOOKS.register
class LRSchedulerHook(Hook):
    """Steps ``scheduler`` after every train iteration and applies a ``warmup`` before it, for the ``optimizers``
    named (one or a list; None: all of ``learner.policy.optimizers()``).

    ``scheduler``: None (the lr stays), a dict naming a class of ``torch.optim.lr_scheduler`` with its arguments
    (``dict(type="StepLR", step_size=1000, gamma=0.5)``), or a callable ``optimizer -> scheduler``. ``warmup``:
    None or one of :data:`WARMUP_MODES` (see :func:`warmup_factor`) for ``warmup_iters`` iterations, from the
    factor ``warmup_ratio`` in (0, 1]. The regular lrs are put back before ``scheduler.step()``, so chainable
    schedulers do not compound the warmup.
    """

    def __init__(self, scheduler: SchedulerSpec = None, warmup: Optional[str] = None, warmup_iters: int = 0,
                 warmup_ratio: float = 0.1, optimizers: Union[None, str, Sequence[str]] = None) -> None:
        self.scheduler_spec = self._check_scheduler(scheduler)
        if warmup is not None and warmup not in WARMUP_MODES:
            raise ValueError(f"LRSchedulerHook: {warmup!r} is not a supported warmup; valid values: {_VALID_WARMUPS}")
        warmup_iters = check_int("LRSchedulerHook: warmup_iters", warmup_iters, minimum=0)
        if warmup is not None and warmup_iters == 0:
            raise ValueError(f"LRSchedulerHook: warmup={warmup!r} needs warmup_iters > 0")
        if warmup is None and warmup_iters > 0:
            raise ValueError(f"LRSchedulerHook: warmup_iters={warmup_iters} without a warmup mode; set warmup to one "
                             f"of {', '.join(map(repr, WARMUP_MODES))}")
        if not is_real(warmup_ratio) or not 0 < warmup_ratio <= 1:
            raise ValueError(f"LRSchedulerHook: warmup_ratio must be a number in (0, 1], got {warmup_ratio!r}")
        if optimizers is not None:
            names = [optimizers] if isinstance(optimizers, str) else list(optimizers)
            if not names or not all(isinstance(n, str) and n for n in names):
                raise ValueError(
                    f"LRSchedulerHook: optimizers must be None, a name or a list of names, got {optimizers!r}")
            optimizers = names
        self.warmup = warmup
        self.warmup_iters = warmup_iters
        self.warmup_ratio = float(warmup_ratio)
        self.optimizer_names: Optional[List[str]] = optimizers
        self.optimizers: Dict[str, torch.optim.Optimizer] = {}
        self.schedulers: Dict[str, Any] = {}
        self._ready = False
        self._pending_state: Optional[Mapping[str, Any]] = None
        self._regular_lrs: Dict[str, List[float]] = {}  # set while a warmup lr is applied
        self._first_step = True

    @staticmethod
    def _check_scheduler(scheduler: SchedulerSpec) -> SchedulerSpec:
        if scheduler is None:
            return None
        if isinstance(scheduler, Mapping):
            spec = dict(scheduler)
            kind = spec.pop("type", None)
            known = sorted(name for name, obj in vars(torch_schedulers).items() if name not in _UNSUPPORTED
                           and isinstance(obj, type) and issubclass(obj, torch_schedulers.LRScheduler))
            if not isinstance(kind, str):
                raise ValueError(
                    f"LRSchedulerHook: a scheduler dict needs 'type', the name of a torch.optim.lr_scheduler "
                    f"class ({', '.join(known)}); got {dict(scheduler)!r}")
            if kind in _UNSUPPORTED:
                raise ValueError(
                    f"LRSchedulerHook: scheduler type {kind!r} is not supported from a dict: {_UNSUPPORTED[kind]}")
            if kind not in known:
                raise ValueError(f"LRSchedulerHook: unknown scheduler type {kind!r}; known types: {', '.join(known)}")
            if "optimizer" in spec:
                raise ValueError("LRSchedulerHook: do not put 'optimizer' in the scheduler dict; the hook passes the "
                                 "policy's optimizers")
            try:
                inspect.signature(getattr(torch_schedulers, kind)).bind(None, **spec)
            except TypeError as exc:
                raise TypeError(f"LRSchedulerHook: bad arguments for {kind}: {exc} (got {spec!r})") from None
            return dict(scheduler)
        if callable(scheduler):
            return scheduler
        raise TypeError(
            "LRSchedulerHook: scheduler must be None, a dict(type='StepLR', ...) or a callable optimizer -> scheduler, "
            f"got {type(scheduler).__name__}")

    def _build_scheduler(self, optimizer: torch.optim.Optimizer) -> Any:
        spec = self.scheduler_spec
        if isinstance(spec, Mapping):
            args = {k: v for k, v in spec.items() if k != "type"}
            return getattr(torch_schedulers, spec["type"])(optimizer, **args)
        built = spec(optimizer)
        if not callable(getattr(built, "step", None)):
            raise TypeError(f"LRSchedulerHook: the scheduler factory returned {built!r}, which has no step() method")
        return built

    def setup(self, learner: Any) -> None:
        """Find the optimizers and build the schedulers (once; ``before_run`` calls it)."""
        if self._ready:
            return
        available = learner.policy.optimizers()
        policy = type(learner.policy).__name__
        if not available:
            raise ValueError(f"LRSchedulerHook: policy {policy} has no optimizers (Policy.optimizers() is empty)")
        names = self.optimizer_names if self.optimizer_names is not None else list(available)
        unknown = [name for name in names if name not in available]
        if unknown:
            raise KeyError(
                f"LRSchedulerHook: policy {policy} has no optimizer {', '.join(map(repr, unknown))}; "
                f"its optimizers: {', '.join(available)}")
        self.optimizers = {name: available[name] for name in names}
        if self.scheduler_spec is not None:
            self.schedulers = {name: self._build_scheduler(opt) for name, opt in self.optimizers.items()}
        self._ready = True
        if self._pending_state is not None:
            state, self._pending_state = self._pending_state, None
            self._apply_state(state)

    before_run = setup

    def before_iter(self, learner: Any) -> None:
        self.setup(learner)
        if self._regular_lrs:  # the previous iteration failed before after_iter: undo its warmup first
            self._restore_regular()
        factor = warmup_factor(self.warmup, learner.train_iter, self.warmup_iters, self.warmup_ratio)
        if factor == 1.0:
            return
        for name, optimizer in self.optimizers.items():
            self._regular_lrs[name] = [group["lr"] for group in optimizer.param_groups]
            for group in optimizer.param_groups:
                group["lr"] = group["lr"] * factor

    def after_iter(self, learner: Any) -> None:
        if not self._ready:
            return
        if self._regular_lrs:
            self._restore_regular()
        # An optimizer that did not step in the first iteration (TD3's delayed actor) makes torch warn that the
        # scheduler stepped before the optimizer; per-iteration scheduling expects that. Only the first step
        # catches warnings: catch_warnings resets the warning registries, so "once" warnings would repeat.
        with warnings.catch_warnings() if self._first_step else contextlib.nullcontext():
            if self._first_step:
                self._first_step = False
                warnings.filterwarnings("ignore", message=r"Detected call of `lr_scheduler.step\(\)` before")
            for scheduler in self.schedulers.values():
                scheduler.step()

    def _restore_regular(self) -> None:
        self._set_lrs(self._regular_lrs)
        self._regular_lrs = {}

    def _set_lrs(self, lrs_by_name: Mapping[str, Sequence[float]]) -> None:
        for name, lrs in lrs_by_name.items():
            for group, lr in zip(self.optimizers[name].param_groups, lrs):
                group["lr"] = lr

    def state_dict(self) -> Dict[str, Any]:
        """The torch schedulers' states and the regular lrs (the lrs before warmup)."""
        if self._pending_state is not None and not self._ready:
            return dict(self._pending_state)
        regular = self._regular_lrs or {name: [g["lr"] for g in o.param_groups] for name, o in self.optimizers.items()}
        return {"schedulers": {name: scheduler.state_dict() for name, scheduler in self.schedulers.items()},
                "regular_lrs": {name: list(lrs) for name, lrs in regular.items()}}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`. Before the hook is set up (no learner yet) it is kept and applied
        at set-up. Mismatched scheduler names raise ``ValueError``."""
        if not isinstance(state, Mapping) or not isinstance(state.get("schedulers"), Mapping):
            raise ValueError(f"LRSchedulerHook.load_state_dict: not a LRSchedulerHook state: {state!r}")
        regular = state.get("regular_lrs", {})
        if not isinstance(regular, Mapping) or not all(
                isinstance(lrs, (list, tuple)) and all(map(is_real, lrs)) for lrs in regular.values()):
            raise ValueError("LRSchedulerHook.load_state_dict: 'regular_lrs' must map optimizer names to lists of lrs, "
                             f"got {regular!r}")
        if not self._ready:
            self._pending_state = state
            return
        self._apply_state(state)

    def _apply_state(self, state: Mapping[str, Any]) -> None:
        saved = state["schedulers"]
        missing = sorted(set(self.schedulers) - set(saved))
        unexpected = sorted(set(saved) - set(self.schedulers))
        if missing or unexpected:
            raise ValueError(
                "LRSchedulerHook.load_state_dict: the saved schedulers do not match this hook's "
                f"(missing: {missing or 'none'}, unexpected: {unexpected or 'none'})")
        regular = state.get("regular_lrs", {})
        for name, lrs in regular.items():
            optimizer = self.optimizers.get(name)
            if optimizer is None or len(lrs) != len(optimizer.param_groups):
                groups = ", ".join(f"{n}: {len(o.param_groups)} group(s)" for n, o in self.optimizers.items())
                raise ValueError(f"LRSchedulerHook.load_state_dict: saved lrs of optimizer {name!r} do not match this "
                                 f"hook's optimizers ({groups})")
        for name, scheduler in self.schedulers.items():
            scheduler.load_state_dict(saved[name])
        self._regular_lrs = {}
        # the lrs the schedule stands at: a scheduler built after the optimizer was restored may have moved them
        self._set_lrs({name: [float(lr) for lr in lrs] for name, lrs in regular.items()})

    def __repr__(self) -> str:
        return (f"LRSchedulerHook(scheduler={self.scheduler_spec!r}, warmup={self.warmup!r}, "
                f"warmup_iters={self.warmup_iters}, warmup_ratio={self.warmup_ratio})")
