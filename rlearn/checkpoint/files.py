"""Checkpoint files: a safe on-disk encoding, reading with validation, RNG state, pruning and resuming.

A checkpoint is a ``torch.save`` file of one dict of tensors, Python primitives and plain containers, so it loads
with ``torch.load(weights_only=True)`` and opening one never runs code from the file (see docs/checkpoints.md).
"""

from __future__ import annotations

import collections
import io
import logging
import math
import os
import pickle
import random
import re
import zipfile
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple, Union

import numpy as np
import torch

from rlearn.checkpoint.integrity import CheckpointError, append_digest, verify_archive
from rlearn.fileio import atomic_write_bytes  # noqa: F401 - rlearn.checkpoint.files.atomic_write_bytes
from rlearn.values import is_int

#: version of the checkpoint layout; bumped when a section changes meaning
FORMAT_VERSION = 1
#: top-level keys every rlearn checkpoint has
REQUIRED_SECTIONS = ("format", "format_version", "rlearn_version", "policy_class", "train_iter", "envstep", "learner",
                     "policy", "hooks", "states", "rng")
#: the sections :func:`read_checkpoint` always returns
HEADER = ("format", "format_version", "train_iter", "envstep")
#: value of the ``format`` key: tells an rlearn checkpoint from any other torch file
FORMAT_TAG = "rlearn.checkpoint"

_TYPE_KEY = "__rlearn_type__"
_ITERATION_RE = re.compile(r"^iteration_(\d+)\.pt$")

PathLike = Union[str, os.PathLike]

_log = logging.getLogger("rlearn.checkpoint")


def encode_state(obj: Any, where: str = "checkpoint") -> Any:
    """``obj`` with numpy arrays/scalars and deques replaced by tagged plain containers; :class:`CheckpointError`
    naming the dotted path (from ``where``, the root's name) of the first value that cannot be stored safely."""
    if isinstance(obj, np.generic):  # before the primitives: np.float64 is a subclass of float
        return {_TYPE_KEY: "npscalar", "value": encode_state(np.asarray(obj), where)}
    if obj is None or isinstance(obj, (bool, int, float, str, bytes, torch.Tensor, torch.dtype, torch.device)):
        return obj
    if isinstance(obj, np.ndarray):
        if obj.dtype.hasobject:
            raise CheckpointError(f"{where}: numpy array of dtype object cannot be stored in a checkpoint")
        array = np.ascontiguousarray(obj)
        try:
            data: Any = torch.from_numpy(array)
        except TypeError:  # dtypes torch has no tensor type for (strings, complex256...): raw bytes
            data = array.tobytes()
        # shape of obj: ascontiguousarray turns a 0-d array into a 1-d one
        return {_TYPE_KEY: "ndarray", "dtype": array.dtype.str, "shape": tuple(obj.shape), "data": data}
    if isinstance(obj, Mapping):
        if _TYPE_KEY in obj:
            raise CheckpointError(f"{where}: the key {_TYPE_KEY!r} is reserved by the checkpoint format")
        out = {key: encode_state(value, f"{where}.{key}") for key, value in obj.items()}
        return collections.OrderedDict(out) if isinstance(obj, collections.OrderedDict) else out
    if isinstance(obj, (list, tuple, collections.deque)):
        items = [encode_state(v, f"{where}[{i}]") for i, v in enumerate(obj)]
        if isinstance(obj, collections.deque):
            return {_TYPE_KEY: "deque", "items": items, "maxlen": obj.maxlen}
        return items if isinstance(obj, list) else tuple(items)
    if isinstance(obj, (set, frozenset)):
        return {encode_state(v, f"{where}{{}}") for v in obj}
    raise CheckpointError(
        f"{where}: cannot store an object of type {type(obj).__module__}.{type(obj).__qualname__} in a "
        "checkpoint; state_dict() methods must return tensors, numpy arrays, numbers, strings and "
        "plain containers (dict, list, tuple)")


def decode_state(obj: Any, where: str = "") -> Any:
    """Invert :func:`encode_state`. A tagged entry that contradicts itself (an array whose shape needs more
    values than it holds, an unknown dtype) raises :class:`CheckpointError` naming its dotted path ``where``."""
    if isinstance(obj, Mapping):
        kind = obj.get(_TYPE_KEY)
        if kind == "ndarray":
            return _decode_array(obj, where or "the checkpoint")
        if kind == "npscalar":
            return decode_state(obj.get("value"), where)[()]
        if kind == "deque":
            items, maxlen = obj.get("items"), obj.get("maxlen")
            if not isinstance(items, list) or not (maxlen is None or is_int(maxlen) and maxlen >= 0):
                raise CheckpointError(f"{where or 'the checkpoint'}: a deque needs a list of items and a maxlen "
                                      f"(None or an int >= 0), got maxlen {maxlen!r}")
            return collections.deque((decode_state(v, f"{where}[{i}]") for i, v in enumerate(items)), maxlen=maxlen)
        out = {key: decode_state(value, f"{where}.{key}" if where else str(key)) for key, value in obj.items()}
        return collections.OrderedDict(out) if isinstance(obj, collections.OrderedDict) else out
    if isinstance(obj, (list, tuple)):
        items = [decode_state(v, f"{where}[{i}]") for i, v in enumerate(obj)]
        return items if isinstance(obj, list) else tuple(items)
    return obj


