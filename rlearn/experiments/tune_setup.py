"""Setting up ``rlearn tune``: the space file and the experiment dir, which belongs to one study (see
:mod:`rlearn.experiments.tune`)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

import optuna

from rlearn.experiments.child import ExperimentError, check_numbers, open_experiment_dir, save_manifest
from rlearn.experiments.study import DirLock, storage_error, storage_label

__all__ = ["Space", "load_space", "override_text", "sampled_overrides", "check_numbers", "made_by", "open_tune_dir",
           "check_identity", "create_study", "TUNE_FILE", "STUDY_ID_ATTR"]

TUNE_FILE = "tune.json"
#: the study's user attribute that tells it apart from a study of the same name created anew
STUDY_ID_ATTR = "rlearn_study_id"


@dataclass
class Space:
    """What ``SPACE.py`` defines: ``space(trial) -> overrides`` and optional ``pruner()`` / ``sampler()``."""

    path: Path
    space: Callable[[Any], Mapping[str, Any]]
    pruner: Optional[Callable[[], Any]] = None
    sampler: Optional[Callable[[], Any]] = None


def load_space(path: Path) -> Space:
    """Import ``SPACE.py`` (ExperimentError naming the file when it cannot be run or has no ``space``)."""
    from rlearn.config import ConfigError
    from rlearn.config.loading import import_file

    try:
        module = import_file(path)
    except ConfigError as exc:
        raise ExperimentError(f"--space: {' '.join(str(exc).split())}") from exc
    space = getattr(module, "space", None)
    if not callable(space):
        raise ExperimentError(f"--space {str(path)!r} must define a function space(trial) returning --set overrides, "
                              "e.g. {'policy.lr': trial.suggest_float('lr', 1e-4, 1e-2, log=True)}")
    return Space(Path(path), space, getattr(module, "pruner", None), getattr(module, "sampler", None))


def override_text(key: str, value: Any) -> str:
    """``key=value`` as ``--set`` reads it (a string as it is, anything else as its Python literal)."""
    return f"{key}={value if isinstance(value, str) else repr(value)}"


def _call(space: Space, name: str, *args: Any) -> Any:
    """``SPACE.py``'s function ``name`` called; its exception becomes ExperimentError naming the file."""
    try:
        return getattr(space, name)(*args)
    except Exception as exc:  # noqa: BLE001 - the user's function failed: a mistake in SPACE.py
        raise ExperimentError(f"{space.path}: {name}({'trial' if args else ''}) raised {type(exc).__name__}: "
                              f"{' '.join(str(exc).split())}") from exc


def sampled_overrides(space: Space, trial: Any) -> List[str]:
    """The ``--set`` overrides ``space(trial)`` samples."""
    values = _call(space, "space", trial)
    if not isinstance(values, Mapping) or not all(isinstance(k, str) for k in values):
        raise ExperimentError(f"{space.path}: space(trial) must return a dict of dotted config keys to values, "
                              f"got {type(values).__name__}")
    return [override_text(k, v) for k, v in values.items()]


def made_by(space: Space, name: str, kind: type) -> Any:
    """What ``SPACE.py``'s ``pruner()`` / ``sampler()`` returns, checked to be an Optuna ``kind``."""
    made = _call(space, name)
    if not isinstance(made, kind):
        raise ExperimentError(f"{space.path}: {name}() must return an optuna.{kind.__module__.split('.')[1]}."
                              f"{kind.__name__}, got {type(made).__name__}")
    return made


def open_tune_dir(exp_dir: Path, cfg: Mapping[str, Any], config: str, overrides: Sequence[str], storage: Optional[str],
                  study_name: Optional[str], space_file: Path, notes: List[str]) -> Dict[str, Any]:
    """The manifest of the experiment dir (study name and identity, storage, space file, overrides; new:
    written, with the base config ``config.py``); another study is refused. ``notes`` gets what to tell the
    user."""
    state = open_experiment_dir(exp_dir, cfg, TUNE_FILE, allowed=(DirLock.NAME,))
    if state is None:
        state = {"config": config, "overrides": list(overrides), "space": str(space_file), "storage": storage,
                 "study_name": study_name or cfg["exp_name"]}
        save_manifest(exp_dir, TUNE_FILE, state)
        return state
    if not isinstance(state, dict) or not isinstance(state.get("study_name"), str):
        raise ExperimentError(f"{exp_dir / TUNE_FILE}: not a tuning manifest; move it away to start afresh")
    if study_name is not None and study_name != state["study_name"]:
        raise ExperimentError(f"{exp_dir} holds the trials of study {state['study_name']!r}; study "
                              f"{study_name!r} needs its own --out (or leave out --study-name to continue)")
    stored = state.get("storage")
    if stored and stored.startswith("sqlite:///"):
        # a copied dir continues its own study: an SQLite file in the original's dir is replaced by the copy's
        path, own = Path(stored[len("sqlite:///"):]), exp_dir / "study.db"
        if path.name == own.name and own.is_file() and path.parent.resolve() != exp_dir.resolve():
            notes.append(f"{exp_dir} is a copy of {path.parent}: it continues its own study in {own}")
            stored = f"sqlite:///{own.resolve()}"
    state["storage"] = stored
    if storage is not None and storage != stored and storage_label(storage, exp_dir) != storage_label(stored, exp_dir):
        raise ExperimentError(f"{exp_dir} tunes the study in {storage_label(stored, exp_dir)}, not "
                              f"{storage_label(storage, exp_dir)}; give the same --storage or another --out")
    return state


def check_identity(exp_dir: Path, study: Any, label: str, state: Dict[str, Any]) -> None:
    """The study must be the one this dir's trials belong to (not emptied, replaced or recreated); a new
    study is marked, the mark kept in the manifest."""
    found = study.user_attrs.get(STUDY_ID_ATTR)
    if state.get("study_id"):
        mine = exp_dir.resolve()
        if found is not None and found != state["study_id"] and any(
                Path(t.user_attrs.get("work_dir", "/")).parent == mine for t in study.get_trials(deepcopy=False)):
            state["study_id"] = found  # two workers created the study at once: the last one's mark stays
        if found != state["study_id"]:
            raise ExperimentError(f"{label} does not hold the study whose trials are in {exp_dir} (study "
                                  f"{state['study_name']!r} was emptied, replaced or recreated there); choose "
                                  "another --out")
    else:
        if found is None:
            if not study.get_trials(deepcopy=False) and any(exp_dir.glob("trial_*")):
                raise ExperimentError(f"{label} has no trials of study {state['study_name']!r} but {exp_dir} holds "
                                      "trial dirs of it; choose another --out")
            found = uuid.uuid4().hex
            study.set_user_attr(STUDY_ID_ATTR, found)
        state["study_id"] = found
    save_manifest(exp_dir, TUNE_FILE, state)


def create_study(storage: Any, name: str, label: str, sampler: Any, pruner: Any) -> Any:
    """The study ``name`` (maximised) in ``storage``, created when missing; ExperimentError in one line."""
    try:
        return optuna.create_study(storage=storage, study_name=name, direction="maximize", load_if_exists=True,
                                   sampler=sampler, pruner=pruner)
    except Exception as exc:  # noqa: BLE001 - an unreachable, locked or foreign database
        raise ExperimentError(f"--storage {label}: {storage_error(exc, label)}") from exc
