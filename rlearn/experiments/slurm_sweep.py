"""``rlearn sweep`` on Slurm: :class:`~rlearn.experiments.slurm.SlurmSweep`, reached without importing submitit
until it is needed."""

from __future__ import annotations

from typing import Any

from rlearn.experiments.child import ExperimentError

__all__ = ["SlurmSweep", "SEED_STATES", "run_slurm_commands"]

#: what ``rlearn sweep --out DIR`` says of a seed of a Slurm sweep
SEED_STATES = ("done", "queued", "running", "failed", "stopped", "not submitted")


def __getattr__(name: str) -> Any:
    if name == "SlurmSweep":  # it needs submitit
        from rlearn.experiments.slurm import SlurmSweep

        return SlurmSweep
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def run_slurm_commands(sweep: Any, args: Any) -> int:
    """``rlearn sweep`` with ``--launcher slurm`` or on a Slurm sweep's ``--out``: the exit code (2 with one
    line for a bad ``--slurm`` item or a missing submitit / Slurm)."""
    from rlearn.commands import fail

    try:
        from rlearn.experiments.slurm import parse_slurm_options, run_slurm_sweep
    except ImportError as exc:
        return fail("sweep", f"--launcher slurm needs submitit ({exc}); install it with: pip install 'rlearn[slurm]'")
    try:
        return run_slurm_sweep(sweep, parse_slurm_options(args.slurm_options), args.dry_run, args.wait)
    except ExperimentError as exc:
        return fail("sweep", exc)