def _decode_array(obj: Mapping[str, Any], where: str) -> np.ndarray:
    """A numpy array from its stored form, after checking that dtype, shape and data agree."""
    shape, data = obj.get("shape"), obj.get("data")
    try:
        dtype = np.dtype(obj.get("dtype"))
    except (TypeError, ValueError):
        raise CheckpointError(f"{where}: array dtype {obj.get('dtype')!r} is not a numpy dtype") from None
    if not isinstance(shape, (tuple, list)) or not all(is_int(n) and n >= 0 for n in shape):
        raise CheckpointError(f"{where}: array shape must be a list of ints >= 0, got {shape!r}")
    if isinstance(data, torch.Tensor):
        held = data.numel()
    elif isinstance(data, bytes) and dtype.itemsize:
        held = len(data) // dtype.itemsize if len(data) % dtype.itemsize == 0 else -1
    else:
        raise CheckpointError(f"{where}: array data must be a tensor or bytes, got {type(data).__name__}")
    needed = math.prod(shape)
    if needed != held:
        raise CheckpointError(f"{where}: an array of shape {tuple(shape)} needs {needed} values, the checkpoint "
                              f"holds {held if held >= 0 else 'a partial one'}")
    try:
        array = data.numpy() if isinstance(data, torch.Tensor) else np.frombuffer(data, dtype=dtype).copy()
        return array.astype(dtype, copy=False).reshape(tuple(shape))
    except (TypeError, ValueError, RuntimeError) as exc:
        raise CheckpointError(f"{where}: cannot rebuild the array ({type(exc).__name__}: {exc})") from None


