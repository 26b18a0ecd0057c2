"""Run-level faults (docs/reliability.md), each reproduced through the ``rlearn`` command as a user meets it:
fatal errors reach the log (item 5), a refused ``--resume`` changes nothing (item 6), one-line errors for
bad work dirs, devices, seeds and checkpoint counters, NaN observations blamed on the environment (item
11), and files rewritten on resume keep their permissions (item 12). See docs/reliability.md."""

from __future__ import annotations

import importlib.util
import os
import re
import stat
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from rlearn.checkpoint import read_checkpoint, serialize_checkpoint



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
FAIL_ENV = "RLEARN_TEST_FAIL_AT"


def last_line(path: Path) -> str:
    return path.read_text().rstrip("\n").splitlines()[-1]


# ------------------------------------------------------------------------ item 5: fatal errors in the log
def test_a_policy_that_raises_at_iteration_37_ends_the_log_with_the_error_and_where(tmp_path):
    work = tmp_path / "run"
    config = helpers.probe_config(tmp_path, max_env_steps=8 * 50)
    out = helpers.rlearn("train", str(config), "--work-dir", str(work), **{FAIL_ENV: "0:37"})
    assert out.returncode == 1
    assert "InjectedFailure" in out.stderr and "Traceback" in out.stderr  # a bug: the console keeps the traceback
    line = last_line(work / "probe.log")
    # iteration 37 is running: 36 finished, its rollout (8 env steps per iteration) collected
    assert " - ERROR - " in line
    assert " - run failed: InjectedFailure: probe failure injected on rank 0 at iteration 37 " \
           "(train_iter 36, envstep 296; raised in " in line, line
    where = re.search(r"raised in (\S+), line (\d+), in (\w+)\(\)\)$", line)
    assert where, line
    assert Path(where.group(1)) == helpers.PROBE and where.group(3) == "_forward_learn"
    source = helpers.PROBE.read_text().splitlines()[int(where.group(2)) - 1]
    assert "raise InjectedFailure" in source


def test_a_bad_env_kwarg_ends_the_log_with_the_error(tmp_path):
    work = tmp_path / "run"
    config = helpers.probe_config(tmp_path, env=dict(id="CartPole-v1", num_envs=2, kwargs=dict(no_such_kwarg=1)))
    out = helpers.rlearn("train", str(config), "--work-dir", str(work))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.startswith("rlearn train: error: env ('CartPole-v1'): ") and "no_such_kwarg" in out.stderr
    line = last_line(work / "probe.log")
    assert " - ERROR - " in line and " - run failed: ConfigError: env ('CartPole-v1'): " in line and "no_such_kwarg" in line
    assert line.endswith(")") and "(while starting; raised in " in line


def test_failure_line_points_at_the_callers_code_when_a_library_raises():
    from rlearn.run.failure import failure_line

    def user_code():
        return torch.zeros(2) @ torch.zeros(3)  # raised inside torch

    try:
        user_code()
    except RuntimeError as exc:
        line = failure_line(exc, 5, 40)
    assert line.startswith("run failed: RuntimeError: ") and "(train_iter 5, envstep 40; raised in " in line
    assert f"{__file__}, line" in line and "in user_code()" in line
    assert failure_line(ValueError("x\n y"), None, None) == "run failed: ValueError: x y (while starting)"


