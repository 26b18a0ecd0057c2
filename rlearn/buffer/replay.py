"""A uniform replay buffer for off-policy policies: one preallocated numpy array per field, written
circularly (a full buffer overwrites its oldest transition), sampled with replacement into tensors that own
their memory (float32, integer actions as int64)."""

from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from rlearn.arrays import to_numpy
from rlearn.buffer import draws
from rlearn.values import check_int, is_int

#: the fields a transition must have; each is stored and returned by :meth:`ReplayBuffer.sample`
FIELDS = ("obs", "action", "reward", "next_obs", "terminated")

ShapeLike = Union[int, Sequence[int]]


def action_dtype_for(action_space: Any) -> np.dtype:
    """The storage dtype of a space's actions: its own integer dtype (``Discrete``...), else float32 (``Box``)."""
    dtype = np.dtype(getattr(action_space, "dtype", None) or np.float32)
    return dtype if np.issubdtype(dtype, np.integer) else np.dtype(np.float32)


def _as_shape(shape: ShapeLike, name: str) -> Tuple[int, ...]:
    if is_int(shape):
        shape = (int(shape),)
    try:
        dims = tuple(shape)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"ReplayBuffer: {name} must be a tuple of ints, got {shape!r}") from None
    if not all(is_int(d) and d >= 0 for d in dims):
        raise ValueError(f"ReplayBuffer: {name} must be a tuple of non-negative ints, got {shape!r}")
    return tuple(int(d) for d in dims)


def _finite_sum(arrays: List[np.ndarray]) -> bool:
    """Whether the float64 sum of ``arrays`` (1-d floats) is finite: False for a NaN or inf, and for float64
    values that overflow it."""
    values = np.concatenate(arrays) if len(arrays) > 1 else arrays[0]
    if values.dtype.itemsize <= 4:
        return math.isfinite(values.sum(dtype=np.float64))
    with np.errstate(over="ignore", invalid="ignore"):
        return math.isfinite(values.sum(dtype=np.float64))


class ReplayBatch(dict):
    """A minibatch from :meth:`ReplayBuffer.sample`: a plain dict of tensors whose values :meth:`ReplayBuffer.add`
    checked, so :func:`rlearn.rl.check_replay_batch` need not test them for NaN again (a host sync per batch)."""

    __slots__ = ()


