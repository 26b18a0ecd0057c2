"""The one MLP of rlearn (and :class:`QEnsemble`, the twin critics as one stacked MLP): an ordinary ``nn.Module``
that computes what ``nn.Sequential(Linear, [LayerNorm], activation, ..., Linear[, output activation])`` computes.
The speed is inside: large CPU batches of a ReLU MLP run through the feature-major ``FeatureMajorMLP``
(:mod:`rlearn.nn.functional`), opt-in bf16 products (:mod:`rlearn.nn.low_precision`), and every other network
through plain autograd operations without a module call per layer.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import torch
from torch import nn

from rlearn.nn.functional import Dense, feature_major_layers, mlp, plain_mlp
from rlearn.nn.low_precision import COMPUTE_DTYPES, mlp_low_precision

__all__ = ["EnsembleLinear", "EnsembleLayerNorm", "MLP", "QEnsemble", "frozen", "ACTIVATIONS", "INITS",
           "FUSED_MIN_ROWS", "FUSED_MIN_WIDTH"]

#: hidden activations (and output activations, besides None) an MLP accepts
ACTIVATIONS = ("relu", "tanh")
#: initialisations: each layer type's own (``nn.Linear``'s), or orthogonal weights with zero biases
INITS = ("default", "orthogonal")
#: a ReLU MLP runs the feature-major kernels on the CPU for batches of at least FUSED_MIN_ROWS rows when a hidden
#: layer is at least FUSED_MIN_WIDTH wide (TD3's and SAC's networks); narrower networks and smaller batches run
#: plain autograd operations, which measured faster there (DQN's batches of 64, PPG's 64-wide networks)
FUSED_MIN_ROWS = 256
FUSED_MIN_WIDTH = 256


class EnsembleLinear(nn.Module):
    """``n`` independent linear layers, ``x [n, B, in]`` (or ``[B, in]``, shared) ``-> [n, B, out]``, initialised
    like ``nn.Linear``'s."""

    def __init__(self, n: int, in_features: int, out_features: int) -> None:
        super().__init__()
        bound = 1.0 / math.sqrt(in_features)
        self.weight = nn.Parameter(torch.empty(n, out_features, in_features).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(n, out_features, 1).uniform_(-bound, bound))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.expand(self.weight.shape[0], -1, -1) if x.dim() == 2 else x
        return torch.baddbmm(self.bias.transpose(-1, -2), x, self.weight.transpose(-1, -2))


