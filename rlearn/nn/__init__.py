"""rlearn's networks (docs/speed-parts.md): the one :class:`MLP` (and :class:`QEnsemble`) every policy builds its
networks with, its fast parts (the feature-major ``FeatureMajorMLP``, opt-in bf16 products), :func:`frozen` and
:class:`ThreadChooser`."""

from rlearn.nn import relu_grad
from rlearn.nn.functional import (Dense, FeatureMajorMLP, fused_kernels_enabled, mlp, mlp_backward, mlp_forward,
                                  plain_mlp, tanh)
from rlearn.nn.low_precision import low_precision_layers, mlp_low_precision, native_bf16_cpu
from rlearn.nn.modules import MLP, EnsembleLayerNorm, EnsembleLinear, QEnsemble, frozen
from rlearn.nn.threads import ThreadChooser

__all__ = [
    "MLP", "QEnsemble", "EnsembleLinear", "EnsembleLayerNorm", "frozen", "ThreadChooser",
    "mlp", "plain_mlp", "tanh", "FeatureMajorMLP", "fused_kernels_enabled", "Dense", "mlp_forward", "mlp_backward",
    "mlp_low_precision", "low_precision_layers", "native_bf16_cpu",
]
