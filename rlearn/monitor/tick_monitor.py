"""``TickMonitor``: sparse per-iteration metrics with per-key sliding windows.

One *tick* is one train iteration. ``update(info)`` records the values of a (sparse) info dict at the
current tick, ``tick()`` advances the clock, and the statistics of a key look at the values recorded
during its last ``window_size(key)`` ticks, the current one included. A key that has no value in its
window has no average (``None``): absent is not zero. NaN and inf are counted, not averaged.

How it stays cheap
------------------
Each key keeps one *aggregate* per tick in which it was reported: ``(tick, sum, count, min, max,
nonfinite)`` of its finite values (several values in one tick merge into one aggregate). Ticks in
which a key was not reported cost that key nothing: expiry is lazy, by tick index.

The aggregates of the window form a queue from which old ticks leave at the front; the statistics are
kept with the classic *two-stack queue*: the newer half of the queue is a list with a running total,
the older half a list in which every element also stores the combined aggregate of itself and every
newer element of that half. Removing the oldest tick is a ``pop()``, and the window's statistics are
the combination of three aggregates (older half, newer half, current tick): O(1) per query,
O(1) amortised per update (an aggregate is moved from one half to the other once), whatever the window
size. Nothing is ever *subtracted*, so sums do not drift as values come and go: every result is an
ordinary floating-point sum of the values in the window, and min/max are exact.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np
import torch

__all__ = ["TickMonitor"]

_INF = math.inf
_NUMPY_KINDS = "biuf"  # bool, signed int, unsigned int, float
_STATE_VERSION = 1
#: read CPU tensors one by one with ``item()`` (there is no device to synchronise with); tests turn it
#: off to exercise the batched path that accelerator tensors take
_CPU_DIRECT = True

# An aggregate entry: (tick, sum, count, min, max, nonfinite). min/max are +inf/-inf when count == 0.
Entry = Tuple[int, float, int, float, float, int]


def _positive_int(what: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{what} must be a positive int, got {value!r}")
    return int(value)


class _KeyWindow:
    """The window of one key (see the module docstring for the data structure).

    An entry is a tuple ``(tick, sum, count, min, max, nonfinite)`` of the values of one tick (min/max
    are +inf/-inf while count is 0). ``cur`` is the entry of the newest tick the key was reported in
    (replaced by a new tuple when that tick gets another value); ``back`` holds the newer half of the
    other entries, oldest first, and ``b_sum``... ``b_bad`` their running total; ``front`` holds the
    older half, *newest first*, each entry extended with five numbers ``(sum, count, min, max,
    nonfinite)`` that aggregate it and every newer entry of the older half, so ``front[-1]`` is the
    oldest tick and its numbers cover the whole older half.
    """

    __slots__ = ("size", "cur", "back", "b_sum", "b_n", "b_min", "b_max", "b_bad", "front", "last", "total_bad")

    def __init__(self, size: int) -> None:
        self.size = size
        self.cur: Optional[Entry] = None
        self.front: List[Tuple[Any, ...]] = []
        self._reset_back()
        self.last: Optional[float] = None
        self.total_bad = 0

    def _reset_back(self) -> None:
        self.back: List[Entry] = []
        self.b_sum = 0.0
        self.b_n = 0
        self.b_min = _INF
        self.b_max = -_INF
        self.b_bad = 0

    # ------------------------------------------------------------------------------------- writes
    def add(self, tick: int, value: float) -> None:
        """Record ``value`` at ``tick`` (ticks never decrease). The hot path: kept inline on purpose."""
        self.last = value
        cur = self.cur
        if value - value == 0.0:  # finite (NaN - NaN and inf - inf are NaN)
            if cur is not None and cur[0] == tick:  # another value in the same tick
                self.cur = (tick, cur[1] + value, cur[2] + 1, min(cur[3], value), max(cur[4], value), cur[5])
                return
            self.cur = (tick, value, 1, value, value, 0)
        else:
            self.total_bad += 1
            if cur is not None and cur[0] == tick:
                self.cur = cur[:5] + (cur[5] + 1,)
                return
            self.cur = (tick, 0.0, 0, _INF, -_INF, 1)
        if cur is None:
            return
        # the previous tick of this key is closed: push its entry to the newer half
        limit = tick - self.size  # ticks <= limit are out of the window
        if cur[0] <= limit:  # even the newest stored tick has left the window: everything has
            self.front = []
            self._reset_back()
            return
        back = self.back
        back.append(cur)
        self.b_sum += cur[1]
        self.b_n += cur[2]
        if cur[3] < self.b_min:
            self.b_min = cur[3]
        if cur[4] > self.b_max:
            self.b_max = cur[4]
        if cur[5]:
            self.b_bad += cur[5]
        front = self.front
        if front:
            if front[-1][0] <= limit:  # steady state of a key reported every tick: one tick leaves
                front.pop()
                if (front[-1][0] if front else back[0][0]) <= limit:
                    self.expire(tick)
        elif back[0][0] <= limit:
            self.expire(tick)

    def _flip(self) -> None:
        """Move the newer half to the (empty) older half, computing the suffix aggregates."""
        s, n, lo, hi, bad = 0.0, 0, _INF, -_INF, 0
        front = []
        for entry in reversed(self.back):
            s += entry[1]
            n += entry[2]
            if entry[3] < lo:
                lo = entry[3]
            if entry[4] > hi:
                hi = entry[4]
            bad += entry[5]
            front.append(entry + (s, n, lo, hi, bad))
        self.front = front
        self._reset_back()

    def expire(self, now: int) -> None:
        """Drop the entries of ticks that are no longer in the window at tick ``now``."""
        limit = now - self.size
        front = self.front
        while True:
            if front:
                if front[-1][0] > limit:
                    break
                front.pop()
            elif self.back and self.back[0][0] <= limit:
                self._flip()
                front = self.front
            else:
                break
        if self.cur is not None and self.cur[0] <= limit:
            self.cur = None

    # -------------------------------------------------------------------------------------- reads
    def stats(self, now: int) -> Tuple[float, int, float, float, int]:
        """``(sum, count, min, max, nonfinite)`` of the window at tick ``now``."""
        front = self.front
        limit = now - self.size
        if front:
            if front[-1][0] <= limit:
                self.expire(now)
        elif (self.back and self.back[0][0] <= limit) or (self.cur is not None and self.cur[0] <= limit):
            self.expire(now)
        s, n, lo, hi, bad = self.b_sum, self.b_n, self.b_min, self.b_max, self.b_bad
        if self.front:
            _, _, _, _, _, _, fs, fn, flo, fhi, fbad = self.front[-1]
            s = fs + s
            n += fn
            if flo < lo:
                lo = flo
            if fhi > hi:
                hi = fhi
            bad += fbad
        cur = self.cur
        if cur is not None:
            s += cur[1]
            n += cur[2]
            if cur[3] < lo:
                lo = cur[3]
            if cur[4] > hi:
                hi = cur[4]
            bad += cur[5]
        return s, n, lo, hi, bad

    def entries(self, now: int) -> List[Entry]:
        """The entries in the window at tick ``now``, oldest first."""
        self.expire(now)
        out = [item[:6] for item in reversed(self.front)]
        out.extend(self.back)
        if self.cur is not None:
            out.append(self.cur)
        return out  # type: ignore[return-value]

    def load_entries(self, entries: List[Entry]) -> None:
        """Replace the window by ``entries`` (validated, oldest first, all in the window)."""
        self.front = []
        self._reset_back()
        self.cur = None
        if not entries:
            return
        *older, newest = entries
        for entry in older:
            self.back.append(tuple(entry))  # type: ignore[arg-type]
            self.b_sum += entry[1]
            self.b_n += entry[2]
            self.b_min = min(self.b_min, entry[3])
            self.b_max = max(self.b_max, entry[4])
            self.b_bad += entry[5]
        self.cur = tuple(newest)  # type: ignore[assignment]


class TickMonitor:
    """Sliding-window statistics of sparse per-iteration metrics; one tick per train iteration.

    Args:
        window_size: default window, in ticks, of every key.
        window_sizes: per-key windows (``{"aux_loss": 50}``), overriding ``window_size``.

    The statistics of a key (:meth:`avg`, :meth:`min`, :meth:`max`, :meth:`count`, :meth:`nonfinite`)
    look at the values recorded during the last ``window_size(key)`` ticks, the current tick included.
    ``avg``/``min``/``max`` are ``None`` when the window holds no finite value, never 0. NaN and inf
    are excluded from them and counted by :meth:`nonfinite`.

    Example::

        monitor = TickMonitor(window_size=20)
        for it in range(40):               # one train iteration per tick
            info = {"loss": 1.0}
            if it % 10 == 0:               # a periodic key
                info["aux_loss"] = float(it)
            monitor.update(info)
            if it == 39:                   # log time: the window is ticks 20..39
                print(monitor.count("loss"), monitor.count("aux_loss"), monitor.avg("aux_loss"))  # 20 2 25.0
            monitor.tick()

    Values are scalars: Python numbers (bool included), numpy scalars or one-element arrays, and
    one-element torch tensors. Anything else raises ``TypeError`` naming the key; an update is
    all-or-nothing. Tensors on an accelerator are copied to the host together, with one transfer per
    ``update`` call and device, not one synchronisation per key.
    """

    def __init__(self, window_size: int = 20, window_sizes: Optional[Mapping[str, int]] = None) -> None:
        self._default_size = _positive_int("TickMonitor window_size", window_size)
        self._sizes: Dict[str, int] = {}
        if window_sizes is not None:
            if not isinstance(window_sizes, Mapping):
                raise TypeError(f"TickMonitor window_sizes must be a mapping key -> int, got {window_sizes!r}")
            for key, size in window_sizes.items():
                _check_key(key)
                self._sizes[key] = _positive_int(f"TickMonitor window size of {key!r}", size)
        self._windows: Dict[str, _KeyWindow] = {}
        self._tick = 0

    # ------------------------------------------------------------------------------------ clock
    @property
    def tick_count(self) -> int:
        """Ticks completed so far, which is also the index of the current tick."""
        return self._tick

    def tick(self) -> None:
        """Advance the clock by one tick (call it once per train iteration, after recording)."""
        self._tick += 1

    # ----------------------------------------------------------------------------------- windows
    def window_size(self, key: str) -> int:
        """The window of ``key``, in ticks."""
        return self._sizes.get(key, self._default_size)

    def set_window_size(self, key: str, size: int) -> None:
        """Set the window of ``key`` (it need not have been recorded yet).

        Shrinking takes effect immediately. Growing does not bring back values that had already left
        the old window: the window fills up again as new ticks come.
        """
        _check_key(key)
        size = _positive_int(f"TickMonitor window size of {key!r}", size)
        window = self._windows.get(key)
        if window is not None:
            window.expire(self._tick)  # with the old size, so growing recovers nothing lazily kept
            window.size = size
        self._sizes[key] = size

    # ------------------------------------------------------------------------------------ record
    def update(self, info: Mapping[str, Any]) -> None:
        """Record every value of ``info`` at the current tick.

        A key may get several values during one tick (several ``update`` calls); they all count.
        Raises ``TypeError`` (non-string key, non-scalar value: the message names the key and the
        type or shape) or ``ValueError`` (an int too large for a float) before recording anything.
        """
        if not isinstance(info, Mapping):
            raise TypeError(f"TickMonitor.update expects a dict of scalars, got {type(info).__name__}")
        converted: Optional[Dict[str, float]] = None  # values that are not already Python floats
        tensors: Optional[Dict[str, torch.Tensor]] = None
        for key, value in info.items():
            if type(value) is float and type(key) is str and key:  # the common case: nothing to do
                continue
            if type(key) is not str or not key:
                _check_key(key)
            cls = type(value)
            if cls is float:
                continue
            if isinstance(value, torch.Tensor):
                if value.is_cpu and _CPU_DIRECT:
                    number = _cpu_tensor_to_float(key, value)
                else:  # accelerator: copied to the host together with the others, below
                    _check_tensor(key, value)
                    if tensors is None:
                        tensors = {}
                    tensors[key] = value
                    continue
            elif cls is int or cls is bool:
                try:
                    number = float(value)
                except OverflowError:
                    raise ValueError(f"monitor value for {key!r} is an int too large for a float: {value}") from None
            else:
                number = _to_float(key, value)
            if converted is None:
                converted = {}
            converted[key] = number
        if tensors is not None:
            if converted is None:
                converted = {}
            try:
                numbers_ = _tensors_to_floats(list(tensors.values()))
            except (RuntimeError, NotImplementedError) as exc:  # e.g. meta tensors, a failed device copy
                names = ", ".join(repr(k) for k in tensors)
                raise TypeError(f"monitor values for {names}: cannot copy the tensors to the host ({exc})") from exc
            converted.update(zip(tensors, numbers_))
        # validation is over: record everything
        tick = self._tick
        windows = self._windows
        items = info.items() if converted is None else [(k, converted.get(k, v)) for k, v in info.items()]
        for key, value in items:
            window = windows.get(key)
            if window is None:
                window = windows[key] = _KeyWindow(self._sizes.get(key, self._default_size))
            window.add(tick, value)

    # ---------------------------------------------------------------------------------- queries
    def _stats(self, key: str) -> Optional[Tuple[float, int, float, float, int]]:
        window = self._windows.get(key)
        if window is None:
            return None
        return window.stats(self._tick)

    def avg(self, key: str) -> Optional[float]:
        """Mean of the finite values of ``key`` in its window; None if there are none (never 0)."""
        window = self._windows.get(key)  # inlined _stats: this is what every log calls for every key
        if window is None:
            return None
        total, count, _, _, _ = window.stats(self._tick)
        return total / count if count else None

    def sum(self, key: str) -> Optional[float]:
        """Sum of the finite values of ``key`` in its window; None if there are none."""
        stats = self._stats(key)
        if stats is None or stats[1] == 0:
            return None
        return stats[0]

    def min(self, key: str) -> Optional[float]:
        """Smallest finite value of ``key`` in its window; None if there are none."""
        stats = self._stats(key)
        if stats is None or stats[1] == 0:
            return None
        return stats[2]

    def max(self, key: str) -> Optional[float]:
        """Largest finite value of ``key`` in its window; None if there are none."""
        stats = self._stats(key)
        if stats is None or stats[1] == 0:
            return None
        return stats[3]

    def count(self, key: str) -> int:
        """Number of finite values of ``key`` in its window."""
        stats = self._stats(key)
        return 0 if stats is None else stats[1]

    def nonfinite(self, key: str) -> int:
        """Number of NaN/inf values of ``key`` in its window (they are left out of avg/min/max)."""
        stats = self._stats(key)
        return 0 if stats is None else stats[4]

    def nonfinite_total(self, key: str) -> int:
        """Number of NaN/inf values of ``key`` ever recorded (since construction or the loaded state)."""
        window = self._windows.get(key)
        return 0 if window is None else window.total_bad

    def last(self, key: str) -> Optional[float]:
        """The most recent value of ``key`` ever recorded (NaN/inf included); None if never recorded."""
        window = self._windows.get(key)
        return None if window is None else window.last

    def keys(self) -> List[str]:
        """Every key ever recorded, in first-seen order."""
        return list(self._windows)

    def __contains__(self, key: object) -> bool:
        return key in self._windows

    def __repr__(self) -> str:
        return f"TickMonitor(tick_count={self._tick}, window_size={self._default_size}, keys={self.keys()})"

    # ------------------------------------------------------------------------------------- state
    def state_dict(self) -> Dict[str, Any]:
        """The monitor's state in plain Python types, bounded by the window sizes.

        Holds the clock, the window sizes, and per key (first-seen order) its per-tick aggregates still
        in the window, its last value and its total of non-finite values.
        """
        keys = []
        for key, window in self._windows.items():
            keys.append(
                {
                    "key": key,
                    "entries": [list(entry) for entry in window.entries(self._tick)],
                    "last": window.last,
                    "nonfinite_total": window.total_bad,
                }
            )
        return {
            "version": _STATE_VERSION,
            "tick_count": self._tick,
            "window_size": self._default_size,
            "window_sizes": dict(self._sizes),
            "keys": keys,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a :meth:`state_dict`: clock, window sizes and windows, exactly as saved.

        The state is validated completely first; anything malformed raises ``ValueError`` (or
        ``TypeError`` for a non-mapping) naming the field, and leaves the monitor unchanged.
        """
        tick, default_size, sizes, windows = _parse_state(state)
        self._tick = tick
        self._default_size = default_size
        self._sizes = sizes
        self._windows = windows


