"""Signals (docs/reliability.md, items 2 and 8): SIGTERM to a one-process run saves a checkpoint and exits 143 like
Ctrl-C exits 130; a second signal stops at once; ranks whose launcher (``torchrun`` or ``rlearn --nproc``)
was SIGKILLed stop within seconds instead of training unsupervised."""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import sys
import time
from pathlib import Path

import pytest

from rlearn.checkpoint import read_checkpoint


def _load_helpers():
    """tests/faults/run_fault_helpers.py, imported by path (the configs import it by path too)."""
    path = Path(__file__).resolve().parent / "run_fault_helpers.py"
    if "run_fault_helpers" not in sys.modules:
        spec = importlib.util.spec_from_file_location("run_fault_helpers", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules["run_fault_helpers"] = module
        spec.loader.exec_module(module)
    return sys.modules["run_fault_helpers"]


helpers = _load_helpers()


def _table_at(log: Path, train_iter: int) -> bool:
    # the learner table's heading: "... INFO - train_iter 10  envstep 80"
    return log.exists() and re.search(rf"- train_iter {train_iter}  envstep \d+\n", log.read_text()) is not None


# ------------------------------------------------------------------------------ one process: SIGTERM
def _stop_a_run_with(signum, tmp_path, at_table):
    """Start a probe run, send ``signum`` once the table of iteration ``at_table`` is in its log; the work
    dir, stdout, and the checkpoint the stop saved (after checking exit code ``128 + signum``, no traceback
    and the stop line, whose counters are the checkpoint's)."""
    work = tmp_path / "run"
    config = helpers.probe_config(tmp_path)
    proc = helpers.start("train", str(config), "--work-dir", str(work))
    try:
        helpers.wait_for(lambda: _table_at(work / "probe.log", at_table), 180, proc, f"the table of iteration {at_table}")
        proc.send_signal(signum)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    name = signal.Signals(signum).name
    assert proc.returncode == 128 + signum, stderr[-3000:]
    assert "Traceback" not in stderr + stdout
    stopped = re.search(rf"{name}: stopping at train_iter (\d+), envstep (\d+); saving a checkpoint", stdout)
    assert stopped, stdout[-3000:]
    saved = read_checkpoint(work / "ckpt" / "latest.pt")
    assert (saved["train_iter"], saved["envstep"]) == (int(stopped.group(1)), int(stopped.group(2)))
    assert saved["train_iter"] >= at_table
    return work, stdout, saved


def test_sigterm_saves_a_checkpoint_and_exits_143(tmp_path):
    work, stdout, saved = _stop_a_run_with(signal.SIGTERM, tmp_path, at_table=10)
    assert "probe: stopped (interrupted)" in stdout
    # the venv's own rlearn when PATH does not find it (rlearn.executables)
    assert re.search(r"resume with: (\S*/)?rlearn train " + re.escape(f"{work / 'config.py'} --work-dir {work} --resume"),
                     stdout), stdout[-2000:]
    # and the run continues from there
    out = helpers.rlearn("train", str(work / "config.py"), "--work-dir", str(work), "--resume", "--set",
                         f"train.max_env_steps={saved['envstep'] + 16}", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert read_checkpoint(work / "ckpt" / "latest.pt")["train_iter"] == saved["train_iter"] + 2


def test_sighup_is_a_sigterm_saves_a_checkpoint_and_exits_129(tmp_path):
    """A closed terminal or SSH session (SIGHUP) used to end the run at once, without a checkpoint or a log line."""
    work, stdout, _ = _stop_a_run_with(signal.SIGHUP, tmp_path, at_table=5)
    assert "probe: stopped (interrupted)" in stdout
    assert "SIGHUP: stopping at train_iter" in (work / "probe.log").read_text()


def test_guard_first_signal_is_a_flag_second_stops_at_once():
    from rlearn.run.signals import InterruptGuard, StopNow, signal_exit_code

    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    with InterruptGuard() as guard:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.01)
        assert guard.requested and guard.signal_name == "SIGTERM" and guard.reason == "SIGTERM"
        with pytest.raises(StopNow) as stop:
            os.kill(os.getpid(), signal.SIGINT)  # a second signal of the other kind stops too
            time.sleep(0.01)
    assert stop.value.signum == signal.SIGINT and isinstance(stop.value, KeyboardInterrupt)
    assert str(stop.value) == "second SIGINT: stopped at once, without a checkpoint"
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before
    assert (signal_exit_code(signal.SIGINT), signal_exit_code(signal.SIGTERM)) == (130, 143)
    with InterruptGuard() as guard:  # SIGHUP (terminal closed) is a stop request like SIGTERM
        os.kill(os.getpid(), signal.SIGHUP)
        time.sleep(0.01)
        assert guard.requested and guard.signal_name == "SIGHUP" and guard.reason == "SIGHUP"
    assert signal_exit_code(signal.SIGHUP) == 129
    with InterruptGuard(enabled=False) as guard:  # multi-process runs: nothing installed
        assert signal.getsignal(signal.SIGTERM) == before[0]


def test_a_second_sigterm_stops_at_once_without_a_checkpoint(tmp_path):
    """The second signal arrives while the first one's checkpoint is not saved yet (a slow save)."""
    work = tmp_path / "run"
    slow_save = tmp_path / "slow_save.py"
    slow_save.write_text(
        "import time\n"
        "from rlearn.hooks import Hook\n"
        "from rlearn.registry import HOOKS\n"
        "@HOOKS.register\n"
        "class SlowSave(Hook):\n"
        "    def before_save_checkpoint(self, learner, checkpoint):\n"
        "        open(%r, 'w').close()\n"
        "        time.sleep(30)\n" % str(tmp_path / "saving")
    )
    config = helpers.probe_config(tmp_path, custom_imports=[str(helpers.PROBE), str(slow_save)],
                                  learner=dict(log_freq=5, monitor_window=5, hooks=[dict(type="SlowSave")]))
    proc = helpers.start("train", str(config), "--work-dir", str(work))
    try:
        helpers.wait_for(lambda: _table_at(work / "probe.log", 5), 180, proc, "the table of iteration 5")
        proc.send_signal(signal.SIGTERM)
        helpers.wait_for(lambda: (tmp_path / "saving").exists(), 60, proc, "the checkpoint save")
        start = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=60)
        elapsed = time.monotonic() - start
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert elapsed < 20  # not after the 30 s save
    assert proc.returncode == 143
    assert not (work / "ckpt" / "latest.pt").exists()
    assert "rlearn train: second SIGTERM: stopped at once, without a checkpoint" in stderr
    assert "second SIGTERM: stopped at once, without a checkpoint at train_iter" in (work / "probe.log").read_text()


