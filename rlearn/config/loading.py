"""Loading a config (a Python file, a bundled config or a dict) and resolving it into a nested dict of plain,
checked values: defaults filled in (the policy's from its class), ``--set`` overrides applied. A config file runs
as a module under a private name (its ``if __name__ == "__main__":`` block does not run)."""

from __future__ import annotations

import copy
import difflib
import hashlib
import importlib
import importlib.util
import sys
import traceback
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from rlearn.config.errors import ConfigError
from rlearn.config.keys import get_by_path, known_paths, merge_section, validate_config, validate_keys
from rlearn.config.overrides import Override, apply_overrides, parse_override
from rlearn.config.policy_keys import policy_keys, validate_policy_section
from rlearn.config.schema import SCHEMA, defaults

__all__ = ["load_config", "resolve_config", "import_file", "config_source", "imports_named"]

_loaded_files: Dict[str, Any] = {}
#: the package every executed config or ``custom_imports`` file is registered under (only in that process)
USER_PACKAGE = "rlearn_user_config"


def user_modules() -> List[Any]:
    """The modules of the files :func:`import_file` executed in this process (other processes cannot import them)."""
    return [module for name, module in list(sys.modules.items()) if name.startswith(f"{USER_PACKAGE}.")]


def import_file(path: Union[str, Path], fresh: bool = False) -> Any:
    """Execute the Python file ``path`` as a module (once per process unless ``fresh``) and return it, registered
    as ``rlearn_user_config.<stem>_<hash>`` (so its classes pickle); an error in it is a :class:`ConfigError`
    naming the file and line."""
    path = Path(path).expanduser().resolve()
    key = str(path)
    if key in _loaded_files and not fresh:
        return _loaded_files[key]
    if not path.is_file():
        raise ConfigError(f"config file {str(path)!r} does not exist")
    digest = hashlib.sha1(key.encode()).hexdigest()[:10]
    name = f"{USER_PACKAGE}.{''.join(c if c.isalnum() else '_' for c in path.stem)}_{digest}"
    if USER_PACKAGE not in sys.modules:
        package = type(sys)(USER_PACKAGE)
        package.__path__ = []  # a namespace for the executed config files
        sys.modules[USER_PACKAGE] = package
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"cannot load {str(path)!r} as a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        if isinstance(exc, ConfigError):
            raise
        if isinstance(exc, SyntaxError):
            raise ConfigError(f"syntax error in config file {str(path)!r}, line {exc.lineno}: {exc.msg}") from exc
        lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).resolve() == path]
        line = f" at line {lines[-1]}" if lines else ""
        raise ConfigError(f"config file {str(path)!r} raised {type(exc).__name__}{line}: {exc}") from exc
    _loaded_files[key] = module
    return module