def capture_rng_state() -> Dict[str, Any]:
    """Global RNG states: Python ``random``, numpy's legacy global generator, torch CPU and CUDA."""
    state: Dict[str, Any] = {"python": random.getstate(), "numpy": np.random.get_state(legacy=False),
                             "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["torch_cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: Mapping[str, Any]) -> None:
    """Restore what :func:`capture_rng_state` returned (CUDA only when present on both sides)."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    cuda_states = state.get("torch_cuda")
    if cuda_states is not None and torch.cuda.is_available() and len(cuda_states) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(cuda_states)


def serialize_checkpoint(checkpoint: Mapping[str, Any]) -> bytes:
    """``checkpoint`` encoded, ``torch.save``-d and digested (:class:`CheckpointError` if a value cannot be stored)."""
    buffer = io.BytesIO()
    torch.save(encode_state(dict(checkpoint)), buffer)
    append_digest(buffer)
    return buffer.getvalue()


def read_checkpoint(path: PathLike, logger: Optional[logging.Logger] = None,
                    sections: Optional[Iterable[str]] = None) -> Dict[str, Any]:
    """Load and check an rlearn checkpoint file (CRCs, digest, safe unpickling, format tag, version, sections);
    every problem is a :class:`CheckpointError` naming it. A file without a digest loads with a warning on
    ``logger`` (default ``rlearn.checkpoint``). The file is opened once: what was verified is what is loaded.

    ``sections``: only these top-level sections (and :data:`HEADER`) are decoded and returned, so a damaged
    entry elsewhere (a replay buffer's) cannot stop a reader that does not need it (``rlearn eval``).
    """
    path = Path(path)

    def error(problem: str) -> CheckpointError:
        return CheckpointError(f"checkpoint {path}: {problem}")

    if not path.exists():
        raise error("no such file")
    if not path.is_file():
        raise error("not a regular file")
    with open(path, "rb") as handle:
        head = handle.read(4)
        if head != b"PK\x03\x04":
            raise error("not a PyTorch checkpoint (the file does not start with a zip header; "
                        f"{'it is empty' if not head else 'garbage or another format'})")
        handle.seek(0)
        if not zipfile.is_zipfile(handle):
            raise error("truncated or corrupt (the zip archive has no central directory; was the save interrupted?)")
        digest = verify_archive(handle, path)
        handle.seek(0)
        try:
            raw = torch.load(handle, map_location="cpu", weights_only=True)
        except pickle.UnpicklingError as exc:
            raise error("contains objects other than tensors and plain containers, so it was not written by rlearn; "
                        f"refusing to unpickle it ({str(exc).splitlines()[0]})") from exc
        except Exception as exc:  # zip members missing or damaged, ...
            raise error(f"truncated or corrupt ({type(exc).__name__}: {exc})") from exc
    if not isinstance(raw, Mapping) or raw.get("format") != FORMAT_TAG:
        raise error("a torch file but not an rlearn checkpoint")
    version = raw.get("format_version")
    if not (is_int(version) and 1 <= version <= FORMAT_VERSION):
        raise error(f"format version {version!r} is not supported (this rlearn reads versions 1..{FORMAT_VERSION}; "
                    "upgrade rlearn to read newer checkpoints)")
    missing = [section for section in REQUIRED_SECTIONS if section not in raw]
    if missing:
        raise error(f"missing section(s) {', '.join(missing)}")
    for counter, value in ((key, raw[key]) for key in ("train_iter", "envstep")):
        if not is_int(value) or value < 0:
            raise error(f"counter {counter!r} must be an int >= 0, got {value!r} ({type(value).__name__})")
    if digest is None:
        (logger or _log).warning("checkpoint %s has no integrity digest (re-saved by other code than rlearn): its "
                                 "zip checksums were checked, but its content cannot be verified", path)
    wanted = raw if sections is None else {key: raw[key] for key in (*HEADER, *sections) if key in raw}
    try:
        return decode_state(wanted)
    except CheckpointError as exc:
        raise error(str(exc)) from None


def iteration_checkpoints(directory: PathLike) -> List[Tuple[int, Path]]:
    """``(n, path)`` for every ``iteration_<n>.pt`` in ``directory``, oldest first."""
    directory = Path(directory)
    entries = directory.iterdir() if directory.is_dir() else ()
    return sorted((int(match.group(1)), entry) for entry in entries
                  if (match := _ITERATION_RE.match(entry.name)) and entry.is_file())


def prune_checkpoints(directory: PathLike, keep: Optional[int], protect: Iterable[PathLike] = (),
                      resumed_from_iter: Optional[int] = None) -> List[Path]:
    """Delete the ``iteration_<n>.pt`` files of an abandoned timeline (``n > resumed_from_iter``, passed at the first
    save after a resume only, so a later ``--resume`` never picks them), then all but the newest ``keep`` (None:
    all kept); returns the deleted paths. ``latest.pt`` and the paths in ``protect`` are never touched."""
    protected = {Path(p).resolve() for p in protect}
    removed: List[Path] = []

    def remove(path: Path) -> None:
        if path.resolve() not in protected:
            path.unlink(missing_ok=True)
            removed.append(path)

    if resumed_from_iter is not None:
        for n, path in iteration_checkpoints(directory):
            if n > resumed_from_iter:
                remove(path)
    if keep is not None:
        files = iteration_checkpoints(directory)
        for _, path in files[: max(len(files) - keep, 0)]:
            remove(path)
    return removed


def find_resume_checkpoint(ckpt_dir: PathLike,
                           logger: Optional[logging.Logger] = None) -> Tuple[Path, List[Tuple[Path, str]]]:
    """The checkpoint ``--resume`` continues from (``latest.pt`` unless a valid ``iteration_<n>.pt`` is newer, after a
    kill between the two writes of one save; else the newest valid ``iteration_<n>.pt``) and ``[(path, reason)]``
    for the files passed over, logged with ``logger``; :class:`CheckpointError` listing them when none is valid."""
    ckpt_dir = Path(ckpt_dir)
    skipped: List[Tuple[Path, str]] = []
    chosen: Optional[Path] = None
    chosen_iter = -1
    latest = ckpt_dir / "latest.pt"
    try:
        chosen_iter = int(read_checkpoint(latest, logger=logger)["train_iter"])
        chosen = latest
    except CheckpointError as exc:
        skipped.append((latest, str(exc).removeprefix(f"checkpoint {latest}: ")))
    for n, path in reversed(iteration_checkpoints(ckpt_dir)):
        if chosen is not None and n <= chosen_iter:
            break
        try:
            train_iter = int(read_checkpoint(path, logger=logger)["train_iter"])
        except CheckpointError as exc:
            skipped.append((path, str(exc).removeprefix(f"checkpoint {path}: ")))
            continue
        if chosen is not None:
            skipped.append(
                (chosen, f"older (train_iter {chosen_iter}) than {path.name} (train_iter {train_iter}): the save "
                         f"of {path.name} was interrupted before it updated {chosen.name}"))
        chosen = path
        break
    if chosen is None:
        listing = "; ".join(f"{p.name}: {why}" for p, why in skipped)
        raise CheckpointError(f"no valid checkpoint to resume from in {ckpt_dir} ({listing})")
    if logger is not None:
        for path, why in skipped:
            logger.warning("resume: skipped %s: %s", path, why)
        if skipped:
            logger.info("resume: using %s (the newest valid checkpoint)", chosen)
    return chosen, skipped