class EnsembleLayerNorm(nn.Module):
    """``n`` independent ``nn.LayerNorm(features)`` on ``x [n, B, features]`` (``weight``, ``bias``
    ``[n, 1, features]``)."""

    def __init__(self, n: int, features: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n, 1, features))
        self.bias = nn.Parameter(torch.zeros(n, 1, features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.addcmul(self.bias, nn.functional.layer_norm(x, x.shape[-1:]), self.weight)


class _LayerCache:
    """A network's parameter lists and the linear layers' feature-major views, kept between forward calls;
    :meth:`valid` is False once a parameter was replaced or moved (in-place updates show through the views)."""

    __slots__ = ("slots", "params", "norm_params", "layers", "members")

    def __init__(self, linears: Sequence[nn.Module], norms: Sequence[nn.Module]) -> None:
        pairs = [(m, name, m._parameters[name]) for m in (*linears, *norms) for name in ("weight", "bias")]
        self.slots = [(m, name, p, p.data_ptr()) for m, name, p in pairs]
        #: the linear layers' ``[w_0, b_0, w_1, b_1, ...]``
        self.params: List[torch.Tensor] = [p for _, _, p in pairs[:2 * len(linears)]]
        #: the layer norms' ``[weight_0, bias_0, ...]``
        self.norm_params: List[torch.Tensor] = [p for _, _, p in pairs[2 * len(linears):]]
        self.layers = feature_major_layers(self.params)
        self.members: Dict[int, Tuple[List[torch.Tensor], List[Dense]]] = {}

    def valid(self) -> bool:
        for m, name, p, ptr in self.slots:
            if m._parameters.get(name) is not p or p.data_ptr() != ptr:
                return False
        return True

    def member(self, i: int) -> Tuple[List[torch.Tensor], List[Dense]]:
        """Detached views of stacked member ``i``'s linear parameters and layers (for use without gradients)."""
        if i not in self.members:
            with torch.no_grad():
                params = [p.detach()[i] for p in self.params]
            self.members[i] = (params, feature_major_layers(params))
        return self.members[i]


def _check_choice(what: str, value: Any, choices: Sequence[Any]) -> None:
    if value not in choices:
        raise ValueError(f"MLP: {what} must be one of {list(choices)}, got {value!r}")


class MLP(nn.Module):
    """A multilayer perceptron ``x [B, sizes[0]] -> [B, sizes[-1]]``: linear layers of widths ``sizes``, each but
    the last followed by ``activation`` (``"relu"`` or ``"tanh"``; after a ``LayerNorm`` with ``layer_norm``), the
    last by ``output_activation`` (None, ``"relu"`` or ``"tanh"``). ``init="orthogonal"`` gives orthogonal weights
    (gain ``gain``, ``output_gain`` for the last) and zero biases, layer by layer as each is built.

    ``ensemble=n``: ``n`` independent networks evaluated as one (:class:`EnsembleLinear` layers); ``forward(x)``
    takes ``x [B, in]`` (shared) or ``[n, B, in]`` and returns ``[n, B, out]``, ``forward(x, member=j)`` member
    ``j`` alone. State-dict keys: ``layers.<i>.weight`` / ``.bias`` (and ``norms.<i>...``).
    """

    compute_dtype: Optional[torch.dtype] = None  # None: the parameters' dtype; torch.bfloat16: see set_compute_dtype
    _fm_cache: Optional[_LayerCache] = None

    def __init__(self, sizes: Sequence[int], activation: str = "relu", output_activation: Optional[str] = None,
                 layer_norm: bool = False, init: str = "default", gain: float = math.sqrt(2.0),
                 output_gain: float = 1.0, ensemble: Optional[int] = None) -> None:
        super().__init__()
        sizes = [int(size) for size in sizes]
        if len(sizes) < 2 or min(sizes) < 1:
            raise ValueError(f"MLP needs at least two sizes, each >= 1, got {list(sizes)}")
        if ensemble is not None and ensemble < 1:
            raise ValueError(f"MLP: ensemble must be None or >= 1, got {ensemble!r}")
        _check_choice("activation", activation, ACTIVATIONS)
        _check_choice("output_activation", output_activation, (None, *ACTIVATIONS))
        _check_choice("init", init, INITS)
        self.activation, self.output_activation, self.ensemble = activation, output_activation, ensemble
        self.layers = nn.ModuleList()
        for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
            layer = nn.Linear(a, b) if ensemble is None else EnsembleLinear(ensemble, a, b)
            if init == "orthogonal":  # right after each layer is built (the order of the random draws)
                _orthogonal_(layer, gain if i < len(sizes) - 2 else output_gain)
            self.layers.append(layer)
        self.norms: Optional[nn.ModuleList] = None
        if layer_norm:
            self.norms = nn.ModuleList(nn.LayerNorm(b) if ensemble is None else EnsembleLayerNorm(ensemble, b)
                                       for b in sizes[1:-1])
        #: whether the feature-major kernels can compute this network (ReLU hidden layers, no norm, no or tanh
        #: output); they do for large batches of a wide one
        self.fusable = activation == "relu" and not layer_norm and output_activation in (None, "tanh") \
            and len(sizes) > 2
        self._wide = self.fusable and max(sizes[1:-1]) >= FUSED_MIN_WIDTH

    @staticmethod
    def parameter_count(sizes: Sequence[int], ensemble: Optional[int] = None, layer_norm: bool = False) -> int:
        """The number of parameters of ``MLP(sizes, layer_norm=layer_norm, ensemble=ensemble)``, without
        building it."""
        count = sum((a + 1) * b for a, b in zip(sizes[:-1], sizes[1:]))
        if layer_norm:
            count += 2 * sum(sizes[1:-1])
        return count * (ensemble or 1)

    def forward(self, x: torch.Tensor, member: Optional[int] = None) -> torch.Tensor:
        if member is not None and self.ensemble is None:
            raise ValueError("MLP: member= is for an ensemble (MLP(..., ensemble=n))")
        if self.compute_dtype is not None:
            tanh_output = self.output_activation == "tanh"
            return mlp_low_precision(x, self._cache().params, tanh_output, self.compute_dtype, member)
        if self._wide and x.dim() > 1 and x.shape[-2] >= FUSED_MIN_ROWS:
            return self._feature_major(x, member)
        # plain operations: the parameters as they are now (cheaper to read than the kept views are to check)
        params = []
        for layer in self._modules["layers"]._modules.values():
            params += (layer._parameters["weight"], layer._parameters["bias"])
        norms = self._modules.get("norms")
        pairs = None if norms is None else [(n._parameters["weight"], n._parameters["bias"])
                                            for n in norms._modules.values()]
        if member is not None:  # without gradients nothing is recorded for the selection
            params = [p[member] for p in params]
            pairs = None if pairs is None else [(w[member], b[member]) for w, b in pairs]
        return plain_mlp(x, params, self.activation, self.output_activation, pairs)

    def _feature_major(self, x: torch.Tensor, member: Optional[int]) -> torch.Tensor:
        """The network through the feature-major kernels, with the kept parameter views."""
        cache = self._cache()
        tanh_output = self.output_activation == "tanh"
        if member is None:
            return mlp(x, cache.params, tanh_output, cache.layers)
        if torch.is_grad_enabled() and any(p.requires_grad for p in cache.params):
            return mlp(x, [p[member] for p in cache.params], tanh_output)  # graph through the selection
        params, layers = cache.member(member)  # frozen or no_grad: detached views, no selection recorded
        return mlp(x, params, tanh_output, layers)

    def _cache(self) -> _LayerCache:
        cache = self._fm_cache
        if cache is None or not cache.valid():
            cache = self._fm_cache = _LayerCache(list(self.layers), list(self.norms or ()))
        return cache

    def parameter_list(self) -> List[torch.Tensor]:
        """The linear layers' parameters ``[w_0, b_0, w_1, b_1, ...]``, then the norms': the objects of
        :meth:`parameters`, without a walk of the module tree."""
        cache = self._cache()
        return cache.params + cache.norm_params

    def set_compute_dtype(self, dtype: Optional[torch.dtype | str]) -> "MLP":
        """Run the products in ``dtype`` (``torch.bfloat16`` or ``"bf16"``) with the parameters, their gradients
        and the optimizer staying in their own dtype (fp32); ``None`` or ``"fp32"``: the default. Returns self.
        bf16 is for the feature-major networks (ReLU hidden layers, no layer norm, no or tanh output)."""
        if isinstance(dtype, str):
            if dtype not in COMPUTE_DTYPES:
                raise ValueError(f"compute dtype must be one of {sorted(COMPUTE_DTYPES)}, got {dtype!r}")
            dtype = COMPUTE_DTYPES[dtype]
        if dtype not in COMPUTE_DTYPES.values():
            raise ValueError(f"compute dtype must be None or torch.bfloat16, got {dtype!r}")
        if dtype is not None and not self.fusable:
            raise ValueError("MLP: bf16 compute needs ReLU hidden layers without layer norm and no or a tanh output "
                             f"(this one: activation={self.activation!r}, "
                             f"output_activation={self.output_activation!r}, layer_norm={self.norms is not None})")
        self.compute_dtype = dtype
        return self

    def __getstate__(self) -> Dict[str, Any]:  # deepcopy and pickle: the copy builds its own cache
        state = super().__getstate__()
        state.pop("_fm_cache", None)
        return state


def _orthogonal_(layer: nn.Module, gain: float) -> None:
    """Orthogonal weights (each member's, for an :class:`EnsembleLinear`) with ``gain``, zero bias."""
    weight = layer.weight
    with torch.no_grad():
        for w in (weight,) if weight.dim() == 2 else weight.unbind(0):
            nn.init.orthogonal_(w, gain)
    nn.init.zeros_(layer.bias)


class QEnsemble(MLP):
    """``n`` Q-networks as one stacked :class:`MLP` (TD3's and SAC's twin critics; keyword options are the MLP's):
    ``forward(obs [B, o], action [B, a]) -> [n, B]``, row ``i`` is ``Q_{i+1}``; ``member=0`` gives ``Q1 [B]``."""

    def __init__(self, obs_dim: int, act_dim: int, hidden_sizes: Sequence[int], n: int = 2, **options: Any) -> None:
        super().__init__([obs_dim + act_dim, *hidden_sizes, 1], ensemble=n, **options)

    def forward(self, obs: torch.Tensor, action: torch.Tensor,  # type: ignore[override]
                member: Optional[int] = None) -> torch.Tensor:
        return super().forward(torch.cat([obs, action], dim=-1), member).squeeze(-1)


@contextlib.contextmanager
def frozen(module: nn.Module) -> Iterator[nn.Module]:
    """Within the block, ``module``'s parameters do not require grad: a loss computed through it sends
    gradients to its *inputs* only (e.g. an actor loss through a critic), and no weight-gradient product of
    ``module`` is computed. The parameters that required grad do so again afterwards."""
    every = module.parameter_list() if isinstance(module, MLP) else module.parameters()
    params = [p for p in every if p.requires_grad]
    for p in params:
        p.requires_grad_(False)
    try:
        yield module
    finally:
        for p in params:
            p.requires_grad_(True)
