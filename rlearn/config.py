"""Run configuration: load a config, merge it over the defaults, apply ``--set`` overrides, validate, dump.

A config is a nested dict. It comes from a Python file that defines ``config = dict(...)`` or from a
bundled config (``rlearn/configs/<name>.py``, e.g. ``td3_pendulum``)::

    from rlearn.config import load_config

    cfg = load_config("examples/custom_policy.py", overrides=["train.max_env_steps=2000", "seed=3"])

:func:`load_config` (or :func:`resolve_config` for a dict you built yourself) returns the *resolved*
config: every framework section filled in from :data:`DEFAULTS`, the ``policy`` section filled in from
the policy class's ``default_config``, every value checked. Mistakes raise :class:`ConfigError` with a
one-line message naming the dotted key (``train.max_env_step``) and, for an unknown key, the closest
existing keys. :func:`dump_config` writes a resolved config back as a Python file that
:func:`load_config` reads again. docs/configuration.md describes every key.

A config file is executed as a Python module (under a private module name, so an
``if __name__ == "__main__":`` block does not run). Anything it defines at import time takes effect,
in particular ``@policies.register_policy("name")`` on a policy class, which is how
``examples/custom_policy.py`` makes its ``policy.type`` resolvable. Other modules or files that a config
needs imported first go in ``custom_imports``.
"""

from __future__ import annotations

import ast
import copy
import datetime
import difflib
import hashlib
import importlib
import importlib.util
import math
import numbers
import pprint
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

__all__ = [
    "ConfigError",
    "DEFAULTS",
    "FREE_FORM",
    "REQUIRED_KEYS",
    "load_config",
    "resolve_config",
    "apply_overrides",
    "parse_override",
    "coerce_value",
    "dump_config",
    "config_source",
    "flatten",
    "get_by_path",
    "default_work_dir",
    "import_file",
    "validate_config",
    "suggest",
    "SCHEMA",
]


class ConfigError(ValueError):
    """A config is wrong: unknown key, bad value, missing file. The message is one line naming the culprit."""


#: The framework's sections and their defaults. The ``policy`` section is completed from the policy
#: class's ``default_config``. See docs/configuration.md for what each key means.
DEFAULTS: Dict[str, Any] = {
    "exp_name": None,  # None: the config file's stem (or the bundled config's name)
    "seed": 0,
    "device": "cpu",
    "num_threads": 1,
    "profile": False,
    "custom_imports": [],
    "env": {"id": None, "num_envs": 1, "asynchronous": False, "kwargs": {}},
    "policy": {"type": None},
    "buffer": {"size": 100_000},
    "train": {"max_env_steps": 100_000, "collect_steps": 1, "updates_per_step": 1.0},
    "learner": {"log_freq": 100, "monitor_window": None, "monitor_windows": {}, "strict": False, "hooks": []},
    "eval": {"freq": 10_000, "episodes": 10, "num_envs": 1, "stop_value": None},
    "checkpoint": {"freq": 10_000, "keep": 3},
    "dist": {"backend": None, "timeout_s": 300.0},
}

#: dicts whose keys are the user's to choose (environment kwargs, per-key monitor windows)
FREE_FORM: Tuple[str, ...] = ("env.kwargs", "learner.monitor_windows")

#: keys every resolved config has (and every bundled config sets or inherits)
REQUIRED_KEYS: Tuple[str, ...] = (
    "exp_name", "seed", "env.id", "env.num_envs", "train.max_env_steps", "learner.log_freq",
    "learner.monitor_window", "eval.freq", "eval.episodes", "checkpoint.freq", "profile",
)

_BOOL_WORDS = {"true": True, "yes": True, "on": True, "1": True, "false": False, "no": False, "off": False, "0": False}
_NULL_WORDS = {"none", "null"}


