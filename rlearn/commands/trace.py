"""``rlearn trace WORK_DIR``: merge the ranks' trace records into one Chrome Trace Event JSON and summarise it."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import List

from rlearn.commands import fail, int_at_least
from rlearn.executables import shell_command

HELP = "merge a run's timeline records into a Chrome/Perfetto trace (.json or .json.gz) and print a summary"


def _rank_list(text: str) -> List[int]:
    """Parse ``--ranks 0,1,3``."""
    try:
        ranks = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--ranks must be comma-separated integers, got {text!r}") from None
    if not ranks or any(rank < 0 for rank in ranks):
        raise argparse.ArgumentTypeError(f"--ranks must list non-negative ranks, got {text!r}")
    return ranks


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the arguments of ``rlearn trace``."""
    parser.add_argument("work_dir", metavar="WORK_DIR",
                        help="the run's work dir (holding trace/rank<r>.jsonl), or the trace folder itself")
    parser.add_argument("-o", "--output", default=None,
                        help="output file; gzip-compressed when it ends in .gz (default: WORK_DIR/trace.json)")
    parser.add_argument("--ranks", type=_rank_list, default=None, metavar="R[,R...]",
                        help="only these ranks, e.g. 0,1 (default: every rank found)")
    parser.add_argument("--from-iter", type=int_at_least(0, "iteration"), default=None, metavar="N",
                        help="keep what lies within learner iterations N.. (spans recorded with an iter arg)")
    parser.add_argument("--to-iter", type=int_at_least(0, "iteration"), default=None, metavar="M",
                        help="keep what lies within learner iterations ..M (inclusive)")
    parser.add_argument("--no-summary", action="store_true", help="do not print the summary table")


def run(args: argparse.Namespace) -> int:
    """Merge, validate, write, summarise; returns 0, or 1 with a message on stderr when it cannot."""
    from rlearn.trace.merge import TraceMergeError, merge_work_dir, trace_dir, write_trace
    from rlearn.trace.records import RecordsError
    from rlearn.trace.summary import format_summary, summarize
    from rlearn.trace.validate import check_trace

    try:
        result = merge_work_dir(args.work_dir, ranks=args.ranks, from_iter=args.from_iter, to_iter=args.to_iter)
    except (TraceMergeError, RecordsError) as exc:
        return fail("trace", exc, 1)
    check_trace(result.trace)  # a failure here is a bug in the merger, not in the user's records
    if args.output is not None:
        output = Path(args.output)
    else:
        folder = trace_dir(args.work_dir)
        output = (folder.parent if folder.name == "trace" else folder) / "trace.json"
    write_trace(result.trace, output)
    ranks = ", ".join(str(info.rank) for info in result.ranks)
    print(f"wrote {output}: {len(result.intervals)} spans, {len(result.counters)} counter samples, "
          f"ranks {ranks or '-'}")
    if result.torn_lines:
        print(f"note: skipped {result.torn_lines} partially written record line(s) "
              "(a process stopped while writing)")
    for info in result.ranks:  # rank 0 is the reference clock the others are corrected to
        if info.rank != 0 and (info.clock_offset_ns or info.clock_error_ns):
            print(f"rank {info.rank}: clock offset {info.clock_offset_ns / 1e3:.1f} us "
                  f"+- {info.clock_error_ns / 1e3:.1f} us corrected")
    if not args.no_summary:
        print()
        print(format_summary(summarize(result.intervals)))
    view = shell_command("python", "-m", "rlearn.trace.view", output)
    install = shell_command("pip", "install", "rlearn[trace]")
    print(f"\nopen it offline: {view}  ({install}; 127.0.0.1 only)"
          f"\nor online: https://ui.perfetto.dev (Open trace file), or chrome://tracing (Load)")
    return 0
