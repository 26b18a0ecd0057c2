"""What a bundled policy's info dict holds: numbers by name, as Python numbers or 0-d tensors."""

from __future__ import annotations

from typing import Any, Dict, Mapping

import torch


def is_reported_number(value: Any) -> bool:
    """A Python float or int, or a 0-d real tensor (the monitor copies those to the host)."""
    if isinstance(value, torch.Tensor):
        return value.dim() == 0 and not value.is_complex() and not value.requires_grad
    return isinstance(value, (float, int)) and not isinstance(value, bool)


def host_info(info: Mapping[str, Any]) -> Dict[str, Any]:
    """An info dict with its 0-d tensors read as Python floats (what the monitor records)."""
    return {key: float(value) if isinstance(value, torch.Tensor) else value for key, value in info.items()}