# ------------------------------------------------------------------------------------------- schema
@dataclass(frozen=True)
class _Field:
    """What a framework key accepts: its type (used to coerce ``--set`` strings), None or not, a check."""

    kind: type
    nullable: bool = False
    check: Optional[Callable[[Any], Optional[str]]] = None  # returns a complaint, or None when fine
    expected: str = ""

    def describe(self) -> str:
        text = self.expected or _type_name(self.kind)
        return f"{text} or None" if self.nullable else text


def _type_name(kind: type) -> str:
    return {int: "int", float: "float", bool: "bool", str: "str", list: "list", dict: "dict"}.get(kind, kind.__name__)


def _at_least(n: int) -> Callable[[Any], Optional[str]]:
    return lambda v: None if v >= n else f"must be >= {n}"


def _positive_float(v: float) -> Optional[str]:
    return None if math.isfinite(v) and v > 0 else "must be a finite number > 0"


def _finite(v: float) -> Optional[str]:
    return None if math.isfinite(v) else "must be finite"


def _exp_name(v: str) -> Optional[str]:
    if not v or v.strip() != v or any(c in v for c in "/\\") or v in (".", ".."):
        return "must be a non-empty name usable as a directory name (no '/', no surrounding spaces)"
    return None


def _non_empty(v: str) -> Optional[str]:
    return None if v else "must not be empty"


def _str_list(v: list) -> Optional[str]:
    bad = [x for x in v if not isinstance(x, str) or not x]
    return f"must be a list of module names or file paths, got {bad[0]!r} in it" if bad else None


def _hook_list(v: list) -> Optional[str]:
    for i, item in enumerate(v):
        if not isinstance(item, Mapping) or not isinstance(item.get("type"), str):
            return f"must be a list of hook dicts with a 'type' (e.g. dict(type='LogShowHook', freq=100)); item {i} is {item!r}"
    return None


def _windows(v: dict) -> Optional[str]:
    for key, size in v.items():
        if not isinstance(key, str) or isinstance(size, bool) or not isinstance(size, int) or size < 1:
            return f"must map monitor keys to window sizes >= 1, got {key!r}: {size!r}"
    return None


def _str_keys(v: dict) -> Optional[str]:
    bad = [k for k in v if not isinstance(k, str)]
    return f"must have string keys, got {bad[0]!r}" if bad else None


def _dist_backend(v: str) -> Optional[str]:
    return None if v in ("gloo", "nccl") else "must be 'gloo', 'nccl' or None (nccl when CUDA is available, else gloo)"


SCHEMA: Dict[str, _Field] = {
    "exp_name": _Field(str, check=_exp_name),
    "seed": _Field(int, check=_at_least(0), expected="int >= 0"),
    "device": _Field(str, check=_non_empty),
    "num_threads": _Field(int, nullable=True, check=_at_least(1), expected="int >= 1"),
    "profile": _Field(bool),
    "custom_imports": _Field(list, check=_str_list),
    "env.id": _Field(str, check=_non_empty),
    "env.num_envs": _Field(int, check=_at_least(1), expected="int >= 1"),
    "env.asynchronous": _Field(bool),
    "env.kwargs": _Field(dict, check=_str_keys),
    "policy.type": _Field(str, check=_non_empty),
    "buffer.size": _Field(int, check=_at_least(1), expected="int >= 1"),
    "train.max_env_steps": _Field(int, check=_at_least(1), expected="int >= 1"),
    "train.collect_steps": _Field(int, check=_at_least(1), expected="int >= 1"),
    "train.updates_per_step": _Field(float, check=_positive_float, expected="float > 0"),
    "learner.log_freq": _Field(int, check=_at_least(1), expected="int >= 1"),
    "learner.monitor_window": _Field(int, nullable=True, check=_at_least(1), expected="int >= 1"),
    "learner.monitor_windows": _Field(dict, check=_windows),
    "learner.strict": _Field(bool),
    "learner.hooks": _Field(list, check=_hook_list),
    "eval.freq": _Field(int, nullable=True, check=_at_least(1), expected="int >= 1"),
    "eval.episodes": _Field(int, check=_at_least(1), expected="int >= 1"),
    "eval.num_envs": _Field(int, check=_at_least(1), expected="int >= 1"),
    "eval.stop_value": _Field(float, nullable=True, check=_finite),
    "checkpoint.freq": _Field(int, nullable=True, check=_at_least(1), expected="int >= 1"),
    "checkpoint.keep": _Field(int, nullable=True, check=_at_least(1), expected="int >= 1"),
    "dist.backend": _Field(str, nullable=True, check=_dist_backend, expected="'gloo' or 'nccl'"),
    "dist.timeout_s": _Field(float, check=_positive_float, expected="float > 0"),
}


