"""The ``rlearn`` sub-commands, one module each (``HELP``, ``add_arguments(parser)``, ``run(args) -> int``).

:mod:`rlearn.cli` lists them in ``COMMANDS`` and builds the parser; see docs/cli.md.
"""
