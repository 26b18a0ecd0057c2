"""``rlearn tune``: trials are separate runs whose logs hold only their own values (``--jobs 2``), pruning
stops a trial and says so in its logs, the best config trains, and a killed study continues."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

optuna = pytest.importorskip("optuna")

from rlearn.experiments.child import ExperimentError, wait_until_free  # noqa: E402
from rlearn.experiments.tune import load_space, override_text  # noqa: E402

SPACE = '''
import optuna


def space(trial):
    return {"policy.lr": trial.suggest_float("lr", 1e-4, 1e-2, log=True)}


class EvenTrialsPruner(optuna.pruners.BasePruner):
    """Prunes the even trials at their first evaluation, so that pruning surely happens."""

    def prune(self, study, trial):
        return trial.number % 2 == 0


def pruner():
    return EvenTrialsPruner()
'''

#: PPO for 6 iterations, an evaluation every 2, a table every iteration (cur_lr_avg: the trial's lr, decaying)
BUDGET = ["train.max_env_steps=1536", "eval.freq=512", "eval.episodes=2", "eval.num_envs=2", "learner.log_freq=1"]


def load_study(out: Path, name: str = "ppo_cartpole"):
    """The study of a tuning dir, read through Optuna's own journal reader."""
    from optuna.storages.journal import JournalFileBackend

    return optuna.load_study(study_name=name, storage=optuna.storages.JournalStorage(JournalFileBackend(str(out / "study.journal"))))


def tune_command(out: Path, space: Path, trials: int, jobs: int = 2) -> list:
    return [sys.executable, "-m", "rlearn", "tune", "ppo_cartpole", "--space", str(space), "--trials", str(trials),
            "--jobs", str(jobs), "--out", str(out), "--sampler-seed", "0", "--no-progress", "--set", *BUDGET]