# ------------------------------------------------------------------------------------------ helpers
def flatten(cfg: Mapping[str, Any], prefix: str = "", stop: Iterable[str] = FREE_FORM) -> Dict[str, Any]:
    """``{"train": {"max_env_steps": 5}}`` -> ``{"train.max_env_steps": 5}``; dicts named in ``stop`` and
    empty dicts stay whole (they are values)."""
    stop = tuple(stop)
    out: Dict[str, Any] = {}
    for key, value in cfg.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value and path not in stop:
            out.update(flatten(value, f"{path}.", stop))
        else:
            out[path] = value
    return out


def get_by_path(cfg: Mapping[str, Any], path: str) -> Any:
    """The value at dotted ``path`` (``KeyError`` naming the path when absent)."""
    node: Any = cfg
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            raise KeyError(path)
        node = node[part]
    return node


def _known_paths(cfg: Mapping[str, Any]) -> List[str]:
    """Every dotted key of ``cfg``, sections included (so ``learner`` and ``learner.log_freq`` both count)."""
    paths: List[str] = []

    def walk(node: Mapping[str, Any], prefix: str) -> None:
        for key, value in node.items():
            path = f"{prefix}{key}"
            paths.append(path)
            if isinstance(value, Mapping) and path not in FREE_FORM:
                walk(value, f"{path}.")

    walk(cfg, "")
    return paths


def suggest(key: str, known: Sequence[str], n: int = 3) -> List[str]:
    """The existing dotted keys closest to ``key``, best first: keys of the same section with a similar
    name, then keys anywhere with a very similar name (``max_env_steps`` -> ``train.max_env_steps``),
    then very similar whole paths."""
    section, _, leaf = key.rpartition(".")
    by_leaf: Dict[str, List[str]] = {}
    siblings: Dict[str, str] = {}
    for path in known:
        parent, _, name = path.rpartition(".")
        by_leaf.setdefault(name, []).append(path)
        if parent == section:
            siblings[name] = path
    found: List[str] = [siblings[name] for name in difflib.get_close_matches(leaf, list(siblings), n=n, cutoff=0.6)]
    for name in difflib.get_close_matches(leaf, list(by_leaf), n=n, cutoff=0.8):
        found.extend(by_leaf[name])
    found.extend(difflib.get_close_matches(key, known, n=n, cutoff=0.8))
    unique = [path for i, path in enumerate(found) if path not in found[:i] and path != key]
    return unique[:n]


def _unknown_key_error(key: str, known: Sequence[str], owner: str = "") -> ConfigError:
    close = suggest(key, known)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    section, _, _ = key.rpartition(".")
    siblings = sorted(k.rsplit(".", 1)[-1] for k in known if k.rpartition(".")[0] == section)
    where = f"'{section}'" if section else "the top level"
    listing = f" (keys at {where}: {', '.join(siblings)})" if siblings else ""
    return ConfigError(f"unknown config key '{key}'{owner}{hint}{listing}")


def _is_plain(value: Any) -> bool:
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_is_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, (str, int)) and _is_plain(v) for k, v in value.items())
    return False


