"""The parts of rlearn.run on their own: work-dir choice, signal guards, the off-policy update schedule and
pending updates, the EvalHook a run uses, and resuming checkpoints written before rlearn.run existed."""

from __future__ import annotations

import math
import os
import signal
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlearn.config import ConfigError, load_config
from rlearn.distributed import DistributedError
from rlearn.run import Trainer
from rlearn.run.off_policy import OffPolicyLoop, UpdateSchedule
from rlearn.run.signals import InterruptGuard, TerminatedByLauncher, workers_ignore_sigint
from rlearn.checkpoint import CheckpointError
from rlearn.run.workdir import WorkDir, choose_work_dir, resume_checkpoint
from rlearn.workdir_lock import claim_free_work_dir, existing_run as run_exists

from test_run import reinforce_cfg, scalars, steps


# ------------------------------------------------------------------------------------------ work dir
def test_run_exists_needs_checkpoints_or_events(tmp_path):
    assert run_exists(tmp_path) is None
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "tb").mkdir()
    (tmp_path / "exp.log").write_text("a log alone is no run")
    assert run_exists(tmp_path) is None
    (tmp_path / "tb" / "events.out.tfevents.1.host").write_bytes(b"")
    assert run_exists(tmp_path) == f"{tmp_path / 'tb'} holds TensorBoard events"
    (tmp_path / "ckpt" / "latest.pt").write_bytes(b"")
    assert run_exists(tmp_path) == f"{tmp_path / 'ckpt'} holds checkpoints"


def free_work_dir(default: Path) -> Path:
    """The directory ``claim_free_work_dir`` picks (its lock released again)."""
    path, lock = claim_free_work_dir(default)
    lock.release()
    return path


def test_free_work_dir_takes_the_next_free_suffix(tmp_path):
    default = tmp_path / "exp"
    assert free_work_dir(default) == default
    for name in ("exp", "exp_2"):
        (tmp_path / name / "ckpt").mkdir(parents=True)
        (tmp_path / name / "ckpt" / "latest.pt").write_bytes(b"")
    (tmp_path / "exp_3").mkdir()  # exists but holds no run: taken
    assert free_work_dir(default) == tmp_path / "exp_3"


def chosen(*args, **kwargs) -> tuple:
    """``(path, moved_from, locked)`` of ``choose_work_dir``'s answer (its lock released again)."""
    dirs = choose_work_dir(*args, **kwargs)
    locked = dirs.lock is not None
    dirs.release()
    return dirs.path, dirs.moved_from, locked


def test_choose_work_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = load_config("td3_pendulum")
    default = Path("work_dirs/td3_pendulum")
    assert chosen(cfg, "runs/x", None) == (Path("runs/x"), None, True)
    assert chosen(cfg, "runs/x", True) == (Path("runs/x"), None, True)
    assert chosen(cfg, None, None) == (default, None, True)
    (default / "ckpt").mkdir(parents=True)
    (default / "ckpt" / "latest.pt").write_bytes(b"")
    assert chosen(cfg, None, True) == (default, None, True)  # resuming continues the default one
    fresh = choose_work_dir(cfg, None, None)
    fresh.release()
    assert (fresh.path, fresh.moved_from) == (Path("work_dirs/td3_pendulum_2"), default)
    assert (fresh.tb_dir, fresh.ckpt_dir, fresh.config_file) == (
        fresh.path / "tb", fresh.path / "ckpt", fresh.path / "config.py")
    # ranks > 0 take rank 0's choice, do not look at the disk themselves and hold no lock
    seen = []
    assert chosen(cfg, None, None, rank=1, broadcast=lambda obj: seen.append(obj) or Path("w/r0")) == (
        Path("w/r0"), default, False)
    assert seen == [None]