# ----------------------------------------------------------------------------------------- scalars
def _check_key(key: Any) -> None:
    if not isinstance(key, str):
        raise TypeError(f"monitor keys must be strings, got {type(key).__name__}: {key!r}")
    if not key:
        raise ValueError("monitor keys must be non-empty strings, got ''")


def _int_to_float(key: str, value: int) -> float:
    try:
        return float(value)
    except OverflowError:
        raise ValueError(f"monitor value for {key!r} is an int too large for a float: {value}") from None


def _not_scalar(key: str, value: Any, detail: str = "") -> TypeError:
    kind = f"{type(value).__module__}.{type(value).__qualname__}" if type(value).__module__ != "builtins" else type(value).__name__
    return TypeError(
        f"monitor value for {key!r} must be a scalar (a Python number, a numpy scalar or one-element "
        f"array, or a one-element tensor), got {kind}{detail}"
    )


def _to_float(key: str, value: Any) -> float:
    """Convert a non-tensor scalar; TypeError naming the key otherwise."""
    if isinstance(value, np.ndarray):
        if value.size != 1 or value.dtype.kind not in _NUMPY_KINDS:
            raise _not_scalar(key, value, f" of shape {value.shape} and dtype {value.dtype}")
        return float(value.reshape(-1)[0])
    if isinstance(value, np.generic):
        if value.dtype.kind not in _NUMPY_KINDS:
            raise _not_scalar(key, value, f" of dtype {value.dtype}")
        return float(value)
    if isinstance(value, numbers.Real):
        if isinstance(value, numbers.Integral):
            return _int_to_float(key, int(value))
        try:
            return float(value)
        except (TypeError, ValueError, OverflowError) as exc:
            raise _not_scalar(key, value, f" ({exc})") from None
    raise _not_scalar(key, value)


