"""The policy contract: **learn** (``_forward_learn(data) -> info dict``, keys declared by ``_monitor_vars_learn()``),
**collect** (``_forward_collect(obs, envstep) -> dict`` of actions and collect-side metrics) and **eval**
(``_forward_eval(obs) -> actions``); docs/write-your-own-policy.md describes the data of each mode.
"""

from __future__ import annotations

import abc
import contextlib
import copy
import dataclasses
import difflib
import functools
from typing import Any, ClassVar, Dict, Iterator, List, Mapping, Optional

import numpy as np
import torch

from rlearn.config import ConfigError
from rlearn.config.policy_keys import declaration_defaults, policy_keys, validate_policy_section
from rlearn.memory import available_memory
from rlearn.optim import AdamStep, clip_grad_norm_
from rlearn.registry import defined_at
from rlearn.trace import span

Scalar = Any  # int | float | numpy scalar | one-element torch.Tensor

#: the share of the available memory a policy's networks and their optimizer state may take
NETWORK_MEMORY_FRACTION = 0.5


class PolicyConfigError(ConfigError, KeyError):
    """A policy configuration names a key the policy does not know, or has a bad value; the message names
    ``policy.<key>``. A :class:`rlearn.config.ConfigError` (so a ``ValueError``), and a ``KeyError`` as before."""

    def __str__(self) -> str:  # KeyError would otherwise quote the whole message
        return str(self.args[0]) if self.args else ""


def merge_policy_config(defaults: Mapping[str, Any], overrides: Optional[Mapping[str, Any]], owner: str,
                        prefix: str = "policy.") -> Dict[str, Any]:
    """``defaults`` updated with ``overrides``, nested dicts merged recursively; an unknown key is a
    :class:`PolicyConfigError` naming the policy, the full key (``policy.net.width``) and the closest known keys."""
    merged = copy.deepcopy(dict(defaults))
    for key, value in (overrides or {}).items():
        if key not in merged:
            close = difflib.get_close_matches(str(key), [str(k) for k in merged], n=3)
            hint = f"; did you mean {', '.join(repr(prefix + c) for c in close)}?" if close else ""
            raise PolicyConfigError(
                f"{owner}: unknown config key '{prefix}{key}'{hint} Known keys: {', '.join(sorted(map(str, merged)))}"
            )
        if isinstance(merged[key], dict) and isinstance(value, Mapping):
            merged[key] = merge_policy_config(merged[key], value, owner, f"{prefix}{key}.")
        else:
            merged[key] = copy.deepcopy(value)
    return merged


