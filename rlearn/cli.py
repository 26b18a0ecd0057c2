"""The ``rlearn`` command line: one sub-command per module of :mod:`rlearn.commands`, each with ``HELP`` (its
line in ``rlearn --help``), ``EPILOG`` (examples, optional), ``add_arguments(parser)`` (cheap: no torch
import) and ``run(args) -> int`` (the exit code)."""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Optional, Sequence

from rlearn import __version__

#: sub-command name -> module implementing it, in the order ``rlearn --help`` lists them
COMMANDS = {name: f"rlearn.commands.{name}" for name in ("train", "trace", "eval", "plot", "sweep", "report", "tune")}


def build_parser() -> argparse.ArgumentParser:
    """Build the top-level parser with every sub-command registered."""
    parser = argparse.ArgumentParser(prog="rlearn",
                                     description="rlearn: reinforcement learning whose logs you can trust.")
    parser.add_argument("--version", action="version", version=f"rlearn {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(module_name)
        sub = subparsers.add_parser(name, help=module.HELP, description=module.HELP,
                                    epilog=getattr(module, "EPILOG", None),
                                    formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(sub)
        sub.set_defaults(_module=module)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the ``rlearn`` console script; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        return int(args._module.run(args) or 0)
    except KeyboardInterrupt:
        print("rlearn: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
