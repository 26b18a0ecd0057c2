"""Writing a resolved config as Python, one key per line commented with its help: ``--print-config`` and
``<work_dir>/config.py`` (which :func:`~rlearn.config.load_config` reads back to an equal dict)."""

from __future__ import annotations

import datetime
import pprint
import re
from pathlib import Path
from typing import Any, List, Mapping, Optional, Union

from rlearn.config.policy_keys import policy_keys_of
from rlearn.config.schema import SCHEMA, SECTIONS
from rlearn.config.spec import Key

__all__ = ["format_config", "dump_config", "default_work_dir", "short_help"]


def short_help(path: str, limit: int = 90, keys: Optional[Mapping[str, Key]] = None) -> str:
    """The first phrase of the help of a framework key (or one in ``keys``), markdown removed, at most ``limit``
    characters; ``""`` for an undeclared key."""
    key = SCHEMA.get(path) or (keys or {}).get(path)
    if key is None:
        return ""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", key.help).replace("`", "")
    text = re.split(r"; |(?<!e\.g)\. |,? e\.g\. | \(e\.g\. ", text, maxsplit=1)[0]
    if len(text) > limit:
        text = text[: limit - 3].rsplit(" ", 1)[0].rstrip(",;:(") + "..."
    return text


def format_config(cfg: Mapping[str, Any], comments: bool = True) -> str:
    """``cfg`` as a Python dict literal, one key per line (sections nested), each declared key commented with its
    help unless ``comments=False``."""
    lines: List[str] = ["{"]
    declared = policy_keys_of(cfg) if comments else {}

    def walk(node: Mapping[str, Any], prefix: str, indent: str) -> None:
        for name, value in node.items():
            path = f"{prefix}{name}"
            if isinstance(value, dict) and value and path in SECTIONS:
                lines.append(f"{indent}{name!r}: {{")
                walk(value, f"{path}.", indent + "    ")
                lines.append(f"{indent}}},")
                continue
            # one line; inf and nan come out as names that the dumped file defines
            line = f"{indent}{name!r}: {pprint.pformat(value, width=10_000, sort_dicts=False)},"
            note = short_help(path, keys=declared) if comments else ""
            lines.append(f"{line}  # {note}" if note else line)

    walk(cfg, "", "    ")
    lines.append("}")
    return "\n".join(lines)


_DUMP_HEADER = '''\
# Resolved configuration of experiment {name!r}, written by rlearn {version} on {date}.
# Every default is filled in (docs/configuration.md describes each key). Run it again with:
#     {again}
# or continue this run with:
#     {resume}
inf = float("inf")
nan = float("nan")

config = '''


def dump_config(cfg: Mapping[str, Any], path: Union[str, Path]) -> Path:
    """Write ``cfg`` as a Python config file (``config = {...}``, commented with each key's help) that
    :func:`~rlearn.config.load_config` reads back to an equal dict, atomically; returns the path."""
    from rlearn import __version__
    from rlearn.executables import shell_command
    from rlearn.fileio import atomic_write_bytes

    path = Path(path)
    text = _DUMP_HEADER.format(
        name=cfg.get("exp_name"),
        version=__version__,
        date=datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S"),
        again=shell_command("rlearn", "train", path),
        resume=shell_command("rlearn", "train", path, "--work-dir", path.parent, "--resume"),
    ) + format_config(cfg) + "\n"
    return atomic_write_bytes(path, text.encode("utf-8"))  # keeps the permissions of the file it replaces


def default_work_dir(cfg: Mapping[str, Any]) -> Path:
    """``work_dirs/<exp_name>`` relative to the current directory."""
    return Path("work_dirs") / str(cfg["exp_name"])