class ReplayBuffer:
    """Ring buffer of the last ``capacity`` transitions with uniform sampling: observations of ``obs_shape`` in
    ``obs_dtype`` (``np.uint8`` saves images 4x memory), actions of ``action_shape`` in ``action_dtype``
    (:func:`action_dtype_for`); ``seed`` seeds the sampling generator (part of :meth:`state_dict`).
    """

    def __init__(self, capacity: int, obs_shape: ShapeLike, action_shape: ShapeLike, obs_dtype: Any = np.float32,
                 action_dtype: Any = np.float32, seed: Optional[int] = None) -> None:
        self.capacity = check_int("ReplayBuffer: capacity", capacity)
        self.obs_shape = _as_shape(obs_shape, "obs_shape")
        self.action_shape = _as_shape(action_shape, "action_shape")
        self.obs_dtype = np.dtype(obs_dtype)
        self.action_dtype = np.dtype(action_dtype)
        for name, dtype in (("obs_dtype", self.obs_dtype), ("action_dtype", self.action_dtype)):
            if dtype == object or not (np.issubdtype(dtype, np.number) or dtype == np.bool_):
                raise TypeError(f"ReplayBuffer: {name} must be a numeric dtype, got {dtype}")
        layout = {"obs": (self.obs_shape, self.obs_dtype), "action": (self.action_shape, self.action_dtype),
                  "reward": ((), np.float32), "next_obs": (self.obs_shape, self.obs_dtype),
                  "terminated": ((), np.float32)}
        self._item_shapes: Dict[str, Tuple[int, ...]] = {key: shape for key, (shape, _) in layout.items()}
        # np.zeros maps pages lazily: memory is touched as the buffer fills.
        self._storage = {key: np.zeros((self.capacity, *shape), dtype) for key, (shape, dtype) in layout.items()}
        # what sample() returns: float32, but integer (discrete) actions as int64
        self._sample_dtypes = {key: np.dtype(np.float32) for key in self._item_shapes}
        if np.issubdtype(self.action_dtype, np.integer):
            self._sample_dtypes["action"] = np.dtype(np.int64)
        self._pos = 0  # next slot to write
        self._size = 0  # filled slots
        self._rng = np.random.default_rng(seed)
        self._castable: set = set()  # (field, dtype) pairs already accepted by add
        self._prefetch: Optional[draws.Prefetch] = None  # batches drawn ahead by prefetch(), see there

    def __len__(self) -> int:
        return self._size

    @property
    def full(self) -> bool:
        """Whether the buffer holds ``capacity`` transitions (the next add overwrites the oldest)."""
        return self._size == self.capacity

    def __repr__(self) -> str:
        return (f"ReplayBuffer(size={self._size}, capacity={self.capacity}, obs_shape={self.obs_shape}, "
                f"action_shape={self.action_shape})")

    def add(self, transitions: Mapping[str, Any]) -> int:
        """Store transitions (each of :data:`FIELDS` ``[n, ...]`` or ``[n_steps, num_envs, ...]``; other keys are
        ignored); returns how many. All or nothing: a missing field, a shape or dtype that does not fit, a
        non-finite value or a ``terminated`` flag other than 0/1 raises, naming the field, before any write.
        """
        if self._prefetch is not None:  # the contents change: batches drawn ahead would be stale
            self._drop_prefetch()
        if type(transitions) is not dict and not isinstance(transitions, Mapping):  # the dict test first: cheaper
            raise TypeError(f"ReplayBuffer.add expects a dict of arrays, got {type(transitions).__name__}")
        missing = [key for key in FIELDS if key not in transitions]
        if missing:
            raise KeyError(f"ReplayBuffer.add: transitions lack {missing} (have {sorted(map(str, transitions))})")
        arrays = {}
        for key in FIELDS:
            value = transitions[key]
            arrays[key] = value if type(value) is np.ndarray else to_numpy(value, copy=False)
        obs = arrays["obs"]
        lead_ndim = obs.ndim - len(self.obs_shape)
        if lead_ndim not in (1, 2) or obs.shape[lead_ndim:] != self.obs_shape:
            raise ValueError(
                f"ReplayBuffer.add: 'obs' has shape {obs.shape}; expected [n, *{self.obs_shape}] or "
                f"[n_steps, num_envs, *{self.obs_shape}]"
            )
        lead = obs.shape[:lead_ndim]
        n = math.prod(lead)
        floats = []
        for key, array in arrays.items():
            expected = lead + self._item_shapes[key]
            if array.shape != expected:
                raise ValueError(f"ReplayBuffer.add: {key!r} has shape {array.shape}, expected {expected}")
            if (key, array.dtype) not in self._castable:
                self._check_dtype(key, array.dtype)
            kind = array.dtype.kind
            if kind == "f":
                floats.append(array.reshape(-1))
            elif kind == "c":
                floats.append(np.abs(array).reshape(-1))  # inf/NaN iff a part is
            if lead_ndim == 2:
                arrays[key] = array.reshape(n, *self._item_shapes[key])
        # the exact per-field count only for the rare batch that fails the cheap test
        if floats and not _finite_sum(floats):
            for key, array in arrays.items():
                if array.dtype.kind in "fc":
                    bad = int(array.size - np.count_nonzero(np.isfinite(array)))
                    if bad:
                        raise ValueError(f"ReplayBuffer.add: {key!r} holds {bad} non-finite value(s); nothing was "
                                         "added")
        flags = arrays["terminated"]
        if not (flags * flags == flags).all():  # x * x == x: exactly 0 and 1 among finite numbers
            raise ValueError("ReplayBuffer.add: 'terminated' must hold 0/1 flags")
        if n == 0:
            return 0
        n_write = min(n, self.capacity)
        if n > self.capacity:  # only the newest `capacity` transitions would survive
            arrays = {key: array[n - self.capacity:] for key, array in arrays.items()}
            self._pos = (self._pos + n - self.capacity) % self.capacity
        first = min(n_write, self.capacity - self._pos)
        for key, array in arrays.items():
            store = self._storage[key]
            store[self._pos:self._pos + first] = array[:first]
            if n_write > first:  # wrapped: the rest goes to the start
                store[:n_write - first] = array[first:]
        self._pos = (self._pos + n_write) % self.capacity
        self._size = min(self._size + n, self.capacity)
        return n

    def _check_dtype(self, key: str, dtype: np.dtype) -> None:
        """Refuse a dtype that cannot be stored without changing kind (float into int, str...); cached."""
        target = self._storage[key].dtype
        if dtype == object or not np.can_cast(dtype, target, casting="same_kind"):
            raise TypeError(f"ReplayBuffer.add: {key!r} has dtype {dtype}, which cannot be stored as {target}")
        self._castable.add((key, dtype))

    def sample(self, batch_size: int) -> ReplayBatch:
        """``batch_size`` transitions drawn uniformly with replacement: a :class:`ReplayBatch` of CPU tensors
        ``[B, ...]`` owning their memory, float32 but integer actions (int64)."""
        if type(batch_size) is not int or batch_size < 1:  # the common case without an ABC check
            check_int("ReplayBuffer.sample: batch_size", batch_size)
        if self._size == 0:
            raise RuntimeError("ReplayBuffer.sample: the buffer is empty; add transitions before sampling")
        ahead = self._prefetch
        if ahead is not None:
            if ahead.batch_size == batch_size and (ahead.batches or ahead.planned):
                if not ahead.batches:
                    self._draw_ahead(ahead)
                ahead.chunk_taken += 1
                return ahead.batches.pop()
            self._drop_prefetch()
        index = self._rng.integers(0, self._size, size=int(batch_size))
        return self.gather(index)

    def gather(self, index: np.ndarray) -> ReplayBatch:
        """The transitions at storage positions ``index`` (ints in ``[0, len(self))``), as :meth:`sample`
        returns them."""
        batch = ReplayBatch()
        for key, store in self._storage.items():
            picked = store.take(index, axis=0)
            want = self._sample_dtypes[key]
            if picked.dtype != want:
                picked = picked.astype(want)
            batch[key] = torch.from_numpy(picked)
        return batch

    def prefetch(self, batch_size: int, n_batches: int) -> None:
        """Announce ``n_batches`` :meth:`sample` calls of ``batch_size`` with no :meth:`add` between them: they are
        drawn and gathered a chunk (about :data:`rlearn.buffer.draws.PREFETCH_BYTES`) at a time, with the batches
        and :meth:`state_dict` of plain calls. An :meth:`add`, a load or another size drops what was drawn ahead.
        """
        check_int("ReplayBuffer.prefetch: batch_size", batch_size)
        check_int("ReplayBuffer.prefetch: n_batches", n_batches, 0)
        self._drop_prefetch()
        if (n_batches < 2 or not 2 <= self._size <= draws.MAX_SIZE
                or not hasattr(self._rng.bit_generator, "advance") or not draws.available()):
            return
        row_bytes = sum(store.dtype.itemsize * math.prod(store.shape[1:]) for store in self._storage.values())
        chunk = max(2, min(int(n_batches), draws.PREFETCH_BYTES // max(1, row_bytes * int(batch_size))))
        ahead = draws.Prefetch(int(batch_size), int(n_batches), chunk)
        self._prefetch = ahead
        self._draw_ahead(ahead)

    def _draw_ahead(self, ahead: draws.Prefetch) -> None:
        """Draw and gather the next chunk of announced batches (in the order :meth:`sample` would)."""
        count = min(ahead.chunk, ahead.planned)
        ahead.planned -= count
        size = ahead.batch_size
        drawn = draws.draw_batches(self._rng, self._size, size, count)
        fields = {key: tensor.split(size) for key, tensor in self.gather(drawn.values.reshape(-1)).items()}
        ahead.batches = [ReplayBatch({key: parts[i] for key, parts in fields.items()})
                         for i in range(count - 1, -1, -1)]
        ahead.chunk_taken, ahead.drawn = 0, drawn

    def _drop_prefetch(self) -> None:
        """Forget the batches drawn ahead; the generator continues after the last batch handed out."""
        ahead, self._prefetch = self._prefetch, None
        if ahead is not None and ahead.batches:  # drawn beyond what was handed out: rewind
            self._rng = draws.generator_in(ahead.drawn.state_after(ahead.chunk_taken))

    def state_dict(self) -> Dict[str, Any]:
        """The filled part of the storage (copied), the write position and the sampling generator's state
        (after the batches handed out)."""
        ahead = self._prefetch
        return {
            **self._layout(),
            "pos": self._pos,
            "size": self._size,
            "data": {key: store[:self._size].copy() for key, store in self._storage.items()},
            "rng": self._rng.bit_generator.state if ahead is None else ahead.drawn.state_after(ahead.chunk_taken),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` into this buffer (same capacity, shapes and dtypes); on error nothing
        changes."""
        mine = self._layout()
        expected = {*mine, "pos", "size", "data", "rng"}
        if not isinstance(state, Mapping) or set(state) != expected:
            keys = sorted(state) if isinstance(state, Mapping) else type(state).__name__
            raise ValueError(f"ReplayBuffer.load_state_dict: expected keys {sorted(expected)}, got {keys}")
        for key, value in mine.items():
            theirs = list(state[key]) if key.endswith("shape") else state[key]
            if theirs != value:
                raise ValueError(f"ReplayBuffer.load_state_dict: saved {key}={state[key]!r} but this buffer has "
                                 f"{value!r}")
        size, pos = state["size"], state["pos"]
        for name, value, high in (("size", size, self.capacity), ("pos", pos, self.capacity - 1)):
            if not is_int(value) or not 0 <= value <= high:
                raise ValueError(f"ReplayBuffer.load_state_dict: {name}={value!r} is outside [0, {high}]")
        if size < self.capacity and pos != size:
            raise ValueError(f"ReplayBuffer.load_state_dict: pos={pos} must equal size={size} until the buffer is full")
        data = state["data"]
        if not isinstance(data, Mapping) or set(data) != set(FIELDS):
            raise ValueError(f"ReplayBuffer.load_state_dict: 'data' must hold exactly {list(FIELDS)}")
        arrays = {}
        for key in FIELDS:
            array = to_numpy(data[key], copy=False)
            want = (int(size), *self._item_shapes[key])
            if array.shape != want or array.dtype != self._storage[key].dtype:
                raise ValueError(f"ReplayBuffer.load_state_dict: data[{key!r}] is {array.dtype}{list(array.shape)}, "
                                 f"expected {self._storage[key].dtype}{list(want)}")
            arrays[key] = array
        rng = np.random.default_rng()
        try:
            rng.bit_generator.state = state["rng"]
        except (TypeError, ValueError, KeyError) as exc:
            raise ValueError(f"ReplayBuffer.load_state_dict: bad 'rng' state ({exc})") from exc
        for key, array in arrays.items():
            self._storage[key][:size] = array
        self._size, self._pos, self._rng = int(size), int(pos), rng
        self._prefetch = None

    def _layout(self) -> Dict[str, Any]:
        """What a saved state must share with this buffer to load into it."""
        return {"capacity": self.capacity, "obs_shape": list(self.obs_shape), "action_shape": list(self.action_shape),
                "obs_dtype": self.obs_dtype.str, "action_dtype": self.action_dtype.str}
