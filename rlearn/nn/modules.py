"""MLP modules whose forward runs the feature-major kernels of :mod:`rlearn.nn.functional`.

They are ordinary ``nn.Module`` s (parameters, ``state_dict``, ``.to(device)``, autograd): a policy writes
its losses on their outputs and calls ``backward()``; the speed is inside :func:`rlearn.nn.functional.mlp`.
"""

from __future__ import annotations

import contextlib
import math
from typing import Iterator, List, Optional, Sequence

import torch
from torch import nn

from rlearn.nn.functional import mlp

__all__ = ["EnsembleLinear", "EnsembleMLP", "MLP", "frozen"]

_OUTPUT_ACTIVATIONS = (None, "tanh")


def _check_activation(output_activation: Optional[str]) -> bool:
    if output_activation not in _OUTPUT_ACTIVATIONS:
        raise ValueError(f"output_activation must be one of {_OUTPUT_ACTIVATIONS}, got {output_activation!r}")
    return output_activation == "tanh"


class EnsembleLinear(nn.Module):
    """``n`` independent linear layers evaluated together: ``x [n, B, in]`` (or ``[B, in]``, shared) ``->
    [n, B, out]``.

    ``weight [n, out, in]`` (member ``i`` is laid out like ``nn.Linear.weight``) and ``bias [n, out, 1]``
    are initialised like :class:`torch.nn.Linear` (uniform in ``+-1/sqrt(in)``), independently per member.
    """

    def __init__(self, n: int, in_features: int, out_features: int) -> None:
        super().__init__()
        bound = 1.0 / math.sqrt(in_features)
        self.weight = nn.Parameter(torch.empty(n, out_features, in_features).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(n, out_features, 1).uniform_(-bound, bound))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.expand(self.weight.shape[0], -1, -1) if x.dim() == 2 else x
        return torch.baddbmm(self.bias.transpose(-1, -2), x, self.weight.transpose(-1, -2))


class EnsembleMLP(nn.Module):
    """``n`` independent ReLU MLPs with layer widths ``sizes``, evaluated as one (e.g. twin critics).

    Every layer is an :class:`EnsembleLinear` (``layers.<i>.weight [n, out, in]``); the forward pass runs
    one batched product per layer for all members, forward and backward, through
    :func:`rlearn.nn.functional.mlp`. ``forward(x [B, in] (shared) or [n, B, in]) -> [n, B, out]``;
    ``forward(x, member=i) -> [B, out]`` runs member ``i`` alone (e.g. ``Q1`` for an actor loss).
    """

    def __init__(self, n: int, sizes: Sequence[int], output_activation: Optional[str] = None) -> None:
        super().__init__()
        if n < 1 or len(sizes) < 2:
            raise ValueError(f"EnsembleMLP needs n >= 1 and at least two sizes, got n={n}, sizes={list(sizes)}")
        self.n = n
        self.tanh_output = _check_activation(output_activation)
        self.layers = nn.ModuleList(EnsembleLinear(n, a, b) for a, b in zip(sizes[:-1], sizes[1:]))

    def forward(self, x: torch.Tensor, member: Optional[int] = None) -> torch.Tensor:
        if member is None:
            params = [p for layer in self.layers for p in (layer.weight, layer.bias)]
        else:
            params = [p[member] for layer in self.layers for p in (layer.weight, layer.bias)]
        return mlp(x, params, self.tanh_output)


class MLP(nn.Module):
    """A ReLU MLP ``x [B, sizes[0]] -> [B, sizes[-1]]``, optionally ending in ``tanh``.

    Its parameters are those of ``net = nn.Sequential(Linear, ReLU, ..., Linear[, Tanh])`` (state-dict keys
    ``net.0.weight``, ``net.0.bias``, ``net.2.weight``, ...), initialised like ``nn.Linear``; the forward
    pass runs through :func:`rlearn.nn.functional.mlp` (the same function as ``net``, faster on the CPU).
    """

    def __init__(self, sizes: Sequence[int], output_activation: Optional[str] = None) -> None:
        super().__init__()
        if len(sizes) < 2:
            raise ValueError(f"MLP needs at least two sizes, got {list(sizes)}")
        self.tanh_output = _check_activation(output_activation)
        layers: List[nn.Module] = []
        for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
            layers.append(nn.Linear(a, b))
            if i < len(sizes) - 2:
                layers.append(nn.ReLU(inplace=True))
        if self.tanh_output:
            layers.append(nn.Tanh())
        self.net = nn.Sequential(*layers)
        self._linears = [m for m in self.net if isinstance(m, nn.Linear)]  # a plain list: not re-registered

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return mlp(x, [p for layer in self._linears for p in (layer.weight, layer.bias)], self.tanh_output)


@contextlib.contextmanager
def frozen(module: nn.Module) -> Iterator[nn.Module]:
    """Within the block, ``module``'s parameters do not require grad: a loss computed through it sends
    gradients to its *inputs* only (e.g. an actor loss through a critic), and no weight-gradient product of
    ``module`` is computed. The parameters that required grad do so again afterwards."""
    params = [p for p in module.parameters() if p.requires_grad]
    for p in params:
        p.requires_grad_(False)
    try:
        yield module
    finally:
        for p in params:
            p.requires_grad_(True)