# ------------------------------------------------------------------- several processes: supervisor loss
@pytest.mark.parametrize("victim", ["torchrun", "rlearn"])
def test_ranks_stop_when_their_launcher_is_killed(tmp_path, victim):
    """``rlearn train --nproc 2`` runs rlearn -> torchrun -> 2 ranks. SIGKILL of torchrun: the kernel sends
    each rank SIGTERM (parent-death signal), and the rank logs that its launcher is gone. SIGKILL of the
    ``rlearn`` parent: torchrun gets SIGTERM the same way and stops the ranks as it does on any SIGTERM."""
    work = tmp_path / "run"
    config = helpers.probe_config(tmp_path, dist=dict(timeout_s=60))
    proc = helpers.start("train", str(config), "--nproc", "2", "--work-dir", str(work))
    tree = []
    try:
        helpers.wait_for(lambda: _table_at(work / "probe.log", 5), 240, proc, "the table of iteration 5")
        tree = helpers.descendants(proc.pid)
        torchrun = [pid for pid in tree if f"{proc.pid}" == Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]]
        assert len(torchrun) == 1, tree
        ranks = helpers.descendants(torchrun[0])
        assert len(ranks) >= 2, ranks
        os.kill(torchrun[0] if victim == "torchrun" else proc.pid, signal.SIGKILL)
        start = time.monotonic()
        # well under the 60 s distributed timeout: the ranks stop because of the signal, not by timing out
        # (no tighter bound: on a loaded machine a rank needs seconds to log and exit)
        helpers.wait_for(lambda: not any(helpers.alive(pid) for pid in tree), 45, None, "every rank to stop")
        elapsed = time.monotonic() - start
        proc.wait(timeout=30)
    finally:
        helpers.kill_all([pid for pid in tree if helpers.alive(pid)])
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
    assert elapsed < 45
    logs = [(work / "probe.log").read_text(), (work / "probe_rank1.log").read_text()]
    for rank, text in enumerate(logs):
        if victim == "torchrun":
            # a DistributedError raised by the handler inside a collective is passed on as it is, not wrapped
            assert re.search(rf"rank {rank} of 2 stopped: DistributedError: rank {rank}: the launcher \(pid "
                             rf"{torchrun[0]}: torchrun or rlearn --nproc\) is gone, stopping", text), text[-2000:]
        else:
            assert f"rank {rank} of 2 stopped: DistributedError: rank {rank}: terminated by SIGTERM from the launcher" \
                in text, text[-2000:]


