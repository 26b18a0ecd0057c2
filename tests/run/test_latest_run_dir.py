"""``--resume`` without ``--work-dir`` continues the most recent run of the exp_name (latest_run_dir)."""

from __future__ import annotations

import os
from pathlib import Path

from rlearn.config import load_config
from rlearn.run.workdir import WorkDir, choose_work_dir, latest_run_dir


def _checkpoint(run: Path, mtime_s: int) -> None:
    (run / "ckpt").mkdir(parents=True, exist_ok=True)
    path = run / "ckpt" / "latest.pt"
    path.write_bytes(b"x")
    os.utime(path, ns=(mtime_s * 10**9, mtime_s * 10**9))


def test_latest_run_dir_picks_the_newest_checkpoint(tmp_path):
    default = tmp_path / "work_dirs" / "td3"
    assert latest_run_dir(default) == default  # nothing at all: the default (the resume then says why)
    _checkpoint(default, 1_000)
    assert latest_run_dir(default) == default
    _checkpoint(tmp_path / "work_dirs" / "td3_2", 3_000)
    _checkpoint(tmp_path / "work_dirs" / "td3_10", 2_000)  # numeric suffix, not text order
    (tmp_path / "work_dirs" / "td3_3").mkdir()  # a directory without checkpoints is never chosen
    (tmp_path / "work_dirs" / "td3_x" / "ckpt").mkdir(parents=True)  # not a suffix of td3
    _checkpoint(tmp_path / "work_dirs" / "td3_other", 9_000)
    assert latest_run_dir(default) == tmp_path / "work_dirs" / "td3_2"
    _checkpoint(tmp_path / "work_dirs" / "td3_10", 3_000)  # tie: the higher suffix (created later)
    assert latest_run_dir(default) == tmp_path / "work_dirs" / "td3_10"


def test_resume_without_work_dir_continues_the_most_recent_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = load_config("td3_pendulum")
    _checkpoint(Path("work_dirs/td3_pendulum"), 1_000)
    _checkpoint(Path("work_dirs/td3_pendulum_2"), 2_000)
    dirs = choose_work_dir(cfg, None, True)
    dirs.release()  # rank 0 locks the directory it resumes
    assert (dirs.path, dirs.moved_from) == (Path("work_dirs/td3_pendulum_2"), None)
    seen = []  # ranks > 0 take rank 0's choice
    chosen = choose_work_dir(cfg, None, True, rank=1, broadcast=lambda obj: seen.append(obj) or Path("w/r0"))
    assert seen == [None] and chosen == WorkDir(Path("w/r0")) and chosen.lock is None
