"""Checkpoint files: atomic writes, a safe on-disk encoding, validation and RNG state.

A checkpoint is a ``torch.save`` file holding one dict (see :data:`REQUIRED_SECTIONS`). Everything in it
is a tensor, a Python primitive (``None``, bool, int, float, str, bytes) or a plain container (dict,
list, tuple, set), so it loads with ``torch.load(weights_only=True)``: opening a checkpoint never runs
code from the file. The few richer types that state dicts commonly hold are encoded reversibly by
:func:`encode_state` / :func:`decode_state` (numpy arrays and scalars, ``collections.deque``); any other
object is refused when saving, with its path in the state tree, before a byte is written.

Files are written atomically (:func:`atomic_write_bytes`): a temporary file in the same directory, fsync,
``os.replace``, fsync of the directory. A crash or an error mid-save leaves the previous file intact.
"""

from __future__ import annotations

import collections
import io
import os
import pickle
import random
import re
import zipfile
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple, Union

import numpy as np
import torch

from rlearn.fileio import atomic_write_bytes

#: version of the checkpoint layout; bumped when a section changes meaning
FORMAT_VERSION = 1
#: top-level keys every rlearn checkpoint has
REQUIRED_SECTIONS = (
    "format",
    "format_version",
    "rlearn_version",
    "policy_class",
    "train_iter",
    "envstep",
    "learner",
    "policy",
    "hooks",
    "states",
    "rng",
)
#: value of the ``format`` key: tells an rlearn checkpoint from any other torch file
FORMAT_TAG = "rlearn.checkpoint"

_TYPE_KEY = "__rlearn_type__"
_ITERATION_RE = re.compile(r"^iteration_(\d+)\.pt$")

PathLike = Union[str, os.PathLike]


class CheckpointError(RuntimeError):
    """A checkpoint cannot be written or read; the message names the file (or state entry) and the problem."""


# ---------------------------------------------------------------------------------------------- encoding
def encode_state(obj: Any, where: str = "checkpoint") -> Any:
    """Return ``obj`` with numpy arrays/scalars and deques replaced by tagged plain containers.

    Raises :class:`CheckpointError` naming the dotted path of the first value that cannot be stored
    safely (``where`` is the name of the root).
    """
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
    if isinstance(obj, collections.deque):
        items = [encode_state(v, f"{where}[{i}]") for i, v in enumerate(obj)]
        return {_TYPE_KEY: "deque", "items": items, "maxlen": obj.maxlen}
    if isinstance(obj, Mapping):
        if _TYPE_KEY in obj:
            raise CheckpointError(f"{where}: the key {_TYPE_KEY!r} is reserved by the checkpoint format")
        out = {key: encode_state(value, f"{where}.{key}") for key, value in obj.items()}
        return collections.OrderedDict(out) if isinstance(obj, collections.OrderedDict) else out
    if isinstance(obj, (list, tuple)):
        items = [encode_state(v, f"{where}[{i}]") for i, v in enumerate(obj)]
        return items if isinstance(obj, list) else tuple(items)
    if isinstance(obj, (set, frozenset)):
        return {encode_state(v, f"{where}{{}}") for v in obj}
    raise CheckpointError(
        f"{where}: cannot store an object of type {type(obj).__module__}.{type(obj).__qualname__} in a "
        "checkpoint; state_dict() methods must return tensors, numpy arrays, numbers, strings and "
        "plain containers (dict, list, tuple)"
    )


