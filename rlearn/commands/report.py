"""``rlearn report EXP_DIR [EXP_DIR ...] [-o DIR]``: aggregate scores of experiments with confidence intervals in
``DIR/report.md``, ``DIR/scores.json`` and PNGs; exit code 2 with one line for a mistake."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Tuple

from rlearn.commands import fail

HELP = "compare experiments (sweep dirs): IQM, CIs, probability of improvement, curves (Markdown + PNGs)"

EPILOG = """\
examples:
  rlearn report experiments/ppo_cartpole experiments/ppg_cartpole -o report/
  rlearn report experiments/ppo_cartpole --train-episodes 100 --reps 10000
  rlearn report experiments/* --normalize 0:500
"""


def _range(text: str) -> Tuple[float, float]:
    """An argparse ``type``: ``LOW:HIGH``."""
    try:
        low, high = text.split(":")
        return float(low), float(high)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LOW:HIGH (e.g. 0:500), got {text!r}") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the arguments of ``rlearn report`` (no heavy imports here)."""
    parser.add_argument("exp_dirs", nargs="+", metavar="EXP_DIR",
                        help="experiment dirs (a sweep's --out; any dir of work dirs), one experiment each")
    parser.add_argument("-o", "--output", default="report", metavar="DIR", help="where report.md and the PNGs go "
                        "(default: report/)")
    parser.add_argument("--train-episodes", type=int, default=None, metavar="N",
                        help="also score each run by the mean return of its last N training episodes (runs of "
                             "rlearn sweep --train-episodes N)")
    parser.add_argument("--train-key", default=None, metavar="KEY",
                        help="also score each run by the last value of this metrics.jsonl key "
                             "(e.g. collector/episode_return_avg)")
    parser.add_argument("--reps", type=int, default=2000, metavar="N", help="bootstrap resamples (default 2000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the bootstrap (default 0)")
    parser.add_argument("--normalize", type=_range, default=None, metavar="LOW:HIGH",
                        help="report (score - LOW) / (HIGH - LOW) instead of raw returns")
    parser.add_argument("--target", type=float, default=None,
                        help="optimality gap target (default: 1 when normalised, else the environment's "
                             "reward_threshold)")


def run(args: argparse.Namespace) -> int:
    """Compute and write the report; the exit code."""
    from rlearn.experiments.child import ExperimentError
    from rlearn.experiments.report import ReportOptions, build_report, verdict, warnings_of, write_report
    from rlearn.experiments.sweep import train_episodes_key

    if args.train_episodes is not None and args.train_key is not None:
        return fail("report", "give --train-episodes or --train-key, not both")
    train_key = train_episodes_key(args.train_episodes) if args.train_episodes is not None else args.train_key
    options = ReportOptions(reps=args.reps, seed=args.seed, train_key=train_key, normalize=args.normalize,
                            target=args.target)
    try:
        experiments, sections = build_report([Path(d) for d in args.exp_dirs], options)
    except ExperimentError as exc:
        return fail("report", exc)
    for line in warnings_of(experiments, sections):
        print(f"rlearn report: warning: {line}", file=sys.stderr)
    try:
        report = write_report(experiments, sections, options, Path(args.output))
    except OSError as exc:
        return fail("report", f"cannot write the report into {args.output}: {exc.strerror or exc}")
    print(f"wrote {report}")
    for section in sections:
        for (x, y), e in section.improvement.items():
            runs = (len(section.scores[x]), len(section.scores[y]))
            print(f"  {section.kind}: {verdict(x, y, e, runs).replace('**', '')}")
    return 0
