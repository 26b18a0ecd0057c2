"""Helpers of tests/faults/test_run_*.py (loaded by path: imported by the configs' ``custom_imports`` and
by the tests with :func:`load`): an environment that turns NaN, and config files for tiny runs.

* ``NanObs-v0``: CartPole-like 4-dimensional observations that become NaN at the ``nan_at``-th step of
  each sub-environment (counted since construction), rewards 1, episodes of 20 steps.
* ``SlowStart-v0``: the same, with a slow construction that says when it starts (signals during start-up).
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from rlearn.env import register_env

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve()
PROBE = ROOT / "tests" / "distributed" / "dist_helpers.py"


class NanObsEnv(gym.Env):
    """See the module docstring."""

    def __init__(self, nan_at: int = 10**9) -> None:
        self.observation_space = spaces.Box(-1.0, 1.0, (4,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self.nan_at = nan_at
        self.steps = 0
        self.t = 0

    def reset(self, *, seed: Optional[int] = None, options: Any = None):
        super().reset(seed=seed)
        self.t = 0
        return self.np_random.uniform(-0.1, 0.1, 4).astype(np.float32), {}

    def step(self, action: Any):
        self.steps += 1
        self.t += 1
        obs = self.np_random.uniform(-0.1, 0.1, 4).astype(np.float32)
        if self.steps >= self.nan_at:
            obs[2] = np.nan
        return obs, 1.0, False, self.t >= 20, {}


class SlowStartEnv(NanObsEnv):
    """``SlowStart-v0``: ``NanObs-v0`` whose construction (at the run's start-up) creates the file named by
    ``RLEARN_TEST_STARTUP_MARKER`` and then takes ``RLEARN_TEST_STARTUP_S`` seconds (default 3)."""

    def __init__(self) -> None:
        super().__init__()
        marker = os.environ.get("RLEARN_TEST_STARTUP_MARKER")
        if marker:
            Path(marker).touch()
            time.sleep(float(os.environ.get("RLEARN_TEST_STARTUP_S", "3")))


if "NanObs-v0" not in gym.registry:
    register_env("NanObs-v0", NanObsEnv)
if "SlowStart-v0" not in gym.registry:
    register_env("SlowStart-v0", SlowStartEnv)


def load(path: Path = HERE) -> Any:
    """Import a helper file by path, once (works however pytest imports the test modules)."""
    if path.stem in sys.modules:
        return sys.modules[path.stem]
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


def probe_config(directory: Path, name: str = "probe", **overrides: Any) -> Path:
    """A config file training the ``dist_probe`` policy (tests/distributed/dist_helpers.py): 2 envs x 4 steps
    per iteration and process = 8 env steps per process and iteration."""
    train = dict(max_env_steps=overrides.pop("max_env_steps", 10**7))
    env = overrides.pop("env", dict(id="CartPole-v1", num_envs=2))
    learner = overrides.pop("learner", dict(log_freq=5, monitor_window=5))
    checkpoint = overrides.pop("checkpoint", dict(freq=None))
    cfg: Dict[str, Any] = dict(
        exp_name=name, seed=3, custom_imports=[str(PROBE), str(HERE)], env=env,
        policy=dict(type="dist_probe", rollout_steps=4), train=train, learner=learner,
        eval=dict(freq=None, episodes=1, stop_value=None), checkpoint=checkpoint, dist=dict(timeout_s=60),
    )
    cfg.update(overrides)
    path = directory / f"{name}.py"
    path.write_text(f"config = {cfg!r}\n")
    return path


def child_env(**extra: str) -> Dict[str, str]:
    env = dict(os.environ, RLEARN_NO_PROGRESS="1", PYTHONUNBUFFERED="1", **extra)
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "RLEARN_TORCHRUN_CHILD"):
        env.pop(name, None)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def rlearn(*args: str, cwd: Path = ROOT, timeout: float = 300, **extra: str) -> subprocess.CompletedProcess:
    """Run ``python -m rlearn ARGS`` to the end."""
    return subprocess.run([sys.executable, "-m", "rlearn", *args], capture_output=True, text=True, cwd=cwd,
                          env=child_env(**extra), timeout=timeout)


def start(*args: str, cwd: Path = ROOT, **extra: str) -> subprocess.Popen:
    """Start ``python -m rlearn ARGS`` (stdout and stderr captured)."""
    return subprocess.Popen([sys.executable, "-m", "rlearn", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=cwd, env=child_env(**extra))


def wait_for(predicate: Any, timeout: float, proc: Optional[subprocess.Popen] = None, what: str = "") -> None:
    """Poll ``predicate()`` every 0.1 s; fail after ``timeout`` s or when ``proc`` ended first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc is not None and proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"the process ended (rc {proc.returncode}) before {what}:\n{out[-3000:]}\n{err[-3000:]}")
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def descendants(pid: int) -> List[int]:
    """Every living descendant of ``pid`` (from /proc)."""
    children: Dict[int, List[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def kill_all(pids: List[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
