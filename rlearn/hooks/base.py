"""The hook core: ``Hook``, ``Priority``, ``HookManager`` and ``build_hook`` (see docs/hooks.md)."""

from __future__ import annotations

import bisect
import difflib
import enum
from typing import Any, Dict, List, Mapping, Optional, Tuple, Type, Union

from rlearn.registry import HOOKS, Registry
from rlearn.values import is_int

__all__ = ["Hook", "Priority", "get_priority", "HookManager", "HOOKS", "build_hook", "MOUNT_POINTS", "PriorityLike"]


class Priority(enum.IntEnum):
    """Hook priorities: a lower value runs first."""

    HIGHEST = 0
    VERY_HIGH = 10
    HIGH = 30
    ABOVE_NORMAL = 40
    NORMAL = 50
    BELOW_NORMAL = 60
    LOW = 70
    VERY_LOW = 90
    LOWEST = 100


PriorityLike = Union[int, str, Priority]


def get_priority(priority: PriorityLike) -> int:
    """A :class:`Priority`, a name (any case) or an int 0..100 as an int: ``ValueError`` for an unknown name or an
    int out of range, ``TypeError`` for any other type."""
    if is_int(priority):
        value = int(priority)
        if not 0 <= value <= 100:
            raise ValueError(f"hook priority must be in 0..100 (lower runs first), got {value}")
        return value
    if isinstance(priority, str):
        member = Priority.__members__.get(priority.strip().upper())
        if member is None:
            names = list(Priority.__members__)
            close = difflib.get_close_matches(priority.strip().upper(), names, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"unknown hook priority {priority!r}.{hint} Known names: {', '.join(names)}")
        return int(member)
    what = "not a bool" if isinstance(priority, bool) else f"got {type(priority).__name__}"
    raise TypeError(f"hook priority must be a Priority, a name or an int 0..100, {what}: {priority!r}")


class Hook:
    """Base class of hooks: every mount point is a method that does nothing by default. A hook with state implements
    ``state_dict()`` / ``load_state_dict(state)`` (saved under its class name). ``priority`` is reserved (set at
    registration); a subclass chooses its default with ``DEFAULT_PRIORITY``."""

    #: priority used when the hook is registered (or built from a config) without an explicit one
    DEFAULT_PRIORITY: PriorityLike = Priority.NORMAL

    def before_run(self, learner: Any) -> None:
        """Once, before the first train iteration (the run calls it; also after resuming)."""

    def after_run(self, learner: Any) -> None:
        """Once, after the last train iteration (also when training stops early or is interrupted)."""

    def before_iter(self, learner: Any) -> None:
        """Before each train iteration; ``learner.train_iter`` is the index of the coming iteration."""

    def after_iter(self, learner: Any) -> None:
        """After each train iteration: ``learner.train_iter`` counts it (the monitor ticks after these hooks)."""

    def before_collect(self, learner: Any) -> None:
        """Before the run collects environment steps."""

    def after_collect(self, learner: Any) -> None:
        """After the run collected environment steps (``learner.envstep`` may not be updated yet)."""

    def before_eval(self, learner: Any) -> None:
        """Before an evaluation."""

    def after_eval(self, learner: Any) -> None:
        """After an evaluation."""

    def before_save_checkpoint(self, learner: Any, checkpoint: Dict[str, Any]) -> None:
        """Before ``checkpoint`` is written; a hook may add entries to it."""

    def after_load_checkpoint(self, learner: Any, checkpoint: Dict[str, Any]) -> None:
        """After a checkpoint was loaded and every state restored."""

    @staticmethod
    def every_n_iters(learner: Any, n: int) -> bool:
        """True when ``learner.train_iter`` is a multiple of ``n`` (in ``after_iter``: after iterations n, 2n...);
        ``n <= 0`` never fires."""
        _check_int("n", n)
        return n > 0 and learner.train_iter % n == 0

    @staticmethod
    def every_n_envsteps(learner: Any, n: int, last: Optional[int]) -> bool:
        """True when ``learner.envstep`` reached a new multiple of ``n`` since envstep ``last`` (None: never fired).
        Env steps grow in chunks, so this compares ``envstep // n`` with ``last // n``. ``n <= 0`` never fires."""
        _check_int("n", n)
        if last is not None:
            _check_int("last", last)
        return n > 0 and learner.envstep // n > (0 if last is None else last // n)

    @staticmethod
    def is_first_iter(learner: Any) -> bool:
        """True in ``before_iter`` of the first iteration of a run (``train_iter == 0``)."""
        return learner.train_iter == 0

    def __repr__(self) -> str:
        priority = self.__dict__.get("priority")
        return f"{type(self).__name__}(priority={priority})" if priority is not None else f"{type(self).__name__}()"


def _check_int(name: str, value: Any) -> None:
    # any int: n <= 0 is valid and never fires, and a float n is a TypeError (check_int's ValueError would not be)
    if not is_int(value):
        raise TypeError(f"{name} must be an int, got {value!r}")