def decode_state(obj: Any) -> Any:
    """Invert :func:`encode_state`."""
    if isinstance(obj, Mapping):
        kind = obj.get(_TYPE_KEY)
        if kind == "ndarray":
            data = obj["data"]
            if isinstance(data, torch.Tensor):
                array = data.numpy()
            else:
                array = np.frombuffer(data, dtype=np.dtype(obj["dtype"])).copy()
            return array.astype(np.dtype(obj["dtype"]), copy=False).reshape(obj["shape"])
        if kind == "npscalar":
            return decode_state(obj["value"])[()]
        if kind == "deque":
            return collections.deque((decode_state(v) for v in obj["items"]), maxlen=obj["maxlen"])
        out = {key: decode_state(value) for key, value in obj.items()}
        return collections.OrderedDict(out) if isinstance(obj, collections.OrderedDict) else out
    if isinstance(obj, list):
        return [decode_state(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(decode_state(v) for v in obj)
    return obj


# ------------------------------------------------------------------------------------------- RNG state
def capture_rng_state() -> Dict[str, Any]:
    """Global RNG states: Python ``random``, numpy's legacy global generator, torch CPU and CUDA."""
    state: Dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(legacy=False),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["torch_cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: Mapping[str, Any]) -> None:
    """Restore what :func:`capture_rng_state` returned (CUDA only when present on both sides)."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "torch_cuda" in state and torch.cuda.is_available():
        cuda_states = state["torch_cuda"]
        if len(cuda_states) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(cuda_states)


# -------------------------------------------------------------------------------------------- writing
def serialize_checkpoint(checkpoint: Mapping[str, Any]) -> bytes:
    """Encode and ``torch.save`` ``checkpoint`` to bytes (raises :class:`CheckpointError` first if a
    value cannot be stored)."""
    encoded = encode_state(dict(checkpoint))
    buffer = io.BytesIO()
    torch.save(encoded, buffer)
    return buffer.getvalue()


# -------------------------------------------------------------------------------------------- reading
def read_checkpoint(path: PathLike) -> Dict[str, Any]:
    """Load and check an rlearn checkpoint file; every problem is a :class:`CheckpointError` naming it.

    Checks: the path is a file; it is a torch zip archive; it unpickles with ``weights_only=True``; it is
    a dict tagged as an rlearn checkpoint of a supported format version with every required section.
    Policy compatibility is checked by the learner (:meth:`BaseLearner.load_checkpoint`).
    """
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"checkpoint {path}: no such file")
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path}: not a regular file")
    with open(path, "rb") as handle:
        head = handle.read(4)
    if head != b"PK\x03\x04":
        raise CheckpointError(
            f"checkpoint {path}: not a PyTorch checkpoint (the file does not start with a zip header; "
            f"{'it is empty' if not head else 'garbage or another format'})"
        )
    if not zipfile.is_zipfile(path):
        raise CheckpointError(
            f"checkpoint {path}: truncated or corrupt (the zip archive has no central directory; "
            "was the save interrupted?)"
        )
    try:
        raw = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        raise CheckpointError(
            f"checkpoint {path}: contains objects other than tensors and plain containers, so it was not "
            f"written by rlearn; refusing to unpickle it ({str(exc).splitlines()[0]})"
        ) from exc
    except Exception as exc:  # zip members missing or damaged, bad CRC, ...
        raise CheckpointError(f"checkpoint {path}: truncated or corrupt ({type(exc).__name__}: {exc})") from exc
    if not isinstance(raw, Mapping) or raw.get("format") != FORMAT_TAG:
        raise CheckpointError(f"checkpoint {path}: a torch file but not an rlearn checkpoint")
    version = raw.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION or version < 1:
        raise CheckpointError(
            f"checkpoint {path}: format version {version!r} is not supported (this rlearn reads versions "
            f"1..{FORMAT_VERSION}; upgrade rlearn to read newer checkpoints)"
        )
    missing = [section for section in REQUIRED_SECTIONS if section not in raw]
    if missing:
        raise CheckpointError(f"checkpoint {path}: missing section(s) {', '.join(missing)}")
    return decode_state(raw)


# ------------------------------------------------------------------------------------------ directory
def iteration_checkpoints(directory: PathLike) -> List[Tuple[int, Path]]:
    """``(n, path)`` for every ``iteration_<n>.pt`` in ``directory``, oldest first."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    found = []
    for entry in directory.iterdir():
        match = _ITERATION_RE.match(entry.name)
        if match and entry.is_file():
            found.append((int(match.group(1)), entry))
    return sorted(found)


def prune_checkpoints(directory: PathLike, keep: Optional[int], protect: Iterable[PathLike] = ()) -> List[Path]:
    """Delete all but the newest ``keep`` ``iteration_<n>.pt`` files (``keep=None`` keeps all).

    ``latest.pt`` is never touched, nor any path in ``protect``. Returns the deleted paths.
    """
    if keep is None:
        return []
    protected = {Path(p).resolve() for p in protect}
    files = iteration_checkpoints(directory)
    doomed = files[: max(len(files) - keep, 0)]
    removed = []
    for _, path in doomed:
        if path.resolve() in protected:
            continue
        path.unlink(missing_ok=True)
        removed.append(path)
    return removed