# ---------------------------------------------------------------------------------------- coercion
def coerce_value(key: str, text: str, kind: Optional[type], nullable: bool = True) -> Any:
    """Turn the string ``text`` of ``--set key=text`` into a value of type ``kind``.

    * ``bool``: true/false, yes/no, on/off, 1/0 (any case);
    * ``int``: an integer literal (``100_000`` too) or an integral float literal (``1e5``);
    * ``float``: any number (``3``, ``3e-4``, ``inf``);
    * ``str``: the text itself (a quoted Python string literal is unquoted);
    * ``list`` / ``dict``: a Python literal (``[64, 64]``, ``64,64``, ``{'g': 9.8}``);
    * ``None`` (``kind`` unknown, e.g. the current value is None): a Python literal if the text is one,
      else the text;
    * ``none`` / ``null`` give None where ``nullable``.

    A text that does not fit raises :class:`ConfigError` naming the key, the text and the expected type.
    """
    stripped = text.strip()
    if nullable and stripped.lower() in _NULL_WORDS:
        return None

    def fail(expected: str) -> ConfigError:
        return ConfigError(f"--set {key}={text}: cannot read {text!r} as {expected}")

    literal: Any
    try:
        literal = ast.literal_eval(stripped)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        literal = _NOTHING
    if kind is None:
        return text if literal is _NOTHING else literal
    if kind is bool:
        word = stripped.lower()
        if word in _BOOL_WORDS:
            return _BOOL_WORDS[word]
        raise fail("bool (true/false, yes/no, on/off, 1/0)")
    if kind is int:
        if isinstance(literal, bool):
            raise fail("int")
        if isinstance(literal, int):
            return literal
        if isinstance(literal, float) and math.isfinite(literal) and literal.is_integer():
            return int(literal)
        raise fail("int")
    if kind is float:
        if isinstance(literal, (int, float)) and not isinstance(literal, bool):
            return float(literal)
        try:
            return float(stripped)  # inf, nan, -inf
        except ValueError:
            raise fail("float") from None
    if kind is str:
        return literal if isinstance(literal, str) else text
    if kind in (list, tuple):
        if isinstance(literal, (list, tuple)):
            return list(literal)
        raise fail("list (e.g. [64, 64] or 64,64)")
    if kind is dict:
        if isinstance(literal, dict):
            return literal
        raise fail("dict (e.g. {'key': 1})")
    return text if literal is _NOTHING else literal


_NOTHING = object()


def parse_override(item: str) -> Tuple[str, str]:
    """Split ``"a.b=VALUE"`` into ``("a.b", "VALUE")``; anything else is a :class:`ConfigError`."""
    if not isinstance(item, str) or "=" not in item:
        raise ConfigError(f"--set expects KEY=VALUE (e.g. train.max_env_steps=5000), got {item!r}")
    key, _, value = item.partition("=")
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ConfigError(f"--set expects a dotted key before '=' (e.g. train.max_env_steps=5000), got {item!r}")
    return key, value


def _override_kind(path: str, current: Any, exists: bool) -> Tuple[Optional[type], bool]:
    field = SCHEMA.get(path)
    if field is not None:
        return field.kind, field.nullable
    if not exists or current is None:
        return None, True
    if isinstance(current, bool):
        return bool, False
    if isinstance(current, numbers.Integral):
        return int, False
    if isinstance(current, numbers.Real):
        return float, False
    if isinstance(current, (list, tuple)):
        return list, False
    for kind in (str, dict):
        if isinstance(current, kind):
            return kind, False
    return None, True