# ------------------------------------------------------------- item 6: a refused --resume changes nothing
def test_a_refused_resume_leaves_config_py_as_it_was(tmp_path):
    work = tmp_path / "run"
    config = helpers.probe_config(tmp_path, max_env_steps=8 * 10, checkpoint=dict(freq=5))
    out = helpers.rlearn("train", str(config), "--work-dir", str(work))
    assert out.returncode == 0, out.stderr
    saved = work / "config.py"
    before = saved.read_bytes()
    log_before = (work / "probe.log").read_text()
    # resuming with networks of another shape (Acrobot: 6 observations, 3 actions): refused, one line, exit 2
    out = helpers.rlearn("train", str(saved), "--work-dir", str(work), "--resume", "--set", "env.id=Acrobot-v1",
                         "train.max_env_steps=160", cwd=tmp_path)
    assert out.returncode == 2, out.stdout[-2000:] + out.stderr[-2000:]
    assert out.stderr.startswith("rlearn train: error: ") and "Traceback" not in out.stderr
    assert saved.read_bytes() == before
    assert sorted(p.name for p in (work / "ckpt").iterdir()) == ["best.pt", "iteration_10.pt", "iteration_5.pt", "latest.pt"]
    assert (work / "probe.log").read_text().startswith(log_before)
    # the documented command still works afterwards
    out = helpers.rlearn("train", str(saved), "--work-dir", str(work), "--resume", "--set",
                         "train.max_env_steps=160", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert read_checkpoint(work / "ckpt" / "latest.pt")["train_iter"] == 20
    assert "'max_env_steps': 160," in saved.read_text()


# ---------------------------------------------------------- item 12: files rewritten on resume keep modes
def test_files_rewritten_on_resume_keep_their_permissions(tmp_path):
    work = tmp_path / "run"
    config = helpers.probe_config(tmp_path, max_env_steps=8 * 5)
    out = helpers.rlearn("train", str(config), "--work-dir", str(work))
    assert out.returncode == 0, out.stderr
    modes = {work / "config.py": 0o600, work / "probe.log": 0o640}
    for path, mode in modes.items():
        os.chmod(path, mode)
    out = helpers.rlearn("train", str(config), "--work-dir", str(work), "--resume", "--set", "train.max_env_steps=80")
    assert out.returncode == 0, out.stderr
    assert "'max_env_steps': 80," in (work / "config.py").read_text()  # it was rewritten
    for path, mode in modes.items():
        assert stat.S_IMODE(path.stat().st_mode) == mode, path


# ------------------------------------------------------------------------- item 11: one-line errors
def _one_line_error(out, *parts: str) -> None:
    assert out.returncode == 2, out.stdout[-2000:] + out.stderr[-2000:]
    assert "Traceback" not in out.stderr and out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith("rlearn train: error: ")
    for part in parts:
        assert part in out.stderr, out.stderr


def test_work_dir_that_is_a_file(tmp_path):
    config = helpers.probe_config(tmp_path, max_env_steps=8)
    target = tmp_path / "afile"
    target.write_text("not a directory")
    out = helpers.rlearn("train", str(config), "--work-dir", str(target))
    _one_line_error(out, f"work dir '{target}' is a file, not a directory")
    out = helpers.rlearn("train", str(config), "--work-dir", str(target / "sub"))
    _one_line_error(out, f"work dir '{target / 'sub'}' cannot be created: '{target}' is a file")
    assert target.read_text() == "not a directory"


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_device_cuda_without_cuda(tmp_path):
    config = helpers.probe_config(tmp_path, max_env_steps=8)
    out = helpers.rlearn("train", str(config), "--work-dir", str(tmp_path / "run"), "--set", "device=cuda")
    _one_line_error(out, "config key 'device' is 'cuda' but torch finds no CUDA device here", "device='cpu'")


@pytest.mark.parametrize("seed", ["99999999999999999999", str(2**63 - 1)])
def test_seed_out_of_range(tmp_path, seed):
    config = helpers.probe_config(tmp_path, max_env_steps=8)
    out = helpers.rlearn("train", str(config), "--work-dir", str(tmp_path / "run"), "--seed", seed)
    _one_line_error(out, "config key 'seed' (--seed) must be an int in 0..", f"got {seed}")


def test_largest_seed_trains(tmp_path):
    from rlearn.run.ranks import max_seed

    config = helpers.probe_config(tmp_path, max_env_steps=8)
    out = helpers.rlearn("train", str(config), "--work-dir", str(tmp_path / "run"), "--seed", str(max_seed(1)))
    assert out.returncode == 0, out.stderr[-2000:]


def _resume_with(tmp_path, where, value):
    work = tmp_path / "run"
    config = helpers.probe_config(tmp_path, max_env_steps=8 * 5)
    assert helpers.rlearn("train", str(config), "--work-dir", str(work)).returncode == 0
    latest = work / "ckpt" / "latest.pt"
    checkpoint = read_checkpoint(latest)
    node = checkpoint
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = value
    latest.write_bytes(serialize_checkpoint(checkpoint))
    before = {p.name: p.read_bytes() for p in (work / "tb").iterdir()}
    # --resume names the file: a damaged latest.pt alone would make --resume fall back to iteration_<n>.pt
    out = helpers.rlearn("train", str(config), "--work-dir", str(work), "--resume", str(latest), "--set",
                         "train.max_env_steps=80")
    return out, latest, before, work


@pytest.mark.parametrize("where, value", [
    (("states", "collector", "envstep"), "40"),
    (("states", "run", "pending_updates"), "x"),
    (("states", "run", "last_eval_iter"), 2.5),
])
def test_checkpoint_counters_of_the_wrong_type(tmp_path, where, value):
    out, latest, tb_before, work = _resume_with(tmp_path, where, value)
    _one_line_error(out, str(latest), repr(where[-1]), repr(value))
    assert {p.name: p.read_bytes() for p in (work / "tb").iterdir()} == tb_before  # nothing rewound


@pytest.mark.slow
@pytest.mark.parametrize("where, value", [(("train_iter",), "5"), (("envstep",), 4.5)])
def test_top_level_checkpoint_counters_of_the_wrong_type(tmp_path, where, value):
    out, latest, tb_before, work = _resume_with(tmp_path, where, value)
    _one_line_error(out, str(latest), where[-1])
    assert {p.name: p.read_bytes() for p in (work / "tb").iterdir()} == tb_before


# ---------------------------------------------------------- item 11: NaN observations blame the environment
def test_nan_observations_are_blamed_on_the_environment_not_the_policy(tmp_path):
    work = tmp_path / "run"
    config = tmp_path / "nan_ppg.py"
    config.write_text(
        "config = dict(\n"
        f"    exp_name='nan_ppg', custom_imports=[{str(helpers.HERE)!r}],\n"
        "    env=dict(id='NanObs-v0', num_envs=2, kwargs=dict(nan_at=30)),\n"
        "    policy=dict(type='ppg', rollout_steps=8, minibatch_size=8, aux_minibatch_size=16, e_policy=1,\n"
        "                e_value=1, e_aux=1, n_pi=2, hidden_sizes=[16]),\n"
        "    train=dict(max_env_steps=1000), learner=dict(log_freq=2), eval=dict(freq=None),\n"
        "    checkpoint=dict(freq=None),\n"
        ")\n"
    )
    out = helpers.rlearn("train", str(config), "--work-dir", str(work))
    assert out.returncode == 1, out.stderr[-3000:]
    assert "Traceback" not in out.stderr and out.stderr.count("\n") == 1, out.stderr
    # the 30th step of each sub-environment: step() call 30; sub-environment 0 is named first
    assert out.stderr.startswith(
        "rlearn train: error: environment 'NanObs-v0' returned a non-finite observation in sub-environment 0 "
        "at its step() call 30 of this process: ["), out.stderr
    assert "PPG" not in out.stderr and "_forward_collect" not in out.stderr
    line = last_line(work / "nan_ppg.log")
    # 3 iterations of 2 x 8 steps were collected; the 4th rollout failed at its 6th step (env steps 48 + 10)
    assert "run failed: EnvironmentFault: environment 'NanObs-v0'" in line
    assert "(train_iter 3, envstep 58; raised in " in line and "checks.py" in line


def test_finite_check_wrapper():
    import gymnasium as gym

    from rlearn.env import make_vector_env
    from rlearn.env.checks import EnvironmentFault, FiniteCheck

    env = FiniteCheck(make_vector_env("NanObs-v0", 3, seed=0, env_kwargs=dict(nan_at=25)), "NanObs-v0")
    env.reset(seed=0)
    with pytest.raises(EnvironmentFault, match=r"non-finite (final )?observation in sub-environment 0 at its "
                                               r"step\(\) call 25 of this process: \[ *-?0\.\d+ +-?0\.\d+ +nan"):
        for _ in range(30):
            env.step(np.zeros(3, dtype=np.int64))
    env.close()
    # episodes end at step 20: a NaN in a final observation is caught too (the reset one is fine)
    env = FiniteCheck(make_vector_env("NanObs-v0", 2, seed=0, env_kwargs=dict(nan_at=20)), "NanObs-v0")
    env.reset(seed=0)
    for _ in range(19):
        env.step(np.zeros(2, dtype=np.int64))
    with pytest.raises(EnvironmentFault, match="non-finite final observation in sub-environment 0 at its step"):
        env.step(np.zeros(2, dtype=np.int64))
    env.close()
    assert isinstance(env, gym.vector.VectorEnv)
