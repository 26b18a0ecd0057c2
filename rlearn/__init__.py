"""rlearn: PyTorch reinforcement learning whose learner handles irregular metrics correctly.

Data flow, one folder per stage::

    env -> collector -> buffer -> learner -> policy._forward_learn -> monitor -> hooks -> files
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