def apply_overrides(cfg: Dict[str, Any], overrides: Iterable[Union[str, Tuple[str, Any]]]) -> Dict[str, Any]:
    """Apply ``--set`` overrides to a resolved config in place and return it.

    Each override is ``"dotted.key=VALUE"`` (VALUE coerced with :func:`coerce_value` to the key's type)
    or a ``(key, value)`` pair (value used as is). The key must exist, except for a new entry directly
    inside a free-form dict (:data:`FREE_FORM`: ``env.kwargs.<name>``, ``learner.monitor_windows.<key>``).
    """
    known = _known_paths(cfg)
    for item in overrides:
        if isinstance(item, tuple):
            path, raw, is_text = item[0], item[1], False
        else:
            path, raw = parse_override(item)
            is_text = True
        parent_path, _, leaf = path.rpartition(".")
        try:
            parent = get_by_path(cfg, parent_path) if parent_path else cfg
        except KeyError:
            parent = None
        exists = isinstance(parent, dict) and leaf in parent
        free = parent_path in FREE_FORM
        if not exists and not (free and isinstance(parent, dict)):
            owner = ""
            policy_type = cfg.get("policy", {}).get("type") if isinstance(cfg.get("policy"), dict) else None
            if path.startswith("policy.") and policy_type is not None:
                owner = f" for policy {policy_type!r}"
            raise _unknown_key_error(path, known, owner)
        if exists and isinstance(parent[leaf], dict) and parent[leaf] and path not in FREE_FORM:
            subkeys = ", ".join(f"{path}.{k}" for k in parent[leaf])
            raise ConfigError(f"--set {path}: '{path}' is a section; set its keys one by one ({subkeys})")
        if is_text:
            kind, nullable = _override_kind(path, parent.get(leaf), exists)
            value = coerce_value(path, raw, kind, nullable)
        else:
            value = copy.deepcopy(raw)
        parent[leaf] = value
    return cfg


# ------------------------------------------------------------------------------------------ loading
_loaded_files: Dict[str, Any] = {}


def _module_name_for(path: Path) -> str:
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:10]
    stem = "".join(c if c.isalnum() else "_" for c in path.stem)
    return f"rlearn_user_config.{stem}_{digest}"


def import_file(path: Union[str, Path], fresh: bool = False) -> Any:
    """Execute the Python file ``path`` as a module and return the module.

    A file is executed once per process (later calls return the same module) unless ``fresh``, which
    executes it again (a config file read by :func:`load_config` may have changed since).

    The module is registered in ``sys.modules`` under a private name (``rlearn_user_config.<stem>_<hash>``)
    so that classes defined there are picklable and an ``if __name__ == "__main__":`` block does not run.
    Errors while executing it become a :class:`ConfigError` naming the file and the line.
    """
    path = Path(path).expanduser().resolve()
    key = str(path)
    if key in _loaded_files and not fresh:
        return _loaded_files[key]
    if not path.is_file():
        raise ConfigError(f"config file {str(path)!r} does not exist")
    name = _module_name_for(path)
    if "rlearn_user_config" not in sys.modules:
        package = type(sys)("rlearn_user_config")
        package.__path__ = []  # a namespace for the executed config files
        sys.modules["rlearn_user_config"] = package
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"cannot load {str(path)!r} as a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        del sys.modules[name]
        raise ConfigError(f"syntax error in config file {str(path)!r}, line {exc.lineno}: {exc.msg}") from exc
    except ConfigError:
        del sys.modules[name]
        raise
    except Exception as exc:
        del sys.modules[name]
        line = _error_line(exc, path)
        raise ConfigError(
            f"config file {str(path)!r} raised {type(exc).__name__}{line}: {exc}"
        ) from exc
    _loaded_files[key] = module
    return module


def _error_line(exc: BaseException, path: Path) -> str:
    tb = exc.__traceback__
    line = None
    while tb is not None:
        if Path(tb.tb_frame.f_code.co_filename).resolve() == path:
            line = tb.tb_lineno
        tb = tb.tb_next
    return f" at line {line}" if line is not None else ""


def _bundled_names() -> List[str]:
    from rlearn.configs import available_configs

    return available_configs()


