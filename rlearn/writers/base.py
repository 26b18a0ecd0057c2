"""``Writer``: the one interface between the metric path and an output format.

Every set of numbers the learner shows (a periodic log, an evaluation result) goes to each writer of
``learner.writers`` with ``write_scalars(scalars, step_iter, step_env)``. Names are final (``loss_avg``,
``evaluator/episode_return_mean``): a writer decides how to lay them out, never what they mean. See
docs/writers.md.
"""

from __future__ import annotations

import abc
import logging
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Union

from rlearn.config.spec import is_int

__all__ = ["Writer", "WriterFanout", "ScalarValue", "StateCheck", "count", "text", "optional", "list_of", "table_of",
           "unique_names"]

#: a value handed to a writer; ``None`` means "no value in the window" (shown as ``-``, never written as 0)
ScalarValue = Optional[Union[int, float]]


#: a check of one saved-state value: the complaint ("must be an int >= 0, got -3"), or '' when it is fine
StateCheck = Callable[[Any], str]


def count(value: Any) -> str:
    """A count: an int >= 0 (not a bool)."""
    return "" if is_int(value) and value >= 0 else f"must be an int >= 0, got {value!r}"


def text(value: Any) -> str:
    """A non-empty string."""
    return "" if isinstance(value, str) and value else f"must be a non-empty str, got {value!r}"


def optional(check: StateCheck) -> StateCheck:
    """``check``, or None."""
    return lambda value: "" if value is None else check(value)


def list_of(check: StateCheck, length: Optional[int] = None) -> StateCheck:
    """A list (or tuple) of ``length`` items (any length when None), each passing ``check``."""
    def check_list(value: Any) -> str:
        if not isinstance(value, (list, tuple)) or length is not None and len(value) != length:
            return f"must be a list of {length or 'any number of'} item(s), got {value!r}"
        return next((f"item {i} {why}" for i, item in enumerate(value) if (why := check(item))), "")
    return check_list


def table_of(check: StateCheck) -> StateCheck:
    """A dict of str -> values passing ``check``."""
    def check_table(value: Any) -> str:
        if not isinstance(value, Mapping):
            return f"must be a dict, got {type(value).__name__}"
        return next((f"entry {key!r} {why or 'must have a str key'}" for key, item in value.items()
                     if (why := check(item)) or not isinstance(key, str)), "")
    return check_table


