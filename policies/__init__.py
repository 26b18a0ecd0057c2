"""rlearn's algorithms, each one module a reader can follow top to bottom. A config names its policy with
``policy.type``: a registered name (``"td3"``, ``"sac"``, ``"ppo"``, ``"ppg"``, ``"dqn"`` or one added with
:func:`register_policy`) or an import path ``"package.module:ClassName"``. Each bundled policy registers itself
with ``@register_policy`` when its module is imported, as a user's does; importing this package imports them all.
"""

from policies.base import Policy, PolicyConfigError, is_scalar, merge_policy_config
from rlearn.registry import get_policy_class, register_policy, registered_policies

from policies.dqn import DQNPolicy  # noqa: E402  (the bundled policies, after the base they subclass)
from policies.ppg import PPGPolicy  # noqa: E402
from policies.ppo import PPOPolicy  # noqa: E402
from policies.sac import SACPolicy  # noqa: E402
from policies.td3 import TD3Policy  # noqa: E402

__all__ = [
    "Policy", "PolicyConfigError", "is_scalar", "merge_policy_config", "register_policy", "get_policy_class",
    "registered_policies", "TD3Policy", "PPGPolicy", "PPOPolicy", "DQNPolicy", "SACPolicy",
]