def test_override_text_and_space_errors(tmp_path):
    assert override_text("policy.lr", 0.001) == "policy.lr=0.001"
    assert override_text("policy.hidden_sizes", [64, 64]) == "policy.hidden_sizes=[64, 64]"
    assert override_text("policy.activation", "relu") == "policy.activation=relu"
    bad = tmp_path / "bad_space.py"
    bad.write_text("x = 1\n")
    with pytest.raises(ExperimentError, match="must define a function space"):
        load_space(bad)
    with pytest.raises(ExperimentError, match="does not exist"):
        load_space(tmp_path / "missing.py")


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    root = tmp_path_factory.mktemp("tune")
    space = root / "space.py"
    space.write_text(SPACE)
    out = root / "exp"
    done = subprocess.run(tune_command(out, space, 4), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    return out, load_study(out), done


def test_four_trials_each_with_its_own_logs(study):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import metadata as hp_metadata

    from rlearn.writers.jsonl import read_jsonl

    out, loaded, _ = study
    trials = sorted(loaded.get_trials(), key=lambda t: t.number)
    assert [(t.number, t.state.name) for t in trials] == [(0, "PRUNED"), (1, "COMPLETE"), (2, "PRUNED"), (3, "COMPLETE")]
    lrs = [t.params["lr"] for t in trials]
    assert len(set(lrs)) == 4
    for trial, lr in zip(trials, lrs):
        work_dir = out / f"trial_{trial.number}"
        assert trial.user_attrs["work_dir"] == str(work_dir)
        assert f"    'lr': {lr!r}," in (work_dir / "config.py").read_text()
        # metrics.jsonl: the lr this trial trained with, decaying linearly from its own sampled value only
        logged = [r["cur_lr_avg"] for r in read_jsonl(work_dir / "metrics.jsonl") if "cur_lr_avg" in r]
        assert logged[0] == lr
        assert all(lr * (1 - 7 / 391) <= v <= lr for v in logged)
        others = [x for x in lrs if abs(x - lr) > 0.02 * lr]  # lrs this trial's decay cannot reach
        assert not any(v == x for v in logged for x in others)
        # TensorBoard (its own reader): the same curve, and one HParams session with this trial's lr
        acc = EventAccumulator(str(work_dir / "tb"), size_guidance={"scalars": 0, "tensors": 0})
        acc.Reload()
        assert [e.value for e in acc.Scalars("learner_iter/cur_lr_avg")] == pytest.approx(logged, rel=1e-6)
        start = hp_metadata.parse_session_start_info_plugin_data(
            acc.SummaryMetadata("_hparams_/session_start_info").plugin_data.content)
        assert start.hparams["policy.lr"].number_value == lr
        # what was reported to Optuna is this trial's evaluations.jsonl
        evaluations = [json.loads(line) for line in (work_dir / "evaluations.jsonl").read_text().splitlines()]
        means = {e["envstep"]: sum(e["returns"]) / len(e["returns"]) for e in evaluations}
        assert trial.intermediate_values == {k: means[k] for k in trial.intermediate_values}
        if trial.state.name == "COMPLETE":
            assert trial.intermediate_values == means and trial.value == means[1536]
            assert "pruned" not in (work_dir / "ppo_cartpole.log").read_text()
        else:
            assert list(trial.intermediate_values) == [512]
            log = (work_dir / "ppo_cartpole.log").read_text()
            assert "resume with:" not in log and "resume with:" not in (work_dir / "console.log").read_text()
            assert f"pruned by rlearn tune: trial {trial.number} of study 'ppo_cartpole', evaluation return " \
                   f"{means[512]:.4g} at envstep 512" in log
            texts = [t.tensor_proto.string_val[0].decode() for t in acc.Tensors("tune/pruned/text_summary")]
            assert texts and texts[0].startswith(f"pruned by rlearn tune: trial {trial.number}")


def test_best_config_trains_as_is(study, tmp_path):
    out, loaded, done = study
    best = max((t for t in loaded.get_trials() if t.state.name == "COMPLETE"), key=lambda t: t.value)
    config = out / "best_config.py"
    assert f"    'lr': {best.params['lr']!r}," in config.read_text()
    assert f"best: trial {best.number}" in done.stdout
    run = subprocess.run([sys.executable, "-m", "rlearn", "train", str(config), "--work-dir", str(tmp_path / "best"),
                          "--no-progress"], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    assert (tmp_path / "best" / "ckpt" / "latest.pt").is_file()


@pytest.mark.slow
def test_a_killed_study_resumes_its_running_trials(tmp_path):
    """SIGKILL of the tuner while its trials train: started again, the same trials continue (from their
    checkpoint, or from scratch when they stopped without one) and the study reaches its trial count."""
    space = tmp_path / "space.py"
    space.write_text(SPACE.replace("return trial.number % 2 == 0", "return False"))
    out = tmp_path / "exp"
    command = tune_command(out, space, 2)
    command[command.index("train.max_env_steps=1536")] = "train.max_env_steps=8192"
    first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 300
    while not all((out / f"trial_{n}" / "evaluations.jsonl").is_file() for n in (0, 1)):
        assert time.monotonic() < deadline, "no trial evaluated"
        time.sleep(0.2)
    first.kill()  # SIGKILL: the kernel sends the trials SIGTERM; they stop, with or without a checkpoint
    first.communicate(timeout=60)
    for n in (0, 1):
        assert wait_until_free(out / f"trial_{n}", timeout_s=120), "a trial did not stop"
    second = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert second.returncode == 0, second.stdout + second.stderr
    assert second.stdout.count("its worker is gone; queued again") == 2
    loaded = load_study(out)
    # the killed tuner's trials 0 and 1 were failed and queued again as 2 and 3, in the same work dirs
    assert sorted((t.number, t.state.name) for t in loaded.get_trials()) == [(0, "FAIL"), (1, "FAIL"), (2, "COMPLETE"),
                                                                             (3, "COMPLETE")]
    assert "2 complete, 2 retried" in second.stdout
    for trial in loaded.get_trials(states=(optuna.trial.TrialState.COMPLETE,)):
        work_dir = Path(trial.user_attrs["work_dir"])
        assert work_dir.name == f"trial_{trial.system_attrs['failed_trial']}"
        evaluations = [json.loads(line)["envstep"] for line in (work_dir / "evaluations.jsonl").read_text().splitlines()]
        # one evaluation per 512 steps (a trial stopped right at one evaluates it after its next iteration)
        assert len(evaluations) == 16 and all(512 * k <= e < 512 * k + 256 for k, e in enumerate(evaluations, 1))
        # each reported once, on the 512-step grid, none lost
        assert sorted(trial.intermediate_values) == [512 * k for k in range(1, 17)]


@pytest.mark.slow
def test_optuna_dashboard_shows_the_study(study, tmp_path):
    """optuna-dashboard, served on 127.0.0.1, opens the study in headless Chromium: its trials, the best
    one and the pruned ones."""
    from tests.experiments.dashboard import dashboard_binary, dashboard_screenshot
    from tests.ui.browser import missing

    if missing() or not dashboard_binary():
        pytest.skip(missing() or "optuna-dashboard is not installed (pip install 'rlearn[dashboard]')")
    out, loaded, _ = study
    best = max((t for t in loaded.get_trials() if t.state.name == "COMPLETE"), key=lambda t: t.value)
    text = dashboard_screenshot(str(out / "study.journal"), "ppo_cartpole", tmp_path / "dashboard.png",
                                wait_for=(f"Best Trial (number={best.number})", "Pruned", "Intermediate values"))
    assert f"lr: {best.params['lr']}" in text
    assert (tmp_path / "dashboard.png").stat().st_size > 20_000


def test_hparams_tab_lists_every_trial_side_by_side(study):
    """What TensorBoard's HParams tab reads over ``--logdir EXP``, through its own hparams backend: one
    session per trial, pruned ones included, with its lr and its final (or last) evaluation return."""
    from tensorboard import context
    from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
    from tensorboard.plugins import base_plugin
    from tensorboard.plugins.hparams import backend_context

    out, loaded, _ = study
    mux = plugin_event_multiplexer.EventMultiplexer()
    mux.AddRunsFromDirectory(str(out))
    mux.Reload()
    provider = data_provider.MultiplexerDataProvider(mux, str(out))
    ctx = backend_context.Context(base_plugin.TBContext(logdir=str(out), multiplexer=mux, data_provider=provider))
    request = context.RequestContext()
    sessions = ctx.hparams_metadata(request, "")
    assert sorted(sessions) == [f"trial_{n}/tb" for n in range(4)]
    last = ctx.read_last_scalars(request, "", None)
    for trial in loaded.get_trials():
        score = last[f"trial_{trial.number}/tb"]["hparams/evaluator/episode_return_mean"].value
        expected = trial.value if trial.state.name == "COMPLETE" else trial.intermediate_values[512]
        assert score == pytest.approx(expected, rel=1e-6)


def test_an_unusable_storage_is_a_one_line_error(tmp_path):
    space = tmp_path / "space.py"
    space.write_text(SPACE)
    command = tune_command(tmp_path / "exp", space, 1)
    command[command.index("--out"):command.index("--out")] = ["--storage", "postgresql://rlearn:pw@127.0.0.1:9/optuna"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rlearn tune: error: --storage postgresql://rlearn:***@127.0.0.1:9/optuna: ")
    assert not (tmp_path / "exp").exists()  # nothing recorded: the same command with a working --storage starts afresh


def test_a_continued_study_with_the_same_sampler_seed_does_not_repeat_its_trials(tmp_path):
    from rlearn.experiments.tune import Tuner

    space = tmp_path / "space.py"
    space.write_text(SPACE)
    first = Tuner("ppo_cartpole", space, trials=2, exp_dir=tmp_path / "exp", sampler_seed=0)
    asked = [first.study.ask() for _ in range(2)]
    drawn = [t.suggest_float("lr", 1e-4, 1e-2, log=True) for t in asked]
    for trial in asked:
        first.study.tell(trial, 1.0)
    again = Tuner("ppo_cartpole", space, trials=4, exp_dir=tmp_path / "exp", sampler_seed=0)
    more = [again.study.ask().suggest_float("lr", 1e-4, 1e-2, log=True) for _ in range(2)]
    assert drawn[0] != drawn[1] and not set(more) & set(drawn)
