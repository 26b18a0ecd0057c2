"""WandbWriter (offline) and MlflowWriter (local file store), read back with each service's own reader: both
axes, sparse keys, config, and a resumed run that continues the same run without duplicate or missing
points. Skipped when the extra is not installed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from tracking_readers import mlflow_history, wandb_records, wandb_steps  # noqa: E402

WRITES = [
    ({"loss_avg": 1.5, "aux_avg": None}, 10, 70),
    ({"loss_avg": 2.25, "aux_avg": 0.125}, 20, 140),
    ({"evaluator/episode_return_mean": -3.0}, 20, 140),
    ({"loss_avg": 1.0, "aux_avg": 4.0}, 30, 210),
]
CONFIG = {"exp_name": "x", "seed": 1, "policy": {"type": "td3", "lr": 0.001, "hidden_sizes": [16]}}


def expected_rows(writes):
    return [{"train_iter": it, "envstep": env, **{k: v for k, v in s.items() if v is not None}} for s, it, env in writes]


@pytest.fixture
def wandb_env(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb_files"))
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_MODE", "offline")
    (tmp_path / "wandb_files").mkdir()
    return tmp_path / "wandb_files"


@pytest.fixture
def mlflow_uri(tmp_path, monkeypatch):
    pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # mlflow >= 3.? keeps the file store behind this switch
    return (tmp_path / "mlruns").as_uri()


def run_writes(writer, writes, flush=True):
    for scalars, it, env in writes:
        writer.write_scalars(scalars, it, env)
        if flush:
            writer.flush()


def test_wandb_offline_rows_axes_and_config(tmp_path, wandb_env):
    from rlearn.writers.wandb_writer import WandbWriter

    writer = WandbWriter(tmp_path / "work", project="rlearn-test", mode="offline")
    writer.write_config(CONFIG, 0)
    run_writes(writer, WRITES)
    writer.close()
    rows, config, metrics = wandb_records(wandb_env, writer.run_id)
    assert rows == expected_rows(WRITES)  # None values absent, both axes in every row
    assert config["policy"] == {"type": "td3", "lr": 0.001, "hidden_sizes": [16]} and config["seed"] == 1
    defined = {(m.name or m.glob_name): m.step_metric for m in metrics if not m.expanded_from_glob}
    assert defined == {"envstep": "", "train_iter": "", "*": "envstep"}
    state = json.loads((tmp_path / "work" / "wandb_run.json").read_text())
    assert state == {"run_id": writer.run_id, "logged": [30, 210, 0]}


def test_wandb_resume_continues_the_same_run_without_duplicates(tmp_path, wandb_env):
    from rlearn.writers.wandb_writer import WandbWriter

    first = WandbWriter(tmp_path / "work", mode="offline")
    run_writes(first, WRITES[:1])
    checkpoint = first.state_dict()
    run_writes(first, WRITES[1:3])  # logged after the checkpoint, then the process dies
    first.close()
    resumed = WandbWriter(tmp_path / "work", mode="offline")
    resumed.load_state_dict(checkpoint)
    resumed.rewind(10, 70)
    run_writes(resumed, WRITES[1:])  # the resumed run computes the same rows again, then goes on
    resumed.close()
    assert resumed.run_id == first.run_id
    rows, _, _ = wandb_records(wandb_env, first.run_id)
    assert rows == expected_rows(WRITES)
    # one continuous history: W&B's step goes on in the resumed process's folder instead of restarting at 0
    # (a sync of a folder numbered from 0 would replace the earlier folder's history)
    assert wandb_steps(wandb_env, first.run_id) == [[0, 1, 2], [3]]


def test_a_wandb_run_resumed_twice_keeps_one_step_sequence_and_syncs_as_its_fragments(tmp_path, wandb_env):
    import subprocess
    import sys

    from rlearn.writers.wandb_writer import WandbWriter

    checkpoint = None
    for part in (WRITES[:2], WRITES[2:3], WRITES[3:]):  # three sessions, each resumed from the previous end
        writer = WandbWriter(tmp_path / "work", mode="offline")
        if checkpoint is not None:
            writer.load_state_dict(checkpoint)
            writer.rewind(*checkpoint["at"][:2])
        run_writes(writer, part)
        checkpoint = writer.state_dict()
        writer.close()
    run_id = writer.run_id
    assert wandb_steps(wandb_env, run_id) == [[0, 1], [2], [3]]
    # the documented upload: every fragment of the run, synced in order into the one run
    fragments = sorted(str(p) for p in (wandb_env / "wandb").glob(f"offline-run-*-{run_id}*"))
    wandb_cli = [sys.executable, "-c", "import sys; from wandb.cli.cli import cli; sys.exit(cli())"]
    done = subprocess.run([*wandb_cli, "beta", "sync", "--dry-run", "--id", run_id, *fragments], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert all(fragment in done.stderr + done.stdout for fragment in fragments)


def test_mlflow_file_store_both_axes_params_and_resume(tmp_path, mlflow_uri):
    from rlearn.writers.mlflow_writer import MlflowWriter

    first = MlflowWriter(tmp_path / "work", tracking_uri=mlflow_uri, experiment_name="rl")
    first.write_config(CONFIG, 0)
    run_writes(first, WRITES[:2])
    checkpoint = first.state_dict()
    run_writes(first, WRITES[2:3])
    first.close()
    history, params, status = mlflow_history(mlflow_uri, first.run_id)
    assert status == "FINISHED"
    assert params == {"exp_name": "x", "seed": "1", "policy.type": "td3", "policy.lr": "0.001",
                      "policy.hidden_sizes": "[16]"}

    resumed = MlflowWriter(tmp_path / "work", tracking_uri=mlflow_uri, experiment_name="rl")
    resumed.load_state_dict(checkpoint)
    resumed.rewind(20, 140)
    resumed.write_config({**CONFIG, "seed": 2}, 20)  # a parameter cannot change: kept, warned about
    run_writes(resumed, WRITES[2:])
    resumed.close()
    assert resumed.run_id == first.run_id
    history, params, _ = mlflow_history(mlflow_uri, first.run_id)
    assert params["seed"] == "1"
    assert history == {
        "envstep": [(10, 70.0), (20, 140.0), (30, 210.0)],  # step = train_iter, value = envstep
        "loss_avg": [(10, 1.5), (20, 2.25), (30, 1.0)],
        "aux_avg": [(20, 0.125), (30, 4.0)],
        "evaluator/episode_return_mean": [(20, -3.0)],
    }


def test_missing_extra_names_the_pip_command(monkeypatch):
    from rlearn.writers import MissingExtraError
    from rlearn.writers.tracking import require

    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb -> ImportError
    with pytest.raises(MissingExtraError, match=r"pip install 'rlearn\[wandb\]'"):
        require("wandb", "wandb")


def test_wandb_disabled_mode_writes_nothing_and_reports_nothing(tmp_path, wandb_env):
    """``mode="disabled"`` has no transaction log to read back: no disk check, no missing rows at close."""
    import time

    from rlearn.writers.wandb_writer import WandbWriter

    writer = WandbWriter(tmp_path / "work", mode="disabled")
    run_writes(writer, WRITES)
    started = time.monotonic()
    writer.close()  # no OSError, no wait for rows that are never written
    assert time.monotonic() - started < writer.FINISH_TIMEOUT_S
    assert json.loads((tmp_path / "work" / "wandb_run.json").read_text())["logged"] == [30, 210, 0]


@pytest.fixture
def silent_server():
    """A loopback port that accepts connections and never answers (a hung tracking server)."""
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    server.close()


def closed_port_uri() -> str:
    """``http://127.0.0.1:<port>`` of a loopback port nothing listens on (connections are refused)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_mlflow_server_that_refuses_is_reported_at_start_naming_it(tmp_path):
    pytest.importorskip("mlflow")
    from rlearn.writers.mlflow_writer import MlflowWriter

    uri = closed_port_uri()
    writer = MlflowWriter(tmp_path / "work", tracking_uri=uri)
    with pytest.raises(OSError) as refused:
        writer.write_config(CONFIG, 0)
    assert str(refused.value) == (f"MLflow tracking server {uri} cannot be reached (connection refused); "
                                  "is it running, and is tracking_uri right?")
    assert writer.run_id is None and not (tmp_path / "work" / "mlflow_run.json").exists()