def config_source(spec: str) -> Tuple[str, str]:
    """Where ``rlearn train CONFIG`` takes its config from: ``("file", path)`` or ``("bundled", name)``; an unknown
    name raises :class:`ConfigError` listing the bundled configs."""
    if not isinstance(spec, str) or not spec:
        raise ConfigError(f"a config is a .py file or a bundled config name, got {spec!r}")
    path = Path(spec).expanduser()
    if spec.endswith(".py") or path.is_file() or "/" in spec or "\\" in spec:
        if not path.is_file():
            raise ConfigError(f"config file {spec!r} does not exist")
        return "file", str(path.resolve())
    from rlearn.configs import available_configs

    names = available_configs()
    if spec not in names:
        close = difflib.get_close_matches(spec, names, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        listing = ", ".join(names) if names else "(none)"
        raise ConfigError(f"no config file or bundled config named {spec!r}{hint} (bundled configs: {listing})")
    return "bundled", spec


def load_config(spec: Union[str, Path, Mapping[str, Any]], overrides: Iterable[Override] = (),
                seed: Optional[int] = None) -> Dict[str, Any]:
    """Load a config file, bundled config name or dict and resolve it (:func:`resolve_config`) with ``overrides``
    (``"dotted.key=VALUE"`` strings or ``(key, value)`` pairs) and ``seed`` (if not None)."""
    raw: Any = spec
    default_name: Optional[str] = None
    if not isinstance(spec, Mapping):
        kind, where = config_source(str(spec))
        bundled = kind == "bundled"
        module = importlib.import_module(f"rlearn.configs.{where}") if bundled else import_file(where, fresh=True)
        default_name = where if bundled else Path(where).stem
        raw = getattr(module, "config", None)
        if not isinstance(raw, Mapping):
            origin = f"bundled config {where!r}" if bundled else f"config file {where!r}"
            found = "nothing" if raw is None else type(raw).__name__
            raise ConfigError(f"{origin} must define a dict named 'config' (config = dict(...)), found {found}")
    overrides = [*overrides, *([("seed", seed)] if seed is not None else [])]
    return resolve_config(raw, overrides=overrides, default_exp_name=default_name)


def _import_custom(items: Sequence[str]) -> None:
    for item in items:
        if item.endswith(".py") or "/" in item or "\\" in item:
            import_file(item)
            continue
        try:
            importlib.import_module(item)
        except ImportError as exc:
            raise ConfigError(f"custom_imports: cannot import {item!r} ({exc})") from exc


def imports_named(cfg: Mapping[str, Any]) -> List[str]:
    """What resolving and building ``cfg`` would import (whose code it would run), each as ``"<key> <value>"``:
    ``custom_imports`` items, a ``policy.type`` import path (``"pkg.module:Class"``) and an ``env.id`` with a
    module prefix (``"pkg.module:MyEnv-v0"``); empty for a config naming only bundled, registered parts."""
    from rlearn.registry import registered_policies

    named: List[str] = []
    imports = cfg.get("custom_imports") or []
    named += [f"custom_imports {item!r}" for item in (imports if isinstance(imports, (list, tuple)) else [imports])]
    policy_type = (cfg.get("policy") or {}).get("type") if isinstance(cfg.get("policy"), Mapping) else None
    if isinstance(policy_type, str) and ":" in policy_type and policy_type not in registered_policies():
        named.append(f"policy.type {policy_type!r}")
    env_id = (cfg.get("env") or {}).get("id") if isinstance(cfg.get("env"), Mapping) else None
    if isinstance(env_id, str) and ":" in env_id:
        named.append(f"env.id {env_id!r}")
    return named


def _policy_source_file(cls: type) -> Optional[str]:
    """The file a policy class must be loaded from when its module cannot be imported by name."""
    module = sys.modules.get(cls.__module__)
    if module is None or not (cls.__module__ == "__main__" or cls.__module__.startswith(f"{USER_PACKAGE}.")):
        return None
    file = getattr(module, "__file__", None)
    return str(Path(file).resolve()) if file else None


def resolve_config(raw: Mapping[str, Any], overrides: Iterable[Override] = (),
                   default_exp_name: Optional[str] = None) -> Dict[str, Any]:
    """Merge ``raw`` over the defaults, import ``custom_imports``, merge the policy section over the policy's
    ``default_config``, apply ``overrides``, check every value (idempotent). A policy defined in ``__main__`` or an
    executed config file gets that file in ``custom_imports``, so the dumped config loads on its own."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"a config must be a dict, got {type(raw).__name__}")
    cfg = merge_section(defaults(), raw)
    if not isinstance(cfg["policy"], Mapping):
        raise ConfigError(f"config key 'policy' is a section and must be a dict, got {cfg['policy']!r}")
    cfg["policy"] = {"type": None, **copy.deepcopy(dict(cfg["policy"]))}

    # framework overrides first (their mistakes are found before any policy code is imported), then the
    # policy's own keys once its defaults are known
    early: List[Override] = []
    late: List[Override] = []
    for item in overrides:
        path = item[0] if isinstance(item, tuple) else parse_override(item)[0]
        (late if path.startswith("policy.") and path != "policy.type" else early).append(item)
    apply_overrides(cfg, early)
    unset = [path for path in ("policy.type", "exp_name") if get_by_path(cfg, path) is None]
    validate_keys(cfg, {path: key for path, key in SCHEMA.items() if path not in unset})
    _import_custom(cfg["custom_imports"])

    policy_type = cfg["policy"]["type"]
    if policy_type is None:
        raise ConfigError("config key 'policy.type' is not set: name a policy (e.g. policy=dict(type='td3'))")
    policy_cls = _policy_class(policy_type)
    policy_defaults = {"type": policy_type, **(getattr(policy_cls, "default_config", {}) or {})}
    known = [f"policy.{path}" for path in known_paths(policy_defaults)]
    owner = f" for policy {policy_type!r}"
    cfg["policy"] = merge_section(policy_defaults, cfg["policy"], "policy.", known, owner=owner)
    source = _policy_source_file(policy_cls)
    if source is not None and source not in cfg["custom_imports"]:
        cfg["custom_imports"] = [*cfg["custom_imports"], source]

    declared = policy_keys(policy_cls)
    apply_overrides(cfg, late, keys=declared)
    validate_policy_section(cfg["policy"], declared)
    if cfg["exp_name"] is None:
        cfg["exp_name"] = default_exp_name or str(cfg["policy"]["type"]).replace(":", "_").replace(".", "_")
    validate_config(cfg)
    return cfg


def _policy_class(policy_type: str) -> type:
    from rlearn.registry import get_policy_class

    try:
        return get_policy_class(policy_type)
    except KeyError as exc:
        message = exc.args[0] if exc.args else str(exc)
        raise ConfigError(f"policy.type: {message}") from exc
    except (ImportError, AttributeError, ValueError, TypeError) as exc:
        raise ConfigError(f"policy.type {policy_type!r}: {type(exc).__name__}: {exc}") from exc
