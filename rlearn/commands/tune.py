"""``rlearn tune CONFIG --space SPACE.py --trials N [--jobs K] [--storage URL] [--out DIR]``: an Optuna study of
``rlearn train`` trials (each in its own process and work dir, pruned when it lags), kept in ``DIR/study.journal``
or ``--storage``. Exit codes: 0, 1 when trials kept failing, 2 for a mistake, 130 / 143 after Ctrl-C / SIGTERM."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from rlearn.commands import fail, int_at_least

HELP = "tune hyperparameters with Optuna: each trial a run with its own logs, pruned early when it lags"

EPILOG = """\
examples:
  rlearn tune dqn_cartpole --space examples/dqn_space.py --trials 20 --jobs 2 --set train.max_env_steps=20000
  rlearn tune dqn_cartpole --space examples/dqn_space.py --trials 20 --storage postgresql://user:pw@db/optuna
  rlearn tune dqn_cartpole --space examples/dqn_space.py --trials 100 --launcher slurm --workers 8 --slurm time=4:00:00
  optuna-dashboard experiments/dqn_cartpole_tune/study.journal
  rlearn train experiments/dqn_cartpole_tune/best_config.py
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the arguments of ``rlearn tune`` (no heavy imports here)."""
    parser.add_argument("config", metavar="CONFIG", help="the base config: a config file or bundled config name")
    parser.add_argument("--space", required=True, metavar="SPACE.py",
                        help="a Python file defining space(trial) -> {dotted.key: value} (and optionally pruner(), "
                             "sampler())")
    parser.add_argument("--trials", type=int, required=True, metavar="N",
                        help="trials the study should have (complete, pruned, running or queued), counting every "
                             "tuner working on it: restarts, other processes and machines")
    parser.add_argument("--jobs", type=int, default=1, metavar="K",
                        help="trials at once on this machine (default 1); each gets cores/K torch threads at most")
    parser.add_argument("--storage", default=None, metavar="URL",
                        help="an Optuna RDB URL, e.g. postgresql://user:password@host/db, or a journal file path "
                             "(default: <out>/study.journal)")
    parser.add_argument("--study-name", default=None, metavar="NAME", help="default: the config's exp_name")
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="the experiment dir (default: experiments/<exp_name>_tune)")
    parser.add_argument("--set", dest="overrides", action="extend", nargs="+", default=[], metavar="KEY=VALUE",
                        help="override base config values for every trial, as for rlearn train")
    parser.add_argument("--startup-trials", type=int, default=5, metavar="N",
                        help="the median pruner prunes nothing until N trials have finished (default 5)")
    parser.add_argument("--warmup-steps", type=int, default=None, metavar="STEPS",
                        help="the median pruner prunes no evaluation before this env step (default: the policy's "
                             "learning_starts plus one eval.freq, so that learning has started)")
    parser.add_argument("--sampler-seed", type=int, default=None, metavar="S", help="seed of the TPE sampler")
    parser.add_argument("--heartbeat", type=float, default=10.0, metavar="SECONDS",
                        help="each running trial's heartbeat interval (default 10); a trial without one for 6 "
                             "intervals (a killed worker) is taken over by another tuner of the study")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (also: RLEARN_NO_PROGRESS=1)")
    slurm = parser.add_argument_group("Slurm (docs/cluster.md)")
    slurm.add_argument("--launcher", choices=("local", "slurm"), default="local",
                       help="local: tune in this process (default); slurm: submit --workers tuners as one job array")
    slurm.add_argument("--workers", type=int_at_least(1), default=1, metavar="N", help="with --launcher slurm: tuners to submit")
    slurm.add_argument("--slurm", dest="slurm_options", action="extend", nargs="+", default=[], metavar="KEY=VALUE",
                       help="as for rlearn sweep: partition=, time=, cpus_per_task=, mem=, array_parallelism=, extra=, ...")
    slurm.add_argument("--dry-run", action="store_true", help="with --launcher slurm: print the sbatch script only")


def run(args: argparse.Namespace) -> int:
    """Run the study; the exit code."""
    from rlearn.executables import shell_command
    from rlearn.experiments.child import ExperimentError

    try:
        import optuna  # noqa: F401
    except ImportError as exc:
        return fail("tune", f"rlearn tune needs optuna ({exc}); install it with: pip install 'rlearn[experiments]'")
    from rlearn.experiments.tune import Tuner

    try:
        tuner = Tuner(args.config, Path(args.space), args.trials, Path(args.out) if args.out else None, args.storage,
                      args.jobs, args.overrides, args.study_name, args.startup_trials, args.warmup_steps,
                      args.sampler_seed, args.heartbeat)
    except ExperimentError as exc:
        return fail("tune", exc)
    if args.launcher == "slurm":
        return submit_workers(args, tuner)
    if args.slurm_options or args.dry_run or args.workers != 1:
        return fail("tune", "--workers, --slurm and --dry-run go with --launcher slurm")
    result = tuner.run(display_enabled=False if args.no_progress else None)
    print(f"study {result.study_name!r} ({result.storage}): "
          + ", ".join(f"{n} {s}" for s, n in sorted(result.counts.items())))
    if tuner.fatal:
        return fail("tune", tuner.fatal)
    if tuner.aborted:
        print(f"rlearn tune: stopped: {tuner.aborted}", file=sys.stderr)
    if result.best_number is not None:
        print(f"  best: trial {result.best_number}, last evaluation return {result.best_value:.4g}, {result.best_params}")
        print(f"  best config: {result.best_config}    (train it: {shell_command('rlearn', 'train', result.best_config)})")
        print(f"  report: {shell_command('rlearn', 'report', result.exp_dir)}")
    if result.exit_code in (130, 143):
        print("  continue with the same command")
    print(f"  dashboard: {dashboard_command(result.storage)}")
    return result.exit_code


def dashboard_command(storage: str) -> str:
    """The optuna-dashboard command for ``storage`` when it is installed, else how to install it."""
    from rlearn.executables import shell_command

    beside = Path(sys.executable).parent / "optuna-dashboard"
    if beside.is_file() or shutil.which("optuna-dashboard"):
        return shell_command("optuna-dashboard", storage)
    return ("optuna-dashboard shows the study; install it with: "
            + shell_command("pip", "install", "-c", "constraints.txt", "-e", ".[dashboard]"))


def submit_workers(args: argparse.Namespace, tuner: "object") -> int:
    """``--launcher slurm``: the study and its dir are ready (checked here); submit ``--workers`` tasks, each
    ``rlearn tune`` of the same study with this command's options (paths made absolute for the nodes)."""
    from rlearn.experiments.child import ExperimentError

    try:
        from rlearn.experiments.slurm import parse_slurm_options, submit_tune_workers
    except ImportError as exc:
        return fail("tune", f"--launcher slurm needs submitit ({exc}); install it with: pip install 'rlearn[slurm]'")
    config = str(Path(args.config).resolve()) if Path(args.config).is_file() else args.config
    argv = ["tune", config, "--space", str(Path(args.space).resolve()), "--trials", str(args.trials), "--jobs",
            str(args.jobs), "--out", str(Path(tuner.exp_dir).resolve()), "--startup-trials", str(args.startup_trials),
            "--heartbeat", str(args.heartbeat), "--no-progress"]
    for option, value in (("--storage", args.storage), ("--study-name", args.study_name),
                          ("--warmup-steps", args.warmup_steps)):
        if value is not None:
            argv += [option, str(value)]
    if args.overrides:
        argv += ["--set", *args.overrides]
    try:
        message, _ = submit_tune_workers(argv, tuner.exp_dir, args.workers, parse_slurm_options(args.slurm_options),
                                         args.dry_run, args.sampler_seed)
    except ExperimentError as exc:
        return fail("tune", exc)
    print(message)
    if not args.dry_run:
        print(f"  logs: {Path(tuner.exp_dir) / 'slurm' / 'logs'}; trials: {Path(tuner.exp_dir)}/trial_<n>/")
        print(f"  state of the study: {dashboard_command(tuner.storage_url)}")
    return 0
