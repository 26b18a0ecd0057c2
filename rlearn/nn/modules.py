"""MLP modules whose forward runs the feature-major kernels of :mod:`rlearn.nn.functional`.

They are ordinary ``nn.Module`` s (parameters, ``state_dict``, ``.to(device)``, autograd): a policy writes
its losses on their outputs and calls ``backward()``; the speed is inside :func:`rlearn.nn.functional.mlp`.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import torch
from torch import nn

from rlearn.nn.functional import Dense, feature_major_layers, mlp
from rlearn.nn.low_precision import COMPUTE_DTYPES, mlp_low_precision

__all__ = ["EnsembleLinear", "EnsembleMLP", "QEnsemble", "MLP", "frozen"]

_OUTPUT_ACTIVATIONS = (None, "tanh")


def _check_activation(output_activation: Optional[str]) -> bool:
    if output_activation not in _OUTPUT_ACTIVATIONS:
        raise ValueError(f"output_activation must be one of {_OUTPUT_ACTIVATIONS}, got {output_activation!r}")
    return output_activation == "tanh"


class EnsembleLinear(nn.Module):
    """``n`` independent linear layers evaluated together: ``x [n, B, in]`` (or ``[B, in]``, shared) ``->
    [n, B, out]``, with ``weight [n, out, in]`` and ``bias [n, out, 1]`` initialised like ``nn.Linear``'s."""

    def __init__(self, n: int, in_features: int, out_features: int) -> None:
        super().__init__()
        bound = 1.0 / math.sqrt(in_features)
        self.weight = nn.Parameter(torch.empty(n, out_features, in_features).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(n, out_features, 1).uniform_(-bound, bound))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.expand(self.weight.shape[0], -1, -1) if x.dim() == 2 else x
        return torch.baddbmm(self.bias.transpose(-1, -2), x, self.weight.transpose(-1, -2))


class _LayerCache:
    """A network's parameter list and their feature-major views, kept between forward calls (building them
    costs more than a small layer's arithmetic); :meth:`valid` is False once a parameter was replaced or moved.
    In-place updates need nothing: the views share the parameters' storage."""

    __slots__ = ("slots", "params", "layers", "members")

    def __init__(self, linears: Sequence[nn.Module]) -> None:
        self.slots = [(m, name, m._parameters[name]) for m in linears for name in ("weight", "bias")]
        self.params: List[torch.Tensor] = [p for _, _, p in self.slots]
        self.slots = [(m, name, p, p.data_ptr()) for m, name, p in self.slots]
        self.layers = feature_major_layers(self.params)
        self.members: Dict[int, Tuple[List[torch.Tensor], List[Dense]]] = {}

    def valid(self) -> bool:
        for m, name, p, ptr in self.slots:
            if m._parameters.get(name) is not p or p.data_ptr() != ptr:
                return False
        return True

    def member(self, i: int) -> Tuple[List[torch.Tensor], List[Dense]]:
        """Detached views of stacked member ``i``'s parameters and layers (for use without gradients)."""
        if i not in self.members:
            with torch.no_grad():
                params = [p.detach()[i] for p in self.params]
            self.members[i] = (params, feature_major_layers(params))
        return self.members[i]


class _CachedLayers(nn.Module):
    """Base of the MLP modules: :meth:`parameter_list`, :meth:`_cache` (a :class:`_LayerCache`) and the
    opt-in low-precision compute (:meth:`set_compute_dtype`)."""

    _fm_cache: Optional[_LayerCache] = None
    #: None: products in the parameters' dtype (fp32); torch.bfloat16: see rlearn.nn.low_precision
    compute_dtype: Optional[torch.dtype] = None

    def set_compute_dtype(self, dtype: Optional[torch.dtype | str]) -> "_CachedLayers":
        """Run the products in ``dtype`` (``torch.bfloat16`` or ``"bf16"``) with the parameters, their gradients
        and the optimizer staying in their own dtype (fp32); ``None`` or ``"fp32"``: the default. Returns self."""
        if isinstance(dtype, str):
            if dtype not in COMPUTE_DTYPES:
                raise ValueError(f"compute dtype must be one of {sorted(COMPUTE_DTYPES)}, got {dtype!r}")
            dtype = COMPUTE_DTYPES[dtype]
        if dtype not in COMPUTE_DTYPES.values():
            raise ValueError(f"compute dtype must be None or torch.bfloat16, got {dtype!r}")
        self.compute_dtype = dtype
        return self

    def _run(self, x: torch.Tensor, params: List[torch.Tensor], layers: List[Dense], tanh: bool,
             member: Optional[int] = None) -> torch.Tensor:
        """The network on ``x`` in the compute dtype (``member``: one stacked member, low precision only)."""
        if self.compute_dtype is None:
            return mlp(x, params, tanh, layers)
        return mlp_low_precision(x, params, tanh, self.compute_dtype, member)

    def _linears(self) -> Sequence[nn.Module]:
        raise NotImplementedError

    def _cache(self) -> _LayerCache:
        cache = self._fm_cache
        if cache is None or not cache.valid():
            cache = self._fm_cache = _LayerCache(self._linears())
        return cache

    def parameter_list(self) -> List[torch.Tensor]:
        """The network's parameters in forward order ``[w_0, b_0, w_1, b_1, ...]`` (the same objects as
        :meth:`parameters`, kept between calls; do not modify the list)."""
        return self._cache().params

    def __getstate__(self) -> Dict[str, Any]:  # deepcopy and pickle: the copy builds its own cache
        state = super().__getstate__()
        state.pop("_fm_cache", None)
        return state


