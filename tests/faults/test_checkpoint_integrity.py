"""Fault: a checkpoint damaged on disk or in a copy (bit flips).

Before: ``torch.load`` does not check the zip CRCs, so a bit flipped inside tensor data loaded silently as
a different number. Now every checkpoint carries a SHA-256 digest member and every read checks the member
CRCs and the digest. The property: whatever single bit is flipped, reading either fails with a
CheckpointError naming the file, or returns exactly the original content (the flip hit bytes nobody
reads, such as zip alignment padding).

Corrupt, truncated, foreign and malicious (pickled objects) files are covered in
tests/checkpoint/test_checkpoint.py::test_read_errors_name_the_file_and_the_problem.
"""

from __future__ import annotations

import io
import logging
import zipfile

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fault_support import same, write_checkpoint
from rlearn.checkpoint import CheckpointError
from rlearn.checkpoint import files as ckpt
from rlearn.checkpoint.integrity import DIGEST_MEMBER


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    path = write_checkpoint(tmp_path_factory.mktemp("integrity") / "iteration_7.pt", 7)
    return path.read_bytes(), ckpt.read_checkpoint(path)


def tensor_region(data: bytes):
    """Byte range of the largest tensor record (the torch RNG state, a weight matrix or a buffer array)."""
    archive = zipfile.ZipFile(io.BytesIO(data))
    info = max((i for i in archive.infolist() if "/data/" in i.filename), key=lambda i: i.file_size)
    # the data starts after the local header, whose extra field (alignment padding) the central one lacks
    local_extra = int.from_bytes(data[info.header_offset + 28 : info.header_offset + 30], "little")
    start = info.header_offset + 30 + len(info.filename.encode()) + local_extra
    return start, start + info.file_size


def flipped(data: bytes, offset: int, bit: int) -> bytes:
    damaged = bytearray(data)
    damaged[offset] ^= 1 << bit
    return bytes(damaged)


