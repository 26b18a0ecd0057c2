"""MessageHub: seed 000's examples, named instances, all-or-nothing updates, bounded state round trip."""

import io
import math
import pickle
from collections import OrderedDict

import numpy as np
import pytest
import torch

from rlearn.logging import HistoryBuffer, MessageHub


@pytest.fixture(autouse=True)
def isolated_instances():
    """Each test sees an empty instance registry; the previous one is restored afterwards."""
    saved = MessageHub._instances
    MessageHub._instances = OrderedDict()
    yield
    MessageHub._instances = saved


def test_seed_scalars_example():
    hub = MessageHub.get_instance("task")
    hub.update_scalar("train/loss", 1, 1)
    assert hub.get_scalar("train/loss").current() == 1
    hub.update_scalar("train/loss", 3, 1)
    assert hub.get_scalar("train/loss").mean() == 2
    hub.update_scalar("train/lr", 0.1, 1)
    hub.update_scalars({"train/time": {"value": 0.1, "count": 1}, "train/data_time": {"value": 0.1, "count": 1}})
    assert isinstance(hub.get_scalar("train/time"), HistoryBuffer)
    log_dict = hub.log_scalars
    assert list(log_dict) == ["train/loss", "train/lr", "train/time", "train/data_time"]
    assert log_dict["train/lr"].current() == 0.1 and log_dict["train/data_time"].current() == 0.1
    with pytest.raises(TypeError):
        log_dict["x"] = HistoryBuffer()  # a read-only view


def test_seed_runtime_info_and_cross_component_example():
    hub = MessageHub.get_instance("task")
    hub.update_info("iter", 1)
    assert hub.get_info("iter") == 1
    hub.update_info("iter", 2)
    assert hub.get_info("iter") == 2
    assert hub.get_info("missing") is None and hub.get_info("missing", 7) == 7
    assert dict(hub.runtime_info) == {"iter": 2}

    # components that only know the hub's name see the same object
    MessageHub.get_instance("name").update_scalar("train/lr", 0.001)
    MessageHub.get_instance("name").update_info("meta", dict(experiment="x.py", repo="rlearn"))
    MessageHub.get_instance("name").update_scalar("train/loss", 0.1)
    hub = MessageHub.get_instance("name")
    assert hub.get_scalar("train/lr").current() == 0.001
    assert hub.get_scalar("train/loss").current() == 0.1
    assert hub.get_info("meta") == {"experiment": "x.py", "repo": "rlearn"}


def test_instances_current_and_default():
    current = MessageHub.get_current_instance()  # none yet: the default one is created
    assert current.instance_name == "rlearn" and MessageHub.check_instance_created("rlearn")
    first = MessageHub.get_instance("a")
    second = MessageHub.get_instance("b")
    assert MessageHub.get_current_instance() is second
    assert MessageHub.get_instance("a") is first  # returned, not re-created
    assert MessageHub.get_current_instance() is second
    private = MessageHub("private")
    assert MessageHub.get_current_instance() is second and not MessageHub.check_instance_created("private")
    assert private is not MessageHub.get_instance("private")
    with pytest.raises(ValueError, match="max_state_length"):
        MessageHub.get_instance("a", max_state_length=5)
    with pytest.raises(TypeError, match="name"):
        MessageHub("")


def test_update_scalar_accepts_tensors_and_rejects_bad_values_naming_the_key():
    hub = MessageHub("h")
    hub.update_scalar("train/loss", torch.tensor(0.5))
    hub.update_scalar("train/loss", np.float32(1.5), count=torch.tensor(3))
    assert hub.get_scalar("train/loss").data[1].tolist() == [1, 3]
    with pytest.raises(TypeError, match=r"'train/loss'.*shape \(2,\)"):
        hub.update_scalar("train/loss", torch.zeros(2))
    with pytest.raises(TypeError, match=r"'train/new'.*str"):
        hub.update_scalar("train/new", "0.1")
    with pytest.raises(ValueError, match=r"'train/new'.*count"):
        hub.update_scalar("train/new", 1.0, count=0)
    with pytest.raises(TypeError, match="key"):
        hub.update_scalar(3, 1.0)
    assert list(hub.log_scalars) == ["train/loss"]  # nothing created by the failures
    assert hub.get_scalar("train/loss").data[0].tolist() == [0.5, 1.5]


