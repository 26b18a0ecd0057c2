"""Fault: two runs in one work dir (item 1).

Before: three seeds launched with ``&`` in the default dir shared one ``tb/``, one log and one
``config.py``. Now a run holds ``<work_dir>/.lock`` (flock) for its whole life; a second run on the same
dir is refused naming the live holder; a default-dir run takes the next free ``_<n>`` suffix atomically;
``kill -9`` releases the lock and the next run takes over the stale file.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from rlearn.workdir_lock import LOCK_NAME, WorkDirBusyError, WorkDirError, WorkDirLock, claim_free_work_dir, existing_run


def test_second_lock_on_a_held_dir_is_refused_naming_the_holder(tmp_path):
    work = tmp_path / "exp"
    with WorkDirLock(work) as lock:
        assert lock.held and lock.took_over is None and lock.exclusive
        record = json.loads((work / LOCK_NAME).read_text())
        assert record["pid"] == os.getpid() and record["argv"] == sys.argv
        with pytest.raises(WorkDirBusyError, match=rf"^work dir {work} is in use by a live run \(PID {os.getpid()} on host .*, started \d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d, command: .*\); two runs never share a work dir") as caught:
            WorkDirLock(work).acquire()
        assert caught.value.holder.pid == os.getpid() and caught.value.work_dir == work
    assert not (work / LOCK_NAME).exists()  # released and removed
    with WorkDirLock(work) as again:
        assert again.took_over is None


def test_lock_is_released_when_the_block_raises(tmp_path):
    with pytest.raises(ValueError):
        with WorkDirLock(tmp_path):
            raise ValueError("the run failed")
    WorkDirLock(tmp_path).acquire().release()


def test_a_file_is_not_a_work_dir(tmp_path):
    (tmp_path / "exp").write_text("x")
    with pytest.raises(WorkDirError, match=rf"work dir {tmp_path / 'exp'} exists and is not a directory"):
        WorkDirLock(tmp_path / "exp").acquire()


HOLDER = textwrap.dedent(
    """
    import sys, time
    from rlearn.workdir_lock import WorkDirLock
    lock = WorkDirLock(sys.argv[1]).acquire()
    print("locked", flush=True)
    time.sleep(120)
    """
)


def test_kill_9_releases_the_lock_and_the_stale_file_is_taken_over(tmp_path):
    work = tmp_path / "exp"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(work), "--seed", "3"], stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline() == b"locked\n"
        with pytest.raises(WorkDirBusyError, match=rf"in use by a live run \(PID {holder.pid} on host .*command: -c {work} --seed 3\)"):
            WorkDirLock(work).acquire()
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        holder.stdout.close()
    assert json.loads((work / LOCK_NAME).read_text())["pid"] == holder.pid  # the file stays behind
    with WorkDirLock(work) as lock:
        assert lock.took_over is not None and lock.took_over.pid == holder.pid
        assert lock.took_over.alive() is False
        assert json.loads((work / LOCK_NAME).read_text())["pid"] == os.getpid()


def _claim(default, start, done, results):
    start.wait()  # every process calls claim_free_work_dir at the same moment
    path, lock = claim_free_work_dir(default)
    (path / "marker").write_text(str(os.getpid()))
    results.put((str(path), os.getpid()))
    done.wait()  # hold the lock until every process has claimed
    lock.release()


def test_processes_started_together_never_share_a_work_dir(tmp_path):
    default = tmp_path / "work_dirs" / "td3"
    (tmp_path / "work_dirs").mkdir()
    # the default dir already holds a finished run; _3 is held by a live run
    (default / "ckpt").mkdir(parents=True)
    (default / "ckpt" / "latest.pt").write_bytes(b"x")
    busy = WorkDirLock(tmp_path / "work_dirs" / "td3_3").acquire()
    count = 6
    context = multiprocessing.get_context("fork")
    start, done, results = context.Barrier(count), context.Barrier(count), context.Queue()
    workers = [context.Process(target=_claim, args=(default, start, done, results)) for _ in range(count)]
    for worker in workers:
        worker.start()
    try:
        claimed = [results.get(timeout=60) for _ in range(count)]
    finally:
        for worker in workers:
            worker.join(timeout=60)
        busy.release()
    assert all(worker.exitcode == 0 for worker in workers)
    paths = sorted((path for path, _ in claimed), key=lambda p: (len(p), p))
    expected = [str(default.with_name(f"td3_{n}")) for n in (2, 4, 5, 6, 7, 8)]
    assert paths == expected  # six distinct directories, skipping the finished run and the live one
    for path, pid in claimed:
        assert (tmp_path / path / "marker").read_text() == str(pid)


def test_claim_returns_the_lock_held_and_skips_files_and_runs(tmp_path):
    default = tmp_path / "exp"
    default.write_text("a file")
    (tmp_path / "exp_2" / "tb").mkdir(parents=True)
    (tmp_path / "exp_2" / "tb" / "events.out.tfevents.1.host").write_bytes(b"")
    assert existing_run(tmp_path / "exp_2") == f"{tmp_path / 'exp_2' / 'tb'} holds TensorBoard events"
    path, lock = claim_free_work_dir(default)
    assert path == tmp_path / "exp_3" and lock.held
    with pytest.raises(WorkDirBusyError):
        WorkDirLock(path).acquire()
    lock.release()
    assert not (tmp_path / "exp_2" / LOCK_NAME).exists()  # the skipped run's dir is left as it was
    path, lock = claim_free_work_dir(default, holds_run=lambda p: None)
    assert path == tmp_path / "exp_2"
    lock.release()