class EnsembleMLP(_CachedLayers):
    """``n`` independent ReLU MLPs with layer widths ``sizes``, evaluated as one (e.g. twin critics): one
    batched product per layer (:class:`EnsembleLinear` weights). ``forward(x [B, in] (shared) or [n, B, in])
    -> [n, B, out]``; ``forward(x, member=i) -> [B, out]`` runs member ``i`` alone."""

    def __init__(self, n: int, sizes: Sequence[int], output_activation: Optional[str] = None) -> None:
        super().__init__()
        if n < 1 or len(sizes) < 2:
            raise ValueError(f"EnsembleMLP needs n >= 1 and at least two sizes, got n={n}, sizes={list(sizes)}")
        self.n = n
        self.tanh_output = _check_activation(output_activation)
        self.layers = nn.ModuleList(EnsembleLinear(n, a, b) for a, b in zip(sizes[:-1], sizes[1:]))

    def _linears(self) -> Sequence[nn.Module]:
        return list(self.layers)

    def forward(self, x: torch.Tensor, member: Optional[int] = None) -> torch.Tensor:
        cache = self._cache()
        if member is None:
            return self._run(x, cache.params, cache.layers, self.tanh_output)
        if self.compute_dtype is not None:
            return self._run(x, cache.params, cache.layers, self.tanh_output, member)
        if torch.is_grad_enabled() and any(p.requires_grad for p in cache.params):
            return mlp(x, [p[member] for p in cache.params], self.tanh_output)  # graph through the selection
        params, layers = cache.member(member)  # frozen or no_grad: detached views, no selection recorded
        return mlp(x, params, self.tanh_output, layers)


class QEnsemble(EnsembleMLP):
    """``n`` (default 2) Q-networks as one :class:`EnsembleMLP` (the twin critics of TD3 and SAC):
    ``forward(obs [B, o], action [B, a]) -> [n, B]``, row ``i`` is ``Q_{i+1}``; ``member=0`` gives ``Q1 [B]``."""

    def __init__(self, obs_dim: int, act_dim: int, hidden_sizes: Sequence[int], n: int = 2) -> None:
        super().__init__(n, [obs_dim + act_dim, *hidden_sizes, 1])

    def forward(self, obs: torch.Tensor, action: torch.Tensor, member: Optional[int] = None) -> torch.Tensor:
        return super().forward(torch.cat([obs, action], dim=-1), member).squeeze(-1)


class MLP(_CachedLayers):
    """A ReLU MLP ``x [B, sizes[0]] -> [B, sizes[-1]]``, optionally ending in ``tanh``: the parameters of
    ``net = nn.Sequential(Linear, ReLU, ..., Linear[, Tanh])``, run through :func:`rlearn.nn.functional.mlp`."""

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

    def _linears(self) -> Sequence[nn.Module]:
        return [m for m in self.net if isinstance(m, nn.Linear)]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        cache = self._cache()
        return self._run(x, cache.params, cache.layers, self.tanh_output)


@contextlib.contextmanager
def frozen(module: nn.Module) -> Iterator[nn.Module]:
    """Within the block, ``module``'s parameters do not require grad: a loss computed through it sends
    gradients to its *inputs* only (e.g. an actor loss through a critic), and no weight-gradient product of
    ``module`` is computed. The parameters that required grad do so again afterwards."""
    every = module.parameter_list() if isinstance(module, _CachedLayers) else module.parameters()
    params = [p for p in every if p.requires_grad]
    for p in params:
        p.requires_grad_(False)
    try:
        yield module
    finally:
        for p in params:
            p.requires_grad_(True)
