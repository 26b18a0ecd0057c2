"""Run configuration: a nested dict from a Python file defining ``config = dict(...)`` or a bundled config::

    cfg = load_config("examples/custom_policy.py", overrides=["train.max_env_steps=2000", "seed=3"])

Every framework key is declared once, in :mod:`rlearn.config.sections` (a policy's in its ``Config``); every
mistake raises :class:`ConfigError` naming the full dotted key.
"""

from rlearn.config.dump import default_work_dir, dump_config, format_config
from rlearn.config.errors import ConfigError
from rlearn.config.keys import (
    flatten, get_by_path, resolve_section, set_by_path, suggest, undeclared_window_warnings, validate_config,
)
from rlearn.config.loading import config_source, import_file, imports_named, load_config, resolve_config
from rlearn.config.overrides import apply_overrides, coerce_value, parse_override
from rlearn.config.schema import FREE_FORM, SCHEMA, SECTIONS, defaults
from rlearn.config.sections import RunConfig
from rlearn.config.spec import Key, is_int, is_real, non_empty, one_of, option, section

#: keys every resolved config has (and every bundled config sets or inherits)
REQUIRED_KEYS = (
    "exp_name", "seed", "env.id", "env.num_envs", "train.max_env_steps", "learner.log_freq",
    "learner.monitor_window", "eval.freq", "eval.episodes", "checkpoint.freq", "profile",
)

__all__ = [
    "ConfigError", "Key", "RunConfig", "SCHEMA", "SECTIONS", "FREE_FORM", "REQUIRED_KEYS", "defaults",
    "load_config", "resolve_config", "resolve_section", "validate_config", "undeclared_window_warnings",
    "apply_overrides", "parse_override", "coerce_value", "format_config", "dump_config", "default_work_dir",
    "config_source", "import_file", "imports_named", "flatten", "get_by_path", "set_by_path", "suggest", "is_int",
    "is_real", "option", "section", "one_of", "non_empty",
]
