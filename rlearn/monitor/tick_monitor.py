"""``TickMonitor``: sparse per-iteration metrics with per-key sliding windows.

One *tick* is one train iteration. ``update(info)`` records the values of a (sparse) info dict at the
current tick, ``tick()`` advances the clock, and the statistics of a key look at the values recorded
during its last ``window_size(key)`` ticks, the current one included. A key that has no value in its
window has no average (``None``): absent is not zero. NaN and inf are counted, not averaged.

How it stays cheap
------------------
The hot path is ``update`` (once per train iteration, a dozen keys), so recording a value does as
little as Python allows: two list appends per key (its tick, its value), no per-key method call, no
arithmetic. ``tick()`` only increments the clock. Everything else is deferred to the queries (made at
log time) or done once per *block*:

* The values of a key live in two blocks of ticks. The *open* block starts at some tick ``start`` and
  takes every value recorded before ``start + window``; all its values are always in the window. The
  *closed* block is the previous open block: when a value arrives at ``start + window`` or later, the
  open block becomes the closed one (two reassignments, no copy) and the old closed block, whose ticks
  have all left the window by then, is dropped. Ticks in which a key was not reported cost it nothing:
  expiry is lazy, by tick index.
* A query finds the first closed value still in the window with a binary search on the closed ticks,
  and takes the closed block's share from *suffix* aggregates (sum, count, min, max of each value and
  every newer one), built once per block with ``itertools.accumulate`` at the first query that needs
  them. The open block's share is a running aggregate extended at query time with the values
  recorded since the previous query. So a query costs O(log window) in a C binary search plus the
  amortised O(1) per recorded value of those one-off passes, whatever the window size.

Nothing is ever *subtracted*, so sums do not drift as values come and go: every result is a float sum
of the values in the window (in a different order than a left-to-right sum), and min/max are exact.
A key keeps at most two blocks, i.e. the values of at most ``2 * window`` ticks.
"""

from __future__ import annotations

import math
import numbers
from bisect import bisect_right
from itertools import accumulate
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
_ONLY_FLOAT = {float}

# An aggregate entry of the state dict: (tick, sum, count, min, max, nonfinite); min/max are +inf/-inf
# when count == 0.
Entry = Tuple[int, float, int, float, float, int]