def test_flip_in_tensor_data_loaded_silently_before_and_is_refused_now(tmp_path, original):
    data, content = original
    start, end = tensor_region(data)
    damaged = tmp_path / "iteration_7.pt"
    damaged.write_bytes(flipped(data, (start + end) // 2, 3))
    # the fault: torch.load alone returns a different tensor without complaint
    assert not same(ckpt.decode_state(torch.load(damaged, weights_only=True)), content)
    with pytest.raises(CheckpointError, match=rf"checkpoint {damaged}: truncated or corrupt \(BadZipFile: Bad CRC-32"):
        ckpt.read_checkpoint(damaged)


def test_digest_mismatch_is_refused_naming_the_file(tmp_path, original):
    """A change that keeps every zip CRC valid (a member rewritten with a fresh CRC) is caught by the digest."""
    data, _ = original
    source = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            payload = source.read(info)
            if info.filename.endswith("/data/0"):
                payload = bytes([payload[0] ^ 1]) + payload[1:]
            target.writestr(info, payload)
    tampered = tmp_path / "latest.pt"
    tampered.write_bytes(out.getvalue())
    with pytest.raises(CheckpointError, match=rf"checkpoint {tampered}: integrity check failed: the SHA-256 of its content does not match"):
        ckpt.read_checkpoint(tampered)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.one_of(st.just("tensor"), st.just("anywhere")), position=st.floats(0, 1, exclude_max=True), bit=st.integers(0, 7))
def test_any_bit_flip_is_refused_or_harmless(tmp_path, original, where, position, bit):
    data, content = original
    start, end = tensor_region(data) if where == "tensor" else (0, len(data))
    offset = start + int(position * (end - start))
    path = tmp_path / "flipped.pt"
    path.write_bytes(flipped(data, offset, bit))
    try:
        back = ckpt.read_checkpoint(path, logger=logging.getLogger("rlearn.test.quiet"))
    except CheckpointError as exc:
        assert str(exc).startswith(f"checkpoint {path}: ")
        return
    assert same(back, content), f"bit {bit} of byte {offset} changed the content without an error"


def test_member_marked_as_directory_is_refused(tmp_path, original):
    """Found by the exhaustive sweep: bit 4 of a member's external attributes marks it as an MS-DOS
    directory; Python's zipfile still reads the data, but torch's reader (miniz) returns none and the
    tensor loads as zeros. Such a member is refused."""
    data, _ = original
    archive = zipfile.ZipFile(io.BytesIO(data))
    info = [i for i in archive.infolist() if "/data/" in i.filename][-1]
    entry = data.index(b"PK\x01\x02" , 0)
    while data[entry + 46 : entry + 46 + len(info.filename)] != info.filename.encode():
        entry = data.index(b"PK\x01\x02", entry + 4)
    path = tmp_path / "iteration_7.pt"
    path.write_bytes(flipped(data, entry + 38, 4))  # external attributes, low byte: 0x10
    assert zipfile.ZipFile(path).getinfo(info.filename).external_attr & 0x10
    with pytest.raises(CheckpointError, match=rf"truncated or corrupt \(BadZipFile: member '{info.filename}' is marked as a directory\)"):
        ckpt.read_checkpoint(path)


def structure_offsets(data: bytes):
    """Offsets of the central directory and end records (everything after the last member's data)."""
    archive = zipfile.ZipFile(io.BytesIO(data))
    last = max(archive.infolist(), key=lambda i: i.header_offset)
    local_extra = int.from_bytes(data[last.header_offset + 28 : last.header_offset + 30], "little")
    return range(last.header_offset + 30 + len(last.filename.encode()) + local_extra + last.file_size, len(data))


@pytest.mark.slow
def test_every_byte_flipped_is_refused_or_harmless(tmp_path, original):
    """Exhaustive: one flipped bit in each byte of a real checkpoint, and every bit of each byte of its
    zip directory (about 35,000 reads). Member data needs no more: CRC-32 catches every single-bit error."""
    data, content = original
    path = tmp_path / "flipped.pt"
    quiet = logging.getLogger("rlearn.test.quiet")
    directory = structure_offsets(data)
    flips = [(offset, offset % 8) for offset in range(len(data))]
    flips += [(offset, bit) for offset in directory for bit in range(8) if bit != offset % 8]
    refused = 0
    for offset, bit in flips:
        path.write_bytes(flipped(data, offset, bit))
        try:
            back = ckpt.read_checkpoint(path, logger=quiet)
        except CheckpointError:
            refused += 1
            continue
        assert same(back, content), f"bit {bit} of byte {offset} changed the content without an error"
    assert refused > 0.8 * len(flips)


def test_checkpoint_is_still_a_plain_torch_file(tmp_path, original):
    data, content = original
    path = tmp_path / "latest.pt"
    path.write_bytes(data)
    names = zipfile.ZipFile(path).namelist()
    assert names[-1] == f"archive/{DIGEST_MEMBER}"
    assert zipfile.ZipFile(path).read(names[-1]).startswith(b"sha256 ")
    raw = torch.load(path, weights_only=True)  # other tools ignore the digest member
    assert same(ckpt.decode_state(raw), content)


def test_checkpoint_without_digest_loads_with_a_warning(tmp_path, original, caplog):
    """A checkpoint re-saved by other code (no digest member) stays loadable; its CRCs are still checked."""
    data, content = original
    source = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            if not info.filename.endswith(DIGEST_MEMBER):
                target.writestr(info, source.read(info))
    old = tmp_path / "iteration_7.pt"
    old.write_bytes(out.getvalue())
    with caplog.at_level(logging.WARNING, logger="rlearn.checkpoint"):
        assert same(ckpt.read_checkpoint(old), content)
    (warning,) = [r.getMessage() for r in caplog.records]
    assert warning == (
        f"checkpoint {old} has no integrity digest (re-saved by other code than rlearn): its "
        "zip checksums were checked, but its content cannot be verified"
    )
    start, end = tensor_region(out.getvalue())
    old.write_bytes(flipped(out.getvalue(), start + 5, 0))
    with pytest.raises(CheckpointError, match="Bad CRC-32"):
        ckpt.read_checkpoint(old)
