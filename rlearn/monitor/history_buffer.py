"""``HistoryBuffer``: MMEngine's history of one scalar, O(1) amortised ``update`` and O(1) windowed ``mean``.

The retained updates are the slice ``[_a, _b)`` of flat arrays beside double-double prefix sums of the
finite values and their counts, re-based to 0 whenever the slice moves to the front (docs/logging.md,
section HistoryBuffer: storage, costs and the error bound of ``mean``).
"""

from __future__ import annotations

import bisect
import math
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from rlearn.config.spec import is_int
from rlearn.monitor.scalars import to_float

__all__ = ["HistoryBuffer", "MAX_MAGNITUDE", "BUILTIN_STATISTICS", "SUFFIXES", "dd_add", "dd_div"]

MAX_MAGNITUDE = 1e290
_BLOCK = 256
_SMALL = 64  # windows up to this size: plain Python min/max


def _describe(value: Any) -> str:
    text = type(value).__module__ + "." + type(value).__qualname__
    if getattr(value, "shape", None) is not None:
        text += f" of shape {tuple(value.shape)}"
    return text


def check_value(value: Any, what: str = "value") -> float:
    v = to_float(value, what)
    if v - v == 0.0 and abs(v) > MAX_MAGNITUDE:  # finite and huge (NaN/inf are accepted and counted)
        raise ValueError(f"{what} {v!r} is too large to average safely (|{what}| must be <= {MAX_MAGNITUDE:g})")
    return v


def check_count(count: Any, what: str = "count") -> float:
    if isinstance(count, (bool, np.bool_)):
        raise TypeError(f"{what} must be a positive number, not a bool")
    c = to_float(count, what)
    if not 0.0 < c <= MAX_MAGNITUDE:
        raise ValueError(f"{what} must be a positive finite number (<= {MAX_MAGNITUDE:g}); got {c!r}")
    return c


def _read_only(view: np.ndarray) -> np.ndarray:
    view.flags.writeable = False
    return view


def _dd_minus(a_hi: Any, a_lo: Any, b_hi: Any, b_lo: Any) -> Tuple[Any, Any]:
    """``(a_hi + a_lo) - (b_hi + b_lo)`` of double-doubles (floats or arrays), renormalised (TwoSum)."""
    s = a_hi - b_hi
    bp = s - a_hi
    lo = ((a_hi - (s - bp)) + (-b_hi - bp)) + (a_lo - b_lo)
    hi = s + lo
    return hi, lo - (hi - s)


def dd_add(a_hi: float, a_lo: float, b_hi: float, b_lo: float) -> Tuple[float, float]:
    """``(a_hi + a_lo) + (b_hi + b_lo)`` of double-doubles, renormalised (TwoSum)."""
    return _dd_minus(a_hi, a_lo, -b_hi, -b_lo)


_SPLIT = 134217729.0  # 2**27 + 1: Dekker's split of a double into two 26-bit halves


def dd_div(hi: float, lo: float, n: float) -> float:
    """``(hi + lo) / n`` correctly rounded (but for ties): the quotient of ``hi`` corrected by the exact
    remainder (Dekker's product); the one division of every mean in rlearn."""
    q = hi / n
    if not -1e290 < q < 1e290 or not -1e290 < n < 1e290:  # the split would overflow: plain division
        return (hi + lo) / n
    t = _SPLIT * q
    qh = t - (t - q)
    t = _SPLIT * n
    nh = t - (t - n)
    p = q * n
    e = ((qh * nh - p) + qh * (n - nh) + (q - qh) * nh) + (q - qh) * (n - nh)  # q * n == p + e exactly
    return q + (((hi - p) - e) + lo) / n


def _finite_extreme(x: np.ndarray, smallest: bool) -> float:
    """Min (or max) of the finite entries of ``x``; +inf (or -inf) if there is none."""
    if x.size:
        m = float(np.fmin.reduce(x) if smallest else np.fmax.reduce(x))  # NaN is skipped, inf is not
        if m - m == 0.0:
            return m
    x = x[np.isfinite(x)]
    if x.size == 0:
        return math.inf if smallest else -math.inf
    return float(x.min() if smallest else x.max())


