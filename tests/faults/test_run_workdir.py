"""The run's use of the work-dir layer: lock, start-up checks, resume fallback and pruning (docs/reliability.md, items
1, 3, 7 and 9 as the user meets them through ``rlearn.run``)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rlearn.checkpoint import find_resume_checkpoint, iteration_checkpoints, read_checkpoint
from rlearn.config import ConfigError, load_config
from rlearn.fileio import FileWriteError
from rlearn.run import Trainer, train
from rlearn.workdir_lock import LOCK_NAME, WorkDirLock

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "examples" / "custom_policy.py")


def tiny_cfg(*overrides: str) -> dict:
    """The custom REINFORCE example: 2 envs x 16 steps = 32 env steps per iteration, a checkpoint every 2."""
    return load_config(EXAMPLE, [
        "env.num_envs=2", "policy.rollout_steps=16", "policy.baseline_every=2", "policy.hidden=8",
        "train.max_env_steps=192", "learner.log_freq=3", "eval.freq=none", "eval.episodes=2", "eval.num_envs=2",
        "eval.stop_value=none", "checkpoint.freq=2", *overrides,
    ])


def test_a_work_dir_held_by_a_live_run_is_refused_and_freed_after_the_run(tmp_path):
    held = WorkDirLock(tmp_path / "run").acquire()  # another live run (this process) holds it
    try:
        with pytest.raises(ConfigError, match=r"in use by a live run .*PID .*choose another --work-dir") as refused:
            Trainer(tiny_cfg(), work_dir=tmp_path / "run")
        message = str(refused.value)
        assert message.count("choose another --work-dir") == 1 and message.count("wait") == 1, message
        with pytest.raises(ConfigError, match="in use by a live run"):  # --resume of a running run too
            Trainer(tiny_cfg(), work_dir=tmp_path / "run", resume=True)
    finally:
        held.release()
    result = train(tiny_cfg(), work_dir=tmp_path / "run")
    assert result.train_iter == 6 and not (tmp_path / "run" / LOCK_NAME).exists()  # released at the end


def test_the_default_work_dir_moves_on_when_a_live_run_holds_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = tiny_cfg("exp_name=locked")
    held = WorkDirLock(Path("work_dirs") / "locked").acquire()
    try:
        trainer = Trainer(cfg)
        try:
            assert trainer.work_dir == Path("work_dirs") / "locked_2"
        finally:
            trainer.close()
    finally:
        held.release()


def test_resume_falls_back_to_the_newest_valid_checkpoint_and_says_which(tmp_path):
    work = tmp_path / "run"
    train(tiny_cfg("train.max_env_steps=128"), work_dir=work)  # iterations 1..4: iteration_2.pt, iteration_4.pt
    ckpt = work / "ckpt"
    (ckpt / "latest.pt").write_bytes(b"garbage")  # a kill during the write of latest.pt
    result = train(tiny_cfg(), work_dir=work, resume=True)
    assert (result.train_iter, result.envstep) == (6, 192)
    log = (work / "reinforce_cartpole.log").read_text() if (work / "reinforce_cartpole.log").exists() else \
        next(work.glob("*.log")).read_text()
    assert "--resume: skipped" in log and "latest.pt" in log
    assert "--resume: continuing from" in log and "iteration_4.pt" in log
    assert read_checkpoint(ckpt / "latest.pt")["train_iter"] == 6  # a valid latest.pt again


def test_a_read_only_checkpoint_directory_is_found_at_start_up(tmp_path, monkeypatch):
    work = tmp_path / "run"
    (work / "ckpt").mkdir(parents=True)
    from rlearn.run import trainer as trainer_module

    real = trainer_module.check_writable

    def refuse_ckpt(directory):
        if Path(directory).name == "ckpt":
            raise FileWriteError(directory, PermissionError(13, "Permission denied"), "the directory is not writable")
        return real(directory)

    monkeypatch.setattr(trainer_module, "check_writable", refuse_ckpt)
    with pytest.raises(ConfigError, match=r"ckpt.*Permission denied"):
        Trainer(tiny_cfg(), work_dir=work)


def test_stale_temp_files_of_an_interrupted_save_are_removed_at_start_up(tmp_path):
    work = tmp_path / "run"
    train(tiny_cfg("train.max_env_steps=64"), work_dir=work)
    stale = work / "ckpt" / ".latest.pt.abc123.rlearn-999999999-nohost.tmp"  # a dead writer's leftover
    stale.write_bytes(b"half a checkpoint")
    import os, time

    old = time.time() - 3600
    os.utime(stale, (old, old))
    train(tiny_cfg("train.max_env_steps=128"), work_dir=work, resume=True)
    assert not stale.exists()


def test_resuming_from_an_older_checkpoint_prunes_the_abandoned_timeline(tmp_path):
    work = tmp_path / "run"
    train(tiny_cfg("checkpoint.keep=10"), work_dir=work)  # iteration_2, _4, _6 and latest (= 6)
    ckpt = work / "ckpt"
    assert [n for n, _ in iteration_checkpoints(ckpt)] == [2, 4, 6]
    train(tiny_cfg("checkpoint.keep=10", "train.max_env_steps=160"), work_dir=work, resume=ckpt / "iteration_2.pt")
    # the resumed timeline (iterations 3..5) wins: the old iteration_4.pt and iteration_6.pt are gone
    numbers = [n for n, _ in iteration_checkpoints(ckpt)]
    assert numbers == [2, 4, 5]
    assert read_checkpoint(ckpt / "iteration_4.pt")["envstep"] == 128
    assert read_checkpoint(ckpt / "latest.pt")["train_iter"] == 5


def test_kill_9_mid_run_then_resume_continues_from_the_last_checkpoint(tmp_path):
    """``kill -9`` while training (no handler can run): the last periodic checkpoint and every point before it
    are kept; the lock dies with the process; ``--resume`` continues from that checkpoint to the end."""
    import signal
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    import run_fault_helpers as helpers

    work = tmp_path / "run"
    config = helpers.probe_config(tmp_path, checkpoint=dict(freq=10))  # 10**7 env steps: it never ends by itself
    proc = helpers.start("train", str(config), "--work-dir", str(work))
    try:
        helpers.wait_for(lambda: any(n >= 20 for n, _ in iteration_checkpoints(work / "ckpt")), 180, proc,
                         "two checkpoints")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    # latest.pt, or a newer iteration_<n>.pt when the kill fell between the two writes of one save
    path, _ = find_resume_checkpoint(work / "ckpt")
    saved = read_checkpoint(path)["train_iter"]
    assert saved >= 20 and saved % 10 == 0
    end = saved + 30  # iterations: 8 env steps each
    out = helpers.rlearn("train", str(config), "--work-dir", str(work), "--resume", "--set",
                         f"train.max_env_steps={8 * end}")
    assert out.returncode == 0, out.stderr[-3000:]
    final = read_checkpoint(work / "ckpt" / "latest.pt")
    assert (final["train_iter"], final["envstep"]) == (end, 8 * end)
    assert f"resumed from {path}: train_iter={saved}" in (work / "probe.log").read_text()
