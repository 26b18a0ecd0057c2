"""``python -m rlearn`` is the same as the ``rlearn`` command."""

import sys

from rlearn.cli import main

if __name__ == "__main__":
    sys.exit(main())
