"""Edges users met, each reproduced as the user met it (docs/reliability.md, run-level faults): a folder
named ``rlearn`` in the working directory, commands printed for a venv that is not activated, ``--resume``
of a finished run, a refused multi-process resume, strict mode and misspelt per-key windows, and PPG's
auxiliary losses called "never reported" before their period."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Dict

import pytest

from policies import Policy
from rlearn.checkpoint import read_checkpoint

import run_fault_helpers as helpers  # tests/faults/ is on sys.path (pytest's rootdir insertion)

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
    # --resume of the finished run: said once, before torchrun starts anything; nothing changes
    before = files_of(tmp_path / "w")
    out = subprocess.run([str(BIN / "rlearn"), "train", config.name, "--nproc", "2", "--work-dir", "w", "--resume"],
                         cwd=tmp_path, env=installed_env(), capture_output=True, text=True, timeout=240)
    said = out.stdout + out.stderr
    assert out.returncode == 0 and said.count("is complete") == 1 and "torchrun" not in said, said[-3000:]
    assert f"to train longer: {BIN}/rlearn train w/config.py --work-dir w --resume --nproc 2 --set train.max_env_steps=96" in said
    assert files_of(tmp_path / "w") == before


# --------------------------------------------------------------------- commands printed for the user
def _printed(pattern: str, text: str) -> str:
    import re

    found = re.search(pattern, text, re.MULTILINE)
    assert found, text[-3000:]
    return found.group(1)


def test_printed_commands_work_when_pasted_as_they_are(tmp_path):
    """After the README's install the venv is not activated: the summary and config.py name the venv's
    own executables, and each printed command runs as printed (activated: bare names, next test)."""
    env = installed_env()
    config = helpers.probe_config(tmp_path, max_env_steps=8 * 3)
    out = subprocess.run([str(BIN / "rlearn"), "train", config.name, "--work-dir", "w"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    prefix = f"{BIN}/"
    view = _printed(r"\(view: (.*)\)$", out.stdout)
    play = _printed(r"play it: (.*)\)$", out.stdout)
    header = (tmp_path / "w" / "config.py").read_text()
    again = _printed(r"Run it again with:\n#     (.*)$", header)
    assert view == f"{prefix}tensorboard --logdir w/tb"
    assert play == f"{prefix}rlearn eval w --allow-imports"  # the probe policy comes from a custom_imports file
    assert again == f"{prefix}rlearn train w/config.py"
    tensorboard = subprocess.run([shlex.split(view)[0], "--version_tb"], cwd=tmp_path, env=env, capture_output=True,
                                 text=True, timeout=120)
    assert tensorboard.returncode == 0, tensorboard.stderr[-2000:]
    played = subprocess.run(shlex.split(play) + ["--episodes", "1"], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=120)
    assert played.returncode == 0 and "episode_return: mean" in played.stdout, played.stderr[-2000:]


def test_executable_names_this_environments_own_copy(tmp_path, monkeypatch):
    from rlearn.executables import executable, shell_command

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert executable("rlearn") == str(BIN / "rlearn") and executable("python") == sys.executable
    monkeypatch.setenv("PATH", f"{BIN}{os.pathsep}/usr/bin")
    assert executable("rlearn") == "rlearn"
    assert shell_command("rlearn", "train", "my config.py") == "rlearn train 'my config.py'"
    monkeypatch.chdir(BIN.parent.parent)  # the venv below the working directory: a relative path
    monkeypatch.setenv("PATH", "/usr/bin")
    assert executable("tensorboard") == f"{BIN.parent.name}/bin/tensorboard"
    assert executable("no-such-tool") == "no-such-tool"


# ----------------------------------------------------------------------- --resume of a finished run
def test_resume_of_a_finished_run_says_it_is_complete_and_changes_nothing(tmp_path):
    config = helpers.probe_config(tmp_path, max_env_steps=8 * 6, checkpoint=dict(freq=3))
    work = tmp_path / "w"
    assert helpers.rlearn("train", str(config), "--work-dir", str(work)).returncode == 0
    before = files_of(work)
    out = helpers.rlearn("train", str(work / "config.py"), "--work-dir", str(work), "--resume", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert files_of(work) == before  # no checkpoint, event file, config.py, metrics or log rewritten
    assert (f"probe: the run in {work} is complete: train_iter 6, envstep 48 ({work}/ckpt/latest.pt) reached "
            "train.max_env_steps=48; --resume changed nothing") in out.stdout
    command = _printed(r"to train longer: (.*)$", out.stdout)
    assert command.endswith(f"rlearn train {work}/config.py --work-dir {work} --resume --set train.max_env_steps=96")
    # the printed command extends the run
    out = helpers.rlearn(*shlex.split(command)[1:], cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert read_checkpoint(work / "ckpt" / "latest.pt")["envstep"] == 96


def test_a_run_stopped_by_stop_value_or_patience_is_complete_until_the_config_extends_it(tmp_path):
    from rlearn.checkpoint import CheckpointError
    from rlearn.config import load_config
    from rlearn.run import train

    config = helpers.probe_config(tmp_path, max_env_steps=8 * 40, eval=dict(freq=16, episodes=1, stop_value=1.0))
    work = tmp_path / "w"
    first = train(load_config(str(config)), work_dir=work, progress=False)
    assert first.stop_reason == "stop_value" and first.envstep == 16
    before = files_of(work)
    again = train(load_config(str(config)), work_dir=work, resume=True, progress=False)
    assert again.already_complete and (again.stop_reason, again.train_iter, again.envstep) == ("stop_value", 2, 16)
    assert files_of(work) == before
    with pytest.raises(CheckpointError, match=r"latest.pt: written by a run of 1 process\(es\), this run has 2; resume it "
                                              r"with one process \(without --nproc\)"):
        from rlearn.run.resume_check import inspect_resume

        inspect_resume(work / "ckpt" / "latest.pt", load_config(str(config)), 2)
    patience = load_config(str(config), overrides=["eval.stop_value=null", "eval.patience=1"])
    assert train(patience, work_dir=work, resume=True, progress=False).stop_reason == "no_improvement"
    done = train(patience, work_dir=work, resume=True, progress=False)
    assert done.already_complete and done.stop_reason == "no_improvement"
    extended = train(load_config(str(config), overrides=["eval.stop_value=null"]), work_dir=work, resume=True,
                     progress=False)
    assert not extended.already_complete and (extended.stop_reason, extended.envstep) == ("max_env_steps", 320)


# --------------------------------------------------------------------- a refused multi-process resume
def test_nproc_resume_of_a_one_process_checkpoint_is_one_line(tmp_path):
    config = helpers.probe_config(tmp_path, max_env_steps=8 * 6, checkpoint=dict(freq=3))
    work = tmp_path / "w"
    assert helpers.rlearn("train", str(config), "--work-dir", str(work)).returncode == 0
    before = files_of(work)
    out = helpers.rlearn("train", str(config), "--work-dir", str(work), "--resume", "--nproc", "2", "--set",
                         "train.max_env_steps=96")
    assert out.returncode == 2, out.stdout[-3000:] + out.stderr[-3000:]
    assert out.stdout == "" and out.stderr == (
        f"rlearn train: error: checkpoint {work}/ckpt/latest.pt: written by a run of 1 process(es), this run has 2; "
        "resume it with one process (without --nproc)\n")
    assert files_of(work) == before
    # what else every process would refuse is said once too: a work dir a live run holds, a seed out of range
    from rlearn.workdir_lock import WorkDirLock

    held = WorkDirLock(work).acquire()
    try:
        out = helpers.rlearn("train", str(config), "--work-dir", str(work), "--resume", "--nproc", "2")
    finally:
        held.release()
    assert out.returncode == 2 and out.stdout == "" and out.stderr.count("\n") == 1, out.stderr[-3000:]
    assert out.stderr.startswith(f"rlearn train: error: work dir {work} is in use by a live run (PID {os.getpid()} ")
    out = helpers.rlearn("train", str(config), "--nproc", "2", "--seed", str(2**63), "--work-dir", str(tmp_path / "s"))
    assert out.returncode == 2 and out.stdout == "" and out.stderr.count("\n") == 1, out.stderr[-3000:]
    assert out.stderr.startswith("rlearn train: error: config key 'seed' (--seed) must be an int in 0..")
    assert not (tmp_path / "s").exists()


# ------------------------------------------------------------- strict mode and misspelt window keys
def test_strict_mode_makes_a_misspelt_monitor_windows_key_an_error(tmp_path):
    learner = dict(log_freq=5, monitor_window=5, monitor_windows={"los": 10, "data_time": 3}, strict=True)
    config = helpers.probe_config(tmp_path, learner=learner)
    work = tmp_path / "w"
    out = helpers.rlearn("train", str(config), "--work-dir", str(work))
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stdout[-2000:] + out.stderr[-2000:]
    assert out.stderr.startswith(
        "rlearn train: error: config key 'learner.monitor_windows.los': no monitor key 'los' is declared, so this "
        "window is never used; did you mean 'loss'? declared keys (ProbePolicy): loss, ")
    assert out.stderr.endswith(" (learner.strict=True makes this an error)\n")  # data_time (TimerHook's) is declared
    assert not (work / "tb").exists() and not (work / "ckpt").exists()  # stopped before the run's first event


def test_a_strict_learner_refuses_a_misspelt_window_at_its_first_iteration():
    from gymnasium import spaces

    from rlearn.learner import BaseLearner, LearnerConfigError

    dist_helpers = helpers.load(helpers.PROBE)
    policy = dist_helpers.ProbePolicy(None, spaces.Box(-1.0, 1.0, (4,)), spaces.Discrete(2), seed=0)
    learner = BaseLearner(policy, dict(log_freq=2, monitor_windows={"rank_valeu": 4}, strict=True))
    with pytest.raises(LearnerConfigError, match=r"'learner.monitor_windows.rank_valeu'.*did you mean 'rank_value'"):
        learner.train({})
    assert learner.train_iter == 0 and policy.iterations == 0  # refused before the policy ran


# ----------------------------------------------------- PPG's "declared key never reported" and its period
def test_ppg_aux_losses_are_not_called_never_reported_when_log_freq_is_below_n_pi(tmp_path):
    from rlearn.config import load_config
    from rlearn.run import train

    cfg = load_config("ppg_cartpole", overrides=[
        "policy.n_pi=8", "policy.rollout_steps=8", "env.num_envs=2", "policy.e_policy=1", "policy.e_value=1",
        "policy.e_aux=1", "policy.minibatch_size=16", "policy.aux_minibatch_size=64", "learner.log_freq=2",
        "learner.monitor_window=null", "learner.hooks=[]", "train.max_env_steps=160", "eval.freq=null",
        "eval.episodes=1", "eval.num_envs=1", "checkpoint.freq=null"])
    result = train(cfg, work_dir=tmp_path / "w", progress=False)
    assert result.train_iter == 10
    log = result.log_file.read_text()
    assert "never been reported" not in log  # it was warned at iteration 4, before the first auxiliary phase (8)
    assert "aux_value_loss_avg" in log



@pytest.mark.parametrize("config, period_key", [("td3_pendulum", "actor_update_freq"), ("sac_pendulum", "policy_frequency")])
def test_delayed_actor_keys_are_not_called_never_reported_when_log_freq_is_below_their_period(tmp_path, config,
                                                                                            period_key):
    from rlearn.config import load_config
    from rlearn.run import train

    cfg = load_config(config, overrides=[
        f"policy.{period_key}=8", "policy.learning_starts=16", "policy.batch_size=8", "policy.hidden_sizes=[8]",
        "buffer.size=64", "learner.log_freq=2", "learner.monitor_window=null", "learner.hooks=[]",
        "train.max_env_steps=40", "eval.freq=null", "eval.episodes=1", "checkpoint.freq=null"])
    result = train(cfg, work_dir=tmp_path / "w", progress=False)
    assert result.train_iter == 24
    log = result.log_file.read_text()
    assert "never been reported" not in log  # it was warned at iteration 4, before the first actor update (8)
    assert "actor_loss_avg" in log

class RarePolicy(Policy):
    """Reports ``rare`` every 6th iteration (declared period 6) and ``ghost`` (period 6) never."""

    def _init_learn(self):
        self.n = 0

    def _forward_learn(self, data):
        self.n += 1
        return {"loss": 1.0, **({"rare": 2.0} if self.n % 6 == 0 else {})}

    def _monitor_vars_learn(self):
        return ["loss", "rare", "ghost"]

    def _monitor_periods_learn(self):
        return {"rare": 6, "ghost": 6}

    def _forward_collect(self, obs, envstep):
        raise NotImplementedError

    def _forward_eval(self, obs):
        raise NotImplementedError


def test_never_reported_waits_for_the_declared_period_and_names_the_writers_that_are_on(tmp_path):
    import logging

    from rlearn.hooks import LogShowHook
    from rlearn.learner import BaseLearner

    records = []
    logger = logging.getLogger(f"rlearn.test.edges.never.{tmp_path.name}")
    logger.addHandler(type("Keep", (logging.Handler,), {"emit": lambda self, r: records.append(r)})())
    policy = RarePolicy(None, None, None)
    learner = BaseLearner(policy, dict(log_freq=2, writers=["table", "jsonl"]), work_dir=tmp_path, logger=logger)
    learner.register_hook(LogShowHook(width=200))
    learner.call_hook("before_run")
    warned_at = {}
    for i in range(1, 13):
        learner.train(None, envstep=i)
        for record in records:
            if "never been reported" in record.getMessage():
                warned_at.setdefault(record.getMessage().split("'")[1], i)
    assert warned_at == {"ghost": 6}  # 'rare' came at 6 and 12; 'ghost' waited for its period, not the window of 2
    message = next(r.getMessage() for r in records if "'ghost' has never been reported" in r.getMessage())
    assert "after 6 iterations: the table (TableWriter) shows '-'; JsonlWriter write no point for it." in message
    assert "TensorBoard" not in message and "declare its period in RarePolicy._monitor_periods_learn()" in message
    assert policy.monitor_periods() == {"rare": 6, "ghost": 6}


def test_policy_periods_are_checked_and_ppg_declares_n_pi():
    from gymnasium import spaces

    from policies.ppg import PPGPolicy

    ppg = PPGPolicy({"n_pi": 5}, spaces.Box(-1.0, 1.0, (4,)), spaces.Discrete(2), seed=0)
    assert ppg.monitor_periods() == {"aux_value_loss": 5, "behavioral_cloning_loss": 5, "auxiliary_loss": 5}
    policy = RarePolicy(None, None, None)
    policy._monitor_periods_learn = lambda: {"typo": 6}
    with pytest.raises(ValueError, match=r"RarePolicy._monitor_periods_learn\(\) gives a period for 'typo'"):
        policy.monitor_periods()
    policy._monitor_periods_learn = lambda: {"rare": 0}
    with pytest.raises(ValueError, match="the period of 'rare' must be an int >= 1"):
        policy.monitor_periods()
