"""Policy keys declared with ``rlearn.config.option`` (``Policy.Config``): checked when a policy is built and when a
config is resolved, with messages naming the policy, the key and the value; ``--set`` reads the declared type,
``--print-config`` comments them, an unknown key gets the closest ones."""

import math

import pytest

from policies import PolicyConfigError
from rlearn.config import ConfigError, format_config, load_config


def make(policy, **override):
    if policy == "td3":
        from test_td3 import make_policy
    else:
        from test_sac import make_policy
    return make_policy(**override)


def test_declared_values_come_back_typed():
    policy = make("td3", lr_actor=1, hidden_sizes=(64, 32), learn_threads=None)
    assert policy.cfg["lr_actor"] == 1.0 and type(policy.cfg["lr_actor"]) is float
    assert policy.cfg["hidden_sizes"] == [64, 32] and policy.cfg["learn_threads"] is None


@pytest.mark.parametrize("policy, override, message", [
    ("td3", dict(batch_size=0), "TD3Policy: config key 'policy.batch_size' must be >= 1, got 0"),
    ("td3", dict(batch_size=True), "TD3Policy: config key 'policy.batch_size' must be int >= 1, got bool True"),
    ("sac", dict(tau=0.0), "SACPolicy: config key 'policy.tau' must be in (0, 1], got 0.0"),
    ("td3", dict(gamma=math.nan), "TD3Policy: config key 'policy.gamma' must be in [0, 1], got nan"),
    ("sac", dict(autotune=1), "SACPolicy: config key 'policy.autotune' must be bool, got int 1"),
    ("td3", dict(hidden_sizes=[]), "TD3Policy: config key 'policy.hidden_sizes' must not be empty"),
    ("sac", dict(hidden_sizes=[-4]), "SACPolicy: config key 'policy.hidden_sizes[0]' must be >= 1, got -4"),
    ("td3", dict(adaptive_threads="yes"), "TD3Policy: config key 'policy.adaptive_threads' must be bool, got str 'yes'"),
    ("sac", dict(precision="fp16"), "SACPolicy: config key 'policy.precision' must be one of 'fp32', 'bf16', got 'fp16'"),
    ("sac", dict(log_std_min=2.0, log_std_max=-2.0), "SACPolicy: config key 'policy.log_std_max' must be > "
                                                      "policy.log_std_min (2.0), got -2.0"),
    ("td3", dict(gama=0.9), "TD3Policy: unknown config key 'policy.gama'; did you mean 'policy.gamma'?"),
])
def test_bad_values_name_the_policy_key_and_value(policy, override, message):
    with pytest.raises(PolicyConfigError) as info:
        make(policy, **override)
    assert message in str(info.value)


def test_resolving_a_config_checks_and_types_the_policy_keys():
    with pytest.raises(ConfigError, match=r"config key 'policy.gamma' must be in \[0, 1\], got 1.5"):
        load_config("td3_pendulum", ["policy.gamma=1.5"])
    with pytest.raises(ConfigError, match=r"--set policy.autotune=maybe: cannot read 'maybe' as bool"):
        load_config("sac_pendulum", ["policy.autotune=maybe"])
    cfg = load_config("sac_pendulum", ["policy.target_entropy=-2", "policy.lr_actor=1", "policy.autotune=no"])
    # the declared types, not those of the current values (target_entropy defaults to None)
    assert cfg["policy"]["target_entropy"] == -2.0 and type(cfg["policy"]["target_entropy"]) is float
    assert type(cfg["policy"]["lr_actor"]) is float and cfg["policy"]["autotune"] is False
    with pytest.raises(ConfigError, match="did you mean 'policy.target_entropy'"):
        load_config("sac_pendulum", ["policy.target_entropi=-2"])


def test_print_config_comments_the_policy_keys():
    text = format_config(load_config("td3_pendulum"))
    assert "'gamma': 0.98,  # discount" in text
    assert "'actor_update_freq': 2,  # critic updates per actor + target update" in text
