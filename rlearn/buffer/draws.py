"""Several batches of ``Generator.integers(0, size, batch_size)`` at once, exactly as the calls one by one.

Below 2**32 numpy draws bounded integers from the stream of 32-bit halves of the raw draws (Lemire's
multiply-and-reject), so ``n`` calls of ``batch_size`` equal one call of ``n * batch_size``; :func:`draw_batches`
works out the generator's state after each batch from a copy of the raw stream. :func:`available` checks this
once per process; where it does not hold the buffer samples batch by batch.
"""

from __future__ import annotations

import functools
import sys
from typing import Any, Dict, List

import numpy as np
import torch

__all__ = ["Batches", "draw_batches", "available", "MAX_SIZE", "Prefetch", "generator_in", "PREFETCH_BYTES"]

#: ranges above this take numpy's 64-bit path, which is not modelled
MAX_SIZE = 2**32 - 1


class Batches:
    """``n`` batches of indices (``values [n, B]`` int64) drawn by :func:`draw_batches`, and what is needed to
    give the generator's state after any number of them (:meth:`state_after`)."""

    def __init__(self, values: np.ndarray, start: Dict[str, Any], raw: np.ndarray, halves_after: np.ndarray) -> None:
        self.values = values
        self._start = start  # the bit generator's state before the first batch
        self._raw = raw  # the raw draws that followed it (a copy of the stream)
        self._halves_after = halves_after  # halves consumed after batch i, counting a buffered one first

    def state_after(self, k: int) -> Dict[str, Any]:
        """The bit generator's state after the first ``k`` batches (``0 <= k <= n``)."""
        if k == 0:
            return self._start
        halves = int(self._halves_after[k - 1]) - int(self._start["has_uint32"])
        bit_generator = generator_in(self._start).bit_generator
        state = bit_generator.state
        if halves > 0:
            draws = (halves + 1) // 2
            bit_generator.advance(draws)
            state = bit_generator.state
            state["has_uint32"] = halves % 2
            state["uinteger"] = int(self._raw[draws - 1] >> np.uint64(32))
        else:  # only the buffered half was used
            state["has_uint32"] = 0
            state["uinteger"] = self._start["uinteger"]
        return state


def draw_batches(generator: np.random.Generator, size: int, batch_size: int, n_batches: int) -> Batches:
    """``n_batches`` successive ``generator.integers(0, size, batch_size)`` in one call (``2 <= size <=
    MAX_SIZE``, a PCG64-like bit generator with ``advance``); the generator ends where the calls leave it."""
    if not 2 <= size <= MAX_SIZE:
        raise ValueError(f"draw_batches: size must be in [2, {MAX_SIZE}], got {size}")
    bit_generator = generator.bit_generator
    start = bit_generator.state
    values = generator.integers(0, size, size=n_batches * batch_size).reshape(n_batches, batch_size)
    end = bit_generator.state
    # the raw draws the call consumed, from a copy of the stream: how many it took follows from the states
    probe = generator_in(start).bit_generator
    raw = probe.random_raw(n_batches * batch_size + 2)
    while True:
        halves = np.empty(2 * len(raw) + 1, np.uint64)
        halves[0] = start["uinteger"]
        halves[1::2] = raw & np.uint64(0xFFFFFFFF)
        halves[2::2] = raw >> np.uint64(32)
        stream = halves if start["has_uint32"] else halves[1:]
        products = stream * np.uint64(size)
        accepted = (products & np.uint64(0xFFFFFFFF)) >= np.uint64((2**32 - size) % size)
        cumulative = np.cumsum(accepted)
        if cumulative[-1] >= n_batches * batch_size:
            break
        raw = np.concatenate([raw, probe.random_raw(len(raw))])  # many rejections: look further
    # the position (in halves) of the last accepted half of each batch, + 1 = halves consumed after it
    ends = np.searchsorted(cumulative, np.arange(1, n_batches + 1) * batch_size) + 1
    batches = Batches(values, start, raw, ends)
    if batches.state_after(n_batches)["state"] != end["state"]:  # the model does not fit this numpy
        raise RuntimeError("draw_batches: numpy's bounded integers do not follow the expected stream")
    return batches


@functools.lru_cache(maxsize=None)
def available() -> bool:
    """Whether :func:`draw_batches` matches ``Generator.integers`` called batch by batch (checked once)."""
    if sys.byteorder != "little":
        return False
    try:
        for size in (2, 3, 7, 1000, 100_003, 2**31 + 1, MAX_SIZE):  # 2**31 + 1 rejects about half the halves
            for batch_size in (1, 3, 8, 64):
                for warm in (0, 1):  # 1: a half is left in the state before the first batch
                    reference = np.random.default_rng([size, batch_size, warm])
                    mine = np.random.default_rng([size, batch_size, warm])
                    if warm:
                        reference.integers(0, 5, size=1)
                        mine.integers(0, 5, size=1)
                    expected, states = [], []
                    for _ in range(5):
                        expected.append(reference.integers(0, size, size=batch_size))
                        states.append(reference.bit_generator.state)
                    batches = draw_batches(mine, size, batch_size, 5)
                    if (not np.array_equal(batches.values, np.stack(expected)) or mine.bit_generator.state != states[-1]
                            or any(batches.state_after(k + 1) != states[k] for k in range(5))):
                        return False
    except Exception:  # noqa: BLE001 - any difference in numpy's behaviour: sample batch by batch
        return False
    return True


#: :meth:`rlearn.buffer.ReplayBuffer.prefetch` gathers about this many bytes of batches at a time
PREFETCH_BYTES = 4 << 20


class Prefetch:
    """Batches drawn ahead by :meth:`rlearn.buffer.ReplayBuffer.prefetch`: ``batches`` (next last) of the
    chunk ``drawn`` (a :class:`rlearn.buffer.draws.Batches`), ``chunk_taken`` of them handed out, ``planned``
    announced batches not drawn yet."""

    __slots__ = ("batch_size", "planned", "chunk", "chunk_taken", "drawn", "batches")

    def __init__(self, batch_size: int, planned: int, chunk: int) -> None:
        self.batch_size, self.planned, self.chunk = batch_size, planned, chunk
        self.chunk_taken = 0
        self.drawn: Any = None
        self.batches: List[Dict[str, torch.Tensor]] = []


def generator_in(state: Dict[str, Any]) -> np.random.Generator:
    """A new generator in ``state``."""
    bit_generator = getattr(np.random, state["bit_generator"])()
    bit_generator.state = state
    return np.random.Generator(bit_generator)