class Policy(abc.ABC):
    """Base class of every rlearn policy (docs/write-your-own-policy.md): subclasses declare their keys in a
    nested ``Config`` of :func:`rlearn.config.option` fields (or a :attr:`default_config` dict), implement the
    ``_init_learn`` / ``_forward_*`` / ``_monitor_vars_learn`` methods and expose :meth:`modules` and
    :meth:`optimizers`. ``cfg`` is the run's ``policy`` section, the spaces a single environment's, ``seed`` seeds
    the policy's own generators."""

    #: the policy's config keys: a class of ``rlearn.config.option`` fields (made a dataclass), or None
    Config: ClassVar[Optional[type]] = None
    #: every config key the policy accepts, with its default value (derived from ``Config`` when declared)
    default_config: ClassVar[Dict[str, Any]] = {}
    #: True for policies that learn from fresh rollouts (PPG), False for replay-buffer ones (TD3)
    on_policy: ClassVar[bool] = False
    #: ``find_unused_parameters`` of the DDP wrappers: a policy whose every loss reaches every parameter may
    #: set False (saves one autograd-graph traversal per forward pass)
    ddp_find_unused_parameters: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        declaration = cls.__dict__.get("Config")
        if declaration is not None:
            if "__dataclass_fields__" not in declaration.__dict__:  # a subclass of a declaration needs it too
                dataclasses.dataclass(declaration)
            cls.default_config = declaration_defaults(declaration)
        elif "default_config" in cls.__dict__:
            cls.Config = None  # a plain dict replaces an inherited declaration
        own = cls.__dict__.get("modules")
        if own is not None and not getattr(own, "_unwraps_ddp", False):
            # setup_distributed() replaces network attributes by DDP wrappers; whatever a subclass's
            # modules() returns, the framework gets the plain networks (checkpoints identical to one process).
            @functools.wraps(own)
            def modules(self: "Policy") -> Dict[str, torch.nn.Module]:
                return {name: _unwrap(module) for name, module in own(self).items()}

            modules._unwraps_ddp = True  # type: ignore[attr-defined]
            cls.modules = modules  # type: ignore[method-assign]

    def __init__(self, cfg: Optional[Mapping[str, Any]], observation_space: Any, action_space: Any,
                 device: str | torch.device = "cpu", seed: Optional[int] = None) -> None:
        name = type(self).__name__
        self.cfg: Dict[str, Any] = merge_policy_config(self.default_config, cfg, name)
        try:
            validate_policy_section(self.cfg, policy_keys(type(self)))
        except ConfigError as exc:
            raise PolicyConfigError(f"{name}: {exc}") from None
        self._adam_steps: Dict[int, AdamStep] = {}  # optimize()'s steppers, by optimizer
        self.observation_space = observation_space
        self.action_space = action_space
        self.device = torch.device(device)
        self.seed = seed
        self.np_random = np.random.default_rng(seed)
        self._init_learn()
        self._init_collect()
        self._init_eval()

    @contextlib.contextmanager
    def seeded_init(self) -> Iterator[None]:
        """A block whose torch random draws (network initialisation) come from the policy's seed; torch's global
        RNG is left as it was."""
        with torch.random.fork_rng(devices=[]):
            if self.seed is not None:
                torch.manual_seed(self.seed)
            yield

    def check_network_memory(self, trained: int, frozen: int = 0, key: str = "hidden_sizes") -> None:
        """Refuse, before they are allocated, networks that cannot fit: ``trained`` float32 parameters (with a
        gradient and Adam's two moments: 16 bytes each) plus ``frozen`` ones (4 bytes) must take at most
        :data:`NETWORK_MEMORY_FRACTION` of the memory available on the policy's device; else a
        :class:`PolicyConfigError` naming ``policy.<key>`` and the estimate."""
        needed = 4 * (4 * trained + frozen)
        available = _available_memory(self.device)
        if available is not None and needed > NETWORK_MEMORY_FRACTION * available:
            gib = 2.0 ** 30
            raise PolicyConfigError(
                f"{type(self).__name__}: config key 'policy.{key}' is {self.cfg.get(key)!r}: the networks would take "
                f"about {needed / gib:.1f} GiB (parameters, gradients and Adam state), more than "
                f"{NETWORK_MEMORY_FRACTION:.0%} of the {available / gib:.1f} GiB available on {self.device}; "
                f"lower policy.{key}")

    # ------------------------------------------------------------------ learn
    @abc.abstractmethod
    def _init_learn(self) -> None:
        """Build networks, optimizers and anything the learn mode needs."""

    @abc.abstractmethod
    def _forward_learn(self, data: Any) -> Dict[str, Scalar]:
        """Run one train iteration on ``data``; return an info dict of scalars (any subset of the declared keys)."""

    @abc.abstractmethod
    def _monitor_vars_learn(self) -> List[str]:
        """Every key that :meth:`_forward_learn` may ever return, periodic ones included."""

    def _monitor_periods_learn(self) -> Dict[str, int]:
        """Learn keys reported on a fixed period: key -> every how many train iterations (PPG's auxiliary losses:
        ``n_pi``); the learner waits that long before warning that such a key is missing."""
        return {}

    def monitor_periods(self) -> Dict[str, int]:
        """:meth:`_monitor_periods_learn`, checked (declared keys, int periods >= 1; else ValueError)."""
        periods = dict(self._monitor_periods_learn())
        declared = set(self._checked_keys("_monitor_vars_learn"))
        for key, period in periods.items():
            if key not in declared:
                raise ValueError(f"{type(self).__name__}._monitor_periods_learn() gives a period for {key!r}, "
                                 "which _monitor_vars_learn() does not declare")
            if isinstance(period, bool) or not isinstance(period, int) or period < 1:
                raise ValueError(f"{type(self).__name__}._monitor_periods_learn(): the period of {key!r} must be "
                                 f"an int >= 1 (train iterations), got {period!r}")
        return periods

    def _monitor_vars_collect(self) -> List[str]:
        """Collect-side metrics :meth:`_forward_collect` may return beside the action (``epsilon``), monitored as
        ``collector/<key>``."""
        return []

    def optimize(self, loss: torch.Tensor, *optimizers: torch.optim.Optimizer,
                 max_grad_norm: Optional[float] = None) -> Optional[torch.Tensor]:
        """One gradient step on ``loss``: zero the gradients, ``loss.backward()``, clip their global norm to
        ``max_grad_norm`` if given, step every optimizer. Returns the norm before clipping (a 0-d tensor; None
        without ``max_grad_norm``; ``math.inf`` measures without clipping)."""
        steps = [self.adam_step(optimizer) for optimizer in optimizers]
        norm = None
        with span("learner/backward", lane="learner"):
            for step in steps:
                step.zero_grad()
            loss.backward()
            if max_grad_norm is not None:
                params = steps[0].params if len(steps) == 1 else [p for s in steps for p in s.params]
                norm = clip_grad_norm_(params, max_grad_norm)
        with span("learner/optimizer_step", lane="learner"):
            for step in steps:
                step()
        return norm

    def adam_step(self, optimizer: torch.optim.Optimizer) -> AdamStep:
        """The cached :class:`~rlearn.optim.AdamStep` that :meth:`optimize` steps ``optimizer`` with."""
        step = self._adam_steps.get(id(optimizer))
        if step is None or step.optimizer is not optimizer:
            step = self._adam_steps[id(optimizer)] = AdamStep(optimizer)
            step.params = [p for group in optimizer.param_groups for p in group["params"]]
        return step

    def _checked_keys(self, method: str) -> List[str]:
        returned = getattr(self, method)()
        if not isinstance(returned, (list, tuple)):
            raise TypeError(
                f"{type(self).__name__}.{method}() ({defined_at(getattr(type(self), method))}) must return a list of "
                f"monitor keys (every key {method.replace('_monitor_vars', '_forward')}() may report), got {returned!r}")
        keys = list(returned)
        for i, key in enumerate(keys):
            if not isinstance(key, str) or not key:
                raise TypeError(f"{type(self).__name__}.{method}() must return non-empty strings, got {key!r}")
            if key in keys[:i]:
                raise ValueError(f"{type(self).__name__}.{method}() lists {key!r} twice")
        return keys

    def monitor_vars_collect(self) -> List[str]:
        """:meth:`_monitor_vars_collect`, checked (unique non-empty strings, no transition-data name)."""
        keys = self._checked_keys("_monitor_vars_collect")
        reserved = {"obs", "next_obs", "reward", "terminated", "truncated", "action", "env_action"}
        clash = [key for key in keys if key in reserved]
        if clash:
            raise ValueError(f"{type(self).__name__}._monitor_vars_collect() lists {clash}: "
                             "those names are transition data")
        return keys

    def monitor_vars(self) -> List[str]:
        """The declared monitor keys, checked: the learn keys, then the collect keys as ``collector/<key>``."""
        learn = self._checked_keys("_monitor_vars_learn")
        collect = [f"collector/{key}" for key in self.monitor_vars_collect()]
        both = set(learn).intersection(collect)
        if both:
            raise ValueError(f"{type(self).__name__}._monitor_vars_learn() lists {sorted(both)}, monitored collect keys")
        return learn + collect

    # ---------------------------------------------------------------- collect
    def _init_collect(self) -> None:
        """Prepare the collect mode (exploration noise etc.). Optional."""

    @abc.abstractmethod
    def _forward_collect(self, obs: np.ndarray, envstep: int) -> Dict[str, np.ndarray]:
        """Exploration for ``obs [N, *obs_shape]`` after ``envstep`` env steps: ``action`` (stored), optionally
        ``env_action`` (sent to the environment), per-step arrays to store and collect-side metrics."""

    # ------------------------------------------------------------------- eval
    def _init_eval(self) -> None:
        """Prepare the eval mode. Optional."""

    @abc.abstractmethod
    def _forward_eval(self, obs: np.ndarray) -> np.ndarray:
        """Deterministic actions for a batch ``obs [N, *obs_shape]``, in the environment's format."""

    # ------------------------------------------------------------------ state
    def modules(self) -> Dict[str, torch.nn.Module]:
        """The policy's networks by name (target networks included), never DDP-wrapped."""
        return {}

    def optimizers(self) -> Dict[str, torch.optim.Optimizer]:
        """The policy's optimizers by name. Used for checkpoints, LR scheduling and ``cur_lr``."""
        return {}

    # ------------------------------------------------------------------- distributed
    def ddp_modules(self) -> List[str]:
        """Names (keys of :meth:`modules`) of the networks :meth:`setup_distributed` wraps in DDP; default:
        every network with a parameter one of :meth:`optimizers` updates (docs/distributed.md)."""
        from rlearn.distributed.ddp import default_ddp_modules

        return default_ddp_modules(self)

    def setup_distributed(self) -> bool:
        """Collective, once per rank before training: broadcast rank 0's networks, wrap :meth:`ddp_modules` in
        DDP, average the other gradients (docs/distributed.md). False in a single process; idempotent."""
        from rlearn.distributed.ddp import setup_policy_ddp

        return setup_policy_ddp(self)

    def teardown_distributed(self) -> bool:
        """Undo :meth:`setup_distributed` on this rank, before it leaves the process group; True if something
        was undone."""
        from rlearn.distributed.ddp import teardown_policy_ddp

        return teardown_policy_ddp(self)

    def extra_state(self) -> Dict[str, Any]:
        """Anything else a resumed run needs (counters, running statistics); see :meth:`load_extra_state`."""
        return {}

    def load_extra_state(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`extra_state` returned."""

    def state_dict(self) -> Dict[str, Any]:
        """Everything needed to resume: networks, optimizers, extra state and RNG state."""
        return {
            "modules": {name: module.state_dict() for name, module in self.modules().items()},
            "optimizers": {name: opt.state_dict() for name, opt in self.optimizers().items()},
            "extra": self.extra_state(),
            "np_random": self.np_random.bit_generator.state,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a :meth:`state_dict`; a missing or unexpected network/optimizer is a clear error."""
        for section, owned in (("modules", self.modules()), ("optimizers", self.optimizers())):
            saved = state.get(section, {})
            missing = sorted(set(owned) - set(saved))
            unexpected = sorted(set(saved) - set(owned))
            if missing or unexpected:
                raise ValueError(
                    f"{type(self).__name__}: checkpoint {section} do not match this policy "
                    f"(missing: {missing or 'none'}, unexpected: {unexpected or 'none'})"
                )
            for name, obj in owned.items():
                obj.load_state_dict(saved[name])
        self.load_extra_state(state.get("extra", {}))
        if "np_random" in state:
            self.np_random.bit_generator.state = state["np_random"]


def _available_memory(device: torch.device) -> Optional[int]:
    """Bytes the policy's networks may still take on ``device`` (None where unknown)."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    return available_memory() if device.type == "cpu" else None  # the CPU's: what the replay buffer reads


def check_initialised(policy: Any) -> None:
    """A TypeError about the contract if ``policy`` is a :class:`Policy` whose ``__init__`` did not call
    ``super().__init__(cfg, observation_space, action_space, device=..., seed=...)``."""
    if isinstance(policy, Policy) and not ("cfg" in vars(policy) and "_adam_steps" in vars(policy)):
        init = type(policy).__init__
        raise TypeError(
            f"{type(policy).__name__}.__init__ ({defined_at(init)}) must call super().__init__(cfg, observation_space, "
            "action_space, device=device, seed=seed): Policy.__init__ sets cfg, the spaces, device and np_random, "
            "then calls _init_learn (docs/write-your-own-policy.md)")


def _unwrap(module: Any) -> Any:
    """The network inside a ``DistributedDataParallel`` wrapper (without importing torch.distributed eagerly)."""
    inner = getattr(module, "module", None)
    if isinstance(module, torch.nn.parallel.DistributedDataParallel) and isinstance(inner, torch.nn.Module):
        return inner
    return module


def is_scalar(value: Any) -> bool:
    """True for values an info dict may hold (what :func:`rlearn.monitor.scalars.to_float` accepts)."""
    from rlearn.monitor.scalars import is_scalar as accepts

    return accepts(value)
