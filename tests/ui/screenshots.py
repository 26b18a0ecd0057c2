"""Screenshots of what a user opens after a run: TensorBoard (scalars, HParams) and the timeline trace in
the offline Perfetto UI, each served on 127.0.0.1 and loaded in headless Chromium (:mod:`tests.ui.browser`).

``python -m tests.ui.screenshots [--out docs]`` makes a short real TD3 run (traced), takes the pictures
and writes ``tensorboard-scalars.png``, ``tensorboard-hparams.png`` (when the run wrote HParams) and
``trace-perfetto-offline.png``. ``tests/ui/test_screenshots.py`` runs the same checks (marked ``slow``;
skipped without Chromium).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

from tests.ui.browser import LOOPBACK, free_port, screenshot, wait_for_http

__all__ = ["short_run", "hparams_tags", "tensorboard_server", "tensorboard_screenshots", "trace_screenshot",
           "HPARAMS_METRIC"]

#: the HParams metric of a run: its final evaluation return (TensorBoardWriter.write_hparams)
HPARAMS_METRIC = "hparams/evaluator/episode_return_mean"

#: a run of a few hundred iterations: tables, an evaluation, TensorBoard curves on both axes, a trace
RUN_SETTINGS = ["train.max_env_steps=600", "policy.learning_starts=300", "learner.log_freq=50", "eval.freq=300",
                "eval.episodes=1"]


def short_run(work_dir: Path, trace: bool = True) -> Path:
    """Train TD3 on Pendulum for 600 env steps into ``work_dir`` (traced when ``trace``); returns it."""
    env = dict(os.environ, RLEARN_PROFILE="1" if trace else "0")
    command = [sys.executable, "-m", "rlearn", "train", "td3_pendulum", "--work-dir", str(work_dir),
               "--no-progress", "--set", *RUN_SETTINGS]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return work_dir


def hparams_tags(logdir: Path) -> List[str]:
    """Tags carrying HParams plugin data in the event files under ``logdir`` (empty: no HParams written)."""
    from tensorboard.backend.event_processing.event_multiplexer import EventMultiplexer

    multiplexer = EventMultiplexer()
    multiplexer.AddRunsFromDirectory(str(logdir))
    multiplexer.Reload()
    return sorted({tag for run in multiplexer.PluginRunToTagToContent("hparams").values() for tag in run})


class tensorboard_server:
    """``with tensorboard_server(logdir) as url:`` TensorBoard on 127.0.0.1 at a free port."""

    def __init__(self, logdir: Path) -> None:
        self.logdir = logdir
        self.process: Optional[subprocess.Popen] = None

    def __enter__(self) -> str:
        port = free_port()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tensorboard.main", "--logdir", str(self.logdir), "--host", LOOPBACK,
             "--port", str(port), "--load_fast=false", "--reload_interval=1"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        url = f"http://{LOOPBACK}:{port}/"
        wait_for_http(url + "data/logdir", 90)
        return url

    def __exit__(self, *exc: object) -> None:
        assert self.process is not None
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def tensorboard_screenshots(logdir: Path, out_dir: Path, hparams_wait: tuple = ("Trial ID",)) -> Dict[str, Any]:
    """PNGs of the scalar dashboard (waits until the learner's and the evaluator's sections show) and of
    the HParams dashboard's table (waits for every string of ``hparams_wait``; None when the run wrote no
    HParams). Returns ``{"scalars": png, "hparams": png or None, "hparams_text": the HParams page's text}``."""
    shots: Dict[str, Any] = {"hparams": None, "hparams_text": ""}
    with tensorboard_server(logdir) as url:
        scalars = out_dir / "tensorboard-scalars.png"
        screenshot(url + "#timeseries", scalars, wait_for=("learner_iter", "learner_step", "evaluator_step"))
        shots["scalars"] = scalars
        if hparams_tags(logdir):
            hparams = out_dir / "tensorboard-hparams.png"
            shots["hparams_text"] = screenshot(url + "#hparams", hparams, wait_for=hparams_wait)
            shots["hparams"] = hparams
    return shots


def trace_screenshot(work_dir: Path, out: Path) -> Path:
    """Merge the run's trace, serve it with the offline Perfetto UI on 127.0.0.1 (rlearn.trace.view) and
    take a PNG once the rank's process and the throughput counters show."""
    from rlearn.trace.view import serve

    trace_file = out.parent / f".{out.stem}.json"
    done = subprocess.run([sys.executable, "-m", "rlearn", "trace", str(work_dir), "-o", str(trace_file),
                           "--no-summary"], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"rlearn trace failed: {done.stderr[-2000:]}")
    thread, url = serve(trace_file)
    try:
        screenshot(url, out, wait_for=("rank 0", "learner", "throughput/iters_per_sec"))
    finally:
        thread.httpd.shutdown()
        trace_file.unlink()
    return out


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="docs", help="folder for the PNGs (default: docs)")
    parser.add_argument("--work-dir", default=None, help="use this finished run instead of a new one")
    args = parser.parse_args(argv)
    out = Path(args.out)
    import tempfile

    with tempfile.TemporaryDirectory(prefix="rlearn-shots-") as tmp:
        work_dir = Path(args.work_dir) if args.work_dir else short_run(Path(tmp) / "run")
        shots = tensorboard_screenshots(work_dir / "tb", out, hparams_wait=("Trial ID", HPARAMS_METRIC))
        shots.pop("hparams_text")
        shots["trace"] = trace_screenshot(work_dir, out / "trace-perfetto-offline.png")
    for name, path in shots.items():
        print(f"{name}: {path if path else 'skipped (the run wrote no HParams)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
