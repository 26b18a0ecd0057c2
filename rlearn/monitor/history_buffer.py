"""``HistoryBuffer``: the bounded history of one scalar, with O(1) update and O(1) windowed mean.

In the metric path it is the ring behind ``LogProcessor``'s ``last_n`` windows ("max over the last
100 episodes", see :mod:`rlearn.monitor.tracked`). Storage design (see ``docs/monitoring.md``):

* values and counts live in a ring of numpy arrays that grows by doubling up to ``max_length``
  (rounded up to a whole number of blocks), so memory is bounded and a short run stays small;
* next to each entry the ring keeps the running sums *before* that entry (value sum as a compensated
  double-double pair, and the count sum over finite entries likewise); a windowed sum is
  ``total - prefix[oldest in window]``, i.e. O(1). The running sums are re-based every ``capacity``
  updates (amortised O(1)) so they stay of the order of the retained history and rounding never drifts.
  Error bound: each double-double prefix is within about ``2**-104 * n * S`` of the exact prefix (``S``
  the sum of magnitudes since the last re-base, ``n`` its number of terms), so a windowed sum is within
  ``2**-103 * n * S`` of the exact one; ``mean`` rounds the value and count sums to doubles once each and
  divides, three roundings: within 1.5 units of the last place of the result beyond that. This is not
  correctly rounded: a window whose exact sum is far smaller than ``S`` (cancellation against a huge
  older value) can lose digits;
* non-finite values (NaN, +/-inf) are stored and returned by :attr:`HistoryBuffer.data` and
  :meth:`HistoryBuffer.current`, but ``mean``/``min``/``max`` skip them and :meth:`HistoryBuffer.nonfinite`
  counts them (their absolute indices are kept in a short sorted list);
* ``min``/``max`` over large windows combine cached per-block extremes (blocks of 256 entries, invalidated on
  write) with numpy over the partial blocks at both ends, so a query costs O(256 + window / 256).

One module on purpose: the ring, the compensated running sums and the cached block extremes are one data
structure whose invariants (re-basing, growth, wrap-around) every method relies on; split, each half would
have to know the other's internals.
"""

from __future__ import annotations

import bisect
import math
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from rlearn.monitor.scalars import to_float

__all__ = ["HistoryBuffer", "MAX_MAGNITUDE"]

#: largest accepted magnitude of a finite value or count; larger ones could overflow the running sums
MAX_MAGNITUDE = 1e290

_BLOCK_SHIFT = 8
_BLOCK = 1 << _BLOCK_SHIFT  # entries per min/max summary block
_BLOCK_MIN_WINDOW = 4 * _BLOCK  # below this a min/max query just scans the window with numpy
_MIN_CAPACITY = 64
_SMALL_WINDOW = 64  # min/max of windows up to this size are computed in plain Python
_INF = math.inf


def _describe(value: Any) -> str:
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    text = type(value).__module__ + "." + type(value).__qualname__
    if shape is not None:
        text += f" of shape {tuple(shape)}"
    if dtype is not None:
        text += f" and dtype {dtype}"
    return text


def _check_value(value: Any, what: str = "value") -> float:
    v = to_float(value, what)
    if v - v == 0.0 and abs(v) > MAX_MAGNITUDE:  # finite and huge (NaN/inf are accepted and counted)
        raise ValueError(f"{what} {v!r} is too large to average safely (|{what}| must be <= {MAX_MAGNITUDE:g})")
    return v


def _check_count(count: Any, what: str = "count") -> float:
    if isinstance(count, (bool, np.bool_)):
        raise TypeError(f"{what} must be a positive number, not a bool")
    c = to_float(count, what)
    if not (0.0 < c <= MAX_MAGNITUDE):
        raise ValueError(f"{what} must be a positive finite number (<= {MAX_MAGNITUDE:g}); got {c!r}")
    return c


def _two_sum(a: Any, b: Any) -> Tuple[Any, Any]:
    """Error-free sum of floats or float arrays (Knuth's TwoSum): ``a + b == s + e`` exactly."""
    s = a + b
    bp = s - a
    e = (a - (s - bp)) + (b - bp)
    return s, e