def config_source(spec: str) -> Tuple[str, str]:
    """Where ``rlearn train CONFIG`` takes its config from: ``("file", path)`` or ``("bundled", name)``.

    A string ending in ``.py`` or naming an existing file is a file; anything else must be a bundled
    config name. An unknown name raises :class:`ConfigError` listing the bundled configs.
    """
    if not isinstance(spec, str) or not spec:
        raise ConfigError(f"a config is a .py file or a bundled config name, got {spec!r}")
    path = Path(spec).expanduser()
    if spec.endswith(".py") or path.is_file() or "/" in spec or "\\" in spec:
        if not path.is_file():
            raise ConfigError(f"config file {spec!r} does not exist")
        return "file", str(path.resolve())
    names = _bundled_names()
    if spec not in names:
        close = difflib.get_close_matches(spec, names, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        listing = ", ".join(names) if names else "(none)"
        raise ConfigError(f"no config file or bundled config named {spec!r}{hint} (bundled configs: {listing})")
    return "bundled", spec


def _raw_config(spec: Union[str, Path, Mapping[str, Any]]) -> Tuple[Dict[str, Any], Optional[str]]:
    """The user's config dict (deep copy) and the default experiment name."""
    if isinstance(spec, Mapping):
        return copy.deepcopy(dict(spec)), None
    kind, where = config_source(str(spec))
    if kind == "bundled":
        module = importlib.import_module(f"rlearn.configs.{where}")
        origin = f"bundled config {where!r}"
        default_name = where
    else:
        module = import_file(where, fresh=True)
        origin = f"config file {where!r}"
        default_name = Path(where).stem
    raw = getattr(module, "config", None)
    if not isinstance(raw, Mapping):
        found = "nothing" if raw is None else type(raw).__name__
        raise ConfigError(f"{origin} must define a dict named 'config' (config = dict(...)), found {found}")
    return copy.deepcopy(dict(raw)), default_name


def load_config(
    spec: Union[str, Path, Mapping[str, Any]],
    overrides: Iterable[Union[str, Tuple[str, Any]]] = (),
    seed: Optional[int] = None,
) -> Dict[str, Any]:
    """Load and resolve a config.

    Args:
        spec: a config file path, a bundled config name, or a dict.
        overrides: ``--set`` items, ``"dotted.key=VALUE"`` strings or ``(key, value)`` pairs, applied
            after the defaults (an unknown key is an error with suggestions).
        seed: if not None, replaces ``seed`` (``rlearn train --seed``).

    Returns:
        The resolved config (see :func:`resolve_config`).
    """
    raw, default_name = _raw_config(spec)
    overrides = list(overrides)
    if seed is not None:
        overrides.append(("seed", seed))
    return resolve_config(raw, overrides=overrides, default_exp_name=default_name)


def _merge_section(defaults: Mapping[str, Any], user: Mapping[str, Any], prefix: str, known: Sequence[str]) -> Dict[str, Any]:
    merged = copy.deepcopy(dict(defaults))
    for key, value in user.items():
        path = f"{prefix}{key}"
        if not isinstance(key, str):
            raise ConfigError(f"config keys must be strings, got {key!r} in '{prefix[:-1] or 'the top level'}'")
        if key not in merged:
            raise _unknown_key_error(path, known)
        if isinstance(merged[key], dict) and path not in FREE_FORM and path != "policy":
            if not isinstance(value, Mapping):
                raise ConfigError(f"config key '{path}' is a section and must be a dict, got {value!r}")
            merged[key] = _merge_section(merged[key], value, f"{path}.", known)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _import_custom(items: Sequence[str]) -> None:
    for item in items:
        if item.endswith(".py") or "/" in item or "\\" in item:
            import_file(item)
            continue
        try:
            importlib.import_module(item)
        except ImportError as exc:
            raise ConfigError(f"custom_imports: cannot import {item!r} ({exc})") from exc


def _policy_source_file(cls: type) -> Optional[str]:
    """The file a policy class must be loaded from when its module cannot be imported by name."""
    module = sys.modules.get(cls.__module__)
    if module is None or not (cls.__module__ == "__main__" or cls.__module__.startswith("rlearn_user_config.")):
        return None
    file = getattr(module, "__file__", None)
    return str(Path(file).resolve()) if file else None


def resolve_config(
    raw: Mapping[str, Any],
    overrides: Iterable[Union[str, Tuple[str, Any]]] = (),
    default_exp_name: Optional[str] = None,
) -> Dict[str, Any]:
    """Merge ``raw`` over :data:`DEFAULTS`, complete the policy section, apply ``overrides``, validate.

    Steps: unknown framework keys are errors (with suggestions); ``custom_imports`` are imported;
    ``policy.type`` is resolved with :func:`rlearn.registry.get_policy_class` and the policy section is merged
    over the class's ``default_config`` (an unknown policy key is an error naming the policy); the
    overrides are applied; every framework value is checked against its expected type and range.
    A policy defined in ``__main__`` or in an executed config file has that file added to
    ``custom_imports``, so the dumped config can be loaded on its own. Resolving twice is harmless.
    """
    if not isinstance(raw, Mapping):
        raise ConfigError(f"a config must be a dict, got {type(raw).__name__}")
    overrides = list(overrides)
    known = _known_paths(DEFAULTS)
    cfg = _merge_section(DEFAULTS, raw, "", known)
    if not isinstance(cfg["policy"], Mapping):
        raise ConfigError(f"config key 'policy' is a section and must be a dict, got {cfg['policy']!r}")
    cfg["policy"] = {"type": None, **copy.deepcopy(dict(cfg["policy"]))}

    # framework overrides first (their mistakes are found before any policy code is imported), then the
    # policy's own keys once its defaults are known
    paths = [_override_path(o) for o in overrides]
    late = [o for o, path in zip(overrides, paths) if path.startswith("policy.") and path != "policy.type"]
    apply_overrides(cfg, [o for o, path in zip(overrides, paths) if not (path.startswith("policy.") and path != "policy.type")])
    for path in SCHEMA:  # framework values are checked before any policy code is imported
        if path not in ("policy.type", "exp_name") or get_by_path(cfg, path) is not None:
            _check_field(cfg, path)
    _import_custom(cfg["custom_imports"])

    policy_type = cfg["policy"]["type"]
    if policy_type is None:
        raise ConfigError("config key 'policy.type' is not set: name a policy (e.g. policy=dict(type='td3'))")
    _check_field(cfg, "policy.type")
    policy_cls = _policy_class(policy_type)
    cfg["policy"] = _merge_policy(policy_cls, policy_type, cfg["policy"])
    source = _policy_source_file(policy_cls)
    if source is not None and source not in cfg["custom_imports"]:
        cfg["custom_imports"] = [*cfg["custom_imports"], source]

    apply_overrides(cfg, late)
    if cfg["exp_name"] is None:
        cfg["exp_name"] = default_exp_name or str(cfg["policy"]["type"]).replace(":", "_").replace(".", "_")
    validate_config(cfg)
    return cfg


def _override_path(item: Union[str, Tuple[str, Any]]) -> str:
    if isinstance(item, tuple):
        return item[0]
    return parse_override(item)[0]


def _policy_class(policy_type: str) -> type:
    from rlearn.registry import get_policy_class

    try:
        return get_policy_class(policy_type)
    except KeyError as exc:
        message = exc.args[0] if exc.args else str(exc)
        raise ConfigError(f"policy.type: {message}") from exc
    except (ImportError, AttributeError, ValueError, TypeError) as exc:
        raise ConfigError(f"policy.type {policy_type!r}: {type(exc).__name__}: {exc}") from exc


def _merge_policy(cls: type, policy_type: str, section: Mapping[str, Any]) -> Dict[str, Any]:
    defaults = dict(getattr(cls, "default_config", {}) or {})
    merged: Dict[str, Any] = {"type": policy_type, **copy.deepcopy(defaults)}
    known = ["policy.type", *(f"policy.{p}" for p in _known_paths(defaults))]
    owner = f" for policy {policy_type!r}"

    def merge(into: Dict[str, Any], user: Mapping[str, Any], prefix: str) -> None:
        for key, value in user.items():
            path = f"{prefix}{key}"
            if path == "policy.type":
                continue
            if key not in into:
                raise _unknown_key_error(path, known, owner)
            if isinstance(into[key], dict) and isinstance(value, Mapping):
                merge(into[key], value, f"{path}.")
            else:
                into[key] = copy.deepcopy(value)

    merge(merged, section, "policy.")
    return merged


def _check_field(cfg: Mapping[str, Any], path: str) -> None:
    field = SCHEMA[path]
    value = get_by_path(cfg, path)
    if value is None:
        if field.nullable:
            return
        raise ConfigError(f"config key '{path}' must be {field.describe()}, got None")
    ok = isinstance(value, field.kind) and not (field.kind is int and isinstance(value, bool))
    if field.kind is float and isinstance(value, numbers.Real) and not isinstance(value, bool):
        ok = True
    if field.kind is int and isinstance(value, numbers.Integral) and not isinstance(value, bool):
        ok = True
    if field.kind is list and isinstance(value, tuple):
        ok = True
    if not ok:
        raise ConfigError(f"config key '{path}' must be {field.describe()}, got {type(value).__name__} {value!r}")
    if field.check is not None:
        complaint = field.check(value)
        if complaint:
            # list and dict complaints name the bad item themselves
            shown = "" if isinstance(value, (list, tuple, dict)) else f", got {value!r}"
            raise ConfigError(f"config key '{path}' {complaint}{shown}")


def validate_config(cfg: Mapping[str, Any]) -> None:
    """Check every framework key of a resolved config (types, ranges) and that all values are plain
    Python literals (so the config can be dumped and read back). Raises :class:`ConfigError`."""
    for path in SCHEMA:
        _check_field(cfg, path)
    for path, value in flatten(cfg, stop=()).items():
        if not _is_plain(value):
            raise ConfigError(
                f"config key '{path}' must hold plain Python values (dict, list, str, number, bool, None), "
                f"got {type(value).__name__}"
            )
    for path in ("train.updates_per_step", "eval.stop_value"):
        value = get_by_path(cfg, path)
        if isinstance(value, numbers.Integral) and not isinstance(value, bool):
            _set_by_path(cfg, path, float(value))


def _set_by_path(cfg: Mapping[str, Any], path: str, value: Any) -> None:
    parent_path, _, leaf = path.rpartition(".")
    parent = get_by_path(cfg, parent_path) if parent_path else cfg
    parent[leaf] = value


def default_work_dir(cfg: Mapping[str, Any]) -> Path:
    """``work_dirs/<exp_name>`` relative to the current directory."""
    return Path("work_dirs") / str(cfg["exp_name"])


# -------------------------------------------------------------------------------------------- dump
_DUMP_HEADER = '''\
# Resolved configuration of experiment {name!r}, written by rlearn {version} on {date}.
# Every default is filled in. Run it again with:
#     rlearn train {path}
# or continue this run with:
#     rlearn train {path} --work-dir {work_dir} --resume
inf = float("inf")
nan = float("nan")

config = '''


def dump_config(cfg: Mapping[str, Any], path: Union[str, Path]) -> Path:
    """Write ``cfg`` as a Python config file (``config = {...}``) that :func:`load_config` reads back
    to an equal dict. Returns the path. Written atomically (temporary file + rename)."""
    from rlearn import __version__

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    body = pprint.pformat(dict(cfg), indent=1, width=100, sort_dicts=False)
    text = _DUMP_HEADER.format(
        name=cfg.get("exp_name"),
        version=__version__,
        date=datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S"),
        path=path,
        work_dir=path.parent,
    ) + body + "\n"
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return path
