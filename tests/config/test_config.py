"""rlearn.config: loading, merging over the defaults, --set coercion, validation, suggestions, dump."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlearn import config as C
from rlearn.config import ConfigError, coerce_value, dump_config, flatten, load_config, resolve_config
from rlearn.configs import available_configs

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "examples" / "custom_policy.py")
TOP = ("buffer, checkpoint, custom_imports, device, dist, env, eval, exp_name, learner, num_threads, policy, "
       "profile, seed, train")


def error(fn, *args, **kwargs) -> str:
    with pytest.raises(ConfigError) as info:
        fn(*args, **kwargs)
    return str(info.value)


def minimal(**extra):
    cfg = {"env": {"id": "Pendulum-v1"}, "policy": {"type": "td3"}}
    cfg.update(extra)
    return cfg


# ------------------------------------------------------------------------------------------- loading
def test_defaults_fill_every_framework_key():
    cfg = resolve_config(minimal())
    assert cfg["train"] == {"max_env_steps": 100_000, "collect_steps": 1, "updates_per_step": 1.0}
    assert cfg["learner"] == {"log_freq": 100, "monitor_window": None, "monitor_windows": {}, "strict": False, "hooks": [],
                              "writers": ["table", "tensorboard", "jsonl"], "log_processor": {"custom_cfg": []}}
    assert cfg["eval"] == {"freq": 10_000, "episodes": 10, "num_envs": 1, "stop_value": None, "patience": None,
                           "save_best": True, "video": False, "video_freq": None}
    assert cfg["checkpoint"] == {"freq": 10_000, "keep": 3}
    assert cfg["env"] == {"id": "Pendulum-v1", "num_envs": 1, "asynchronous": False, "kwargs": {}}
    assert (cfg["seed"], cfg["device"], cfg["num_threads"], cfg["profile"]) == (0, "cpu", 1, False)
    import policies

    td3_defaults = policies.get_policy_class("td3").default_config
    assert cfg["policy"] == {"type": "td3", **td3_defaults}
    assert cfg["exp_name"] == "td3"  # no file, no exp_name: named after the policy


def test_user_values_win_and_nested_sections_merge():
    cfg = resolve_config(minimal(train={"max_env_steps": 500}, policy={"type": "td3", "batch_size": 7}))
    assert cfg["train"] == {"max_env_steps": 500, "collect_steps": 1, "updates_per_step": 1.0}
    assert cfg["policy"]["batch_size"] == 7
    assert cfg["policy"]["gamma"] == 0.99


@pytest.mark.parametrize("name", available_configs())
def test_every_bundled_config_resolves_with_required_keys(name):
    cfg = load_config(name)
    flat = flatten(cfg, stop=())
    for key in C.REQUIRED_KEYS:
        assert key in flat, f"{name} lacks {key}"
    assert cfg["exp_name"]


@pytest.mark.parametrize("name", available_configs())
def test_every_bundled_config_states_only_what_differs_from_the_defaults(name):
    import importlib

    from rlearn.registry import get_policy_class

    raw = importlib.import_module(f"rlearn.configs.{name}").config
    base = C.defaults()
    base["policy"] = dict(get_policy_class(raw["policy"]["type"]).default_config)
    base["exp_name"] = name  # the loader names the run after the bundled config

    def restated(node, defaults, prefix=""):
        for key, value in node.items():
            default = defaults.get(key, object())
            if isinstance(value, dict) and value and isinstance(default, dict):
                yield from restated(value, default, f"{prefix}{key}.")
            elif value == default:
                yield f"{prefix}{key}"

    assert list(restated(raw, base)) == []


def test_example_file_loads_and_registers_its_policy():
    cfg = load_config(EXAMPLE)
    assert cfg["exp_name"] == "reinforce_cartpole"
    assert cfg["policy"]["type"] == "reinforce_demo"
    assert cfg["custom_imports"] == [EXAMPLE]  # so the dumped config can load the policy on its own
    import policies

    assert policies.get_policy_class("reinforce_demo").__name__ == "ReinforcePolicy"


def test_exp_name_defaults_to_file_stem(tmp_path):
    path = tmp_path / "my_run.py"
    path.write_text("config = dict(env=dict(id='Pendulum-v1'), policy=dict(type='td3'))\n")
    assert load_config(str(path))["exp_name"] == "my_run"


def test_seed_argument_overrides():
    assert load_config(EXAMPLE, seed=7)["seed"] == 7


def test_missing_file_and_unknown_bundled_name():
    assert error(load_config, "nope.py") == "config file 'nope.py' does not exist"
    names = ", ".join(available_configs())
    assert error(load_config, "td3_pendulm") == (
        f"no config file or bundled config named 'td3_pendulm'; did you mean 'td3_pendulum'? (bundled configs: {names})"
    )


def test_file_without_config_dict(tmp_path):
    path = tmp_path / "empty.py"
    path.write_text("x = 1\n")
    assert error(load_config, str(path)) == (
        f"config file '{path}' must define a dict named 'config' (config = dict(...)), found nothing"
    )


def test_file_that_raises_names_the_line(tmp_path):
    path = tmp_path / "bad.py"
    path.write_text("a = 1\nconfig = dict(x=1 / 0)\n")
    assert error(load_config, str(path)) == (
        f"config file '{path}' raised ZeroDivisionError at line 2: division by zero"
    )
    path.write_text("config = dict(\n")
    assert re.fullmatch(rf"syntax error in config file '{re.escape(str(path))}', line 1: .+", error(load_config, str(path)))


def test_main_block_of_a_config_file_does_not_run(tmp_path):
    path = tmp_path / "script.py"
    path.write_text(
        "config = dict(env=dict(id='Pendulum-v1'), policy=dict(type='td3'))\n"
        "if __name__ == '__main__':\n    raise SystemExit('ran')\n"
    )
    assert load_config(str(path))["policy"]["type"] == "td3"


# --------------------------------------------------------------------------------- unknown keys
def test_unknown_top_level_key_suggests_section():
    assert error(resolve_config, minimal(trian={})) == (
        f"unknown config key 'trian'; did you mean 'train'? (keys at the top level: {TOP})"
    )


def test_unknown_nested_key_suggests_closest():
    assert error(resolve_config, minimal(train={"max_env_step": 5})) == (
        "unknown config key 'train.max_env_step'; did you mean 'train.max_env_steps'? "
        "(keys at 'train': collect_steps, max_env_steps, updates_per_step)"
    )


def test_set_of_leaf_at_wrong_level_suggests_its_section():
    assert error(load_config, EXAMPLE, ["max_env_steps=5"]) == (
        f"unknown config key 'max_env_steps'; did you mean 'train.max_env_steps'? (keys at the top level: {TOP})"
    )


def test_unknown_policy_key_names_the_policy():
    expected = (
        "unknown config key 'policy.baseline_evry' for policy 'reinforce_demo'; did you mean 'policy.baseline_every' "
        "or 'policy.baseline_lr' or 'policy.baseline_epochs'? (keys at 'policy': baseline_epochs, baseline_every, "
        "baseline_lr, entropy_coef, gamma, hidden, lr, rollout_steps, type)"
    )
    assert error(load_config, EXAMPLE, ["policy.baseline_evry=3"]) == expected  # registers reinforce_demo too
    raw = {"env": {"id": "CartPole-v1"}, "policy": {"type": "reinforce_demo", "baseline_evry": 3}}
    assert error(resolve_config, raw) == expected
    assert error(resolve_config, minimal(policy={"type": "td3", "lr_actr": 1.0})).startswith(
        "unknown config key 'policy.lr_actr' for policy 'td3'; did you mean 'policy.lr_actor' or 'policy.lr_critic'? "
    )


def test_unknown_key_without_close_match_lists_siblings():
    assert error(load_config, EXAMPLE, ["zzz=1"]) == f"unknown config key 'zzz' (keys at the top level: {TOP})"


def test_unknown_policy_type_and_missing_type():
    assert error(resolve_config, minimal(policy={"type": "td4"})).startswith("policy.type: unknown policy type 'td4'; registered: ")
    assert error(resolve_config, {"env": {"id": "Pendulum-v1"}}) == (
        "config key 'policy.type' is not set: name a policy (e.g. policy=dict(type='td3'))"
    )


def test_section_given_a_scalar():
    assert error(resolve_config, minimal(train=5)) == "config key 'train' is a section and must be a dict, got 5"
    assert error(load_config, EXAMPLE, ["train=5"]) == (
        "--set train: 'train' is a section; set its keys one by one "
        "(train.max_env_steps, train.collect_steps, train.updates_per_step)"
    )


# ------------------------------------------------------------------------------------ --set values
def test_set_coerces_to_the_type_of_each_key():
    cfg = load_config(EXAMPLE, [
        "train.max_env_steps=1e5", "seed=100_000", "train.updates_per_step=2", "policy.lr=3e-4",
        "profile=yes", "env.asynchronous=0", "exp_name=run 1", "eval.stop_value=none",
        "learner.monitor_window=20", "policy.hidden=32",
    ])
    assert cfg["train"]["max_env_steps"] == 100_000 and type(cfg["train"]["max_env_steps"]) is int
    assert cfg["seed"] == 100_000
    assert cfg["train"]["updates_per_step"] == 2.0 and type(cfg["train"]["updates_per_step"]) is float
    assert cfg["policy"]["lr"] == 3e-4
    assert cfg["profile"] is True and cfg["env"]["asynchronous"] is False
    assert cfg["exp_name"] == "run 1"
    assert cfg["eval"]["stop_value"] is None
    assert cfg["learner"]["monitor_window"] == 20


def test_set_list_and_free_form_dicts():
    cfg = load_config("td3_pendulum", [
        "policy.hidden_sizes=64,64", "env.kwargs.g=9.81", "env.kwargs.render_mode=rgb_array",
        "learner.monitor_windows.actor_loss=50",
    ])
    assert cfg["policy"]["hidden_sizes"] == [64, 64]
    assert cfg["env"]["kwargs"] == {"g": 9.81, "render_mode": "rgb_array"}
    assert cfg["learner"]["monitor_windows"] == {"actor_loss": 50}
    cfg = load_config("td3_pendulum", ["policy.hidden_sizes=[32]", "learner.hooks=[{'type': 'TimerHook'}]"])
    assert cfg["policy"]["hidden_sizes"] == [32]
    assert cfg["learner"]["hooks"] == [{"type": "TimerHook"}]


@pytest.mark.parametrize("item, message", [
    ("policy.lr=fast", "--set policy.lr=fast: cannot read 'fast' as float"),
    ("train.max_env_steps=1.5", "--set train.max_env_steps=1.5: cannot read '1.5' as int"),
    ("profile=maybe", "--set profile=maybe: cannot read 'maybe' as bool (true/false, yes/no, on/off, 1/0)"),
    ("policy.hidden=none", "--set policy.hidden=none: cannot read 'none' as int"),
    ("train.max_env_steps=0", "config key 'train.max_env_steps' must be >= 1, got 0"),
    ("train.updates_per_step=-1", "config key 'train.updates_per_step' must be a finite number > 0, got -1.0"),
    ("exp_name=a/b", "config key 'exp_name' must be a non-empty name usable as a directory name (no '/', no surrounding spaces, no newline or other control character), got 'a/b'"),
    ("learner.monitor_windows.x=0", "config key 'learner.monitor_windows.x' must be >= 1, got 0"),
    ("train.max_env_steps", "--set expects KEY=VALUE (e.g. train.max_env_steps=5000), got 'train.max_env_steps'"),
    ("=5", "--set expects a dotted key before '=' (e.g. train.max_env_steps=5000), got '=5'"),
])
def test_bad_set_values(item, message):
    assert error(load_config, EXAMPLE, [item]) == message


def test_bool_words():
    for word, value in {"true": True, "False": False, "YES": True, "no": False, "on": True, "off": False,
                        "1": True, "0": False}.items():
        assert coerce_value("k", word, bool, nullable=False) is value


@given(st.integers(min_value=-10**18, max_value=10**18))
def test_int_text_round_trips(n):
    assert coerce_value("k", str(n), int, nullable=False) == n
    assert coerce_value("k", f"{n:_}", int, nullable=False) == n


@given(st.floats(allow_nan=False))
def test_float_text_round_trips(x):
    assert coerce_value("k", repr(x), float, nullable=False) == x


def test_untyped_values_are_literals_or_text():
    assert coerce_value("k", "3", None) == 3
    assert coerce_value("k", "[1, 2]", None) == [1, 2]
    assert coerce_value("k", "hello", None) == "hello"
    assert coerce_value("k", "null", None) is None
    assert math.isinf(coerce_value("k", "inf", float, nullable=False))


def test_policy_type_override_applies_before_policy_keys():
    cfg = load_config({"env": {"id": "CartPole-v1"}, "policy": {"type": "td3"}}, ["policy.type=ppg", "policy.n_pi=4"])
    assert cfg["policy"]["type"] == "ppg" and cfg["policy"]["n_pi"] == 4


# ---------------------------------------------------------------------------------------- validation
def test_non_literal_values_are_refused():
    assert error(resolve_config, minimal(env={"id": "Pendulum-v1", "kwargs": {"f": print}})) == (
        "config key 'env.kwargs.f' must hold plain Python values (dict, list, str, number, bool, None), "
        "got builtin_function_or_method"
    )


def test_wrong_types_in_a_config_file():
    assert error(resolve_config, minimal(seed="0")) == "config key 'seed' must be int >= 0, got str '0'"
    assert error(resolve_config, minimal(profile=1)) == "config key 'profile' must be bool, got int 1"
    assert error(resolve_config, minimal(learner={"hooks": [{"freq": 3}]})) == (
        "config key 'learner.hooks' must be a list of hook dicts with a 'type' (e.g. dict(type='LogShowHook', "
        "freq=100)); item 0 is {'freq': 3}"
    )
    assert error(resolve_config, minimal(eval={"stop_value": float("nan")})) == (
        "config key 'eval.stop_value' must be finite, got nan"
    )


def test_int_accepted_for_float_keys():
    cfg = resolve_config(minimal(train={"updates_per_step": 2}, eval={"stop_value": -200}))
    assert type(cfg["train"]["updates_per_step"]) is float and type(cfg["eval"]["stop_value"]) is float


def test_resolving_twice_is_harmless():
    cfg = load_config(EXAMPLE, ["train.max_env_steps=1000"])
    assert resolve_config(cfg) == cfg


# -------------------------------------------------------------------------------------------- dump
def test_dump_then_load_gives_the_same_config(tmp_path):
    cfg = load_config("td3_pendulum", ["policy.target_noise_clip=inf", "env.kwargs.g=9.81"])
    path = dump_config(cfg, tmp_path / "config.py")
    text = path.read_text()
    assert text.startswith("# Resolved configuration of experiment 'td3_pendulum'")
    assert load_config(str(path)) == cfg


def test_dumped_custom_policy_config_loads_in_a_fresh_interpreter(tmp_path):
    import subprocess
    import sys

    cfg = load_config(EXAMPLE, ["policy.lr=0.01"])
    path = dump_config(cfg, tmp_path / "config.py")
    code = f"from rlearn.config import load_config; c = load_config({str(path)!r}); print(c['policy']['type'], c['policy']['lr'])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "reinforce_demo 0.01"


# ---------------------------------------------------------------------------------------------- docs
@pytest.mark.docs
def test_every_config_key_is_documented():
    text = (ROOT / "docs" / "configuration.md").read_text()
    for path in flatten(C.defaults(), stop=()):
        assert f"`{path.rsplit('.', 1)[-1]}`" in text, f"docs/configuration.md does not mention {path}"
    for section in ("env", "policy", "buffer", "train", "learner", "eval", "checkpoint"):
        assert f"`{section}`" in text
