"""The one scalar conversion of rlearn: a monitored (or logged) value becomes a Python float.

Accepted: Python real numbers (``bool`` and ``int`` included), numpy real scalars and one-element arrays,
one-element real torch tensors; anything else raises ``TypeError`` naming the key and the type (shape,
dtype). :func:`to_floats` copies the accelerator tensors of one update to the host once per device.
"""

from __future__ import annotations

import numbers
from typing import Any, Container, Dict, Iterable, List, Tuple

import numpy as np
import torch

__all__ = ["to_float", "to_floats", "is_scalar", "check_key"]

#: read CPU tensors one by one with ``item()``; tests turn it off to exercise the accelerator path
CPU_DIRECT = True


def _not_scalar(key: str, value: Any, detail: str = "") -> TypeError:
    cls = type(value)
    kind = cls.__name__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    return TypeError(f"monitor value for {key!r} must be a scalar (a Python number, a numpy scalar or one-element "
                     f"array, or a one-element tensor), got {kind}{detail}")


def _check_tensor(key: str, value: torch.Tensor) -> None:
    if value.numel() != 1 or value.is_complex():
        raise _not_scalar(key, value, f" of shape {tuple(value.shape)} and dtype {value.dtype}")


def to_float(value: Any, key: str = "value") -> float:
    """``value`` as a Python float; ``TypeError`` naming ``key`` and the type/shape if it is no scalar."""
    if type(value) is float:
        return value
    if isinstance(value, torch.Tensor):
        _check_tensor(key, value)
        return float(value.item())
    if isinstance(value, (np.ndarray, np.generic)):
        if value.size != 1 or value.dtype.kind not in "biuf":
            shape = f" of shape {value.shape}" if isinstance(value, np.ndarray) else ""
            raise _not_scalar(key, value, f"{shape} and dtype {value.dtype}" if shape else f" of dtype {value.dtype}")
        return float(value.reshape(-1)[0])
    if not isinstance(value, numbers.Real):
        raise _not_scalar(key, value)
    try:
        return float(int(value) if isinstance(value, numbers.Integral) else value)
    except OverflowError:
        raise ValueError(f"monitor value for {key!r} is too large for a float: {value}") from None
    except (TypeError, ValueError) as exc:
        raise _not_scalar(key, value, f" ({exc})") from None


def is_scalar(value: Any) -> bool:
    """Whether :func:`to_float` accepts ``value`` (a tensor is checked without reading it)."""
    if isinstance(value, torch.Tensor):
        return value.numel() == 1 and not value.is_complex()
    try:
        to_float(value)
    except (TypeError, ValueError):
        return False
    return True


def check_key(key: Any) -> str:
    """``key`` if it is a monitor key: a non-empty printable str (a table cell, a CSV column, a JSON name on
    one line); ``TypeError``/``ValueError`` naming it otherwise."""
    if isinstance(key, str) and key.isprintable() and key:
        return key
    if not isinstance(key, str):
        raise TypeError(f"monitor keys must be strings, got {type(key).__name__}: {key!r}")
    if not key:
        raise ValueError("monitor keys must be non-empty strings, got ''")
    bad = next(c for c in key if not c.isprintable())
    raise ValueError(f"monitor key {key!r} contains a control character ({bad!r}): a key is one cell of the table "
                     "and one column of metrics.csv; use printable characters only")


def to_floats(items: Iterable[Tuple[str, Any]], known: Container[str] = ()) -> List[Tuple[str, float]]:
    """``(key, float)`` for every ``(key, value)`` (keys not in ``known`` checked by :func:`check_key`);
    tensors off the CPU are copied to the host with one transfer per device. Raises, naming the key,
    before returning anything."""
    out: List[Tuple[str, Any]] = []
    pending: Dict[torch.device, List[Tuple[int, torch.Tensor]]] = {}
    for key, value in items:
        if key not in known:
            check_key(key)
        if type(value) is float:  # the common case first: torch.Tensor's isinstance check is a Python call
            pass
        elif isinstance(value, torch.Tensor) and not (value.is_cpu and CPU_DIRECT):
            _check_tensor(key, value)
            pending.setdefault(value.device, []).append((len(out), value))
        else:
            value = to_float(value, key)
        out.append((key, value))
    for tensors in pending.values():
        try:
            numbers_ = batched_to_floats([t for _, t in tensors])
        except (RuntimeError, NotImplementedError) as exc:  # e.g. meta tensors, a failed device copy
            names = ", ".join(repr(out[i][0]) for i, _ in tensors)
            raise TypeError(f"monitor values for {names}: cannot copy the tensors to the host ({exc})") from exc
        for (index, _), number in zip(tensors, numbers_):
            out[index] = (out[index][0], number)
    return out


def batched_to_floats(tensors: List[torch.Tensor]) -> List[float]:
    """One host copy for one-element tensors of one device: stack (in a common dtype), ``tolist()``."""
    flat = [t.detach().reshape(()) for t in tensors]
    if len({t.dtype for t in flat}) > 1:
        common = torch.float32 if flat[0].device.type == "mps" else torch.float64  # MPS has no float64
        flat = [t.to(common) for t in flat]
    return [float(v) for v in torch.stack(flat).tolist()]