def _check_tensor(key: str, value: torch.Tensor) -> None:
    if value.numel() != 1 or value.is_complex():
        raise _not_scalar(key, value, f" of shape {tuple(value.shape)} and dtype {value.dtype}")


def _cpu_tensor_to_float(key: str, value: torch.Tensor) -> float:
    """``item()`` of a one-element CPU tensor; TypeError naming the key for anything else."""
    try:
        number = value.item()
    except RuntimeError:  # several elements (or none)
        raise _not_scalar(key, value, f" of shape {tuple(value.shape)} and dtype {value.dtype}") from None
    if type(number) is complex:
        raise _not_scalar(key, value, f" of shape {tuple(value.shape)} and dtype {value.dtype}")
    return float(number)


def _tensors_to_floats(tensors: List[torch.Tensor]) -> List[float]:
    """Python floats of one-element tensors that live on accelerators.

    The tensors are concatenated per device (in a common dtype) and copied to the host with one
    ``tolist()`` each, so an info dict of twelve CUDA losses costs one synchronisation, not twelve.
    """
    out: List[Optional[float]] = [None] * len(tensors)
    by_device: Dict[torch.device, List[int]] = {}
    for index, tensor in enumerate(tensors):
        by_device.setdefault(tensor.device, []).append(index)
    for indices in by_device.values():
        for index, number in zip(indices, _batched_to_floats([tensors[i] for i in indices])):
            out[index] = number
    return out  # type: ignore[return-value]