def test_resume_checkpoint(tmp_path):
    dirs = WorkDir(tmp_path)
    assert resume_checkpoint(dirs, None) is None and resume_checkpoint(dirs, False) is None
    with pytest.raises(ConfigError, match=r"--resume: no checkpoint at '.*ckpt/latest.pt'"):
        resume_checkpoint(dirs, True)
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "latest.pt").write_bytes(b"x")
    (tmp_path / "ckpt" / "iteration_5.pt").write_bytes(b"x")
    # neither file reads as a checkpoint: --resume names both (a valid one is used: tests/faults/test_run_workdir.py)
    with pytest.raises(CheckpointError, match=r"no valid checkpoint to resume from .*latest\.pt: .*iteration_5\.pt: "):
        resume_checkpoint(dirs, True)
    assert resume_checkpoint(dirs, str(tmp_path / "ckpt" / "iteration_5.pt")) == tmp_path / "ckpt" / "iteration_5.pt"
    with pytest.raises(ConfigError, match="already holds a run"):
        resume_checkpoint(dirs, None)


# ------------------------------------------------------------------------------------------- signals
def test_interrupt_guard_flags_the_first_sigint_and_raises_on_the_second():
    before = signal.getsignal(signal.SIGINT)
    with InterruptGuard() as guard:
        assert not guard.requested
        os.kill(os.getpid(), signal.SIGINT)
        assert guard.requested
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is before


def test_interrupt_guard_disabled_or_off_the_main_thread_installs_nothing():
    before = signal.getsignal(signal.SIGINT)
    with InterruptGuard(enabled=False):
        assert signal.getsignal(signal.SIGINT) is before
    seen = []

    def in_thread():
        with InterruptGuard():
            seen.append(signal.getsignal(signal.SIGINT))

    thread = threading.Thread(target=in_thread)
    thread.start()
    thread.join()
    assert seen == [before]


def test_sigterm_from_the_launcher_becomes_a_distributed_error():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(DistributedError, match="rank 0: terminated by SIGTERM from the launcher"):
        with TerminatedByLauncher(enabled=True):
            os.kill(os.getpid(), signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) is before
    with TerminatedByLauncher(enabled=False):
        assert signal.getsignal(signal.SIGTERM) is before


def test_environment_workers_start_ignoring_sigint():
    before = signal.getsignal(signal.SIGINT)
    with workers_ignore_sigint(asynchronous=True):
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    assert signal.getsignal(signal.SIGINT) is before
    with workers_ignore_sigint(asynchronous=False):
        assert signal.getsignal(signal.SIGINT) is before


# ------------------------------------------------------------------------------- off-policy schedule
@settings(max_examples=80, deadline=None)
@given(ups=st.sampled_from([0.25, 0.5, 1.0, 1.5, 2.0, 3.0]), chunks=st.lists(st.integers(1, 12), min_size=1, max_size=40))
def test_update_schedule_matches_exact_fractions(ups, chunks):
    """Iterations earned after each collection = floor(ups x steps so far) - earned before (exact, no drift)."""
    from fractions import Fraction

    schedule, total, earned_before = UpdateSchedule(ups), 0, 0
    for chunk in chunks:
        total += chunk
        got = schedule.earn(chunk)
        exact = math.floor(Fraction(ups) * total) - earned_before
        assert got == exact
        earned_before += got
    assert schedule.pending == earned_before
    again = UpdateSchedule(ups)
    again.load_state_dict(schedule.state_dict())
    assert (again.credit, again.pending) == (schedule.credit, schedule.pending)


class FakeCollector:
    def __init__(self, num_envs: int) -> None:
        self.num_envs, self.envstep = num_envs, 0

    def collect(self, n_steps: int):
        self.envstep += n_steps * self.num_envs
        transitions = {"obs": np.zeros((n_steps, self.num_envs, 1))}
        return type("Result", (), {"transitions": transitions, "episodes": [], "metrics": {}})()


class FakeBuffer:
    def __init__(self) -> None:
        self.added, self.samples = 0, 0

    def add(self, transitions) -> None:
        self.added += 1

    def sample(self, batch_size: int):
        self.samples += 1
        return {"batch": batch_size}


class FakeLearner:
    def __init__(self, stop_after: int = -1, guard=None) -> None:
        self.train_iter, self.envstep, self.envsteps = 0, 0, []
        self.stop_after, self.guard = stop_after, guard

    def call_hook(self, name: str) -> None:
        pass

    def record(self, info) -> None:
        pass

    def train(self, data, envstep: int) -> None:
        self.train_iter += 1
        self.envsteps.append(envstep)
        if self.train_iter == self.stop_after:
            self.guard.requested = True