def _positive_int(what: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{what} must be a positive int, got {value!r}")
    return int(value)


class _KeyWindow:
    """The window of one key (see the module docstring for the data structure).

    Open block: ``ticks``/``vals`` (one element per finite value, in recording order), ``bad`` (the
    tick of every non-finite value) and ``end`` (the first tick that belongs to the next block).
    ``o_sum`` is the sum of ``vals[:o_sum_n]`` and ``o_lo``/``o_hi`` the min/max of ``vals[:o_mm_n]``,
    extended lazily by the queries.

    Closed block: ``c_ticks`` (non-decreasing), per element its sum ``c_sums``, count ``c_counts``
    (``None`` when every element is one value, as after a roll) and min/max ``c_los``/``c_his`` (the
    same list as ``c_sums`` after a roll), ``c_bad`` (ticks of its non-finite values), and the suffix
    aggregates ``c_suf*`` (``None`` until a query needs them; one extra neutral element at the end).
    """

    __slots__ = (
        "size", "end", "ticks", "vals", "bad", "o_sum", "o_sum_n", "o_lo", "o_hi", "o_mm_n",
        "c_ticks", "c_sums", "c_counts", "c_los", "c_his", "c_bad", "c_suf", "c_suf_n", "c_suf_lo", "c_suf_hi",
        "total_bad",
    )  # fmt: skip

    def __init__(self, size: int, now: int) -> None:
        self.size = size
        self.total_bad = 0
        self._set_closed([], [], None, [], [], [])
        self._open_block(now)

    def _open_block(self, now: int) -> None:
        self.end = now + self.size
        self.ticks: List[int] = []
        self.vals: List[float] = []
        self.bad: List[int] = []
        self.o_sum, self.o_sum_n = 0.0, 0
        self.o_lo, self.o_hi, self.o_mm_n = _INF, -_INF, 0

    def _set_closed(
        self,
        ticks: List[int],
        sums: List[float],
        counts: Optional[List[int]],
        los: List[float],
        his: List[float],
        bad: List[int],
    ) -> None:
        self.c_ticks, self.c_sums, self.c_counts = ticks, sums, counts
        self.c_los, self.c_his, self.c_bad = los, his, bad
        self.c_suf: Optional[List[float]] = None
        self.c_suf_n: Optional[List[int]] = None
        self.c_suf_lo: Optional[List[float]] = None
        self.c_suf_hi: Optional[List[float]] = None

    # ------------------------------------------------------------------------------------- writes
    def roll(self, now: int) -> None:
        """Start a new open block at ``now`` (>= ``end``); the open block becomes the closed one."""
        # the lists of the dropped closed block are recycled (cleared) for the new open block
        ticks, vals, bad = self.c_ticks, self.c_sums, self.c_bad
        ticks.clear()
        vals.clear()
        bad.clear()
        if now - self.size < self.end - 1:  # some of the open block is still in the window
            self.c_ticks, self.c_sums, self.c_bad = self.ticks, self.vals, self.bad
            self.ticks, self.vals, self.bad = ticks, vals, bad
        else:  # everything has left the window: the closed block is empty
            self.ticks.clear()
            self.vals.clear()
            self.bad.clear()
        self.c_los = self.c_his = self.c_sums
        self.c_counts = self.c_suf = self.c_suf_n = self.c_suf_lo = self.c_suf_hi = None
        self.end = now + self.size
        self.o_sum, self.o_sum_n = 0.0, 0
        self.o_lo, self.o_hi, self.o_mm_n = _INF, -_INF, 0

    def add(self, tick: int, value: float) -> None:
        """Record a float ``value`` at ``tick`` (ticks never decrease). ``update`` inlines the common case."""
        if tick >= self.end:
            self.roll(tick)
        if value - value == 0.0:  # finite (NaN - NaN and inf - inf are NaN)
            self.ticks.append(tick)
            self.vals.append(value)
        else:
            self.bad.append(tick)
            self.total_bad += 1

    # -------------------------------------------------------------------------------------- reads
    def sum_count(self, now: int) -> Tuple[float, int]:
        """Sum and number of the finite values in the window at tick ``now``."""
        if now >= self.end:
            self.roll(now)
        vals = self.vals
        count = len(vals)
        done = self.o_sum_n
        if done != count:
            self.o_sum += vals[done] if done + 1 == count else sum(vals[done:])
            self.o_sum_n = count
        total = self.o_sum
        c_ticks = self.c_ticks
        limit = now - self.size
        if c_ticks and c_ticks[-1] > limit:
            first = bisect_right(c_ticks, limit)
            suffix = self.c_suf
            if suffix is None:
                suffix = self._suffix_sums()
            total = suffix[first] + total
            count += len(c_ticks) - first if self.c_counts is None else self.c_suf_n[first]  # type: ignore[index]
        return total, count

    def min_max(self, now: int) -> Tuple[float, float]:
        """Min and max of the finite values in the window at tick ``now`` (inf, -inf if none)."""
        if now >= self.end:
            self.roll(now)
        vals = self.vals
        if self.o_mm_n != len(vals):
            new = vals[self.o_mm_n :]
            self.o_lo = min(self.o_lo, min(new))
            self.o_hi = max(self.o_hi, max(new))
            self.o_mm_n = len(vals)
        low, high = self.o_lo, self.o_hi
        c_ticks = self.c_ticks
        limit = now - self.size
        if c_ticks and c_ticks[-1] > limit:
            first = bisect_right(c_ticks, limit)
            if self.c_suf_lo is None:
                self.c_suf_lo = _suffix(self.c_los, min, _INF)
                self.c_suf_hi = _suffix(self.c_his, max, -_INF)
            low = min(low, self.c_suf_lo[first])
            high = max(high, self.c_suf_hi[first])  # type: ignore[index]
        return low, high

    def nonfinite(self, now: int) -> int:
        """Number of NaN/inf values in the window at tick ``now``."""
        if now >= self.end:
            self.roll(now)
        count = len(self.bad)
        c_bad = self.c_bad
        if c_bad and c_bad[-1] > now - self.size:
            count += len(c_bad) - bisect_right(c_bad, now - self.size)
        return count

    def _suffix_sums(self) -> List[float]:
        self.c_suf = suffix = _suffix(self.c_sums, None, 0.0)
        if self.c_counts is not None:
            self.c_suf_n = _suffix(self.c_counts, None, 0)
        return suffix

    # ------------------------------------------------------------------------------------- state
    def entries(self, now: int) -> List[Entry]:
        """One aggregate per tick of the window at tick ``now``, oldest first (the state dict format)."""
        if now >= self.end:
            self.roll(now)
        limit = now - self.size
        merged: Dict[int, List[Any]] = {}

        def merge(tick: int, total: float, count: int, low: float, high: float, bad: int) -> None:
            entry = merged.get(tick)
            if entry is None:
                merged[tick] = [tick, total, count, low, high, bad]
            else:  # in recording order, like the running sum of a tick
                entry[1] += total
                entry[2] += count
                entry[3] = min(entry[3], low)
                entry[4] = max(entry[4], high)
                entry[5] += bad

        c_ticks, c_counts = self.c_ticks, self.c_counts
        for i in range(bisect_right(c_ticks, limit), len(c_ticks)):
            merge(c_ticks[i], self.c_sums[i], 1 if c_counts is None else c_counts[i], self.c_los[i], self.c_his[i], 0)
        for tick in self.c_bad[bisect_right(self.c_bad, limit) :]:
            merge(tick, 0.0, 0, _INF, -_INF, 1)
        for tick, value in zip(self.ticks, self.vals):
            merge(tick, value, 1, value, value, 0)
        for tick in self.bad:
            merge(tick, 0.0, 0, _INF, -_INF, 1)
        return [tuple(merged[tick]) for tick in sorted(merged)]  # type: ignore[misc]

    def load_entries(self, entries: List[Entry], now: int) -> None:
        """Replace the window by ``entries`` (validated, oldest first, all in the window at ``now``)."""
        ticks: List[int] = []
        sums: List[float] = []
        counts: List[int] = []
        los: List[float] = []
        his: List[float] = []
        bad: List[int] = []
        for tick, total, count, low, high, nonfinite in entries:
            if count:
                ticks.append(tick)
                sums.append(total)
                counts.append(count)
                los.append(low)
                his.append(high)
            bad.extend([tick] * nonfinite)
        self._set_closed(ticks, sums, counts, los, his, bad)
        self._open_block(now)


def _suffix(values: List[Any], func: Any, neutral: Any) -> List[Any]:
    """``out[i]`` = ``values[i]`` combined (``func``, default +) with every later value; ``out[-1]`` = neutral."""
    out = list(accumulate(reversed(values), func))
    out.reverse()
    out.append(neutral)
    return out


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
        self._last: Dict[str, Optional[float]] = {}
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
            entries = window.entries(self._tick)  # with the old size: growing recovers nothing lazily kept
            window.size = size
            window.load_entries(entries, self._tick)
        self._sizes[key] = size

    # ------------------------------------------------------------------------------------ record
    def update(self, info: Mapping[str, Any]) -> None:
        """Record every value of ``info`` at the current tick.

        A key may get several values during one tick (several ``update`` calls); they all count.
        Raises ``TypeError`` (non-string key, non-scalar value: the message names the key and the
        type or shape) or ``ValueError`` (an int too large for a float) before recording anything.
        """
        windows = self._windows
        tick = self._tick
        # the common case, a dict of Python floats for keys already seen (so valid keys), needs no check
        items: Any
        if type(info) is dict and set(map(type, info.values())) == _ONLY_FLOAT and info.keys() <= windows.keys():
            items = info.items()
            recorded: Any = info
        else:
            items = recorded = self._validated(info)
            if not info.keys() <= windows.keys():  # validation is over: nothing below can fail
                for key, _ in items:
                    if key not in windows:
                        windows[key] = _KeyWindow(self._sizes.get(key, self._default_size), tick)
        for key, value in items:
            window = windows[key]
            if tick >= window.end or value - value:  # a new block, or NaN/inf (x - x is NaN: truthy)
                window.add(tick, value)
            else:  # window.add() inlined
                window.ticks.append(tick)
                window.vals.append(value)
        self._last.update(recorded)

    def _validated(self, info: Mapping[str, Any]) -> List[Tuple[str, float]]:
        """``info``'s items with every value a Python float; raises naming the culprit otherwise."""
        if not isinstance(info, dict) and not isinstance(info, Mapping):
            raise TypeError(f"TickMonitor.update expects a dict of scalars, got {type(info).__name__}")
        items: List[Tuple[str, Any]] = []
        tensors: Optional[Dict[int, torch.Tensor]] = None  # accelerator tensors, by position in items
        cpu_direct = _CPU_DIRECT
        for key, value in info.items():
            if type(key) is not str or not key:
                _check_key(key)
            cls = type(value)
            if cls is float:
                items.append((key, value))
            elif cls is torch.Tensor or isinstance(value, torch.Tensor):
                if value.is_cpu and cpu_direct:
                    try:  # the common case inlined: item() of a one-element float tensor is a float
                        number = value.item()
                    except RuntimeError:  # several elements: the helper names the key and the shape
                        number = None
                    items.append((key, number if type(number) is float else _cpu_tensor_to_float(key, value)))
                else:  # accelerator: copied to the host together with the others, below
                    _check_tensor(key, value)
                    if tensors is None:
                        tensors = {}
                    tensors[len(items)] = value
                    items.append((key, None))
            elif cls is int or cls is bool:
                items.append((key, _int_to_float(key, value)))
            else:
                items.append((key, _to_float(key, value)))
        if tensors is not None:
            try:
                numbers_ = _tensors_to_floats(list(tensors.values()))
            except (RuntimeError, NotImplementedError) as exc:  # e.g. meta tensors, a failed device copy
                names = ", ".join(repr(items[i][0]) for i in tensors)
                raise TypeError(f"monitor values for {names}: cannot copy the tensors to the host ({exc})") from exc
            for index, number in zip(tensors, numbers_):
                items[index] = (items[index][0], number)
        return items

    # ---------------------------------------------------------------------------------- queries
    def avg(self, key: str) -> Optional[float]:
        """Mean of the finite values of ``key`` in its window; None if there are none (never 0)."""
        window = self._windows.get(key)  # window.sum_count() inlined: every log calls it for every key
        if window is None:
            return None
        now = self._tick
        if now >= window.end:
            window.roll(now)
        vals = window.vals
        count = len(vals)
        done = window.o_sum_n
        if done == count:
            total = window.o_sum
        else:
            window.o_sum = total = window.o_sum + (vals[done] if done + 1 == count else sum(vals[done:]))
            window.o_sum_n = count
        c_ticks = window.c_ticks
        if c_ticks:
            limit = now - window.size
            if c_ticks[-1] > limit:
                first = bisect_right(c_ticks, limit)
                suffix = window.c_suf or window._suffix_sums()
                total = suffix[first] + total
                count += len(c_ticks) - first if window.c_counts is None else window.c_suf_n[first]  # type: ignore[index]
        return total / count if count else None

    def sum(self, key: str) -> Optional[float]:
        """Sum of the finite values of ``key`` in its window; None if there are none."""
        window = self._windows.get(key)
        if window is None:
            return None
        total, count = window.sum_count(self._tick)
        return total if count else None

    def min(self, key: str) -> Optional[float]:
        """Smallest finite value of ``key`` in its window; None if there are none."""
        window = self._windows.get(key)
        if window is None:
            return None
        low = window.min_max(self._tick)[0]
        return None if low == _INF else low

    def max(self, key: str) -> Optional[float]:
        """Largest finite value of ``key`` in its window; None if there are none."""
        window = self._windows.get(key)
        if window is None:
            return None
        high = window.min_max(self._tick)[1]
        return None if high == -_INF else high

    def count(self, key: str) -> int:
        """Number of finite values of ``key`` in its window."""
        window = self._windows.get(key)
        return 0 if window is None else window.sum_count(self._tick)[1]

    def nonfinite(self, key: str) -> int:
        """Number of NaN/inf values of ``key`` in its window (they are left out of avg/min/max)."""
        window = self._windows.get(key)
        return 0 if window is None else window.nonfinite(self._tick)

    def nonfinite_total(self, key: str) -> int:
        """Number of NaN/inf values of ``key`` ever recorded (since construction or the loaded state)."""
        window = self._windows.get(key)
        return 0 if window is None else window.total_bad

    def last(self, key: str) -> Optional[float]:
        """The most recent value of ``key`` ever recorded (NaN/inf included); None if never recorded."""
        return self._last.get(key)

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
        in the window (``[tick, sum, count, min, max, nonfinite]``), its last value and its total of
        non-finite values.
        """
        keys = []
        for key, window in self._windows.items():
            keys.append(
                {
                    "key": key,
                    "entries": [list(entry) for entry in window.entries(self._tick)],
                    "last": self._last.get(key),
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
        tick, default_size, sizes, windows, lasts = _parse_state(state)
        self._tick = tick
        self._default_size = default_size
        self._sizes = sizes
        self._windows = windows
        self._last = lasts


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


def _parse_state(state: Any) -> Tuple[int, int, Dict[str, int], Dict[str, _KeyWindow], Dict[str, Optional[float]]]:
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
    lasts: Dict[str, Optional[float]] = {}
    for index, record in enumerate(records):
        if not isinstance(record, Mapping) or "key" not in record:
            raise _state_error(f"'keys[{index}]' must be a dict with a 'key', got {record!r}")
        key = record["key"]
        if not isinstance(key, str) or not key:
            raise _state_error(f"'keys[{index}]' has a bad key name {key!r}")
        if key in windows:
            raise _state_error(f"key {key!r} appears twice")
        size = sizes.get(key, default_size)
        window = _KeyWindow(size, tick)
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
        window.load_entries(entries, tick)
        lasts[key] = None if last is None else float(last)
        window.total_bad = int(total_bad)
        windows[key] = window
    return tick, default_size, sizes, windows, lasts


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