# ------------------------------------------------------------------------------------- signals at start-up
def _started_up_to_the_env(tmp_path, *extra_args, **config):
    """A probe run on ``SlowStart-v0`` started in its own session; returns it once its start-up builds the env."""
    import subprocess

    work, marker = tmp_path / "run", tmp_path / "building_envs"
    path = helpers.probe_config(tmp_path, env=dict(id="SlowStart-v0", num_envs=2), **config)
    proc = subprocess.Popen([sys.executable, "-m", "rlearn", "train", str(path), "--work-dir", str(work), *extra_args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env=helpers.child_env(RLEARN_TEST_STARTUP_MARKER=str(marker), RLEARN_TEST_STARTUP_S="4"))
    helpers.wait_for(marker.exists, 180, proc, "the start-up to build the environments")
    return proc, work


def test_sighup_during_start_up_stops_at_the_first_safe_point_with_a_checkpoint(tmp_path):
    """Before: a SIGHUP (a closed terminal) while the run was starting killed it silently, with an empty log."""
    proc, work = _started_up_to_the_env(tmp_path, checkpoint=dict(freq=None))
    try:
        os.killpg(proc.pid, signal.SIGHUP)  # the terminal's whole session, as when it is closed
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 129, stderr[-3000:]
    assert "Traceback" not in stderr + stdout
    log = (work / "probe.log").read_text()
    assert "SIGHUP: stopping at train_iter 0, envstep 0; saving a checkpoint" in log, log[-3000:]
    saved = read_checkpoint(work / "ckpt" / "latest.pt")
    assert (saved["train_iter"], saved["envstep"]) == (0, 0)
    out = helpers.rlearn("train", str(work / "config.py"), "--work-dir", str(work), "--resume", "--set",
                         "train.max_env_steps=16", "env.id=CartPole-v1", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]  # and it resumes
    assert read_checkpoint(work / "ckpt" / "latest.pt")["train_iter"] == 2


@pytest.mark.slow
def test_sighup_during_the_start_up_of_ranks_is_logged_by_each_and_ends_the_run(tmp_path):
    """``rlearn train --nproc 2``: a SIGHUP to the whole session while the ranks build their environments used to
    end every process silently, leaving empty logs."""
    proc, work = _started_up_to_the_env(tmp_path, "--nproc", "2")
    try:
        os.killpg(proc.pid, signal.SIGHUP)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 129, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    for rank, log in enumerate((work / "probe.log", work / "probe_rank1.log")):
        assert re.search(rf"rank {rank} of 2 stopped: DistributedError: rank {rank}: terminated by SIG(HUP|TERM)",
                         log.read_text()), log.read_text()[-2000:]
