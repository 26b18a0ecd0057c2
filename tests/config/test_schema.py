"""The config schema: one declaration per key gives the defaults, the checks, --set types, the comments of
--print-config and the tables of docs/configuration.md."""

from __future__ import annotations

import ast
import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

import rlearn.config.docs as config_docs
from rlearn.config.policy_keys import policy_keys_of
from rlearn.config import (
    FREE_FORM, SCHEMA, SECTIONS, ConfigError, apply_overrides, defaults, flatten, format_config, load_config,
    resolve_config, resolve_section, undeclared_window_warnings,
)
from rlearn.config.dump import short_help
from rlearn.configs import available_configs


def error(fn, *args, **kwargs) -> str:
    with pytest.raises(ConfigError) as info:
        fn(*args, **kwargs)
    return str(info.value)


def minimal(**extra):
    return {"env": {"id": "Pendulum-v1"}, "policy": {"type": "td3"}, **extra}


# ------------------------------------------------------------------------------------------ schema
def test_defaults_and_schema_declare_the_same_keys():
    assert list(flatten(defaults(), stop=FREE_FORM)) == list(SCHEMA)
    assert FREE_FORM == ("env.kwargs", "learner.monitor_windows")
    assert list(SECTIONS) == ["", "env", "policy", "buffer", "train", "learner", "learner.log_processor", "eval",
                              "checkpoint", "dist"]
    assert defaults("learner.log_processor") == {"custom_cfg": []}
    first, second = defaults(), defaults()
    first["learner"]["hooks"].append({"type": "TimerHook"})
    assert second["learner"]["hooks"] == [] and defaults()["learner"]["hooks"] == []  # fresh copies


@pytest.mark.parametrize("path", [p for p, k in SCHEMA.items() if not k.required])
def test_every_default_passes_its_own_check_and_has_help(path):
    key = SCHEMA[path]
    assert key.validate(key.default) == key.default
    assert key.help and not key.help.endswith(".")


@pytest.mark.parametrize("path", [p for p, k in SCHEMA.items() if k.kind is int])
def test_int_keys_refuse_bools_and_honour_their_lower_bound(path):
    key = SCHEMA[path]
    assert error(key.validate, True).startswith(f"config key '{path}' must be int")
    if key.ge is not None:
        assert error(key.validate, int(key.ge) - 1) == f"config key '{path}' must be >= {key.ge}, got {int(key.ge) - 1}"
        assert key.validate(int(key.ge)) == int(key.ge)


@pytest.mark.parametrize("path", [p for p, k in SCHEMA.items() if k.kind is bool])
def test_bool_keys_refuse_ints(path):
    assert error(SCHEMA[path].validate, 1) == f"config key '{path}' must be bool, got int 1"


@given(st.integers(min_value=-5, max_value=10**9))
def test_log_freq_bound_against_a_direct_comparison(n):
    key = SCHEMA["learner.log_freq"]
    if n >= 1:
        assert key.validate(n) == n
    else:
        assert error(key.validate, n) == f"config key 'learner.log_freq' must be >= 1, got {n}"


@pytest.mark.parametrize("path", [p for p, k in SCHEMA.items() if not k.required])
def test_set_reads_every_key_back_from_its_printed_default(path):
    """--set coerces text with the type the schema declares: the printed default comes back equal."""
    cfg = resolve_config(minimal())
    value = SCHEMA[path].default
    text = "none" if value is None else repr(value)
    apply_overrides(cfg, [f"{path}={text}"])
    result = cfg
    for part in path.split("."):
        result = result[part]
    assert result == value and type(result) is type(value)


# ------------------------------------------------------------------------------------ nested keys
def test_monitor_window_values_are_checked_one_by_one():
    assert error(resolve_config, minimal(learner={"monitor_windows": {"loss": 5, "aux": "64"}})) == (
        "config key 'learner.monitor_windows.aux' must be int >= 1, got str '64'"
    )
    assert error(resolve_config, minimal(learner={"monitor_windows": {"loss": True}})) == (
        "config key 'learner.monitor_windows.loss' must be int >= 1, got bool True"
    )
    assert error(resolve_config, minimal(learner={"monitor_windows": {3: 5}})) == (
        "config key 'learner.monitor_windows' must have string keys, got 3"
    )


def test_set_reads_monitor_window_entries_as_ints():
    cfg = load_config("td3_pendulum", ["learner.monitor_windows.actor_loss=1e3", "learner.monitor_windows.q_value=5"])
    assert cfg["learner"]["monitor_windows"] == {"actor_loss": 1000, "q_value": 5}
    assert type(cfg["learner"]["monitor_windows"]["actor_loss"]) is int
    assert error(load_config, "td3_pendulum", ["learner.monitor_windows.actor_loss=big"]) == (
        "--set learner.monitor_windows.actor_loss=big: cannot read 'big' as int"
    )
    cfg = load_config("td3_pendulum", ["env.kwargs.g=9.81", "env.kwargs.mode=fast"])  # untyped: literal or text
    assert cfg["env"]["kwargs"] == {"g": 9.81, "mode": "fast"}


