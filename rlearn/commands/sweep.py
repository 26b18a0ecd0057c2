"""``rlearn sweep CONFIG --seeds 0-9 [--jobs N] [--out DIR] [--set KEY=VALUE ...]``: one ``rlearn train`` per seed
in its own process and work dir (``DIR/seed_<n>``); the same command again resumes. Exit codes: 0, 1 when a run
failed, 2 for a mistake, 130 / 143 after Ctrl-C / SIGTERM. See docs/experiments.md."""

from __future__ import annotations

import argparse
import collections
from pathlib import Path

from rlearn.commands import fail
from rlearn.executables import shell_command

HELP = "train a config over many seeds, one process and work dir per seed (resumable)"

EPILOG = """\
examples:
  rlearn sweep ppo_cartpole --seeds 0-9 --jobs 2 --out experiments/ppo_cartpole
  rlearn sweep ppo_cartpole --seeds 0-9 --jobs 2 --out experiments/ppo_cartpole   # again: resumes, skips finished
  rlearn sweep examples/custom_policy.py --seeds 0,1,2 --set policy.lr=3e-4 train.max_env_steps=20000
  rlearn sweep td3_hopper --seeds 0-9 --launcher slurm --slurm partition=cpu time=8:00:00   # docs/cluster.md
  rlearn report experiments/ppo_cartpole experiments/ppg_cartpole -o report/
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the arguments of ``rlearn sweep`` (no heavy imports here)."""
    parser.add_argument("config", nargs="?", metavar="CONFIG",
                        help="a config file or bundled config name (as for rlearn train); omit it to continue the "
                             "sweep in --out")
    parser.add_argument("--seeds", default=None, metavar="SEEDS",
                        help="the seeds: a range 0-9, a list 0,3,7, or both 0-4,10 (added to an existing sweep's; at most 10000)")
    parser.add_argument("--jobs", type=int, default=None, metavar="N",
                        help="runs at once (default 1; continuing a sweep: what it was started with); each gets "
                             "cores/N torch threads at most")
    parser.add_argument("--out", default=None, metavar="DIR", help="the experiment dir (default: experiments/<exp_name>)")
    parser.add_argument("--set", dest="overrides", action="extend", nargs="+", default=[], metavar="KEY=VALUE",
                        help="override config values for every run, as for rlearn train")
    parser.add_argument("--train-episodes", type=int, default=None, metavar="N",
                        help="also log the mean return of each run's last N training episodes "
                             "(rlearn report --train-episodes N reads it)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (also: RLEARN_NO_PROGRESS=1)")
    slurm = parser.add_argument_group("Slurm (docs/cluster.md)")
    slurm.add_argument("--launcher", choices=("local", "slurm"), default=None,
                       help="local: processes on this machine (default); slurm: one job array, a task per seed "
                            "(an existing sweep keeps its launcher)")
    slurm.add_argument("--slurm", dest="slurm_options", action="extend", nargs="+", default=[], metavar="KEY=VALUE",
                       help="partition=, time=, cpus_per_task=, mem=, gpus_per_task=, array_parallelism=, account=, "
                            "qos=, constraint=, signal_delay_s=, setup=, extra=")
    slurm.add_argument("--dry-run", action="store_true", help="with --launcher slurm: print the sbatch script, submit nothing")
    slurm.add_argument("--wait", action="store_true", help="with --launcher slurm: follow the jobs until they end")


def run(args: argparse.Namespace) -> int:
    """Run the sweep; the exit code."""
    from rlearn.experiments.child import ExperimentError
    from rlearn.experiments.sweep import Sweep, parse_seeds

    try:
        seeds = parse_seeds(args.seeds) if args.seeds is not None else []
        sweep = Sweep(args.config, seeds, Path(args.out) if args.out else None, args.overrides, args.jobs,
                      args.train_episodes)
    except ExperimentError as exc:
        return fail("sweep", exc)
    if (args.launcher or sweep.state.get("launcher", "local")) == "slurm":
        from rlearn.experiments.slurm_sweep import run_slurm_commands

        return run_slurm_commands(sweep, args)
    if args.slurm_options or args.dry_run or args.wait:
        return fail("sweep", "--slurm, --dry-run and --wait go with --launcher slurm")
    try:
        result = sweep.run(display_enabled=False if args.no_progress else None)
    except ExperimentError as exc:
        return fail("sweep", exc)
    counts = collections.Counter(result.statuses.values())
    print(f"sweep {result.exp_dir}: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
          + f" ({result.wall_s:.1f}s)")
    if result.exit_code in (130, 143):
        print(f"  continue with the same command (or: {shell_command('rlearn', 'sweep', '--out', result.exp_dir)})")
    elif result.exit_code == 0:
        print(f"  report: {shell_command('rlearn', 'report', result.exp_dir)}")
    return result.exit_code