def _dd_difference(a_hi: Any, a_lo: Any, b_hi: Any, b_lo: Any) -> Tuple[Any, Any]:
    """``(a_hi + a_lo) - (b_hi + b_lo)`` of two double-doubles (floats or float arrays) as ``(hi, lo)``, not
    renormalised: the high parts' difference, and its TwoSum error plus the low parts' difference. ``hi + lo``
    rounds it once to a double; ``_two_sum(hi, lo)`` renormalises it to a double-double."""
    hi, err = _two_sum(a_hi, -b_hi)
    return hi, err + (a_lo - b_lo)


class HistoryBuffer:
    """The recent history of one scalar (a loss, a time, a learning rate...) and statistics over it.

    Args:
        log_history: initial values, oldest first.
        count_history: the count of each initial value (how many samples it stands for); defaults to
            ones. Must have the same length as ``log_history`` when given.
        max_length: how many updates are kept. Constructing with more values warns and keeps the newest;
            updates past ``max_length`` drop the oldest.

    ``mean(w)`` is ``sum(values) / sum(counts)`` over the last ``w`` updates (all of them when ``w`` is
    None). ``mean``, ``min`` and ``max`` skip non-finite values (they are counted by :meth:`nonfinite`)
    and return NaN when the window holds no finite value. Any statistic of an empty buffer raises
    ``ValueError``.

    Example::

        >>> buf = HistoryBuffer([1, 2, 3], [1, 1, 1])
        >>> buf.mean(2), buf.min(), buf.max(2)
        (2.5, 1.0, 3.0)
    """

    def __init__(
        self,
        log_history: Sequence[Any] = (),
        count_history: Sequence[Any] = (),
        max_length: int = 1_000_000,
    ) -> None:
        if isinstance(max_length, bool) or not isinstance(max_length, (int, np.integer)) or max_length < 1:
            raise ValueError(f"max_length must be a positive int; got {max_length!r}")
        self.max_length = int(max_length)
        if max_length <= _BLOCK_MIN_WINDOW:
            self._cap_final = self.max_length
        else:
            self._cap_final = -(-self.max_length // _BLOCK) * _BLOCK
        values, counts = self._check_histories(log_history, count_history)
        if len(values) > self.max_length:
            warnings.warn(
                f"The length of history buffer ({len(values)}) exceeds the max_length ({self.max_length}); "
                f"the first {len(values) - self.max_length} elements are dropped.",
                stacklevel=2,
            )
            values = values[-self.max_length:]
            counts = counts[-self.max_length:]
        initial = max(_MIN_CAPACITY, 1 << max(0, len(values) - 1).bit_length())  # a power of two
        self._allocate(min(self._cap_final, initial))
        for v, c in zip(values.tolist(), counts.tolist()):
            self._append(v, c)

    # ------------------------------------------------------------------ construction helpers
    @staticmethod
    def _as_array(history: Sequence[Any], name: str, checker: Callable[[Any, str], float]) -> np.ndarray:
        if isinstance(history, (str, bytes)) or not hasattr(history, "__len__"):
            raise TypeError(f"{name} must be a sequence of numbers; got {_describe(history)}")
        if isinstance(history, np.ndarray) and history.ndim == 1 and history.dtype.kind in "iuf":
            arr = history.astype(np.float64)
            bad = np.flatnonzero(np.isfinite(arr) & (np.abs(arr) > MAX_MAGNITUDE))
            if bad.size:  # let the scalar checker produce the error message
                checker(arr[bad[0]], f"{name}[{bad[0]}]")
            return arr
        return np.array([checker(x, f"{name}[{i}]") for i, x in enumerate(history)], dtype=np.float64)

    def _check_histories(self, log_history: Sequence[Any], count_history: Sequence[Any]) -> Tuple[np.ndarray, np.ndarray]:
        values = self._as_array(log_history, "log_history", _check_value)
        if len(count_history) == 0 and len(values) > 0:
            counts = np.ones(len(values))
        else:
            counts = self._as_array(count_history, "count_history", _check_count)
            if len(counts) != len(values):
                raise ValueError(
                    f"log_history and count_history must have the same length; got {len(values)} and {len(counts)}"
                )
            bad = np.flatnonzero(~((counts > 0) & np.isfinite(counts)))
            if bad.size:
                _check_count(counts[bad[0]], f"count_history[{bad[0]}]")
        return values, counts

    def _allocate(self, capacity: int) -> None:
        self._cap = capacity
        self._v = np.zeros(capacity)  # values
        self._c = np.zeros(capacity)  # counts
        self._sh = np.zeros(capacity)  # value sum before this entry (high part)
        self._sl = np.zeros(capacity)  # value sum before this entry (compensation)
        self._sc = np.zeros(capacity)  # finite-entry count sum before this entry (high part)
        self._scl = np.zeros(capacity)  # finite-entry count sum before this entry (compensation)
        self._block_ok = bytearray((capacity >> _BLOCK_SHIFT) + 1)  # 1 = cached block extremes are valid
        self._bmin = np.full(len(self._block_ok), _INF)
        self._bmax = np.full(len(self._block_ok), -_INF)
        self._n = 0  # updates ever appended (absolute index of the next one)
        self._size = 0  # retained updates
        self._tot_hi = 0.0
        self._tot_lo = 0.0
        self._tot_c = 0.0
        self._tot_cl = 0.0
        self._nonfinite: List[int] = []  # absolute indices of non-finite values, sorted
        self._nf_head = 0  # entries before this index have left the history

    def _grow(self) -> None:
        """Double the ring (up to its final capacity), keeping every retained entry at ``abs % capacity``."""
        old_cap = self._cap
        new_cap = min(self._cap_final, 2 * old_cap)
        idx = np.arange(self._n - self._size, self._n)
        old, new = idx % old_cap, idx % new_cap
        for name in ("_v", "_c", "_sh", "_sl", "_sc", "_scl"):
            arr = np.zeros(new_cap)
            arr[new] = getattr(self, name)[old]
            setattr(self, name, arr)
        self._cap = new_cap
        self._block_ok = bytearray((new_cap >> _BLOCK_SHIFT) + 1)
        self._bmin = np.full(len(self._block_ok), _INF)
        self._bmax = np.full(len(self._block_ok), -_INF)

    def _rebase(self) -> None:
        """Subtract the running sums before the oldest retained entry from every stored sum.

        Keeps the sums of the order of the retained history, so the compensated sums never drift.
        """
        if self._size == 0:
            return
        j = (self._n - self._size) % self._cap
        bh, bl, bc, bcl = self._sh[j], self._sl[j], self._sc[j], self._scl[j]
        self._sh, self._sl = _two_sum(*_dd_difference(self._sh, self._sl, bh, bl))
        self._sc, self._scl = _two_sum(*_dd_difference(self._sc, self._scl, bc, bcl))
        self._tot_hi, self._tot_lo = _two_sum(*_dd_difference(self._tot_hi, self._tot_lo, float(bh), float(bl)))
        self._tot_c, self._tot_cl = _two_sum(*_dd_difference(self._tot_c, self._tot_cl, float(bc), float(bcl)))

    # ------------------------------------------------------------------ update
    def update(self, value: Any, count: Any = 1) -> None:
        """Append ``value`` standing for ``count`` samples (``count`` a positive finite number).

        Raises ``TypeError`` for a value that is not a real scalar (the message names its type and
        shape) and ``ValueError`` for a bad count; the buffer is left unchanged.
        """
        v = value if type(value) is float and abs(value) <= MAX_MAGNITUDE else _check_value(value)
        c = 1.0 if type(count) is int and count == 1 else _check_count(count)
        self._append(v, c)

    def _append(self, v: float, c: float) -> None:
        """Append an already validated value and count (the hot path: keep it flat)."""
        n = self._n
        size = self._size
        cap = self._cap
        if size == cap and cap < self._cap_final:
            self._grow()
            cap = self._cap
        i = n % cap
        self._block_ok[i >> _BLOCK_SHIFT] = 0
        self._v[i] = v
        self._c[i] = c
        hi = self._tot_hi
        lo = self._tot_lo
        tc = self._tot_c
        tcl = self._tot_cl
        self._sh[i] = hi
        self._sl[i] = lo
        self._sc[i] = tc
        self._scl[i] = tcl
        if v - v == 0.0:  # finite: compensated (TwoSum) accumulation
            s = hi + v
            bp = s - hi
            self._tot_lo = lo + ((hi - (s - bp)) + (v - bp))
            self._tot_hi = s
            s = tc + c  # the counts get the same compensation (a huge count must not swallow later ones)
            bp = s - tc
            self._tot_cl = tcl + ((tc - (s - bp)) + (c - bp))
            self._tot_c = s
        else:
            self._nonfinite.append(n)
        self._n = n + 1
        if size < self.max_length:
            self._size = size + 1
        elif self._nf_head < len(self._nonfinite):
            self._forget_nonfinite(n + 1 - size)
        if i == cap - 1:  # once per trip around the ring: amortised O(1)
            self._rebase()

    def _forget_nonfinite(self, oldest: int) -> None:
        """Drop the indices of non-finite values older than absolute index ``oldest``."""
        nf = self._nonfinite
        head = self._nf_head
        while head < len(nf) and nf[head] < oldest:
            head += 1
        if head > 64 and 2 * head > len(nf):  # amortised O(1), keeps the list short
            del nf[:head]
            head = 0
        self._nf_head = head

    # ------------------------------------------------------------------ access
    def __len__(self) -> int:
        return self._size

    def __repr__(self) -> str:
        return f"{type(self).__name__}(len={self._size}, max_length={self.max_length})"

    @property
    def data(self) -> Tuple[np.ndarray, np.ndarray]:
        """``(values, counts)``: copies of the retained history as float64 arrays, oldest first."""
        return self.window(None)

    def window(self, window_size: Optional[int] = None) -> Tuple[np.ndarray, np.ndarray]:
        """``(values, counts)`` of the last ``window_size`` updates (all when None), oldest first, as copies.

        ``LastN`` windows (the ``last_n`` entries of ``LogProcessor``) read their values with it.
        """
        w = self._size if window_size is None else self._window(window_size, allow_empty=True)
        parts = self._ranges(w)
        if len(parts) == 1:
            a, b = parts[0]
            return self._v[a:b].copy(), self._c[a:b].copy()
        return (
            np.concatenate([self._v[a:b] for a, b in parts]),
            np.concatenate([self._c[a:b] for a, b in parts]),
        )

    @property
    def nbytes(self) -> int:
        """Bytes held by the ring arrays and the non-finite index list (an upper bound of its memory)."""
        arrays = (self._v, self._c, self._sh, self._sl, self._sc, self._scl, self._bmin, self._bmax)
        return sum(a.nbytes for a in arrays) + len(self._block_ok) + 8 * len(self._nonfinite)

    def _window(self, window_size: Optional[int], allow_empty: bool = False) -> int:
        """Validate ``window_size`` and return the number of entries it covers (clipped to the history)."""
        if window_size is None:
            w = self._size
        elif isinstance(window_size, bool) or not isinstance(window_size, (int, np.integer)):
            raise TypeError(f"window_size must be a positive int or None; got {window_size!r}")
        elif window_size < 1:
            raise ValueError(f"window_size must be a positive int or None; got {window_size!r}")
        else:
            w = min(int(window_size), self._size)
        if w == 0 and not allow_empty:
            raise ValueError("HistoryBuffer is empty: update it before asking for a statistic")
        return w

    def _ranges(self, w: int) -> List[Tuple[int, int]]:
        """Physical slot ranges holding the last ``w`` entries, oldest first."""
        a = (self._n - w) % self._cap
        if a + w <= self._cap:
            return [(a, a + w)]
        return [(a, self._cap), (0, a + w - self._cap)]

    # ------------------------------------------------------------------ statistics
    def current(self) -> float:
        """The most recent value, as recorded (NaN included)."""
        if self._size == 0:
            raise ValueError("HistoryBuffer is empty: update it before asking for a statistic")
        return float(self._v[(self._n - 1) % self._cap])

    def mean(self, window_size: Optional[int] = None) -> float:
        """``sum(values) / sum(counts)`` over the finite values among the last ``window_size`` updates.

        ``window_size=None`` means the whole retained history. NaN if the window holds no finite value.
        """
        size = self._size
        if type(window_size) is int and window_size > 0 and size:  # fast path of _window
            w = window_size if window_size < size else size
        else:
            w = self._window(window_size)
        j = (self._n - w) % self._cap
        # each windowed sum is a difference of double-doubles, rounded once to a double
        hi, lo = _dd_difference(self._tot_c, self._tot_cl, self._sc.item(j), self._scl.item(j))
        c = hi + lo
        if c == 0.0:
            return math.nan
        hi, lo = _dd_difference(self._tot_hi, self._tot_lo, self._sh.item(j), self._sl.item(j))
        return (hi + lo) / c

    def min(self, window_size: Optional[int] = None) -> float:
        """Smallest finite value among the last ``window_size`` updates (NaN if none is finite)."""
        return self._extreme(window_size, True)

    def max(self, window_size: Optional[int] = None) -> float:
        """Largest finite value among the last ``window_size`` updates (NaN if none is finite)."""
        return self._extreme(window_size, False)

    def nonfinite(self, window_size: Optional[int] = None) -> int:
        """How many of the last ``window_size`` updates were NaN or infinite."""
        w = self._window(window_size, allow_empty=True)
        nf = self._nonfinite
        return len(nf) - bisect.bisect_left(nf, self._n - w, lo=self._nf_head)

    def _extreme(self, window_size: Optional[int], smallest: bool) -> float:
        size = self._size
        if type(window_size) is int and window_size > 0 and size:  # fast path of _window
            w = window_size if window_size < size else size
        else:
            w = self._window(window_size)
        if w <= _SMALL_WINDOW:  # plain Python beats numpy's per-call overhead here
            cap = self._cap
            a = (self._n - w) % cap
            if a + w <= cap:
                values = self._v[a: a + w].tolist()
            else:
                values = self._v[a:].tolist() + self._v[: a + w - cap].tolist()
            if self._nf_head != len(self._nonfinite):  # some non-finite value is retained
                values = [x for x in values if x - x == 0.0]
                if not values:
                    return math.nan
            return min(values) if smallest else max(values)
        best = _INF if smallest else -_INF
        pick = min if smallest else max
        for a, b in self._ranges(w):
            best = pick(best, self._range_extreme(a, b, smallest))
        return best if best - best == 0.0 else math.nan

    def _range_extreme(self, a: int, b: int, smallest: bool) -> float:
        """Finite min (or max) over slots ``[a, b)``; +inf (or -inf) if none is finite."""
        lo_block = -(-a >> _BLOCK_SHIFT)
        hi_block = b >> _BLOCK_SHIFT
        if b - a < _BLOCK_MIN_WINDOW or self._cap % _BLOCK or hi_block - lo_block < 2:
            return _finite_extreme(self._v[a:b], smallest)
        ok = np.frombuffer(self._block_ok, dtype=np.uint8, count=hi_block - lo_block, offset=lo_block)
        stale = np.flatnonzero(ok == 0)
        if stale.size:
            rows = stale + lo_block
            blocks = self._v[: self._cap].reshape(-1, _BLOCK)[rows]
            finite = np.isfinite(blocks)
            self._bmin[rows] = np.where(finite, blocks, _INF).min(axis=1)
            self._bmax[rows] = np.where(finite, blocks, -_INF).max(axis=1)
            for r in rows.tolist():
                self._block_ok[r] = 1
        summary = self._bmin if smallest else self._bmax
        mid = float(summary[lo_block:hi_block].min() if smallest else summary[lo_block:hi_block].max())
        left = _finite_extreme(self._v[a: lo_block << _BLOCK_SHIFT], smallest)
        right = _finite_extreme(self._v[hi_block << _BLOCK_SHIFT: b], smallest)
        return min(mid, left, right) if smallest else max(mid, left, right)

    # ------------------------------------------------------------------ state
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


def _finite_extreme(x: np.ndarray, smallest: bool) -> float:
    """Min (or max) of the finite entries of ``x``; +inf (or -inf) if there is none."""
    if x.size == 0:
        return _INF if smallest else -_INF
    m = float(np.fmin.reduce(x) if smallest else np.fmax.reduce(x))  # NaN ignored unless all NaN
    if m - m == 0.0:
        return m
    finite = x[np.isfinite(x)]
    if finite.size == 0:
        return _INF if smallest else -_INF
    return float(finite.min() if smallest else finite.max())