def test_log_processor_shape():
    entry = {"data_src": "collector/episode_return", "method_name": "max", "window_size": 100,
             "log_name": "episode_return_max"}
    cfg = load_config("td3_pendulum", [f"learner.log_processor.custom_cfg=[{entry!r}]"])
    assert cfg["learner"]["log_processor"] == {"custom_cfg": [entry]}
    cfg = resolve_config(minimal(learner={"log_processor": {"custom_cfg": (entry,)}}))
    assert cfg["learner"]["log_processor"]["custom_cfg"] == [entry]  # a tuple is normalised to a list
    assert error(resolve_config, minimal(learner={"log_processor": {"custom_cfg": [entry, "max"]}})) == (
        "config key 'learner.log_processor.custom_cfg' must be a list of dicts (e.g. dict(data_src='loss', "
        "method_name='max')); item 1 is 'max'"
    )
    assert error(resolve_config, minimal(learner={"log_processor": {"custom_cfg": entry}})) == (
        f"config key 'learner.log_processor.custom_cfg' must be list of dict, got dict {entry!r}"
    )
    assert error(resolve_config, minimal(learner={"log_processor": {"custom_cgf": []}})) == (
        "unknown config key 'learner.log_processor.custom_cgf'; did you mean 'learner.log_processor.custom_cfg'? "
        "(keys at 'learner.log_processor': custom_cfg)"
    )
    assert error(resolve_config, minimal(learner={"log_processor": [entry]})) == (
        f"config key 'learner.log_processor' is a section and must be a dict, got {[entry]!r}"
    )


def test_several_unknown_keys_are_all_named():
    assert error(resolve_config, minimal(train={"max_env_step": 5, "colect_steps": 1})) == (
        "unknown config key 'train.max_env_step'; did you mean 'train.max_env_steps'? (keys at 'train': "
        "collect_steps, max_env_steps, updates_per_step); also unknown: 'train.colect_steps'"
    )


def test_undeclared_window_warnings():
    assert undeclared_window_warnings({"critic_loss": 5}, ["critic_loss", "actor_loss"], "TD3Policy") == []
    assert undeclared_window_warnings({"critc_loss": 5, "zzz": 2}, ["critic_loss", "actor_loss"], "TD3Policy") == [
        "config key 'learner.monitor_windows.critc_loss': no monitor key 'critc_loss' is declared, so this window "
        "is never used; did you mean 'critic_loss'? declared keys (TD3Policy): critic_loss, actor_loss",
        "config key 'learner.monitor_windows.zzz': no monitor key 'zzz' is declared, so this window is never used; "
        "declared keys (TD3Policy): critic_loss, actor_loss",
    ]


# ------------------------------------------------------------------------------------ one section
def test_resolve_section_fills_defaults_and_the_same_as_default():
    learner = resolve_section("learner", None)
    assert learner == {**defaults("learner"), "monitor_window": 100}
    assert resolve_section("learner", {"log_freq": 7})["monitor_window"] == 7
    assert resolve_section("learner", {"log_freq": 7, "monitor_window": 3})["monitor_window"] == 3
    run = resolve_config(minimal(learner={"log_freq": 20}))
    assert run["learner"]["monitor_window"] is None  # the run config keeps "unset"; the learner fills it
    assert resolve_section("learner", run["learner"]) == {**run["learner"], "monitor_window": 20}
    assert error(resolve_section, "train", {"max_env_steps": 0}) == "config key 'train.max_env_steps' must be >= 1, got 0"
    with pytest.raises(KeyError):
        resolve_section("policy", {})


def test_error_types_are_one_family():
    from policies import PolicyConfigError
    from rlearn.learner import LearnerConfigError

    assert issubclass(ConfigError, ValueError)
    assert issubclass(LearnerConfigError, ConfigError)
    assert issubclass(PolicyConfigError, ConfigError) and issubclass(PolicyConfigError, KeyError)
    with pytest.raises(PolicyConfigError) as info:
        from policies import merge_policy_config

        merge_policy_config({"net": {"width": 64}}, {"net": {"widht": 3}}, "MyPolicy")
    assert str(info.value) == (
        "MyPolicy: unknown config key 'policy.net.widht'; did you mean 'policy.net.width'? Known keys: width"
    )


# ------------------------------------------------------------------------------------ print / dump
@pytest.mark.parametrize("name", available_configs())
def test_format_config_is_the_config_with_the_schema_help_as_comments(name):
    cfg = load_config(name)
    text = format_config(cfg)
    assert ast.literal_eval(text) == cfg
    lines = text.splitlines()
    for path in SCHEMA:
        leaf = path.rsplit(".", 1)[-1]
        note = short_help(path)
        assert note and len(note) <= 90
        assert any(line.strip().startswith(f"{leaf!r}: ") and line.endswith(f"  # {note}") for line in lines), path
    declared = policy_keys_of(cfg)  # the policy's keys are commented with their declared help too
    assert declared
    for path in declared:
        leaf, note = path.rsplit(".", 1)[-1], short_help(path, keys=declared)
        assert note and any(line.strip().startswith(f"{leaf!r}: ") and line.endswith(f"  # {note}") for line in lines)
    assert ast.literal_eval(format_config(cfg, comments=False)) == cfg


