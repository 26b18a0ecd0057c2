"""The one scalar conversion of rlearn: a monitored (or logged) value becomes a Python float.

Accepted: Python real numbers (``bool`` and ``int`` included), numpy real scalars and one-element arrays,
one-element real torch tensors; anything else raises ``TypeError`` naming the key and the type (shape,
dtype). :func:`to_floats` copies the accelerator tensors of one update to the host once per device.
"""

from __future__ import annotations

import numbers
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

import numpy as np
import torch

__all__ = ["to_float", "to_floats", "is_scalar"]

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


def to_floats(items: Iterable[Tuple[str, Any]],
              check_key: Optional[Callable[[Any], None]] = None) -> List[Tuple[str, float]]:
    """``(key, float)`` for every ``(key, value)``, accelerator tensors copied once per device; raises
    (naming the key) before returning anything. ``check_key`` gets every key that is not a non-empty str."""
    out: List[Tuple[str, Any]] = []
    tensors: Optional[Dict[int, torch.Tensor]] = None  # accelerator tensors, by position in out
    cpu_direct = CPU_DIRECT
    for key, value in items:
        if (type(key) is not str or not key) and check_key is not None:
            check_key(key)
        cls = type(value)
        if cls is float:
            out.append((key, value))
        elif cls is torch.Tensor or isinstance(value, torch.Tensor):
            if value.is_cpu and cpu_direct:
                try:  # the common case: item() of a one-element float tensor is a float
                    number = value.item()
                except RuntimeError:  # several elements: to_float names the key and the shape
                    number = None
                out.append((key, number if type(number) is float else to_float(value, key)))
            else:  # accelerator: copied to the host together with the others, below
                _check_tensor(key, value)
                if tensors is None:
                    tensors = {}
                tensors[len(out)] = value
                out.append((key, None))
        else:
            out.append((key, to_float(value, key)))
    if tensors is not None:
        by_device: Dict[torch.device, List[int]] = {}
        for index, tensor in tensors.items():
            by_device.setdefault(tensor.device, []).append(index)
        try:
            for indices in by_device.values():
                for index, number in zip(indices, batched_to_floats([tensors[i] for i in indices])):
                    out[index] = (out[index][0], number)
        except (RuntimeError, NotImplementedError) as exc:  # e.g. meta tensors, a failed device copy
            names = ", ".join(repr(out[i][0]) for i in tensors)
            raise TypeError(f"monitor values for {names}: cannot copy the tensors to the host ({exc})") from exc
    return out


def batched_to_floats(tensors: List[torch.Tensor]) -> List[float]:
    """One host copy for one-element tensors of one device: concatenate (in a common dtype), ``tolist()``."""
    flat = [t.detach().reshape(1) for t in tensors]
    if len({t.dtype for t in flat}) > 1:
        common = torch.float32 if flat[0].device.type == "mps" else torch.float64  # MPS has no float64
        flat = [t.to(common) for t in flat]
    return [float(v) for v in torch.cat(flat).tolist()]
