"""``rlearn train CONFIG``: train a policy from a config file or a bundled config. Exit codes (docs/cli.md): 0
finished, 2 a mistake in the command, config or checkpoint (one line), 128 + the signal after Ctrl-C / SIGTERM /
SIGHUP, 1 any other failure. ``--nproc N`` re-launches the command through ``torchrun`` in N processes."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from typing import Any, Dict, Optional

from rlearn.commands import fail

HELP = "train a policy from a config file or a bundled config"

EPILOG = """\
examples:
  rlearn train td3_pendulum
  rlearn train examples/custom_policy.py --set train.max_env_steps=20000 --set learner.log_freq=20
  rlearn train ppg_cartpole --work-dir runs/ppg --seed 3
  rlearn train td3_pendulum --resume            # continue work_dirs/<exp_name> from ckpt/latest.pt
  rlearn train --list-configs
  rlearn train ppg_cartpole --nproc 2           # 2 processes on this machine (torchrun, gloo on CPU)
  torchrun --nproc_per_node 2 -m rlearn train ppg_cartpole    # the same, launched by hand
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the arguments of ``rlearn train`` (no heavy imports here)."""
    parser.add_argument("config", nargs="?", metavar="CONFIG",
                        help="a Python config file defining `config = dict(...)`, or a bundled config name")
    parser.add_argument("--work-dir", metavar="DIR", default=None,
                        help="where the log, tb/, ckpt/ and config.py go (default: work_dirs/<exp_name>)")
    parser.add_argument("--seed", type=int, default=None, metavar="N", help="override the config's seed")
    parser.add_argument("--set", dest="overrides", action="extend", nargs="+", default=[], metavar="KEY=VALUE",
                        help="override a config value by dotted key, e.g. --set train.max_env_steps=5000 "
                             "policy.lr=3e-4 (values are read as the key's type)")
    parser.add_argument("--resume", nargs="?", const=True, default=None, metavar="PATH",
                        help="continue a run: from PATH, or from <work-dir>/ckpt/latest.pt without PATH")
    parser.add_argument("--list-configs", action="store_true", help="list the bundled configs and exit")
    parser.add_argument("--print-config", action="store_true",
                        help="print the resolved config (defaults and overrides applied, each key commented with its "
                             "help) and exit")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (also: RLEARN_NO_PROGRESS=1)")
    parser.add_argument("--nproc", type=int, default=None, metavar="N",
                        help="train in N processes on this machine: re-launches this command through torchrun "
                             "(gloo on CPU, nccl on GPU); see docs/distributed.md")
    parser.add_argument("--debug", action="store_true", help="show the full traceback of a config or checkpoint error")


def _list_configs() -> int:
    import importlib

    from rlearn.configs import available_configs

    names = available_configs()
    width = max(map(len, names), default=0)
    for name in names:
        summary = (importlib.import_module(f"rlearn.configs.{name}").__doc__ or "").strip().splitlines()
        print(f"{name:<{width}}  {summary[0] if summary else ''}")
    return 0


def run(args: argparse.Namespace) -> int:
    """Load the config, train, and return the exit code."""
    if args.list_configs:
        return _list_configs()
    if not args.config:
        return fail("train", "CONFIG is required: a config file (e.g. examples/custom_policy.py) or a bundled "
                             "config name (see: rlearn train --list-configs)")
    try:
        return _train(args)
    except Exception as exc:
        code = _exit_code(exc)
        if code is None or args.debug or os.environ.get("RLEARN_DEBUG", "") not in ("", "0"):
            raise
        from rlearn.run.ranks import RanksDisagree

        if isinstance(exc, RanksDisagree) and exc.rank != 0:  # every rank raises it alike: rank 0 says it
            time.sleep(RANK_EXIT_GRACE_S)
            return code
        return fail("train", exc, code)
    except KeyboardInterrupt as exc:
        from rlearn.run.signals import StopNow, signal_exit_code

        if not isinstance(exc, StopNow):
            raise
        print(f"rlearn train: {exc}", file=sys.stderr)  # a second Ctrl-C / SIGTERM: stopped at once
        return signal_exit_code(exc.signum)


#: seconds a rank > 0 waits before exiting on an error rank 0 reports, so that rank 0 says it before torchrun
#: stops every rank because one exited
RANK_EXIT_GRACE_S = 2.0


def _exit_code(exc: Exception) -> Optional[int]:
    """2 for a mistake in the config or the checkpoint, 1 for a failure told in one line (NaN from the environment,
    a lost rank, a full disk); None for a bug (traceback)."""
    from rlearn.checkpoint import CheckpointError
    from rlearn.config import ConfigError
    from rlearn.distributed import DistributedError
    from rlearn.env.checks import EnvironmentFault
    from rlearn.fileio import FileWriteError

    if isinstance(exc, (ConfigError, CheckpointError)):
        return 2
    return 1 if isinstance(exc, (DistributedError, EnvironmentFault, FileWriteError)) else None


def _train(args: argparse.Namespace) -> int:
    from rlearn.config import load_config

    cfg = load_config(args.config, overrides=args.overrides, seed=args.seed)
    if args.print_config:
        from rlearn.config import format_config

        print(format_config(cfg))  # one key per line, each framework key commented with its help
        return 0
    if args.nproc is not None:
        launched = _launch_processes(args, cfg)
        if launched is not None:
            return launched

    from rlearn.run import train
    from rlearn.run.signals import signal_exit_code

    if os.environ.get("TORCHELASTIC_ERROR_FILE"):  # under torchrun: its failure summary shows our traceback
        from torch.distributed.elastic.multiprocessing.errors import record

        train = record(train)
    result = train(cfg, work_dir=args.work_dir, resume=args.resume, progress=False if args.no_progress else None)
    if result.interrupted:
        return signal_exit_code(signal.Signals[result.stop_signal or "SIGINT"])
    return 0


def _launch_processes(args: argparse.Namespace, cfg: Dict[str, Any]) -> Optional[int]:
    """``--nproc N``: the exit code of the same command run by torchrun in N processes, or None to train in
    this process (N == 1, or already one of torchrun's processes with a matching world size)."""
    if args.nproc < 1:
        return fail("train", f"--nproc must be >= 1, got {args.nproc}")
    world = os.environ.get("WORLD_SIZE")
    if world is not None:  # already launched (by torchrun, or by a previous --nproc)
        if world != str(args.nproc):
            return fail("train", f"--nproc {args.nproc} but this process is one of WORLD_SIZE={world} launched "
                                 "processes")
        return None
    if args.nproc == 1:
        return None
    from rlearn.distributed.launch import relaunch
    from rlearn.run.resume_check import precheck_launch

    # what every process would refuse (or find complete) is said once, here, before torchrun starts them
    complete = precheck_launch(cfg, args.work_dir, args.resume, args.nproc)
    if complete is not None:
        complete.report(cfg["exp_name"], complete.work_dir)
        return 0
    return relaunch(args.nproc, ["train", *_rebuild_argv(args)])


def _rebuild_argv(args: argparse.Namespace) -> list:
    """The command-line arguments of ``args`` without ``--nproc`` (what each launched process gets)."""
    argv = [args.config]
    for flag, value in (("--work-dir", args.work_dir), ("--seed", args.seed), ("--resume", args.resume),
                        ("--no-progress", args.no_progress or None), ("--debug", args.debug or None)):
        if value is not None:
            argv += [flag] if value is True else [flag, str(value)]
    return argv + (["--set", *args.overrides] if args.overrides else [])