def test_update_scalars_is_all_or_nothing():
    hub = MessageHub("h")
    hub.update_scalars({"train/a": 1.0})
    bad_updates = [
        ({"train/a": 2.0, "train/b": [1, 2]}, TypeError, "'train/b'"),
        ({"train/a": 2.0, "train/b": {"count": 2}}, ValueError, r"'train/b'.*'value'"),
        ({"train/a": 2.0, "train/b": {"value": 1, "cnt": 2}}, ValueError, r"'train/b'.*cnt"),
        ({"train/a": 2.0, "train/b": {"value": 1, "count": -1}}, ValueError, r"'train/b'.*count"),
        ({"train/a": 2.0, None: 1.0}, TypeError, "key"),
    ]
    for mapping, error, match in bad_updates:
        with pytest.raises(error, match=match):
            hub.update_scalars(mapping)
    assert list(hub.log_scalars) == ["train/a"]
    assert hub.get_scalar("train/a").data[0].tolist() == [1.0]
    with pytest.raises(TypeError, match="mapping"):
        hub.update_scalars([("train/a", 1.0)])
    hub.update_scalars({"train/a": 2.0, "train/b": {"value": torch.tensor(4.0), "count": 2}})
    assert hub.get_scalar("train/a").mean() == 1.5 and hub.get_scalar("train/b").mean() == 2.0


def test_get_scalar_error_lists_known_keys():
    hub = MessageHub("h")
    hub.update_scalars({"train/loss": 1.0, "train/lr": 0.1})
    with pytest.raises(KeyError) as info:
        hub.get_scalar("train/los")
    message = str(info.value)
    assert "'train/los'" in message and "Did you mean 'train/loss'" in message
    assert "Known scalars: 'train/loss', 'train/lr'" in message


def test_state_round_trip_is_bounded_and_plain():
    hub = MessageHub("h", max_state_length=100)
    for i in range(5000):
        hub.update_scalar("train/loss", float(i), count=2)
        if i % 10 == 0:
            hub.update_scalar("train/actor_loss", math.nan if i == 4990 else float(i))
    hub.update_info("iter", 5000)
    hub.update_info("meta", {"exp": "td3"})
    state = hub.state_dict()
    assert len(state["log_scalars"]["train/loss"]["log_history"]) == 100
    assert len(state["log_scalars"]["train/actor_loss"]["log_history"]) == 100
    assert len(pickle.dumps(state)) < 20_000  # a checkpoint stays small however long the run

    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=True)  # plain containers: safe loading works

    other = MessageHub("restored", max_state_length=100)
    other.update_scalar("val/acc", 0.5)  # kept: not in the state
    other.load_state_dict(loaded)
    assert other.get_info("iter") == 5000 and other.get_info("meta") == {"exp": "td3"}
    restored = other.get_scalar("train/loss")
    assert restored.data[0].tolist() == [float(i) for i in range(4900, 5000)]
    assert restored.data[1].tolist() == [2.0] * 100
    assert restored.mean(10) == hub.get_scalar("train/loss").mean(10)
    actor = other.get_scalar("train/actor_loss")
    assert math.isnan(actor.current()) and actor.nonfinite() == 1
    assert actor.mean(2) == 4980.0
    assert other.get_scalar("val/acc").current() == 0.5
    # the restored hub keeps going
    other.update_scalar("train/loss", 5000.0, count=2)
    assert other.get_scalar("train/loss").current() == 5000.0


def test_load_state_dict_rejects_corrupt_state_without_changes():
    hub = MessageHub("h")
    hub.update_scalar("train/loss", 1.0)
    hub.update_info("iter", 3)
    good = hub.state_dict()
    corrupt_states = [
        ({"log_scalars": {}}, KeyError, "runtime_info"),
        ({"log_scalars": [], "runtime_info": {}}, TypeError, "mappings"),
        ({"log_scalars": {"train/x": {"log_history": [1.0]}}, "runtime_info": {}}, KeyError, "train/x"),
        (
            {"log_scalars": {"train/x": {"log_history": [1.0, "a"], "count_history": [1, 1]}}, "runtime_info": {}},
            TypeError,
            r"train/x.*log_history\[1\]",
        ),
        (
            {"log_scalars": {"train/x": {"log_history": [1.0], "count_history": [0]}}, "runtime_info": {}},
            ValueError,
            "train/x",
        ),
        ({**good, "version": 99}, ValueError, "version"),
    ]
    target = MessageHub("target")
    target.update_scalar("train/loss", 7.0)
    target.update_info("iter", 70)
    for state, error, match in corrupt_states:
        with pytest.raises(error, match=match):
            target.load_state_dict(state)
    assert list(target.log_scalars) == ["train/loss"] and target.get_scalar("train/loss").data[0].tolist() == [7.0]
    assert dict(target.runtime_info) == {"iter": 70}


def test_state_dict_skips_runtime_info_that_cannot_be_copied():
    hub = MessageHub("h")
    hub.update_info("lock", __import__("threading").Lock())
    hub.update_info("iter", 1)
    with pytest.warns(UserWarning, match="'lock' is not saved"):
        state = hub.state_dict()
    assert state["runtime_info"] == {"iter": 1}
