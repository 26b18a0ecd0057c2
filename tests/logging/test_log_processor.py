"""LogProcessor: construction-time validation and what collect() returns."""

import math

import pytest

from rlearn.logging import HistoryBuffer, LogProcessor, LogProcessorConfigError, MessageHub


def _hub():
    hub = MessageHub("lp")
    for i in range(1, 21):  # loss = i, time = i / 10, lr = i / 100, episode = i
        hub.update_scalars({"train/loss": float(i), "train/time": i / 10, "train/lr": i / 100, "train/episode": i})
    hub.update_scalar("val/acc", 0.9)
    return hub


def test_default_statistics():
    out = LogProcessor(window_size=10).collect(_hub(), prefix="train")
    assert list(out) == ["loss", "time", "lr", "episode"]
    assert out["loss"] == sum(range(11, 21)) / 10  # 15.5: windowed mean
    assert out["time"] == pytest.approx(1.55, rel=1e-15)
    assert out["lr"] == 0.2 and out["episode"] == 20.0  # current value
    assert LogProcessor().collect(_hub(), prefix="val") == {"acc": 0.9}
    assert LogProcessor(window_size="global").collect(_hub())["loss"] == 10.5


def test_smooth_keys_and_empty_prefix():
    out = LogProcessor(window_size=5, smooth_keys=["episode"]).collect(_hub())
    assert out["episode"] == 18.0 and out["lr"] == 0.2
    everything = LogProcessor(window_size=5).collect(_hub(), prefix="")
    assert set(everything) == {"train/loss", "train/time", "train/lr", "train/episode", "val/acc"}


def test_seed_override_and_add():
    hub = _hub()
    override = LogProcessor(window_size=10, custom_cfg=[dict(data_src="loss", method_name="mean", window_size=20)])
    assert override.collect(hub)["loss"] == 10.5
    added = LogProcessor(
        window_size=10, custom_cfg=[dict(data_src="loss", log_name="loss_min", method_name="min", window_size=100)]
    )
    out = added.collect(hub)
    assert out["loss"] == 15.5 and out["loss_min"] == 1.0
    assert list(out)[:2] == ["loss", "loss_min"]  # an added statistic follows its source
    glob = LogProcessor(custom_cfg=[dict(data_src="lr", log_name="lr_max", method_name="max", window_size="global")])
    assert glob.collect(hub)["lr_max"] == 0.2
    # an entry without window_size on a windowed statistic uses the processor's window
    default_window = LogProcessor(window_size=4, custom_cfg=[dict(data_src="episode", method_name="min")])
    assert default_window.collect(hub)["episode"] == 17.0
    current = LogProcessor(custom_cfg=[dict(data_src="loss", method_name="current")])
    assert current.collect(hub)["loss"] == 20.0


def test_custom_statistic_with_extra_arguments():
    name = "scaled_mean_for_lp_test"

    def scaled(self, window_size=None, scale=1.0):
        return self.mean(window_size) * scale

    HistoryBuffer.register_statistics(scaled, name=name)
    try:
        proc = LogProcessor(
            custom_cfg=[dict(data_src="loss", log_name="loss_x2", method_name=name, scale=2.0, window_size=2)]
        )
        assert proc.collect(_hub())["loss_x2"] == 39.0
        with pytest.raises(LogProcessorConfigError, match=r"custom_cfg\[0\].*'loss'.*takes.*unexpected"):
            LogProcessor(custom_cfg=[dict(data_src="loss", log_name="l", method_name=name, scal=2.0)])
    finally:
        del HistoryBuffer._own_statistics[name]


def test_absent_source_is_not_fabricated_and_nan_windows_stay_nan():
    hub = MessageHub("lp2")
    hub.update_scalar("train/loss", math.nan)
    proc = LogProcessor(custom_cfg=[dict(data_src="actor_loss", log_name="actor_min", method_name="min")])
    out = proc.collect(hub)
    assert list(out) == ["loss"] and math.isnan(out["loss"])
    hub.update_scalar("train/loss", 2.0)
    assert proc.collect(hub)["loss"] == 2.0  # the NaN is skipped, not averaged in


def test_collect_defaults_to_current_hub_and_detects_name_collisions():
    saved = MessageHub._instances
    try:
        MessageHub._instances = type(saved)()
        hub = MessageHub.get_instance("current")
        hub.update_scalars({"train/loss": 1.0, "train/loss_min": 5.0})
        proc = LogProcessor(custom_cfg=[dict(data_src="loss", log_name="loss_min", method_name="min")])
        with pytest.raises(ValueError, match=r"'loss_min' is produced by both train/loss \(min\) and train/loss_min"):
            proc.collect()
        assert LogProcessor().collect() == {"loss": 1.0, "loss_min": 5.0}
    finally:
        MessageHub._instances = saved


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(window_size=0), "window_size must be a positive int or 'global'"),
        (dict(window_size="epoch"), "'epoch' windows are not supported"),
        (dict(window_size=2.5), "window_size"),
        (dict(custom_cfg=[dict(method_name="mean")]), r"custom_cfg\[0\] is missing the required field 'data_src'"),
        (dict(custom_cfg=[dict(data_src="loss")]), r"missing the required field 'method_name'"),
        (dict(custom_cfg=[dict(data_src="loss", method_name="median")]), r"unknown statistic 'median'.*mean"),
        (dict(custom_cfg=[dict(data_src="loss", method_name="mean", window_size=-1)]), r"'loss'.*window_size"),
        (dict(custom_cfg=[dict(data_src="loss", method_name="mean", window_size="epoch")]), "epoch"),
        (
            dict(custom_cfg=[dict(data_src="a", log_name="x", method_name="min"), dict(data_src="b", log_name="x", method_name="max")]),
            r"custom_cfg\[1\] and custom_cfg\[0\] both produce the log name 'x'",
        ),
        (
            dict(custom_cfg=[dict(data_src="loss", method_name="min"), dict(data_src="loss", method_name="max")]),
            "both produce the log name 'loss'",
        ),
        (
            dict(custom_cfg=[dict(data_src="loss", log_name="lr", method_name="min"), dict(data_src="lr", method_name="max")]),
            "log_name 'lr' is also a data_src",
        ),
        (dict(custom_cfg=[dict(data_src="loss", log_name="", method_name="min")]), "log_name must be a non-empty str"),
        (dict(custom_cfg=[dict(data_src="loss", method_name="current", window_size=3)]), r"'current' takes \(\)"),
        (dict(custom_cfg=dict(data_src="loss", method_name="mean")), "list of dicts"),
        (dict(custom_cfg=["loss"]), r"custom_cfg\[0\] must be a dict"),
    ],
)
def test_validation_errors(kwargs, match):
    with pytest.raises(LogProcessorConfigError, match=match):
        LogProcessor(**kwargs)
