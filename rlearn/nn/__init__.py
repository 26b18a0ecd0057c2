"""Fast, tested building blocks for policies' networks (see ``docs/speed-parts.md``).

* :class:`MLP`, :class:`EnsembleMLP` (``n`` stacked networks, e.g. twin critics), :class:`EnsembleLinear`:
  ``nn.Module`` s whose forward runs feature-major kernels inside an ``autograd.Function``
  (:mod:`rlearn.nn.functional`), so losses on their outputs are written as losses and ``backward()`` computes
  only the gradients that are needed.
* :class:`QEnsemble`: ``n`` Q-networks ``(obs, action) -> Q`` as one :class:`EnsembleMLP` (TD3's and SAC's twin critics).
* :func:`frozen`: a block in which a module's parameters do not require grad (an actor loss through a critic).
* :class:`ThreadChooser`: each train iteration on the torch thread count that pays now (CPU).
* ``module.set_compute_dtype("bf16")`` (:mod:`rlearn.nn.low_precision`): opt-in bf16 products with fp32
  parameters, about twice the matmul speed on CPUs with native bf16.
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
