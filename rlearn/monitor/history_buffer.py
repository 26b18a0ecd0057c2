"""``HistoryBuffer``: MMEngine's history of one scalar in two arrays (values, counts) that grow by doubling up to
a little more than ``max_length``: ``update`` is O(1) amortised, a statistic reads the window's slice in C (numpy,
``math.fsum``), O(window) as in MMEngine (docs/logging.md, section HistoryBuffer)."""

from __future__ import annotations

import math
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from rlearn.monitor.scalars import to_float
from rlearn.values import check_int, is_int

__all__ = ["HistoryBuffer", "MAX_MAGNITUDE", "BUILTIN_STATISTICS", "SUFFIXES", "dd_add", "dd_div", "dd_sum"]

MAX_MAGNITUDE = 1e290


def _describe(value: Any) -> str:
    text = type(value).__module__ + "." + type(value).__qualname__
    if getattr(value, "shape", None) is not None:
        text += f" of shape {tuple(value.shape)}"
    return text


def check_value(value: Any, what: str = "value") -> float:
    """``value`` as a float: NaN/inf pass (they are counted apart), a finite value above ``MAX_MAGNITUDE`` raises."""
    v = to_float(value, what)
    if v - v == 0.0 and abs(v) > MAX_MAGNITUDE:
        raise ValueError(f"{what} {v!r} is too large to average safely (|{what}| must be <= {MAX_MAGNITUDE:g})")
    return v


def check_count(count: Any, what: str = "count") -> float:
    """``count`` as a float in ``(0, MAX_MAGNITUDE]``; a bool raises ``TypeError``."""
    if isinstance(count, (bool, np.bool_)):
        raise TypeError(f"{what} must be a positive number, not a bool")
    c = to_float(count, what)
    if not 0.0 < c <= MAX_MAGNITUDE:
        raise ValueError(f"{what} must be a positive finite number (<= {MAX_MAGNITUDE:g}); got {c!r}")
    return c


def dd_sum(values: Sequence[float]) -> Tuple[float, float]:
    """The sum of finite ``values`` as a double-double ``(hi, lo)``: ``hi`` the correctly rounded sum, ``lo`` the
    rounded rest (both ``math.fsum``); ``(inf, 0.0)`` when a partial sum overflows."""
    try:
        hi = math.fsum(values)
        return hi, math.fsum([*values, -hi])
    except OverflowError:
        return sum(values), 0.0


def dd_add(a_hi: float, a_lo: float, b_hi: float, b_lo: float) -> Tuple[float, float]:
    """``(a_hi + a_lo) + (b_hi + b_lo)`` of double-doubles, renormalised (TwoSum)."""
    s = a_hi + b_hi
    bp = s - a_hi
    lo = ((a_hi - (s - bp)) + (b_hi - bp)) + (a_lo + b_lo)
    hi = s + lo
    return hi, lo - (hi - s)


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


def _flat(history: Any, name: str) -> List[Any]:
    """``history`` as a flat list (unchecked)."""
    if isinstance(history, (str, bytes)) or not hasattr(history, "__len__"):
        raise TypeError(f"{name} must be a sequence of numbers; got {_describe(history)}")
    if hasattr(history, "detach"):  # a torch tensor
        history = history.detach().cpu().numpy()
    if isinstance(history, np.ndarray) or len(history) and isinstance(history[0], (list, tuple)):  # as numpy reads it
        return np.asarray(history).reshape(-1).tolist()
    return list(history)


def _checked(history: List[Any], name: str, checker: Callable[[Any, str], float], offset: int) -> np.ndarray:
    """``history`` as a float64 array, every element checked; an error names ``name[index]``."""
    return np.array([checker(x, f"{name}[{i}]") for i, x in enumerate(history, offset)], dtype=np.float64)


def _read_only(view: np.ndarray) -> np.ndarray:
    view.flags.writeable = False
    return view


