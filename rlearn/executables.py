"""Commands printed for the user (``tensorboard --logdir ...``, ``resume with: rlearn train ...``) that work when
pasted as they are, also from a venv that is not activated (``.venv/bin/tensorboard --logdir work_dirs/td3/tb``).
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Union

__all__ = ["executable", "shell_command"]

#: a console script -> the module that runs the same with ``python -m`` (when the script is missing)
_MODULES = {"rlearn": "rlearn", "tensorboard": "tensorboard.main", "pip": "pip"}


def _shown(path: Path) -> str:
    """``path`` as typed in a shell: relative to the working directory when below it (with a ``/``, so
    the shell does not search ``PATH``), else absolute."""
    absolute = Path(os.path.abspath(path))
    try:
        relative = absolute.relative_to(Path.cwd())
    except ValueError:
        return shlex.quote(str(absolute))
    text = str(relative)
    return shlex.quote(text if os.sep in text else f".{os.sep}{text}")


def executable(name: str) -> str:
    """How to call this environment's ``name`` (``python``, ``rlearn``, ``tensorboard``, ``pip``) in a
    shell: the bare name when ``PATH`` finds this very one, else its path; a console script that is
    missing beside the interpreter runs as ``<python> -m <module>``."""
    python = Path(sys.executable)
    own = python if name == "python" else python.parent / name
    if own.is_file() and os.access(own, os.X_OK):
        # compared without resolving links: a venv's python links to the system's, yet only it sees the venv
        found = shutil.which(name)
        return name if found is not None and os.path.abspath(found) == os.path.abspath(own) else _shown(own)
    module = _MODULES.get(name)
    return name if module is None else f"{executable('python')} -m {module}"


def shell_command(name: str, *args: Union[str, Path]) -> str:
    """``executable(name)`` followed by ``args``, each quoted for a POSIX shell where needed."""
    return " ".join([executable(name), *(shlex.quote(str(arg)) for arg in args)])
