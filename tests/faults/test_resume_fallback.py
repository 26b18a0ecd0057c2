"""Faults: ``latest.pt`` missing or damaged at resume (item 3); pruning after resuming from an older
checkpoint (item 9).

Before: a kill during the first write of ``latest.pt`` left only ``iteration_50.pt`` and ``--resume``
said "no checkpoint"; a damaged ``latest.pt`` stopped the resume. Now :func:`find_resume_checkpoint`
takes the newest valid file and says why it passed over the others. Before: after resuming from an older
checkpoint, ``keep`` deleted the resumed run's checkpoints and kept the stale higher-numbered ones of
the abandoned run. Now the resumed timeline wins.
"""

from __future__ import annotations

import logging
import shutil

import pytest

from fault_support import write_checkpoint
from rlearn.checkpoint import CheckpointError, find_resume_checkpoint, iteration_checkpoints, prune_checkpoints, read_checkpoint


def save(ckpt_dir, n, latest=True):
    """What CheckpointHook does: iteration_<n>.pt, then latest.pt with the same bytes."""
    path = write_checkpoint(ckpt_dir / f"iteration_{n}.pt", n)
    if latest:
        shutil.copyfile(path, ckpt_dir / "latest.pt")
    return path


def damage(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10
    path.write_bytes(bytes(data))


def test_latest_is_used_when_valid(tmp_path):
    for n in (10, 20):
        save(tmp_path, n)
    assert find_resume_checkpoint(tmp_path) == (tmp_path / "latest.pt", [])


def test_kill_during_first_latest_write_falls_back_to_iteration_file(tmp_path, caplog):
    save(tmp_path, 50, latest=False)  # killed before latest.pt existed (its temp file is never read)
    (tmp_path / ".latest.pt.abcd1234.rlearn-99999-host.tmp").write_bytes(b"PK\x03\x04 half")
    logger = logging.getLogger("rlearn.test.resume")
    with caplog.at_level(logging.INFO, logger="rlearn.test.resume"):
        path, skipped = find_resume_checkpoint(tmp_path, logger=logger)
    assert path == tmp_path / "iteration_50.pt"
    assert skipped == [(tmp_path / "latest.pt", "no such file")]
    assert [r.getMessage() for r in caplog.records] == [
        f"resume: skipped {tmp_path / 'latest.pt'}: no such file",
        f"resume: using {tmp_path / 'iteration_50.pt'} (the newest valid checkpoint)",
    ]


def test_damaged_latest_and_newest_fall_back_to_the_newest_valid(tmp_path):
    for n in (10, 20, 30):
        save(tmp_path, n)
    damage(tmp_path / "latest.pt")
    damage(tmp_path / "iteration_30.pt")
    (tmp_path / "iteration_25.pt").write_bytes(b"")  # an empty file (disk full while copying)
    path, skipped = find_resume_checkpoint(tmp_path)
    assert path == tmp_path / "iteration_20.pt"
    assert [(p.name, why.split(" (")[0]) for p, why in skipped] == [
        ("latest.pt", "truncated or corrupt"),
        ("iteration_30.pt", "truncated or corrupt"),
        ("iteration_25.pt", "not a PyTorch checkpoint"),
    ]
    assert read_checkpoint(path)["train_iter"] == 20


def test_iteration_file_newer_than_latest_wins(tmp_path):
    """A kill between the two writes of one save: iteration_60.pt is complete, latest.pt still says 50."""
    save(tmp_path, 50)
    save(tmp_path, 60, latest=False)
    path, skipped = find_resume_checkpoint(tmp_path)
    assert path == tmp_path / "iteration_60.pt"
    assert skipped == [
        (tmp_path / "latest.pt", "older (train_iter 50) than iteration_60.pt (train_iter 60): the save of "
                                 "iteration_60.pt was interrupted before it updated latest.pt")
    ]


def test_no_valid_checkpoint_is_a_clear_error(tmp_path):
    with pytest.raises(CheckpointError, match=rf"no valid checkpoint to resume from in {tmp_path / 'ckpt'} \(latest\.pt: no such file\)"):
        find_resume_checkpoint(tmp_path / "ckpt")
    save(tmp_path, 10)
    damage(tmp_path / "latest.pt")
    damage(tmp_path / "iteration_10.pt")
    with pytest.raises(CheckpointError, match=r"no valid checkpoint .*latest\.pt: truncated or corrupt .*; iteration_10\.pt: truncated or corrupt"):
        find_resume_checkpoint(tmp_path)


# ------------------------------------------------------------------------------------------- pruning
def names(directory):
    return sorted((p.name for p in directory.iterdir()), key=lambda n: (len(n), n))


def test_prune_after_resume_from_older_checkpoint_keeps_the_resumed_timeline(tmp_path):
    # the first run saved every 10 iterations up to 50, keep=3
    for n in (10, 20, 30, 40, 50):
        save(tmp_path, n)
        prune_checkpoints(tmp_path, keep=3, protect=[tmp_path / f"iteration_{n}.pt"])
    assert names(tmp_path) == ["latest.pt", "iteration_30.pt", "iteration_40.pt", "iteration_50.pt"]

    # the fault as it was: resumed from iteration_30, the first save (35 with another freq) is deleted
    # by the plain keep rule and the abandoned 40 and 50 survive
    before = tmp_path / "before"
    before.mkdir()
    for name in ("iteration_30.pt", "iteration_40.pt", "iteration_50.pt"):
        shutil.copyfile(tmp_path / name, before / name)
    save(before, 35)
    assert [p.name for p in prune_checkpoints(before, keep=3)] == ["iteration_30.pt"]
    assert [n for n, _ in iteration_checkpoints(before)] == [35, 40, 50]
    shutil.rmtree(before)

    # now: the resumed run's first save passes resumed_from_iter; 40 and 50 belong to the abandoned run
    first = save(tmp_path, 35)
    removed = prune_checkpoints(tmp_path, keep=3, protect=[first], resumed_from_iter=30)
    assert [p.name for p in removed] == ["iteration_40.pt", "iteration_50.pt"]
    assert names(tmp_path) == ["latest.pt", "iteration_30.pt", "iteration_35.pt"]
    # later saves prune by keep only
    for n in (40, 45):
        path = save(tmp_path, n)
        prune_checkpoints(tmp_path, keep=3, protect=[path])
    assert names(tmp_path) == ["latest.pt", "iteration_35.pt", "iteration_40.pt", "iteration_45.pt"]
    assert read_checkpoint(tmp_path / "iteration_40.pt")["train_iter"] == 40
    assert find_resume_checkpoint(tmp_path)[0] == tmp_path / "latest.pt"


def test_abandoned_files_go_even_without_keep(tmp_path):
    """keep=None keeps every file of the run, but not those of the abandoned timeline: otherwise a later
    --resume whose latest.pt was damaged would fall back to the abandoned iteration_50.pt."""
    for n in (10, 20, 30, 40, 50):
        save(tmp_path, n)
    first = save(tmp_path, 25)  # resumed from 20
    removed = prune_checkpoints(tmp_path, keep=None, protect=[first], resumed_from_iter=20)
    assert sorted(p.name for p in removed) == ["iteration_30.pt", "iteration_40.pt", "iteration_50.pt"]
    assert [n for n, _ in iteration_checkpoints(tmp_path)] == [10, 20, 25]
    damage(tmp_path / "latest.pt")
    assert find_resume_checkpoint(tmp_path)[0] == tmp_path / "iteration_25.pt"


def test_resume_point_itself_and_the_saved_file_are_never_removed(tmp_path):
    for n in (10, 20, 30):
        save(tmp_path, n)
    # resumed from 30 and saved at 30 again (e.g. freq changed so the first save lands on the same number)
    removed = prune_checkpoints(tmp_path, keep=1, protect=[tmp_path / "iteration_30.pt"], resumed_from_iter=30)
    assert [p.name for p in removed] == ["iteration_10.pt", "iteration_20.pt"]
    assert names(tmp_path) == ["latest.pt", "iteration_30.pt"]
