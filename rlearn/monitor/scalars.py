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

_NUMPY_KINDS = "biuf"  # bool, signed int, unsigned int, float
#: read CPU tensors one by one with ``item()``; tests turn it off to exercise the accelerator path
CPU_DIRECT = True


def _kind(value: Any) -> str:
    cls = type(value)
    return cls.__name__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def not_scalar(key: str, value: Any, detail: str = "") -> TypeError:
    """The ``TypeError`` for a value of ``key`` that is not a scalar."""
    return TypeError(
        f"monitor value for {key!r} must be a scalar (a Python number, a numpy scalar or one-element "
        f"array, or a one-element tensor), got {_kind(value)}{detail}"
    )


def _int_to_float(key: str, value: int) -> float:
    try:
        return float(value)
    except OverflowError:
        raise ValueError(f"monitor value for {key!r} is an int too large for a float: {value}") from None


def _check_tensor(key: str, value: torch.Tensor) -> None:
    if value.numel() != 1 or value.is_complex():
        raise not_scalar(key, value, f" of shape {tuple(value.shape)} and dtype {value.dtype}")


def to_float(value: Any, key: str = "value") -> float:
    """``value`` as a Python float; ``TypeError`` naming ``key`` and the type/shape if it is no scalar."""
    cls = type(value)
    if cls is float:
        return value
    if cls is int or cls is bool:
        return _int_to_float(key, value)
    if isinstance(value, torch.Tensor):
        _check_tensor(key, value)
        return float(value.detach().reshape(()).item())
    if isinstance(value, np.ndarray):
        if value.size != 1 or value.dtype.kind not in _NUMPY_KINDS:
            raise not_scalar(key, value, f" of shape {value.shape} and dtype {value.dtype}")
        return float(value.reshape(-1)[0])
    if isinstance(value, np.generic):
        if value.dtype.kind not in _NUMPY_KINDS:
            raise not_scalar(key, value, f" of dtype {value.dtype}")
        return float(value)
    if isinstance(value, numbers.Real):
        if isinstance(value, numbers.Integral):
            return _int_to_float(key, int(value))
        try:
            return float(value)
        except (TypeError, ValueError, OverflowError) as exc:
            raise not_scalar(key, value, f" ({exc})") from None
    raise not_scalar(key, value)


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
        if type(value) is float:
            out.append((key, value))
        elif isinstance(value, torch.Tensor):
            if value.is_cpu and CPU_DIRECT:  # no device to wait for: item() of a one-element float tensor
                try:
                    number = value.item()
                except RuntimeError:  # several elements: to_float names the key and the shape
                    number = None
                out.append((key, number if type(number) is float else to_float(value, key)))
            else:
                _check_tensor(key, value)
                pending.setdefault(value.device, []).append((len(out), value))
                out.append((key, None))
        else:
            out.append((key, to_float(value, key)))
    for tensors in pending.values():
        try:
            numbers = batched_to_floats([t for _, t in tensors])
        except (RuntimeError, NotImplementedError) as exc:  # e.g. meta tensors, a failed device copy
            names = ", ".join(repr(out[i][0]) for i, _ in tensors)
            raise TypeError(f"monitor values for {names}: cannot copy the tensors to the host ({exc})") from exc
        for (index, _), number in zip(tensors, numbers):
            out[index] = (out[index][0], number)
    return out


def batched_to_floats(tensors: List[torch.Tensor]) -> List[float]:
    """One host copy for one-element tensors of one device: stack (in a common dtype), ``tolist()``."""
    flat = [t.detach().reshape(()) for t in tensors]
    if len({t.dtype for t in flat}) > 1:
        common = torch.float32 if flat[0].device.type == "mps" else torch.float64  # MPS has no float64
        flat = [t.to(common) for t in flat]
    return [float(v) for v in torch.stack(flat).tolist()]