def test_mlflow_server_that_never_answers_is_given_up_after_the_bounded_check(tmp_path, silent_server):
    pytest.importorskip("mlflow")
    from rlearn.writers.mlflow_writer import MlflowWriter

    writer = MlflowWriter(tmp_path / "work", tracking_uri=silent_server)
    writer.CONNECT_TIMEOUT_S = 0.5
    with pytest.raises(OSError) as silent:
        writer.write_scalars({"loss_avg": 1.0}, 1, 8)
    assert str(silent.value) == (f"MLflow tracking server {silent_server} cannot be reached (no answer within "
                                 "0.5 s); is it running, and is tracking_uri right?")


@pytest.mark.parametrize("options, error, message", [
    (dict(mode="offlinee"), ValueError, "WandbWriter option mode='offlinee' is refused by W&B: Input should be "
                                        "'online', 'offline', 'shared', 'disabled', 'dryrun' or 'run'"),
    (dict(project=3), ValueError, "WandbWriter option project=3 is refused by W&B: Input should be a valid string"),
    (dict(tags=["a", 3]), ValueError, "WandbWriter option tags=['a', 3] is refused by W&B: item 1: Input should "
                                      "be a valid string"),
    (dict(settings={"x_no_such_setting": 1}), ValueError, "WandbWriter option settings={'x_no_such_setting': 1} "
                                                          "is refused by W&B: x_no_such_setting: Extra inputs are not permitted"),
    (dict(projet="x"), TypeError, "WandbWriter got an unknown option 'projet'"),
    (dict(resume="must"), TypeError, "WandbWriter sets wandb.init's 'resume' itself"),
])
def test_wandb_options_are_checked_when_the_writer_is_built(tmp_path, wandb_env, options, error, message):
    from rlearn.writers.wandb_writer import WandbWriter

    with pytest.raises(error) as refused:
        WandbWriter(tmp_path / "work", **options)
    assert str(refused.value).startswith(message), str(refused.value)
    assert not (tmp_path / "work").exists() and not list(wandb_env.iterdir())  # nothing started, nothing written
