"""Integrity of checkpoint files, and the package's one exception (:class:`CheckpointError`).

``torch.load`` does not check zip CRCs, so a bit flipped in tensor data would load silently as a different
number. rlearn adds one member, ``<archive>/rlearn_digest`` (``sha256 <hex>``), over every other member's name,
directory fields and bytes (``torch.load`` ignores it); every read checks the CRCs and the digest.
"""

from __future__ import annotations

import hashlib
import io
import re
import zipfile
from pathlib import Path
from typing import IO, Optional

__all__ = ["CheckpointError", "DIGEST_MEMBER", "append_digest", "archive_digest", "verify_archive"]


class CheckpointError(RuntimeError):
    """A checkpoint cannot be written or read; the message names the file (or state entry) and the problem."""


#: name of the digest member inside the archive's top folder
DIGEST_MEMBER = "rlearn_digest"
_DIGEST_RE = re.compile(rb"^sha256 ([0-9a-f]{64})\n$")
_CHUNK = 1 << 20


def _is_digest(info: zipfile.ZipInfo) -> bool:
    return info.filename.rpartition("/")[2] == DIGEST_MEMBER


#: MS-DOS "directory" attribute: miniz (torch's zip reader) returns no data for such a member
_DOS_DIRECTORY = 0x10


def archive_digest(archive: zipfile.ZipFile, data: Optional[memoryview] = None) -> str:
    """SHA-256 (hex) over every member but the digest member: name, directory fields and bytes, in archive order.

    Reading a member checks its CRC-32 and local header; a damaged member, or one marked as a directory (which
    ``torch.load`` would read as empty), is a ``zipfile.BadZipFile``. ``data``: the bytes of an archive just
    written in memory, whose stored members are then hashed in place (no CRC pass, no copy; the same result).
    """
    digest = hashlib.sha256()
    for info in archive.infolist():
        if _is_digest(info):
            continue
        if info.is_dir() or info.external_attr & _DOS_DIRECTORY:
            raise zipfile.BadZipFile(f"member {info.filename!r} is marked as a directory")
        # the name and the directory fields a zip reader acts on: a flip there breaks reading or changes the digest
        name = info.filename.encode("utf-8")
        fields = (info.file_size, info.compress_size, info.CRC, info.compress_type, info.flag_bits,
                  info.internal_attr, info.external_attr, info.header_offset)
        digest.update(len(name).to_bytes(8, "little") + name)
        digest.update(b"".join(int(f).to_bytes(8, "little") for f in fields))
        if data is not None and info.compress_type == zipfile.ZIP_STORED:
            offset = info.header_offset
            name_length = int.from_bytes(data[offset + 26 : offset + 28], "little")
            extra_length = int.from_bytes(data[offset + 28 : offset + 30], "little")
            start = offset + 30 + name_length + extra_length
            digest.update(data[start : start + info.file_size])
            continue
        with archive.open(info) as member:
            for chunk in iter(lambda: member.read(_CHUNK), b""):
                digest.update(chunk)
    return digest.hexdigest()


def append_digest(buffer: io.BytesIO) -> None:
    """Append the ``<archive>/rlearn_digest`` member to the ``torch.save`` archive in ``buffer``, in place
    (no copy of the archive: the cost is one SHA-256 pass)."""
    with zipfile.ZipFile(buffer) as archive:
        if any(_is_digest(info) for info in archive.infolist()):
            raise ValueError(f"the archive already has a {DIGEST_MEMBER} member")
        folder = archive.namelist()[0].partition("/")[0]
        with buffer.getbuffer() as view:
            value = archive_digest(archive, view)
    with zipfile.ZipFile(buffer, "a") as archive:
        # fixed timestamp: the same checkpoint content gives the same bytes
        archive.writestr(zipfile.ZipInfo(f"{folder}/{DIGEST_MEMBER}"), f"sha256 {value}\n".encode("ascii"))


def verify_archive(handle: IO[bytes], path: Path) -> Optional[str]:
    """Check every member of the zip archive open in ``handle`` and, when present, its digest: returns the
    verified digest (hex) or None without one; :class:`CheckpointError` naming ``path`` when damaged."""
    try:
        with zipfile.ZipFile(handle) as archive:
            stored = [info for info in archive.infolist() if _is_digest(info)]
            if len(stored) > 1:
                raise CheckpointError(f"checkpoint {path}: corrupt (the archive has {len(stored)} digest members)")
            expected: Optional[str] = None
            if stored:
                match = _DIGEST_RE.match(archive.read(stored[0]))
                if match is None:
                    raise CheckpointError(f"checkpoint {path}: corrupt (its digest member is unreadable)")
                expected = match.group(1).decode("ascii")
            actual = archive_digest(archive)
    except CheckpointError:
        raise
    except Exception as exc:  # bad CRC, header mismatch, truncated member, bad compression method, ...
        raise CheckpointError(f"checkpoint {path}: truncated or corrupt ({type(exc).__name__}: {exc})") from exc
    if expected is not None and actual != expected:
        raise CheckpointError(
            f"checkpoint {path}: integrity check failed: the SHA-256 of its content does not match the digest "
            "stored when it was saved (the file was damaged on disk or in a copy); use another checkpoint")
    return expected