def _batched_to_floats(tensors: List[torch.Tensor]) -> List[float]:
    """One host copy for one-element tensors of one device: concatenate, then ``tolist()``."""
    flat = [t.detach().reshape(1) for t in tensors]
    dtypes = {t.dtype for t in flat}
    if len(dtypes) > 1:
        common = torch.float32 if flat[0].device.type == "mps" else torch.float64  # MPS has no float64
        flat = [t.to(common) for t in flat]
    return [float(v) for v in torch.cat(flat).tolist()]


# ------------------------------------------------------------------------------------------- state
def _state_error(message: str) -> ValueError:
    return ValueError(f"TickMonitor.load_state_dict: {message}")


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_float(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _parse_state(state: Any) -> Tuple[int, int, Dict[str, int], Dict[str, _KeyWindow]]:
    """Validate a state dict and build the windows; raises before touching any monitor."""
    if not isinstance(state, Mapping):
        raise TypeError(f"TickMonitor.load_state_dict expects a dict, got {type(state).__name__}")
    missing = [field for field in ("tick_count", "window_size", "window_sizes", "keys") if field not in state]
    if missing:
        raise _state_error(f"not a TickMonitor state: missing {', '.join(repr(m) for m in missing)}")
    version = state.get("version", _STATE_VERSION)
    if version != _STATE_VERSION:
        raise _state_error(f"unsupported state version {version!r} (this rlearn reads version {_STATE_VERSION})")
    tick = state["tick_count"]
    if not _is_int(tick) or tick < 0:
        raise _state_error(f"'tick_count' must be an int >= 0, got {tick!r}")
    tick = int(tick)
    try:
        default_size = _positive_int("'window_size'", state["window_size"])
    except ValueError as exc:
        raise _state_error(str(exc)) from None
    raw_sizes = state["window_sizes"]
    if not isinstance(raw_sizes, Mapping):
        raise _state_error(f"'window_sizes' must be a dict key -> int, got {type(raw_sizes).__name__}")
    sizes: Dict[str, int] = {}
    for key, size in raw_sizes.items():
        if not isinstance(key, str) or not key:
            raise _state_error(f"'window_sizes' has a bad key {key!r}")
        try:
            sizes[key] = _positive_int(f"window size of {key!r}", size)
        except ValueError as exc:
            raise _state_error(str(exc)) from None
    records = state["keys"]
    if not isinstance(records, (list, tuple)):
        raise _state_error(f"'keys' must be a list, got {type(records).__name__}")
    windows: Dict[str, _KeyWindow] = {}
    for index, record in enumerate(records):
        if not isinstance(record, Mapping) or "key" not in record:
            raise _state_error(f"'keys[{index}]' must be a dict with a 'key', got {record!r}")
        key = record["key"]
        if not isinstance(key, str) or not key:
            raise _state_error(f"'keys[{index}]' has a bad key name {key!r}")
        if key in windows:
            raise _state_error(f"key {key!r} appears twice")
        size = sizes.get(key, default_size)
        window = _KeyWindow(size)
        last = record.get("last")
        if last is not None and not _is_float(last):
            raise _state_error(f"key {key!r}: 'last' must be a number or None, got {last!r}")
        total_bad = record.get("nonfinite_total", 0)
        if not _is_int(total_bad) or total_bad < 0:
            raise _state_error(f"key {key!r}: 'nonfinite_total' must be an int >= 0, got {total_bad!r}")
        raw_entries = record.get("entries")
        if not isinstance(raw_entries, (list, tuple)):
            raise _state_error(f"key {key!r}: 'entries' must be a list, got {type(raw_entries).__name__}")
        entries = [_parse_entry(key, i, raw, tick, size) for i, raw in enumerate(raw_entries)]
        for i in range(1, len(entries)):
            if entries[i][0] <= entries[i - 1][0]:
                raise _state_error(f"key {key!r}: entry ticks must increase, got {entries[i - 1][0]} then {entries[i][0]}")
        if entries and last is None:
            raise _state_error(f"key {key!r}: has values in its window but no 'last' value")
        window_bad = sum(entry[5] for entry in entries)
        if window_bad > total_bad:
            raise _state_error(
                f"key {key!r}: 'nonfinite_total' ({total_bad}) is smaller than the window's non-finite count ({window_bad})"
            )
        window.load_entries(entries)
        window.last = None if last is None else float(last)
        window.total_bad = int(total_bad)
        windows[key] = window
    return tick, default_size, sizes, windows


def _parse_entry(key: str, index: int, raw: Any, tick: int, size: int) -> Entry:
    where = f"key {key!r} entry {index}"
    if not isinstance(raw, (list, tuple)) or len(raw) != 6:
        raise _state_error(f"{where}: expected [tick, sum, count, min, max, nonfinite], got {raw!r}")
    entry_tick, total, count, low, high, bad = raw
    if not _is_int(entry_tick) or not tick - size < entry_tick <= tick:
        raise _state_error(
            f"{where}: tick {entry_tick!r} is not in the window ({tick - size}, {tick}] of size {size} at tick {tick}"
        )
    if not _is_int(count) or count < 0 or not _is_int(bad) or bad < 0 or count + bad == 0:
        raise _state_error(f"{where}: count and nonfinite must be ints >= 0, not both 0; got {count!r}, {bad!r}")
    if not all(_is_float(v) for v in (total, low, high)):
        raise _state_error(f"{where}: sum, min and max must be numbers, got {total!r}, {low!r}, {high!r}")
    total, low, high = float(total), float(low), float(high)
    if count:
        if not all(math.isfinite(v) for v in (total, low, high)) or low > high:
            raise _state_error(f"{where}: sum/min/max must be finite with min <= max, got {total}, {low}, {high}")
    elif total != 0.0 or low != _INF or high != -_INF:
        raise _state_error(f"{where}: without finite values sum/min/max must be 0, inf, -inf; got {total}, {low}, {high}")
    return (int(entry_tick), total, int(count), low, high, int(bad))