#: every mount point name :meth:`HookManager.call_hook` accepts
MOUNT_POINTS: Tuple[str, ...] = (
    "before_run", "after_run", "before_iter", "after_iter", "before_collect", "after_collect", "before_eval",
    "after_eval", "before_save_checkpoint", "after_load_checkpoint",
)


class HookManager:
    """Mixin holding a priority-sorted list of hooks (:class:`rlearn.learner.BaseLearner` inherits it)."""

    def __init__(self) -> None:
        super().__init__()
        self._hooks: List[Hook] = []  # sorted by priority; insort_right keeps ties in registration order
        #: mount point -> the hooks that implement it, in calling order (rebuilt after each registration)
        self._mounted: Dict[str, List[Hook]] = {}

    @property
    def hooks(self) -> List[Hook]:
        """The registered hooks in calling order (a copy: register hooks with :meth:`register_hook`)."""
        return list(self._hooks)

    def register_hook(self, hook: Hook, priority: Optional[PriorityLike] = None) -> None:
        """Insert ``hook`` by ``priority`` (see :func:`get_priority`; None: its ``DEFAULT_PRIORITY``) and set
        ``hook.priority``; a hook that already has that (reserved) attribute is a ``ValueError``."""
        if not isinstance(hook, Hook):
            raise TypeError(f"register_hook expects a rlearn.hooks.Hook instance, got {type(hook).__name__}: {hook!r}")
        if hasattr(hook, "priority"):
            raise ValueError(
                f'"priority" is a reserved attribute for hooks: {type(hook).__name__} already has one '
                f"({getattr(hook, 'priority')!r}); a hook is registered once, and sets no priority itself "
                "(use the DEFAULT_PRIORITY class attribute)")
        hook.priority = get_priority(hook.DEFAULT_PRIORITY if priority is None else priority)  # type: ignore
        bisect.insort_right(self._hooks, hook, key=lambda h: h.priority)
        self._mounted = {}

    def hooks_at(self, name: str) -> List[Hook]:
        """The hooks :meth:`call_hook` calls at mount point ``name``, in order: those that override
        :class:`Hook`'s no-op (looked up once per registration). An unknown name is a ``ValueError``."""
        return list(self._hooks_at(name))

    def _hooks_at(self, name: str) -> List[Hook]:
        mounted = self._mounted.get(name)
        if mounted is None:
            if name not in MOUNT_POINTS:
                close = difflib.get_close_matches(str(name), MOUNT_POINTS, n=1)
                hint = f" Did you mean {close[0]!r}?" if close else ""
                raise ValueError(f"unknown hook mount point {name!r}.{hint} Mount points: {', '.join(MOUNT_POINTS)}")
            noop = getattr(Hook, name)
            mounted = [hook for hook in self._hooks
                       if getattr(type(hook), name, noop) is not noop or name in getattr(hook, "__dict__", ())]
            self._mounted[name] = mounted
        return mounted

    def call_hook(self, name: str, *args: Any, **kwargs: Any) -> None:
        """Call ``hook.<name>(self, *args, **kwargs)`` for every hook of :meth:`hooks_at` in order."""
        for hook in self._hooks_at(name):
            getattr(hook, name)(self, *args, **kwargs)

    def get_hook(self, which: Union[str, Type[Hook]]) -> Hook:
        """The first registered hook that is an instance of class ``which``, or whose class is named ``which``
        (``KeyError`` listing the registered hooks when there is none)."""
        if not isinstance(which, (str, type)):
            raise TypeError(f"get_hook expects a hook class or class name, got {which!r}")
        for hook in self._hooks:
            if type(hook).__name__ == which if isinstance(which, str) else isinstance(hook, which):
                return hook
        wanted = which if isinstance(which, str) else which.__name__
        registered = ", ".join(type(h).__name__ for h in self._hooks) or "none"
        raise KeyError(f"no hook {wanted!r} is registered (registered: {registered})")


def build_hook(cfg: Mapping[str, Any], registry: Registry = HOOKS) -> Tuple[Hook, int]:
    """``(hook, priority)`` from a config dict: ``type`` (a registered name), optional ``priority`` (default: the
    class's ``DEFAULT_PRIORITY``) and the constructor's arguments. An unknown type raises
    :class:`rlearn.registry.RegistryError`; a bad priority ``ValueError``/``TypeError`` before anything is built."""
    if not isinstance(cfg, Mapping):
        raise TypeError(f"a hook config must be a dict with a 'type' key, got {type(cfg).__name__}: {cfg!r}")
    args = dict(cfg)
    priority = args.pop("priority", None)
    kind = args.get("type")
    # an unknown type is reported before the priority is looked at
    cls = registry.get(kind) if isinstance(kind, str) else kind if isinstance(kind, type) else None
    try:
        priority = get_priority(getattr(cls, "DEFAULT_PRIORITY", Priority.NORMAL) if priority is None else priority)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"hook config {dict(cfg)!r}: {exc}") from exc
    hook = registry.build(args)
    if not isinstance(hook, Hook):
        raise TypeError(f"hook config {dict(cfg)!r} built a {type(hook).__name__}, which is not a rlearn.hooks.Hook")
    return hook, priority
