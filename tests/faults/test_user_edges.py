"""Edges users met, each reproduced as the user met it (docs/reliability.md, "Edges users met"): a folder
named ``rlearn`` in the working directory, commands printed for a venv that is not activated, ``--resume``
of a finished run, a refused multi-process resume, and strict mode for misspelt per-key windows."""

from __future__ import annotations

import importlib.util
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Dict

import pytest

from rlearn.checkpoint import read_checkpoint

if "run_fault_helpers" not in sys.modules:  # tests/faults/run_fault_helpers.py, by path (its configs import it so)
    _spec = importlib.util.spec_from_file_location("run_fault_helpers", Path(__file__).with_name("run_fault_helpers.py"))
    sys.modules["run_fault_helpers"] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(sys.modules["run_fault_helpers"])
helpers = sys.modules["run_fault_helpers"]

BIN = Path(sys.executable).parent


def installed_env(path: str = "/usr/bin:/bin") -> Dict[str, str]:
    """The environment of a user who installed rlearn as the README says and did not activate the venv:
    no PYTHONPATH, ``PATH`` without the venv's ``bin``."""
    env = helpers.child_env()
    env.pop("PYTHONPATH", None)
    env["PATH"] = path
    return env


def files_of(work: Path) -> Dict[str, bytes]:
    """Every file of a work dir (but the lock) with its content."""
    return {str(p.relative_to(work)): p.read_bytes() for p in sorted(work.rglob("*")) if p.is_file() and p.name != ".lock"}


# ------------------------------------------------------------------- a folder named rlearn in the cwd
@pytest.mark.parametrize("shadow", ["empty folders", "packages of the user"])
def test_python_m_rlearn_works_beside_folders_named_rlearn_and_policies(tmp_path, shadow):
    for name in ("rlearn", "policies"):
        (tmp_path / name).mkdir()
        if shadow == "packages of the user":
            (tmp_path / name / "__init__.py").write_text("VALUE = 1\n")
    out = subprocess.run([sys.executable, "-m", "rlearn", "train", "--list-configs"], cwd=tmp_path,
                         env=installed_env(), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr[-3000:]
    assert "td3_pendulum" in out.stdout


def test_nproc_runs_the_installed_rlearn_beside_a_folder_named_rlearn(tmp_path):
    """``rlearn train --nproc 2`` from a directory holding packages named ``rlearn`` and ``policies``:
    the launched processes import the installed ones and never run the user's files."""
    for name in ("rlearn", "policies"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(f"open({str(tmp_path / ('imported_' + name))!r}, 'w').close()\n")
    config = helpers.probe_config(tmp_path, max_env_steps=16 * 3)
    out = subprocess.run([str(BIN / "rlearn"), "train", config.name, "--nproc", "2", "--work-dir", "w"],
                         cwd=tmp_path, env=installed_env(), capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "Traceback" not in out.stderr
    assert read_checkpoint(tmp_path / "w" / "ckpt" / "latest.pt")["train_iter"] == 3
    assert not list(tmp_path.glob("imported_*"))