class Guard:
    requested = False


def off_policy_loop(learner, world_size=1, pending=0, learning_starts=3):
    schedule = UpdateSchedule(1.0)
    schedule.pending = pending
    loop = OffPolicyLoop(learner, FakeCollector(num_envs=2), FakeBuffer(), world_size, max_env_steps=12,
                         collect_steps=2, learning_starts=learning_starts, batch_size=3, schedule=schedule)
    return loop, schedule


def test_off_policy_step_collects_then_runs_what_it_earned():
    learner = FakeLearner()
    loop, schedule = off_policy_loop(learner, world_size=2)
    assert loop.step(Guard()) is False  # 4 steps of this rank, past its 3 learning starts
    assert (loop.collector.envstep, loop.envstep, learner.train_iter) == (4, 8, 4)
    assert learner.envstep == 8 and learner.envsteps == [8] * 4  # envstep counts every rank
    assert loop.finished() is False
    loop.step(Guard())
    assert loop.finished() is True and schedule.pending == 0


def test_off_policy_nothing_earned_before_learning_starts():
    learner = FakeLearner()
    loop, schedule = off_policy_loop(learner, learning_starts=9)
    loop.step(Guard())
    loop.step(Guard())
    assert (learner.train_iter, schedule.pending, schedule.credit) == (0, 0, 0.0)
    loop.step(Guard())  # collector at 12 >= 9: only this collection's 4 steps earn
    assert learner.train_iter == 4


def test_pending_updates_run_before_collecting_again_and_survive_ctrl_c():
    guard = Guard()
    learner = FakeLearner(stop_after=2, guard=guard)
    loop, schedule = off_policy_loop(learner)
    assert loop.step(guard) is True  # Ctrl-C after the 2nd of 4 iterations
    assert (learner.train_iter, schedule.pending) == (2, 2)  # already decremented for the 2nd: not run twice
    assert schedule.state_dict() == {"update_credit": 0.0, "pending_updates": 2}
    # as resumed from that checkpoint: the pending iterations run first, without collecting
    resumed = FakeLearner()
    loop, schedule = off_policy_loop(resumed, pending=2)
    loop.collector.envstep = 4
    assert loop.step(Guard()) is False
    assert (resumed.train_iter, loop.collector.envstep, loop.buffer.added) == (2, 4, 0)
    assert loop.finished() is False  # 4 < 12 env steps


def test_finished_waits_for_pending_updates():
    loop, schedule = off_policy_loop(FakeLearner())
    loop.collector.envstep = 12
    schedule.pending = 1
    assert not loop.finished()
    schedule.pending = 0
    assert loop.finished()


# ------------------------------------------------------------------------------------ EvalHook in a run
def test_an_eval_hook_from_the_config_replaces_the_default(tmp_path):
    from rlearn.hooks import EvalHook

    cfg = reinforce_cfg("learner.hooks=[{'type': 'EvalHook', 'freq': 64}]")
    trainer = Trainer(cfg, work_dir=tmp_path)
    hooks = [h for h in trainer.learner.hooks if isinstance(h, EvalHook)]
    assert hooks == [trainer.eval_hook] and trainer.eval_hook.freq == 64
    assert trainer.eval_hook.evaluator is trainer.evaluator  # attached by the run
    result = trainer.run()
    assert steps(scalars(result.tb_dir)["evaluator_step/episode_return_mean"]) == [64, 128, 192]


# ---------------------------------------------------------------------------------------------- build
def test_policy_needs_names_the_missing_key():
    from rlearn.run.build import policy_needs

    class OffPolicy:
        on_policy = False
        cfg = {"batch_size": 0}

    class OnPolicy:
        on_policy = True
        cfg = {"rollout_steps": 16, "batch_size": None}

    assert str(pytest.raises(ConfigError, policy_needs, OffPolicy()).value) == (
        "policy OffPolicy is off-policy: the run needs 'policy.batch_size' (an int >= 1) in its default_config, got 0")
    needs = policy_needs(OnPolicy())
    assert (needs.on_policy, needs.rollout_steps, needs.batch_size, needs.learning_starts) == (True, 16, 0, 0)
