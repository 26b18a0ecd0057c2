"""The writer names a config may list in ``learner.writers``, and the check of that list (built by
:mod:`rlearn.writers.build`)."""

from __future__ import annotations

from typing import Any, Mapping, Optional

__all__ = ["WRITER_NAMES", "DEFAULT_WRITERS", "check_writer_specs"]

#: the writers a config can name
WRITER_NAMES = ("table", "tensorboard", "jsonl", "csv", "wandb", "mlflow")
#: ``learner.writers`` by default
DEFAULT_WRITERS = ("table", "tensorboard", "jsonl")


def check_writer_specs(specs: Any) -> Optional[str]:
    """None if ``specs`` is a valid ``learner.writers`` list, else what is wrong (for the config check)."""
    if not isinstance(specs, (list, tuple)):
        return f"must be a list of writer names ({', '.join(WRITER_NAMES)}) or dicts with a 'type'"
    for index, spec in enumerate(specs):
        name = spec.get("type") if isinstance(spec, Mapping) else spec
        if name not in WRITER_NAMES:
            return (f"item {index} ({spec!r}) is not a writer: use one of {', '.join(WRITER_NAMES)}, or a dict "
                    "dict(type=NAME, **options)")
    return None
