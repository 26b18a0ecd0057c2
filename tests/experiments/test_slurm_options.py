"""``rlearn sweep --launcher slurm`` without a cluster: option parsing, the dry run's sbatch script, and that
a local sweep imports nothing of Slurm."""

from __future__ import annotations

import subprocess
import sys

import pytest


def test_slurm_options_and_time_formats():
    pytest.importorskip("submitit")
    from rlearn.experiments.child import ExperimentError
    from rlearn.experiments.slurm import parse_slurm_options, sbatch_parameters

    options = parse_slurm_options(["partition=gpu", "time=1-02:30:00", "cpus_per_task=4", "mem=8G",
                                   "array_parallelism=3", "extra=exclude=node3 --qos=high", "setup=module load x; echo"])
    assert options["time"] == 1590
    params = sbatch_parameters(options, "rlearn-x", 10)
    assert params["partition"] == "gpu" and params["cpus_per_task"] == 4 and params["mem"] == "8G"
    assert params["array_parallelism"] == 3 and params["setup"] == ["module load x", "echo"]
    assert params["additional_parameters"] == {"requeue": True, "exclude": "node3", "qos": "high"}
    for text, minutes in (("90", 90), ("30:00", 30), ("4:00:00", 240), ("0:0:30", 1), ("2-0", 2880)):
        assert parse_slurm_options([f"time={text}"])["time"] == minutes
    for bad, says in (("partion=gpu", "KEY one of partition"), ("cpus_per_task=0", "positive whole number"),
                      ("time=soon", "not minutes")):
        with pytest.raises(ExperimentError, match=says):
            parse_slurm_options([bad])


def test_a_dry_run_prints_the_array_and_submits_nothing(tmp_path):
    pytest.importorskip("submitit")
    out = tmp_path / "exp"
    done = subprocess.run([sys.executable, "-m", "rlearn", "sweep", "ppo_cartpole", "--seeds", "0-9", "--out", str(out),
                           "--launcher", "slurm", "--slurm", "partition=cpu", "time=2:00:00", "cpus_per_task=2",
                           "mem=4G", "array_parallelism=4", "extra=exclude=node3", "--dry-run"],
                          capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    for line in ("#SBATCH --array=0-9%4", "#SBATCH --partition=cpu", "#SBATCH --time=120", "#SBATCH --cpus-per-task=2",
                 "#SBATCH --mem=4G", "#SBATCH --requeue", "#SBATCH --exclude=node3", "#SBATCH --signal=USR2@90"):
        assert line in done.stdout.splitlines(), line
    assert "would submit seeds 0, 1, 2, 3, 4, 5, 6, 7, 8, 9" in done.stdout
    assert not (out / "slurm").exists()


def test_slurm_options_without_the_slurm_launcher_are_refused(tmp_path):
    done = subprocess.run([sys.executable, "-m", "rlearn", "sweep", "ppo_cartpole", "--seeds", "0", "--out",
                           str(tmp_path / "exp"), "--slurm", "time=10"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.strip() == \
        "rlearn sweep: error: --slurm, --dry-run and --wait go with --launcher slurm"


def test_a_local_sweep_imports_nothing_of_slurm():
    code = ("import sys; from rlearn.commands import sweep; import argparse; p = argparse.ArgumentParser(); "
            "sweep.add_arguments(p); import rlearn.experiments.sweep; "
            "print(sorted(m for m in sys.modules if 'submitit' in m or m.endswith('.slurm') or 'slurm_sweep' in m))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[]", done.stderr
