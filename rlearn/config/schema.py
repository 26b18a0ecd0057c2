"""The config schema: :data:`SCHEMA` (one :class:`~rlearn.config.spec.Key` per dotted framework key) and
:func:`defaults`, both built from the declarations in :mod:`rlearn.config.sections`."""

from __future__ import annotations

import dataclasses
import textwrap
import typing
from typing import Any, Dict, Mapping, Tuple

from rlearn.config.sections import RunConfig
from rlearn.config.spec import Key

__all__ = ["SCHEMA", "SECTIONS", "FREE_FORM", "defaults", "section_title"]


def _key_from(path: str, hint: Any, meta: Mapping[str, Any], default: Any) -> Key:
    """A :class:`Key` from a field's type hint and :func:`option` metadata: ``Optional[T]`` accepts None; a
    non-Optional key with a None default must be set (``env.id``; the loader fills ``exp_name``)."""
    nullable = False
    origin = typing.get_origin(hint)
    if origin is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        nullable, hint = True, args[0]
        origin = typing.get_origin(hint)
    kind = origin or hint
    item_kind = None
    if kind in (list, dict):
        args = typing.get_args(hint)
        item = args[-1] if args else None
        item_kind = object if item in (None, Any) else (typing.get_origin(item) or item)
    return Key(path=path, kind=kind, nullable=nullable, default=default, item_kind=item_kind, **meta)


def _walk(cls: type, prefix: str, keys: Dict[str, Key], sections: Dict[str, type]) -> None:
    sections[prefix[:-1]] = cls
    hints = typing.get_type_hints(cls)
    instance = cls()
    for f in dataclasses.fields(cls):
        path = f"{prefix}{f.name}"
        if "section" in f.metadata:
            _walk(f.metadata["section"], f"{path}.", keys, sections)
        else:
            keys[path] = _key_from(path, hints[f.name], f.metadata, getattr(instance, f.name))


#: every framework key by dotted path, in declaration order
SCHEMA: Dict[str, Key] = {}
#: every section by dotted path ("" is the top level), in declaration order
SECTIONS: Dict[str, type] = {}
_walk(RunConfig, "", SCHEMA, SECTIONS)

#: dicts whose keys are the user's to choose (environment kwargs, per-key monitor windows)
FREE_FORM: Tuple[str, ...] = tuple(path for path, key in SCHEMA.items() if key.kind is dict)


def defaults(section_path: str = "") -> Dict[str, Any]:
    """The default values as a fresh nested dict: of the whole config, or of one section (``"learner"``)."""
    return dataclasses.asdict(SECTIONS[section_path]())


def section_title(section_path: str) -> Tuple[str, str]:
    """The title (first docstring line) and the notes (the rest) of a section's declaration."""
    doc = (SECTIONS[section_path].__doc__ or "").strip()
    title, _, notes = doc.partition("\n")
    return title.strip(), textwrap.dedent(notes).strip()
