"""Fast, tested building blocks for policies' networks (docs/speed-parts.md): the feature-major :class:`MLP`,
:class:`EnsembleMLP` and :class:`QEnsemble` modules, :func:`frozen`, :class:`ThreadChooser`, and opt-in bf16
products (``module.set_compute_dtype("bf16")``).
"""

from rlearn.nn import relu_grad
from rlearn.nn.functional import Dense, FeatureMajorMLP, fused_kernels_enabled, mlp, mlp_backward, mlp_forward
from rlearn.nn.low_precision import low_precision_layers, mlp_low_precision, native_bf16_cpu
from rlearn.nn.modules import MLP, EnsembleLinear, EnsembleMLP, QEnsemble, frozen
from rlearn.nn.threads import ThreadChooser

__all__ = [
    "MLP", "EnsembleMLP", "EnsembleLinear", "QEnsemble", "frozen", "ThreadChooser",
    "mlp", "FeatureMajorMLP", "fused_kernels_enabled", "Dense", "mlp_forward", "mlp_backward",
    "mlp_low_precision", "low_precision_layers", "native_bf16_cpu",
]
