"""optuna-dashboard on a study of ``rlearn tune``, served on 127.0.0.1 and shown in headless Chromium.

``python -m tests.experiments.dashboard STORAGE_URL STUDY_NAME OUT.png`` takes the picture in
docs/experiments.md; ``test_experiments_tune.py`` runs the same check (slow; skipped without Chromium or
optuna-dashboard).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.ui.browser import LOOPBACK, free_port, screenshot, wait_for_http

__all__ = ["dashboard_screenshot", "dashboard_binary"]


def dashboard_binary() -> str:
    """The ``optuna-dashboard`` script beside this Python, or on PATH ("" when absent)."""
    beside = Path(sys.executable).with_name("optuna-dashboard")
    return str(beside) if beside.is_file() else (shutil.which("optuna-dashboard") or "")


def dashboard_screenshot(storage: str, study_name: str, out: Path, wait_for: tuple = ()) -> str:
    """Serve ``storage`` with optuna-dashboard, open the study's page, save a PNG; the page's text."""
    port = free_port()
    server = subprocess.Popen([dashboard_binary(), storage, "--host", LOOPBACK, "--port", str(port), "--quiet"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://{LOOPBACK}:{port}/dashboard/"
        wait_for_http(url, 90)
        text = screenshot(url, out, wait_for=(study_name,), timeout=90)
        assert study_name in text
        study_url = f"http://{LOOPBACK}:{port}/dashboard/studies/1"
        return screenshot(study_url, out, wait_for=wait_for, timeout=90, height=1100, settle=4.0)
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


if __name__ == "__main__":
    print(dashboard_screenshot(sys.argv[1], sys.argv[2], Path(sys.argv[3]), tuple(sys.argv[4:]))[:2000])
