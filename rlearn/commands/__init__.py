"""The ``rlearn`` sub-commands, one module each (see :mod:`rlearn.cli`), and what they share."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable


def fail(command: str, message: Any, code: int = 2) -> int:
    """Print ``rlearn <command>: error: <message>`` as one line on stderr; returns the exit ``code``."""
    print(f"rlearn {command}: error: {' '.join(str(message).split())}", file=sys.stderr)
    return code


def int_at_least(minimum: int, name: str = "") -> Callable[[str], int]:
    """An argparse ``type``: an integer ``>= minimum``, else a message (about ``name``) saying which rule the
    text broke."""
    what = f"{name} must" if name else "must"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} be an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{what} be >= {minimum}, got {value}")
        return value

    return parse