class HistoryBuffer:
    """The last ``max_length`` values of one scalar, each with a count (how many samples it stands for).

    ``mean(w)`` is ``sum(values) / sum(counts)`` over the last ``w`` updates (all when None); ``mean``,
    ``min`` and ``max`` skip non-finite values (counted by :meth:`nonfinite`), NaN when none is finite.
    A statistic of an empty buffer raises ``ValueError``. :meth:`statistics` calls one by name from the
    registry :meth:`register_statistics` adds to (that of ``LogProcessor``'s ``method_name``). Example:
    docs/logging.md, section HistoryBuffer.
    """

    _statistics_methods: Dict[str, Callable[..., Any]] = {}

    def __init__(self, log_history: Sequence[Any] = (), count_history: Sequence[Any] = (), max_length: int = 1_000_000) -> None:
        if not is_int(max_length) or max_length < 1:
            raise ValueError(f"max_length must be a positive int; got {max_length!r}")
        self.max_length = int(max_length)
        self._cap_final = self.max_length + max(64, self.max_length // 8)
        values, counts = self._flat(log_history, "log_history"), self._flat(count_history, "count_history")
        if len(counts) and len(counts) != len(values):
            raise ValueError(f"log_history and count_history must have the same length; got {len(values)} and {len(counts)}")
        drop = max(0, len(values) - self.max_length)
        if drop:
            warnings.warn(f"The length of history buffer ({len(values)}) exceeds the max_length ({self.max_length}); "
                          f"the first {drop} elements are dropped.", stacklevel=2)
        values = self._checked(values[drop:], "log_history", check_value, drop)
        counts = self._checked(counts[drop:], "count_history", check_count, drop) if len(counts) else np.ones(len(values))
        self._allocate(min(self._cap_final, max(64, 2 * len(values))))
        for v, c in zip(values.tolist(), counts.tolist()):
            self._append(v, c)

    @staticmethod
    def _flat(history: Any, name: str) -> Any:
        """``history`` as a flat list or numeric array (unchecked)."""
        if isinstance(history, (str, bytes)) or not hasattr(history, "__len__"):
            raise TypeError(f"{name} must be a sequence of numbers; got {_describe(history)}")
        if hasattr(history, "detach"):  # a torch tensor
            history = history.detach().cpu().numpy()
        elif len(history) and isinstance(history[0], (list, tuple)):  # nested lists, as numpy reads them
            history = np.asarray(history)
        if isinstance(history, np.ndarray):
            return history.reshape(-1) if history.dtype.kind in "iuf" else history.reshape(-1).tolist()
        return list(history)

    @staticmethod
    def _checked(history: Any, name: str, checker: Callable[[Any, str], float], offset: int) -> np.ndarray:
        """``history`` as float64, every element checked; an error names ``name[index]``."""
        if isinstance(history, np.ndarray):
            arr = history.astype(np.float64)
            bad = np.isfinite(arr) & (np.abs(arr) > MAX_MAGNITUDE) if checker is check_value else ~(arr > 0) | (arr > MAX_MAGNITUDE)
            for i in np.flatnonzero(bad)[:1].tolist():  # let the scalar checker word the error
                checker(arr[i], f"{name}[{i + offset}]")
            return arr
        return np.array([checker(x, f"{name}[{i + offset}]") for i, x in enumerate(history)], dtype=np.float64)

    def _allocate(self, cap: int) -> None:
        self._cap = cap
        self._v, self._c = np.zeros(cap), np.zeros(cap)
        self._ph, self._pl, self._qh, self._ql = (np.zeros(cap + 1) for _ in range(4))  # prefix sums
        self._bmin, self._bmax = np.zeros(cap // _BLOCK), np.zeros(cap // _BLOCK)  # per-block finite extremes
        self._blocks = 0  # blocks whose extremes are computed
        self._a = self._b = 0  # the retained slice
        self._th = self._tl = self._tch = self._tcl = 0.0  # the prefix sums at _b, as Python floats
        self._n = 0  # updates ever made (the update number of the next one)
        self._bad: List[int] = []  # update numbers of the retained non-finite values (and a few older ones)

    def _make_room(self) -> None:
        """Grow the arrays (doubling) or move the retained slice to the front, its prefix sums re-based to 0."""
        a, b, n = self._a, self._b, self._b - self._a
        if self._cap < self._cap_final:
            old, blocks, updates, bad = self._arrays, self._blocks, self._n, self._bad
            self._allocate(min(self._cap_final, 2 * self._cap))
            for new, arr in zip(self._arrays, old):
                new[: len(arr)] = arr
            self._a, self._b, self._blocks, self._n, self._bad = a, b, blocks, updates, bad
        else:
            self._v[:n], self._c[:n] = self._v[a:b], self._c[a:b]
            ph, pl = _dd_minus(self._ph[a: b + 1], self._pl[a: b + 1], self._ph[a], self._pl[a])
            qh, ql = _dd_minus(self._qh[a: b + 1], self._ql[a: b + 1], self._qh[a], self._ql[a])
            self._ph[: n + 1], self._pl[: n + 1], self._qh[: n + 1], self._ql[: n + 1] = ph, pl, qh, ql
            del self._bad[: bisect.bisect_left(self._bad, self._n - n)]  # those that left the history
            self._a, self._b, self._blocks = 0, n, 0
        self._th, self._tl, self._tch, self._tcl = (x.item(self._b) for x in (self._ph, self._pl, self._qh, self._ql))

    def update(self, value: Any, count: Any = 1) -> None:
        """Append ``value`` standing for ``count`` samples; a bad value or count raises and changes nothing."""
        v = value if type(value) is float and abs(value) <= MAX_MAGNITUDE else check_value(value)
        c = 1.0 if type(count) is int and count == 1 else check_count(count)
        self._append(v, c)

    def _append(self, v: float, c: float) -> None:
        b = self._b
        if b == self._cap:
            self._make_room()
            b = self._b
        self._v[b] = v
        self._c[b] = c
        th, tl, tch, tcl = self._th, self._tl, self._tch, self._tcl
        if v - v == 0.0:  # finite: compensated (TwoSum) accumulation of the value and of its count
            s = th + v
            bp = s - th
            tl += (th - (s - bp)) + (v - bp)
            th = s
            s = tch + c
            bp = s - tch
            tcl += (tch - (s - bp)) + (c - bp)
            tch = s
            self._th, self._tl, self._tch, self._tcl = th, tl, tch, tcl
        else:
            self._bad.append(self._n)
        self._n += 1
        b += 1
        self._ph[b] = th
        self._pl[b] = tl
        self._qh[b] = tch
        self._ql[b] = tcl
        self._b = b
        if b - self._a > self.max_length:
            self._a += 1

    def __len__(self) -> int:
        return self._b - self._a

    def __repr__(self) -> str:
        return f"{type(self).__name__}(len={len(self)}, max_length={self.max_length})"

    @property
    def _log_history(self) -> np.ndarray:
        """The retained values, oldest first (a read-only view), as in MMEngine."""
        return _read_only(self._v[self._a: self._b])

    @property
    def _count_history(self) -> np.ndarray:
        """The retained counts, oldest first (a read-only view), as in MMEngine."""
        return _read_only(self._c[self._a: self._b])

    @property
    def data(self) -> Tuple[np.ndarray, np.ndarray]:
        """``(values, counts)``: copies of the retained history as float64 arrays, oldest first."""
        return self.window(None)

    def window(self, window_size: Optional[int] = None) -> Tuple[np.ndarray, np.ndarray]:
        """``(values, counts)`` of the last ``window_size`` updates (all when None), oldest first, as copies."""
        w = self._window(window_size, allow_empty=True)
        return self._v[self._b - w: self._b].copy(), self._c[self._b - w: self._b].copy()

    @property
    def nbytes(self) -> int:
        """Bytes held by the arrays (an upper bound of its memory)."""
        return sum(a.nbytes for a in self._arrays) + 8 * len(self._bad)

    @property
    def _arrays(self) -> Tuple[np.ndarray, ...]:
        return self._v, self._c, self._ph, self._pl, self._qh, self._ql, self._bmin, self._bmax

    def _window(self, window_size: Optional[int], allow_empty: bool = False) -> int:
        """Validate ``window_size`` and return the number of entries it covers (clipped to the history)."""
        size = self._b - self._a
        if window_size is None:
            w = size
        elif not is_int(window_size):
            raise TypeError(f"window_size must be a positive int or None; got {window_size!r}")
        elif window_size < 1:
            raise ValueError(f"window_size must be a positive int or None; got {window_size!r}")
        else:
            w = min(int(window_size), size)
        if w == 0 and not allow_empty:
            raise ValueError("HistoryBuffer is empty: update it before asking for a statistic")
        return w

    def current(self) -> float:
        """The most recent value, as recorded (NaN included)."""
        if self._b == self._a:
            raise ValueError("HistoryBuffer is empty: update it before asking for a statistic")
        return self._v.item(self._b - 1)

    def mean(self, window_size: Optional[int] = None) -> float:
        """``sum(values) / sum(counts)`` over the finite values among the last ``window_size`` updates
        (``None``: the whole retained history); NaN if the window holds no finite value."""
        if type(window_size) is int and 0 < window_size <= self._b - self._a:  # the fast path of _window
            j = self._b - window_size
        else:
            j = self._b - self._window(window_size)
        hi, lo = _dd_minus(self._tch, self._tcl, self._qh.item(j), self._ql.item(j))
        if hi == 0.0:
            return math.nan
        vhi, vlo = _dd_minus(self._th, self._tl, self._ph.item(j), self._pl.item(j))
        return dd_div(vhi, vlo, hi) if lo == 0.0 else (vhi + vlo) / (hi + lo)

    def min(self, window_size: Optional[int] = None) -> float:
        """Smallest finite value among the last ``window_size`` updates (NaN if none is finite)."""
        return self._extreme(window_size, True)

    def max(self, window_size: Optional[int] = None) -> float:
        """Largest finite value among the last ``window_size`` updates (NaN if none is finite)."""
        return self._extreme(window_size, False)

    def nonfinite(self, window_size: Optional[int] = None) -> int:
        """How many of the last ``window_size`` updates were NaN or infinite."""
        return len(self._bad) - bisect.bisect_left(self._bad, self._n - self._window(window_size, allow_empty=True))

    def count(self, window_size: Optional[int] = None) -> int:
        """How many of the last ``window_size`` updates were finite."""
        return self._window(window_size, allow_empty=True) - self.nonfinite(window_size)

    def std(self, window_size: Optional[int] = None) -> float:
        """Population standard deviation (ddof=0) of the finite values among the last ``window_size``
        updates (counts ignored); NaN if none is finite."""
        values = self._v[self._b - self._window(window_size): self._b]
        values = values[np.isfinite(values)]
        return float(values.std()) if values.size else math.nan

    def _extreme(self, window_size: Optional[int], smallest: bool) -> float:
        w = window_size if type(window_size) is int and 0 < window_size <= self._b - self._a else self._window(window_size)
        a, b = self._b - w, self._b
        if w <= _SMALL:
            values = self._v[a:b].tolist()
            if self._bad and self._bad[-1] >= self._n - w:
                values = [x for x in values if x - x == 0.0]
                if not values:
                    return math.nan
            return min(values) if smallest else max(values)
        first, last = -(-a // _BLOCK), b // _BLOCK
        if last - first < 4:
            best = _finite_extreme(self._v[a:b], smallest)
        else:
            if self._blocks < last:  # compute the extremes of the blocks filled since (written once)
                rows = self._v[self._blocks * _BLOCK: last * _BLOCK].reshape(-1, _BLOCK)
                finite = np.isfinite(rows)
                self._bmin[self._blocks: last] = np.where(finite, rows, math.inf).min(axis=1)
                self._bmax[self._blocks: last] = np.where(finite, rows, -math.inf).max(axis=1)
                self._blocks = last
            pick = min if smallest else max
            middle = (self._bmin if smallest else self._bmax)[first:last]
            best = pick(float(middle.min() if smallest else middle.max()),
                        _finite_extreme(self._v[a: first * _BLOCK], smallest),
                        _finite_extreme(self._v[last * _BLOCK: b], smallest))
        return best if best - best == 0.0 else math.nan

    @classmethod
    def register_statistics(cls, method: Callable[..., Any]) -> Callable[..., Any]:
        """Decorator: register ``method(buffer, *args, **kwargs)`` as the statistic ``method.__name__``
        (for :meth:`statistics` and ``LogProcessor``'s ``method_name``); returns ``method`` unchanged."""
        if not callable(method) or not getattr(method, "__name__", None):
            raise TypeError(f"register_statistics expects a named function; got {method!r}")
        cls._statistics_methods[method.__name__] = method
        return method

    def statistics(self, method_name: str, *args: Any, **kwargs: Any) -> Any:
        """Call the registered statistic ``method_name``; an unknown name raises ``KeyError`` listing them."""
        method = self._statistics_methods.get(method_name)
        if method is None:
            raise KeyError(f"{method_name!r} is not a registered statistic; registered: {', '.join(self._statistics_methods)}")
        return method(self, *args, **kwargs)

    def state_dict(self, last: Optional[int] = None) -> Dict[str, Any]:
        """A picklable snapshot (plain Python lists) of the last ``last`` updates (all when None)."""
        values, counts = self.window(last)
        return {"max_length": self.max_length, "log_history": values.tolist(), "count_history": counts.tolist()}

    @classmethod
    def from_state_dict(cls, state: Dict[str, Any]) -> "HistoryBuffer":
        """Rebuild a buffer from :meth:`state_dict`; a malformed state raises ``KeyError``/``TypeError``/``ValueError``."""
        if not isinstance(state, dict):
            raise TypeError(f"HistoryBuffer state must be a dict; got {_describe(state)}")
        missing = [k for k in ("max_length", "log_history", "count_history") if k not in state]
        if missing:
            raise KeyError(f"HistoryBuffer state is missing {', '.join(missing)}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return cls(state["log_history"], state["count_history"], max_length=state["max_length"])


#: the built-in statistics: name -> the WindowStat attribute that holds it, also the suffix of its output name
SUFFIXES = {"mean": "avg", "min": "min", "max": "max", "current": "last", "count": "count", "std": "std"}
BUILTIN_STATISTICS = {name: getattr(HistoryBuffer, name) for name in SUFFIXES}
HistoryBuffer._statistics_methods.update(BUILTIN_STATISTICS)
