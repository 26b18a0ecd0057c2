"""policies.config_checks: values accepted as they are, bad ones rejected with the policy, key and value named;
TD3 and SAC use them for their config."""

import math

import pytest

from policies.base import PolicyConfigError
from policies.config_checks import check_bool, check_float, check_int, check_sizes


def test_good_values_come_back_typed():
    assert check_int("P", "k", 3, 1) == 3 and type(check_int("P", "k", 3, 1)) is int
    assert check_float("P", "k", 1, 0.0, 2.0) == 1.0 and type(check_float("P", "k", 1, 0.0, 2.0)) is float
    assert check_bool("P", "k", False) is False
    assert check_sizes("P", "hidden_sizes", (64, 32)) == [64, 32]


@pytest.mark.parametrize("call, message", [
    (lambda: check_int("TD3Policy", "batch_size", 0, 1), "TD3Policy: 'policy.batch_size' must be an int >= 1, got 0"),
    (lambda: check_int("P", "k", True, 0), "P: 'policy.k' must be an int >= 0, got True"),
    (lambda: check_float("P", "tau", 0.0, 0.0, 1.0, low_open=True), "P: 'policy.tau' must be a number in (0.0, 1.0], got 0.0"),
    (lambda: check_float("P", "gamma", math.nan, 0.0, 1.0), "P: 'policy.gamma' must be a number in [0.0, 1.0], got nan"),
    (lambda: check_bool("P", "autotune", 1), "P: 'policy.autotune' must be true or false, got 1"),
    (lambda: check_sizes("P", "hidden_sizes", []), "P: 'policy.hidden_sizes' must be a non-empty list of ints, got []"),
    (lambda: check_sizes("P", "hidden_sizes", [64, 0]), "P: 'policy.hidden_sizes[1]' must be an int >= 1, got 0"),
])
def test_bad_values_name_the_policy_key_and_value(call, message):
    with pytest.raises(PolicyConfigError) as info:
        call()
    assert message in str(info.value)


@pytest.mark.parametrize("policy", ["td3", "sac"])
def test_td3_and_sac_check_their_layer_widths_and_flags(policy):
    if policy == "td3":
        from test_td3 import make_policy
        name = "TD3Policy"
    else:
        from test_sac import make_policy
        name = "SACPolicy"
    with pytest.raises(PolicyConfigError, match=rf"{name}: 'policy.hidden_sizes\[0\]' must be an int >= 1, got -4"):
        make_policy(hidden_sizes=[-4])
    with pytest.raises(PolicyConfigError, match=rf"{name}: 'policy.adaptive_threads' must be true or false, got 'yes'"):
        make_policy(adaptive_threads="yes")
