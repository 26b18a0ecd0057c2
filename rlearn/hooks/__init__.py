"""Hooks: code the learner runs at fixed points of a run, in priority order (see docs/hooks.md). The built-in
hooks register themselves in :data:`HOOKS` when imported, so configs can name them."""

from rlearn.hooks.base import HOOKS, MOUNT_POINTS, Hook, HookManager, Priority, build_hook, get_priority
from rlearn.hooks.lr_scheduler import LRSchedulerHook
from rlearn.hooks.timer import TimerHook
from rlearn.hooks.log_show import LogShowHook
from rlearn.hooks.checkpoint import CheckpointHook
from rlearn.hooks.eval import EvalHook, EvalProgress, EvalState, read_evaluations

__all__ = [
    "HOOKS", "MOUNT_POINTS", "Hook", "HookManager", "Priority", "build_hook", "get_priority", "LRSchedulerHook",
    "TimerHook", "LogShowHook", "CheckpointHook", "EvalHook", "EvalProgress", "EvalState", "read_evaluations",
]