def test_short_help_takes_the_first_phrase():
    assert short_help("buffer.size") == "transitions kept"
    assert short_help("learner.log_freq") == "train iterations between two tables / TensorBoard points (see reading-the-logs.md)"
    assert short_help("policy.lr") == ""  # no policy named: nothing declares it
    assert short_help("policy.lr", keys=policy_keys_of({"policy": {"type": "dqn"}})) == "Adam learning rate"


# -------------------------------------------------------------------------------------------- docs
@pytest.mark.docs
def test_docs_configuration_md_is_up_to_date():
    text = config_docs.DOC_PATH.read_text(encoding="utf-8")
    assert config_docs.render_document(text) == text, "run: python -m rlearn.config.docs"
    assert config_docs.main(["--check"]) == 0


@pytest.mark.docs
def test_docs_table_rows_come_from_the_schema():
    text = config_docs.DOC_PATH.read_text(encoding="utf-8")
    for path, key in SCHEMA.items():
        leaf = path.rsplit(".", 1)[-1]
        assert f"| `{leaf}` | " in text and key.help in text, path
    assert "| `log_freq` | `100` | int >= 1 | train iterations between two tables" in text
    assert "| `monitor_window` | None (= `log_freq`) | int >= 1 or None |" in text
    assert "| `size` | `100_000` | int >= 1 |" in text
    assert "| `id` | — (required) | str |" in text


def test_docs_check_fails_when_a_declaration_changes(tmp_path, monkeypatch, capsys):
    doc = tmp_path / "configuration.md"
    doc.write_text(config_docs.DOC_PATH.read_text(encoding="utf-8"), encoding="utf-8")
    assert config_docs.main(["--check", "--path", str(doc)]) == 0
    changed = dataclasses.replace(SCHEMA["buffer.size"], help="how many transitions the buffer holds")
    monkeypatch.setitem(SCHEMA, "buffer.size", changed)
    assert config_docs.main(["--check", "--path", str(doc)]) == 1
    assert "is out of date" in capsys.readouterr().err
    assert config_docs.main(["--path", str(doc)]) == 0
    assert "| `size` | `100_000` | int >= 1 | how many transitions the buffer holds |" in doc.read_text()
    assert config_docs.main(["--check", "--path", str(doc)]) == 0
    doc.write_text("# no markers\n")
    with pytest.raises(ValueError, match="lacks the markers"):
        config_docs.main(["--check", "--path", str(doc)])



@pytest.mark.docs
def test_write_your_own_policy_documents_every_option_argument_with_its_real_message():
    """The option() reference in docs/write-your-own-policy.md: one row per argument, messages as rlearn says them."""
    import inspect
    from pathlib import Path
    from rlearn.config import non_empty, one_of, option
    from rlearn.config.policy_keys import policy_keys

    text = (Path(__file__).resolve().parents[2] / "docs" / "write-your-own-policy.md").read_text(encoding="utf-8")
    section = text.split("### `option()`: every argument", 1)[1].split("\n#", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    documented = {name.strip("` ") for row in rows for name in row.split("|")[1].split(",")}
    assert documented == set(inspect.signature(option).parameters)

    class Declared:
        @dataclasses.dataclass
        class Config:
            lr: float = option(3e-4, "Adam learning rate", gt=0)
            tau: float = option(0.005, "Polyak factor", gt=0, le=1)
            beta: float = option(1.0, "a weight", finite=True)
            hidden_sizes: list[int] = option([64, 64], "hidden layer widths", items=dict(ge=1))
            windows: dict[str, int] = option({}, "windows", items=dict(ge=1))
            precision: str = option("fp32", "precision", check=one_of("fp32", "bf16"))
            names: list[str] = option(["a"], "names", check=non_empty)
            gamma: float = option(0.99, "discount", ge=0, le=1, expected="a discount in [0, 1]")
            target: int | None = option(None, "target", same_as="lr")

    keys = policy_keys(Declared)
    for key, value in [("lr", 0), ("tau", 2), ("beta", float("nan")), ("hidden_sizes", [64, 0]),
                       ("precision", "fp16"), ("gamma", "x"), ("lr", True)]:
        with pytest.raises(ConfigError) as refused:
            keys[f"policy.{key}"].validate(value)
        assert str(refused.value) in " ".join(section.split()), str(refused.value)
    with pytest.raises(ConfigError, match=r"'policy.windows.loss' must be >= 1"):
        keys["policy.windows"].validate({"loss": 0})
    assert keys["policy.lr"].validate(1) == 1.0 and keys["policy.hidden_sizes"].validate((3, 4)) == [3, 4]