class Writer(abc.ABC):
    """Where the numbers of the metric path go.

    Subclasses implement :meth:`write_scalars` and :meth:`write_text`; the other methods do nothing by
    default. A writer that must remember something across a resume returns it from :meth:`state_dict`; the
    learner saves it in every checkpoint under :attr:`name` and hands it back to :meth:`load_state_dict`
    before calling :meth:`rewind`.
    """

    #: the keys :meth:`state_dict` may hold, each with its check; the required ones in :attr:`REQUIRED_STATE`
    STATE_FIELDS: Mapping[str, StateCheck] = {}
    REQUIRED_STATE: Sequence[str] = ()

    @property
    def name(self) -> str:
        """Name of this writer in checkpoints and messages (default: the class name)."""
        return type(self).__name__

    @abc.abstractmethod
    def write_scalars(self, scalars: Mapping[str, ScalarValue], step_iter: int, step_env: int) -> None:
        """Write one set of named numbers measured at train iteration ``step_iter`` and env step ``step_env``,
        in the order to show them. A ``None`` value has no value at this point: show it as missing (``-``)
        or leave it out, never as 0."""

    @abc.abstractmethod
    def write_text(self, tag: str, text: str, step_iter: int) -> None:
        """Write a piece of text (a config, a note) under ``tag`` at train iteration ``step_iter``."""

    def write_config(self, config: Mapping[str, Any], step_iter: int) -> None:
        """Record the run's resolved config (the nested dict of :func:`rlearn.config.load_config`) when a run
        starts or resumes."""

    def write_hparams(self, hparams: Mapping[str, Any], metrics: Mapping[str, float], step_iter: int) -> None:
        """Record the run's flat hyper-parameters (``{"policy.lr": 0.001}``) with its final ``metrics``, once
        when a run ends, so that runs can be compared side by side (TensorBoard's HParams tab)."""

    def write_video(self, name: str, frames: Sequence[Any], fps: float, step_iter: int, step_env: int) -> None:
        """Show a recorded episode (``frames``: H x W x 3 uint8 arrays, played at ``fps``) under the final
        name ``name`` (``evaluator/video``)."""

    def flush(self) -> None:
        """Make everything written so far durable (called by the learner after each write)."""

    def close(self) -> None:
        """Release files; a later write may open new ones."""

    def rewind(self, step_iter: int, step_env: int) -> None:
        """Resume: drop everything written after train iteration ``step_iter`` / env step ``step_env`` (what
        a crashed run wrote after its last checkpoint), so the resumed run adds no duplicate point."""

    def state_dict(self) -> Optional[dict]:
        """What a resumed run needs to :meth:`rewind` exactly; None (the default) for a stateless writer."""
        return None

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned (called on resume, before :meth:`rewind`)."""

    def check_state(self, state: Any) -> str:
        """Why ``state`` (read from a checkpoint) cannot be loaded, or '' when it can: a dict with every key
        of :attr:`REQUIRED_STATE`, each known key passing its check in :attr:`STATE_FIELDS`."""
        if not isinstance(state, Mapping):
            return f"its state must be a dict, got {type(state).__name__}"
        missing = [key for key in self.REQUIRED_STATE if key not in state]
        if missing:
            return f"its state has no {', '.join(map(repr, missing))}"
        return next((f"its state's {key!r} {why}" for key, check in self.STATE_FIELDS.items()
                     if key in state and (why := check(state[key]))), "")

    def require_state(self, state: Any) -> None:
        """Raise ``ValueError`` naming this writer when :meth:`check_state` finds a problem (call it first in
        :meth:`load_state_dict`)."""
        problem = self.check_state(state)
        if problem:
            raise ValueError(f"writer {self.name}: {problem}")


def unique_names(objects: Iterable[Any], name: Callable[[Any], str]) -> Dict[str, Any]:
    """``{name(obj): obj}`` in order, a repeated name getting the suffix ``.2``, ``.3``..."""
    named: Dict[str, Any] = {}
    for obj in objects:
        key, suffix = name(obj), 2
        while key in named:
            key, suffix = f"{name(obj)}.{suffix}", suffix + 1
        named[key] = obj
    return named


class WriterFanout:
    """The writers a run's numbers go to, called through one typed method per kind of output.

    A writer that raises ``Exception`` (a full disk, a tracking service's error) is reported once on
    ``logger`` (with its traceback, except for an ``OSError`` such as an unreachable server or a full disk,
    which its one line says), closed as far as it can be, removed from :attr:`writers` and listed in
    :attr:`failed` (name -> error); the run and the other writers go on.
    """

    def __init__(self, writers: Iterable[Writer], logger: logging.Logger) -> None:
        self.writers: List[Writer] = list(writers)
        for writer in self.writers:
            if not isinstance(writer, Writer):
                raise TypeError(f"learner writers must be rlearn.writers.Writer instances, got {type(writer).__name__}")
        self.failed: Dict[str, str] = {}
        self.logger = logger

    def write_scalars(self, scalars: Mapping[str, ScalarValue], step_iter: int, step_env: int) -> None:
        """:meth:`Writer.write_scalars` on every writer, then :meth:`flush` (as every ``write_*`` method)."""
        self._each("write_scalars", lambda writer: writer.write_scalars(scalars, step_iter, step_env), flush=True)

    def write_text(self, tag: str, text: str, step_iter: int) -> None:
        self._each("write_text", lambda writer: writer.write_text(tag, text, step_iter), flush=True)

    def write_video(self, name: str, frames: Sequence[Any], fps: float, step_iter: int, step_env: int) -> None:
        self._each("write_video", lambda writer: writer.write_video(name, frames, fps, step_iter, step_env), flush=True)

    def write_config(self, config: Mapping[str, Any], step_iter: int) -> None:
        self._each("write_config", lambda writer: writer.write_config(config, step_iter), flush=True)

    def write_hparams(self, hparams: Mapping[str, Any], metrics: Mapping[str, float], step_iter: int) -> None:
        self._each("write_hparams", lambda writer: writer.write_hparams(hparams, metrics, step_iter), flush=True)

    def flush(self) -> None:
        self._each("flush", lambda writer: writer.flush())

    def close(self) -> None:
        self._each("close", lambda writer: writer.close())

    def rewind(self, step_iter: int, step_env: int) -> None:
        self._each("rewind", lambda writer: writer.rewind(step_iter, step_env))

    def by_name(self) -> Dict[str, Writer]:
        """The writers by :attr:`Writer.name` (a repeated name gets ``.2``, ``.3``...), for checkpoints."""
        return unique_names(self.writers, lambda writer: writer.name)

    def _each(self, what: str, call: Callable[[Writer], None], flush: bool = False) -> None:
        """``call(writer)`` for every writer (``what`` names it in the error), then :meth:`flush` if asked."""
        for writer in list(self.writers):
            try:
                call(writer)
            except Exception as exc:  # noqa: BLE001 - any writer error: disable that writer only
                self._disable(writer, what, exc)
        if flush:
            self.flush()

    def _disable(self, writer: Writer, what: str, exc: Exception) -> None:
        if writer in self.writers:
            self.writers.remove(writer)
        self.failed[writer.name] = f"{type(exc).__name__}: {exc}"
        self.logger.error(
            "writer %s failed in %s (%s: %s): it is disabled for the rest of this run; training and the other "
            "writers go on (the checkpoints still hold every number's state)", writer.name, what,
            type(exc).__name__, exc, exc_info=None if isinstance(exc, OSError) else exc)
        try:
            writer.close()
        except Exception:  # noqa: BLE001 - it already failed; release what can be released
            pass
