"""``LogProcessor``: turns a :class:`MessageHub`'s scalar histories into ``{name: value}`` for display."""

from __future__ import annotations

import copy
import inspect
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Union

from rlearn.logging.history_buffer import HistoryBuffer
from rlearn.logging.message_hub import MessageHub

__all__ = ["LogProcessor", "LogProcessorConfigError"]

Window = Union[int, str]
#: substrings of keys smoothed over the window by default
DEFAULT_SMOOTH_KEYS = ("loss", "time")
_RESERVED = ("data_src", "method_name", "log_name", "window_size")


class LogProcessorConfigError(ValueError):
    """A ``LogProcessor`` configuration is invalid; the message names the entry and the field."""


class LogProcessor:
    """Chooses how each scalar of a hub is summarised when it is logged.

    Default statistic per key: the mean over the last ``window_size`` updates for keys containing
    ``'loss'`` or ``'time'`` (or any substring in ``smooth_keys``), the current value for every other key
    (learning rates, counters...). ``custom_cfg`` changes that per key; each entry is a dict with

    * ``data_src`` (required): the key without its prefix, e.g. ``'loss'`` for ``'train/loss'``;
    * ``method_name`` (required): a statistic registered on :class:`HistoryBuffer` (``mean``, ``min``,
      ``max``, ``current``, ``nonfinite`` or one added with ``register_statistics``);
    * ``log_name`` (optional): the output name. Without it the entry *replaces* the default statistic of
      ``data_src``; with it the entry is *added* next to it;
    * ``window_size`` (optional): a positive int or ``'global'`` (the whole retained history). When the
      statistic takes a ``window_size`` argument and the entry gives none, the processor's
      ``window_size`` is used;
    * any other key: passed to the statistic as a keyword argument.

    Every entry is checked at construction; errors are :class:`LogProcessorConfigError` (a
    ``ValueError``) naming the entry.
    """

    def __init__(
        self,
        window_size: Window = 10,
        custom_cfg: Optional[Sequence[Mapping[str, Any]]] = None,
        smooth_keys: Iterable[str] = (),
    ) -> None:
        self.window_size = _check_window(window_size, "LogProcessor window_size")
        smooth = list(smooth_keys) if not isinstance(smooth_keys, str) else [smooth_keys]
        for key in smooth:
            if not isinstance(key, str) or not key:
                raise LogProcessorConfigError(f"smooth_keys must hold non-empty strings; got {key!r}")
        self.smooth_keys = tuple(DEFAULT_SMOOTH_KEYS) + tuple(k for k in smooth if k not in DEFAULT_SMOOTH_KEYS)
        if custom_cfg is None:
            custom_cfg = []
        if isinstance(custom_cfg, Mapping) or not isinstance(custom_cfg, Sequence):
            raise LogProcessorConfigError(f"custom_cfg must be a list of dicts; got {type(custom_cfg).__name__}")
        self.custom_cfg: List[Dict[str, Any]] = [self._check_entry(i, e) for i, e in enumerate(custom_cfg)]
        self._check_names()
        self._overrides = {e["data_src"]: e for e in self.custom_cfg if "log_name" not in e}
        self._additions: Dict[str, List[Dict[str, Any]]] = {}
        for entry in self.custom_cfg:
            if "log_name" in entry:
                self._additions.setdefault(entry["data_src"], []).append(entry)

    # ------------------------------------------------------------------ validation
    def _check_entry(self, index: int, entry: Mapping[str, Any]) -> Dict[str, Any]:
        where = f"custom_cfg[{index}]"
        if not isinstance(entry, Mapping):
            raise LogProcessorConfigError(f"{where} must be a dict; got {type(entry).__name__}")
        entry = dict(copy.deepcopy(entry))
        for field in ("data_src", "method_name"):
            if field not in entry:
                raise LogProcessorConfigError(f"{where} is missing the required field {field!r}: {entry}")
        for field in ("data_src", "method_name", "log_name"):
            if field in entry and (not isinstance(entry[field], str) or not entry[field]):
                raise LogProcessorConfigError(f"{where}: {field} must be a non-empty str; got {entry[field]!r}")
        where = f"{where} (data_src={entry['data_src']!r})"
        try:
            method = HistoryBuffer.get_statistic(entry["method_name"])
        except KeyError as exc:
            raise LogProcessorConfigError(f"{where}: {exc}") from None
        if "window_size" in entry:
            entry["window_size"] = _check_window(entry["window_size"], f"{where}: window_size")
        elif "window_size" in inspect.signature(method).parameters:
            entry["window_size"] = self.window_size
        kwargs = self._statistic_kwargs(entry)
        try:
            HistoryBuffer.check_statistic_arguments(entry["method_name"], **kwargs)
        except TypeError as exc:
            raise LogProcessorConfigError(f"{where}: {exc}") from None
        return entry

    def _check_names(self) -> None:
        sources = {e["data_src"] for e in self.custom_cfg}
        seen: Dict[str, int] = {}
        for index, entry in enumerate(self.custom_cfg):
            name = entry.get("log_name", entry["data_src"])
            if "log_name" in entry and name in sources:
                raise LogProcessorConfigError(
                    f"custom_cfg[{index}]: log_name {name!r} is also a data_src, so both would be logged as "
                    f"{name!r}; drop log_name to replace the statistic of {name!r}, or choose another name"
                )
            if name in seen:
                raise LogProcessorConfigError(
                    f"custom_cfg[{index}] and custom_cfg[{seen[name]}] both produce the log name {name!r}; "
                    "give one of them a different log_name"
                )
            seen[name] = index

    @staticmethod
    def _statistic_kwargs(entry: Mapping[str, Any]) -> Dict[str, Any]:
        kwargs = {k: v for k, v in entry.items() if k not in _RESERVED}
        if "window_size" in entry:
            kwargs["window_size"] = None if entry["window_size"] == "global" else entry["window_size"]
        return kwargs

    # ------------------------------------------------------------------ collect
    def is_smoothed(self, key: str) -> bool:
        """Whether ``key`` (prefix stripped) is averaged over the window by default."""
        return any(s in key for s in self.smooth_keys)

    def collect(self, message_hub: Optional[MessageHub] = None, prefix: str = "train") -> Dict[str, Any]:
        """``{log_name: value}`` for every scalar of ``message_hub`` whose key starts with ``prefix + '/'``.

        Names are the keys with the prefix stripped, plus the ``log_name`` of added entries (placed right
        after their ``data_src``). Entries of ``custom_cfg`` whose ``data_src`` has no history yet produce
        nothing: an absent value is never shown as 0. ``message_hub`` defaults to the current instance.
        An empty ``prefix`` selects every key.
        """
        hub = MessageHub.get_current_instance() if message_hub is None else message_hub
        if not isinstance(prefix, str):
            raise TypeError(f"prefix must be a str; got {prefix!r}")
        head = f"{prefix}/" if prefix else ""
        out: Dict[str, Any] = {}
        owners: Dict[str, str] = {}
        for key, buffer in hub.log_scalars.items():
            if not key.startswith(head):
                continue
            src = key[len(head):]
            entry = self._overrides.get(src)
            if entry is not None:
                value = buffer.statistics(entry["method_name"], **self._statistic_kwargs(entry))
            elif self.is_smoothed(src):
                value = buffer.mean(None if self.window_size == "global" else self.window_size)
            else:
                value = buffer.current()
            self._put(out, owners, src, value, key)
            for added in self._additions.get(src, ()):
                value = buffer.statistics(added["method_name"], **self._statistic_kwargs(added))
                self._put(out, owners, added["log_name"], value, f"{key} ({added['method_name']})")
        return out

    @staticmethod
    def _put(out: Dict[str, Any], owners: Dict[str, str], name: str, value: Any, owner: str) -> None:
        if name in out:
            raise LogProcessorConfigError(
                f"log name {name!r} is produced by both {owners[name]} and {owner}; "
                "rename one of them (custom_cfg log_name)"
            )
        out[name] = value
        owners[name] = owner


def _check_window(window: Any, what: str) -> Window:
    if window == "global" and isinstance(window, str):
        return window
    if isinstance(window, str):
        hint = " ('epoch' windows are not supported: rlearn counts train iterations)" if window == "epoch" else ""
        raise LogProcessorConfigError(f"{what} must be a positive int or 'global'; got {window!r}{hint}")
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise LogProcessorConfigError(f"{what} must be a positive int or 'global'; got {window!r}")
    return window
