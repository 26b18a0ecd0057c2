"""``LearnerCheckpoints``: the checkpoint half of :class:`~rlearn.learner.BaseLearner` (see docs/checkpoints.md)."""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any, Dict, Mapping, Sequence, Union

from rlearn import __version__
from rlearn.checkpoint import files as ckpt
from rlearn.checkpoint.fit import check_policy_state, listing
from rlearn.fileio import atomic_write_bytes
from rlearn.writers.base import unique_names

__all__ = ["LearnerCheckpoints"]


def _has_state(obj: Any) -> bool:
    return callable(getattr(obj, "state_dict", None)) and callable(getattr(obj, "load_state_dict", None))


class LearnerCheckpoints:
    """Checkpoint methods of :class:`~rlearn.learner.BaseLearner`; not used on its own."""

    def register_state(self, name: str, obj: Any) -> None:
        """Save ``obj.state_dict()`` in every checkpoint under ``name`` and restore it on load."""
        if not isinstance(name, str) or not name:
            raise TypeError(f"state name must be a non-empty str, got {name!r}")
        if not _has_state(obj):
            raise TypeError(f"register_state({name!r}): {type(obj).__name__} has no state_dict/load_state_dict")
        if name in self._states:
            raise ValueError(f"a state called {name!r} is already registered")
        self._states[name] = obj

    def _stateful_hooks(self) -> Dict[str, Any]:
        stateful = [hook for hook in self.hooks if _has_state(hook)]
        return unique_names(stateful, lambda hook: type(hook).__name__)

    def checkpoint_dict(self) -> Dict[str, Any]:
        """Everything a resumed run needs, as saved by :meth:`save_checkpoint` (see docs/checkpoints.md)."""
        hub = self.message_hub.state_dict()
        # its scalar histories as plain containers (safe loading)
        hub["log_scalars"] = {key: buffer.state_dict() for key, buffer in hub["log_scalars"].items()}
        return {
            "format": ckpt.FORMAT_TAG,
            "format_version": ckpt.FORMAT_VERSION,
            "rlearn_version": __version__,
            "policy_class": type(self.policy).__qualname__,
            "policy_module": type(self.policy).__module__,
            "train_iter": self.train_iter,
            "envstep": self.envstep,
            "saved_at": time.time(),
            "learner": {
                **self.metrics.state_dict(),
                "tick_pending": self._tick_pending,
                "message_hub": hub,
                "writers": {name: state for name, writer in self.metrics.writers.by_name().items()
                            if (state := writer.state_dict()) is not None},
            },
            "policy": self.policy.state_dict(),
            "hooks": {name: hook.state_dict() for name, hook in self._stateful_hooks().items()},
            "states": {name: obj.state_dict() for name, obj in self._states.items()},
            "rng": ckpt.capture_rng_state(),
            "config": copy.deepcopy(dict(self.run_config)) if self.run_config is not None else None,
        }

    def save_checkpoint(self, path: Union[str, Path, None] = None, copies: Sequence[Union[str, Path]] = ()) -> Path:
        """Save a checkpoint atomically to ``path`` (default ``<work_dir>/ckpt/iteration_<train_iter>.pt``) and to
        each path in ``copies`` (e.g. ``latest.pt``); returns ``path``. Writers are flushed first, so every point
        the checkpoint counts is on disk; a state that cannot be stored raises
        :class:`~rlearn.checkpoint.CheckpointError` before any file is touched."""
        if path is None:
            if self.work_dir is None:
                raise ValueError("save_checkpoint() needs a path when the learner has no work_dir")
            path = self.work_dir / "ckpt" / f"iteration_{self.train_iter}.pt"
        path = Path(path)
        self.metrics.writers.flush()
        checkpoint = self.checkpoint_dict()
        self.call_hook("before_save_checkpoint", checkpoint)
        data = ckpt.serialize_checkpoint(checkpoint)
        for target in (path, *copies):
            atomic_write_bytes(target, data)
        return path

    def load_checkpoint(self, path: Union[str, Path], rewind_tensorboard: bool = True) -> Dict[str, Any]:
        """Restore everything a checkpoint of :meth:`save_checkpoint` holds and return its content; with
        ``rewind_tensorboard`` every writer is rewound to it (:meth:`~rlearn.writers.Writer.rewind`). A problem
        raises :class:`~rlearn.checkpoint.CheckpointError` naming the file, before anything is changed."""
        path = Path(path)
        checkpoint = ckpt.read_checkpoint(path)
        self._check_compatible(path, checkpoint)
        saved_hooks = checkpoint["hooks"]
        hooks = self._stateful_hooks()
        for name in sorted(set(saved_hooks) - set(hooks)):
            self.logger.warning("checkpoint %s has state for hook %s, which is not registered; ignored", path, name)
        for name in sorted(set(hooks) - set(saved_hooks)):
            self.logger.warning("checkpoint %s has no state for hook %s; it starts fresh", path, name)

        def apply(section: str, action) -> None:
            try:
                action()
            except Exception as exc:
                raise ckpt.CheckpointError(f"checkpoint {path}: cannot restore {section} "
                                           f"({type(exc).__name__}: {exc})") from exc

        learner_state = checkpoint["learner"]
        apply("the policy", lambda: self.policy.load_state_dict(checkpoint["policy"]))
        apply("the monitor", lambda: self.metrics.load_state_dict(learner_state))
        windows = self.cfg["monitor_windows"]
        configured = {key: windows.get(key, self.cfg["monitor_window"]) for key in self.monitor_vars()}
        restored = {key: self.monitor.window_size(key) for key in configured}
        if configured != restored:
            changed = ", ".join(f"{k}: {restored[k]} (config {v})" for k, v in configured.items() if v != restored[k])
            self.logger.warning("checkpoint %s: monitor windows differ from the config; the checkpoint's are kept "
                                "so the windows continue: %s", path, changed)
        if learner_state.get("tick_pending"):
            self.monitor.tick()  # the checkpoint was taken in after_iter, before the iteration's tick
        if "message_hub" in learner_state:
            apply("the message hub", lambda: self.message_hub.load_state_dict(learner_state["message_hub"]))
        for name, hook in hooks.items():
            if name in saved_hooks:
                apply(f"hook {name}", lambda h=hook, n=name: h.load_state_dict(saved_hooks[n]))
        for name, obj in self._states.items():
            apply(f"state {name!r}", lambda o=obj, n=name: o.load_state_dict(checkpoint["states"][n]))
        apply("the RNG states", lambda: ckpt.restore_rng_state(checkpoint["rng"]))
        self.train_iter, self.envstep = int(checkpoint["train_iter"]), int(checkpoint["envstep"])
        writer_states = dict(learner_state.get("writers", {}))
        for name, writer in self.metrics.writers.by_name().items():
            if name in writer_states:
                apply(f"writer {name}", lambda w=writer, n=name: w.load_state_dict(writer_states[n]))
        self._publish_info()
        if rewind_tensorboard:
            self.metrics.writers.rewind(self.train_iter, self.envstep)
        self.call_hook("after_load_checkpoint", checkpoint)
        self.logger.info("resumed from %s: train_iter=%d envstep=%d", path, self.train_iter, self.envstep)
        return checkpoint

    def _check_compatible(self, path: Path, checkpoint: Mapping[str, Any]) -> None:
        """Policy class, networks, optimizers, writers' states and registered states must fit; raises
        CheckpointError naming what does not, before anything is loaded."""
        saved_class, current_class = checkpoint["policy_class"], type(self.policy).__qualname__
        if saved_class != current_class:
            raise ckpt.CheckpointError(
                f"checkpoint {path}: written by policy {saved_class}, but this learner runs {current_class}")
        check_policy_state(path, self.policy, checkpoint["policy"])
        learner_state = checkpoint["learner"]
        saved = learner_state.get("writers", {}) if isinstance(learner_state, Mapping) else {}
        if not isinstance(saved, Mapping):
            problems = [f"the writers' states are a {type(saved).__name__}, not a dict"]
        else:  # each writer's Writer.check_state
            problems = [f"writer {name}: {problem}" for name, writer in self.metrics.writers.by_name().items()
                        if name in saved and (problem := writer.check_state(saved[name]))]
        if problems:
            raise ckpt.CheckpointError(f"checkpoint {path}: cannot restore {listing(problems)}")
        missing_states = sorted(set(self._states) - set(checkpoint["states"]))
        if missing_states:
            raise ckpt.CheckpointError(
                f"checkpoint {path}: no state for registered object(s) {', '.join(map(repr, missing_states))}")
        for name in sorted(set(checkpoint["states"]) - set(self._states)):
            self.logger.warning("checkpoint %s has state %r, which is not registered; ignored", path, name)

