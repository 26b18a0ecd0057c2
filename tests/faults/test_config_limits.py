"""Config values that would hurt the machine or the records are one-line errors before anything is
allocated or written: a batch larger than the replay buffer (``batch_size=1e9`` grew to 23 GB and was
OOM-killed with nothing in the log), a buffer larger than the memory, an empty ``--work-dir`` (the current
directory), an ``exp_name`` with a newline, a writer listed twice (every point written twice)."""

from __future__ import annotations

import gymnasium as gym
import pytest
import run_fault_helpers as helpers  # tests/faults/ is on sys.path (pytest's rootdir insertion)

from rlearn.config import ConfigError, load_config
from rlearn.run import build


def _one_line(out, message: str) -> None:
    assert out.returncode == 2, out.stderr[-3000:]
    assert out.stderr == f"rlearn train: error: {message}\n"


def test_a_buffer_larger_than_the_memory_is_a_config_error_before_it_is_allocated(tmp_path):
    out = helpers.rlearn("train", "td3_pendulum", "--work-dir", str(tmp_path / "run"), "--set", "buffer.size=1e11",
                         "train.max_env_steps=1e11")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.startswith("rlearn train: error: config key 'buffer.size' is 100000000000: a full replay buffer "
                                 "of 'Pendulum-v1' (36 bytes per transition) takes 3.3 TiB, but this machine has ")
    assert out.stderr.endswith(" here)\n") and len(out.stderr.splitlines()) == 1
    assert "run failed: ConfigError: config key 'buffer.size'" in (tmp_path / "run" / "td3_pendulum.log").read_text()


def test_a_batch_larger_than_the_buffer_is_a_config_error(tmp_path):
    out = helpers.rlearn("train", "td3_pendulum", "--work-dir", str(tmp_path / "run"), "--set", "policy.batch_size=1e9")
    _one_line(out, "config key 'policy.batch_size' is 1000000000 but 'buffer.size' is 200000: a batch is drawn from "
                   "the buffer's transitions and cannot be larger than the buffer; lower policy.batch_size or raise "
                   "buffer.size")


def test_buffer_limits_count_every_stored_field():
    env = gym.vector.SyncVectorEnv([lambda: gym.make("Pendulum-v1")])
    try:
        cfg = load_config("td3_pendulum", overrides=["buffer.size=1000"])
        # obs and next_obs 3 x float32, action 1 x float32, reward and terminated float32: 36 bytes
        assert build.check_buffer_limits(cfg, env, batch_size=1000, memory=36_000) == 36_000
        with pytest.raises(ConfigError, match=r"a full replay buffer of 'Pendulum-v1' \(36 bytes per transition\) "
                                              r"takes 35\.2 KiB, but this machine has 35\.2 KiB of memory available; "
                                              r"lower buffer.size \(at most about 999 here\)"):
            build.check_buffer_limits(cfg, env, memory=35_999)
        # a run stores at most train.max_env_steps transitions: a larger buffer is never filled
        short = load_config("td3_pendulum", overrides=["buffer.size=1e6", "train.max_env_steps=100"])
        assert build.check_buffer_limits(short, env, memory=3600) == 3600
        with pytest.raises(ConfigError, match=r"is 1000000: the 100 transitions of train.max_env_steps of "
                                              r"'Pendulum-v1' \(36 bytes per transition\) takes 3\.5 KiB"):
            build.check_buffer_limits(short, env, memory=3599)
        with pytest.raises(ConfigError, match="'policy.batch_size' is 1001 but 'buffer.size' is 1000"):
            build.check_buffer_limits(cfg, env, batch_size=1001, memory=10**12)
    finally:
        env.close()
    assert build.available_memory() > 0


def test_an_empty_work_dir_is_refused_instead_of_training_into_the_current_directory(tmp_path):
    out = helpers.rlearn("train", "td3_pendulum", "--work-dir", "", cwd=tmp_path)
    _one_line(out, "--work-dir is empty (''): name a directory, or leave --work-dir out for work_dirs/<exp_name>")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["a\nb", "tab\there", "bell\a"])
def test_an_exp_name_with_a_control_character_is_refused(name):
    with pytest.raises(ConfigError, match=r"^config key 'exp_name' must be a non-empty name usable as a directory "
                                          r"name \(no '/', no surrounding spaces, no newline or other control "
                                          r"character\), got "):
        load_config("td3_pendulum", overrides=[("exp_name", name)])


def test_a_writer_listed_twice_is_refused():
    with pytest.raises(ConfigError, match=r"^config key 'learner.writers' lists the 'jsonl' writer 2 times \(items 1, "
                                          r"3\): every point would be written that many times; list each writer once$"):
        load_config("td3_pendulum", overrides=[("learner.writers", ["table", "jsonl", "csv", dict(type="jsonl")])])
    assert load_config("td3_pendulum", overrides=[("learner.writers", ["table", "jsonl", "csv"])])