class HistoryBuffer:
    """The last ``max_length`` values of one scalar, each with a count (how many samples it stands for).

    ``mean(w)`` is ``sum(values) / sum(counts)`` over the last ``w`` updates (all when None); ``mean``,
    ``min`` and ``max`` skip non-finite values (counted by :meth:`nonfinite`), NaN when none is finite.
    A statistic of an empty buffer raises ``ValueError``. :meth:`statistics` calls one by name from the
    registry :meth:`register_statistics` adds to (that of ``LogProcessor``'s ``method_name``). Example:
    docs/logging.md, section HistoryBuffer.
    """

    _statistics_methods: Dict[str, Callable[..., Any]] = {}

    def __init__(self, log_history: Sequence[Any] = (), count_history: Sequence[Any] = (),
                 max_length: int = 1_000_000) -> None:
        self.max_length = check_int("max_length", max_length)
        self._cap_final = self.max_length + max(64, self.max_length // 8)  # the arrays' largest length
        values, counts = _flat(log_history, "log_history"), _flat(count_history, "count_history")
        if len(counts) and len(counts) != len(values):
            raise ValueError("log_history and count_history must have the same length; "
                             f"got {len(values)} and {len(counts)}")
        drop = max(0, len(values) - self.max_length)
        if drop:
            warnings.warn(f"The length of history buffer ({len(values)}) exceeds the max_length ({self.max_length}); "
                          f"the first {drop} elements are dropped.", stacklevel=2)
        self._v = _checked(values[drop:], "log_history", check_value, drop)
        self._c = _checked(counts[drop:], "count_history", check_count, drop) if len(counts) else np.ones(len(self._v))
        self._unit = bool((self._c == 1.0).all())  # every count ever held is 1: a mean divides by the number of values
        self._a, self._b = 0, len(self._v)  # the retained updates: the slice [_a, _b) of _v and _c

    def update(self, value: Any, count: Any = 1) -> None:
        """Append ``value`` standing for ``count`` samples; a bad value or count raises and changes nothing."""
        v = value if type(value) is float and abs(value) <= MAX_MAGNITUDE else check_value(value)
        c = 1.0 if type(count) is int and count == 1 else check_count(count)
        b = self._b
        if b == len(self._v):  # full: the retained slice moves to the front of arrays up to twice as long
            kept, cap, b = slice(self._a, b), min(self._cap_final, max(64, 2 * b)), b - self._a
            self._v, self._c = (np.concatenate([x[kept], np.empty(cap - b)]) for x in (self._v, self._c))
            self._a = 0
        self._v[b] = v
        self._c[b] = c
        if c != 1.0:
            self._unit = False
        self._b = b + 1
        if self._b - self._a > self.max_length:
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
        window = self._slice(window_size)
        return self._v[window].copy(), self._c[window].copy()

    @property
    def nbytes(self) -> int:
        """Bytes held by the arrays (an upper bound of its memory)."""
        return self._v.nbytes + self._c.nbytes

    def _slice(self, window_size: Optional[int], allow_empty: bool = True) -> slice:
        """The last ``window_size`` updates (all when None, clipped to the history) as a slice of the arrays."""
        if window_size is not None and not is_int(window_size):
            raise TypeError(f"window_size must be a positive int or None; got {window_size!r}")
        if window_size is not None and window_size < 1:
            raise ValueError(f"window_size must be a positive int or None; got {window_size!r}")
        if self._b == self._a and not allow_empty:
            raise ValueError("HistoryBuffer is empty: update it before asking for a statistic")
        return slice(self._a if window_size is None else max(self._a, self._b - int(window_size)), self._b)

    def _finite(self, window_size: Optional[int]) -> Tuple[np.ndarray, np.ndarray]:
        """``(values, counts)`` of the finite values among the last ``window_size`` updates."""
        window = self._slice(window_size, allow_empty=False)
        values, counts = self._v[window], self._c[window]
        finite = np.isfinite(values)
        return (values, counts) if finite.all() else (values[finite], counts[finite])

    def current(self) -> float:
        """The most recent value, as recorded (NaN included)."""
        return self._v[self._slice(1, allow_empty=False)].item()

    def mean(self, window_size: Optional[int] = None) -> float:
        """``sum(values) / sum(counts)`` over the finite values among the last ``window_size`` updates
        (``None``: the whole retained history); NaN if the window holds no finite value."""
        window = self._slice(window_size, allow_empty=False)
        values, counts = self._v[window].tolist(), None if self._unit else self._c[window].tolist()
        if not math.isfinite(sum(values)):  # a NaN/inf among them (or a sum past the float range): the finite ones
            finite = [v - v == 0.0 for v in values]
            values = [v for v, keep in zip(values, finite) if keep]
            counts = None if counts is None else [c for c, keep in zip(counts, finite) if keep]
        if not values:
            return math.nan
        hi, lo = dd_sum(values)
        if counts is None:  # unit counts: their sum is the number of values, exactly
            return dd_div(hi, lo, float(len(values)))
        c_hi, c_lo = dd_sum(counts)
        return dd_div(hi, lo, c_hi) if c_lo == 0.0 else (hi + lo) / (c_hi + c_lo)

    def min(self, window_size: Optional[int] = None) -> float:
        """Smallest finite value among the last ``window_size`` updates (NaN if none is finite)."""
        values = self._finite(window_size)[0]
        return float(values.min()) if values.size else math.nan

    def max(self, window_size: Optional[int] = None) -> float:
        """Largest finite value among the last ``window_size`` updates (NaN if none is finite)."""
        values = self._finite(window_size)[0]
        return float(values.max()) if values.size else math.nan

    def count(self, window_size: Optional[int] = None) -> int:
        """How many of the last ``window_size`` updates were finite."""
        return int(np.count_nonzero(np.isfinite(self._v[self._slice(window_size)])))

    def nonfinite(self, window_size: Optional[int] = None) -> int:
        """How many of the last ``window_size`` updates were NaN or infinite."""
        return len(self._v[self._slice(window_size)]) - self.count(window_size)

    def std(self, window_size: Optional[int] = None) -> float:
        """Population standard deviation (ddof=0) of the finite values among the last ``window_size``
        updates (counts ignored); NaN if none is finite."""
        values = self._finite(window_size)[0]
        return float(values.std()) if values.size else math.nan

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
            raise KeyError(f"{method_name!r} is not a registered statistic; "
                           f"registered: {', '.join(self._statistics_methods)}")
        return method(self, *args, **kwargs)

    def state_dict(self, last: Optional[int] = None) -> Dict[str, Any]:
        """A picklable snapshot (plain Python lists) of the last ``last`` updates (all when None)."""
        values, counts = self.window(last)
        return {"max_length": self.max_length, "log_history": values.tolist(), "count_history": counts.tolist()}

    @classmethod
    def from_state_dict(cls, state: Dict[str, Any]) -> "HistoryBuffer":
        """Rebuild a buffer from :meth:`state_dict`; a malformed state raises ``KeyError``, ``TypeError`` or
        ``ValueError``."""
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
