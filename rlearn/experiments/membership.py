"""Which work dirs of an experiment dir belong to the experiment, read from their ``config.py`` as data.

A report over a directory someone sent runs none of its code: ``config.py`` is read as the literal rlearn
writes (:func:`read_config_literal`), never executed. A run belongs when its config equals the experiment's
apart from :data:`IGNORED_KEYS`; in a study's dir, whose trials differ by design, when it shares
:data:`IDENTITY_KEYS`.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

__all__ = ["read_config_literal", "config_differences", "IGNORED_KEYS", "IDENTITY_KEYS", "Membership", "check_membership"]

#: config keys in which the runs of one experiment may differ
IGNORED_KEYS = ("seed", "num_threads", "exp_name", "learner.writers", "eval.video", "eval.video_freq")
#: the keys every trial of a study shares: environment, algorithm, budget
IDENTITY_KEYS = ("env.id", "policy.type", "train.max_env_steps")
_MISSING = object()


def read_config_literal(path: Path) -> Dict[str, Any]:
    """The dict of ``config = {...}`` in a ``config.py`` as rlearn writes it (a literal; the names ``inf`` and
    ``nan`` it defines are read as the floats), without executing anything. ValueError for anything else."""
    tree = ast.parse(Path(path).read_text(encoding="utf-8"), filename=str(path))
    found = [node.value for node in tree.body if isinstance(node, ast.Assign)
             and any(isinstance(target, ast.Name) and target.id == "config" for target in node.targets)]
    if not found:
        raise ValueError("no 'config = {...}' assignment")

    class _Floats(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            if node.id in ("inf", "nan"):
                return ast.copy_location(ast.Constant(float(node.id)), node)
            return node

    value = ast.literal_eval(_Floats().visit(found[-1]))
    if not isinstance(value, dict):
        raise ValueError(f"'config' is a {type(value).__name__}, not a dict")
    return value


def _same(a: Any, b: Any) -> bool:
    return a == b or repr(a) == repr(b)  # nan == nan for configs


def config_differences(reference: Mapping[str, Any], cfg: Mapping[str, Any], keys: Optional[Sequence[str]] = None,
                       ignored: Sequence[str] = IGNORED_KEYS) -> List[str]:
    """``"key: reference value -> run value"`` for each flattened key (of ``keys``, default all) that differs,
    ``ignored`` keys left out."""
    from rlearn.config import flatten

    a, b = flatten(reference), flatten(cfg)
    names = list(keys) if keys is not None else sorted(set(a) | set(b), key=lambda k: (k not in IDENTITY_KEYS, k))
    return [f"{k}: {_short(a.get(k, '<absent>'))} -> {_short(b.get(k, '<absent>'))}" for k in names
            if k not in ignored and not _same(a.get(k, _MISSING), b.get(k, _MISSING))]


def _short(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _fingerprint(cfg: Mapping[str, Any]) -> str:
    from rlearn.config import flatten

    return repr(sorted((k, repr(v)) for k, v in flatten(cfg).items() if k not in IGNORED_KEYS))


class Membership:
    """The outcome of :func:`check_membership`: the experiment's config (None when no run has one), where it
    came from, the runs that belong, and ``"<dir>: left out, ..."`` for each that does not."""

    def __init__(self, reference: Optional[Dict[str, Any]], source: str, kept: List[Path], left_out: List[str],
                 warnings: List[str]) -> None:
        self.reference, self.source, self.kept, self.left_out, self.warnings = reference, source, kept, left_out, warnings


def _read(path: Path, warnings: List[str]) -> Optional[Dict[str, Any]]:
    if not path.is_file():
        return None
    try:
        return read_config_literal(path)
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError, RecursionError, MemoryError) as exc:
        warnings.append(f"{path} is not a config rlearn wrote, so it was read as nothing and not run "
                        f"({type(exc).__name__}: {' '.join(str(exc).split())[:120]})")
        return None


def check_membership(exp_dir: Path, runs: Sequence[Path]) -> Membership:
    """Split ``runs`` (work dirs of ``exp_dir``) into those of the experiment, whose config is ``exp_dir``'s
    ``config.py`` or else the one most runs share, and those left out. Runs are kept unchecked only when
    neither the experiment nor any run has a readable config."""
    exp_dir = Path(exp_dir)
    warnings: List[str] = []
    configs = {run: _read(Path(run) / "config.py", warnings) for run in runs}
    reference = _read(exp_dir / "config.py", warnings) if exp_dir not in configs else None
    source = f"{exp_dir / 'config.py'}"
    if reference is None:
        readable = [cfg for cfg in configs.values() if cfg is not None]
        if not readable:
            return Membership(None, "", list(runs), [], warnings)
        counts = Counter(_fingerprint(cfg) for cfg in readable)
        best = max(counts.values())
        reference = next(cfg for cfg in readable if counts[_fingerprint(cfg)] == best)
        source = "the config most of its runs share"
    keys = IDENTITY_KEYS if (exp_dir / "tune.json").is_file() else None
    kept: List[Path] = []
    left_out: List[str] = []
    for run, cfg in configs.items():
        if cfg is None:
            left_out.append(f"{run}: left out, it has no config.py that rlearn wrote, so it cannot be told to belong "
                            "to this experiment")
            continue
        if changes := config_differences(reference, cfg, keys):
            shown = "; ".join(changes[:4]) + ("; ..." if len(changes) > 4 else "")
            left_out.append(f"{run}: left out, not a run of this experiment ({shown})")
            continue
        kept.append(run)
    return Membership(reference, source, kept, left_out, warnings)


def describe_budget(envsteps: Sequence[int], budget: Any) -> str:
    """``"6144 env steps per run (train.max_env_steps 6000)"``: what the runs did, with the configured budget
    when a run's count differs from it ("" when no run has an env step)."""
    done = sorted({int(s) for s in envsteps if s})
    if not done:
        return ""
    text = f"{done[0]} env steps per run" if len(done) == 1 else f"{done[0]} to {done[-1]} env steps per run"
    if budget is not None and any(s != budget for s in done):
        shown = int(budget) if isinstance(budget, float) and budget.is_integer() else budget
        text += f" (train.max_env_steps {shown})"
    return text
