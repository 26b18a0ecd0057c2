"""MessageHub: the runtime-state bus (MMEngine's info API), named instances, resumed keys in the state."""

import io
from collections import OrderedDict

import pytest
import torch

from rlearn.logging import MessageHub


@pytest.fixture(autouse=True)
def isolated_instances():
    """Each test sees an empty instance registry; the previous one is restored afterwards."""
    saved = MessageHub._instance_dict
    MessageHub._instance_dict = OrderedDict()
    yield
    MessageHub._instance_dict = saved


def test_mmengine_doc_runtime_info_and_cross_component_example():
    hub = MessageHub.get_instance("task")
    hub.update_info("iter", 1)
    assert hub.get_info("iter") == 1
    hub.update_info("iter", 2)
    assert hub.get_info("iter") == 2
    assert hub.get_info("missing") is None and hub.get_info("missing", 7) == 7
    assert dict(hub.runtime_info) == {"iter": 2}

    # components that only know the hub's name see the same object
    MessageHub.get_instance("name").update_info("lr", 0.001)
    MessageHub.get_instance("name").update_info("meta", dict(experiment="x.py", repo="rlearn"))
    hub = MessageHub.get_instance("name")
    assert hub.get_info("lr") == 0.001
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
    with pytest.raises(TypeError):
        MessageHub.get_instance("c", max_state_length=5)  # not an option of MessageHub
    with pytest.raises(TypeError, match="name"):
        MessageHub("")


def test_update_info_dict_pop_info_and_resumed_keys():
    hub = MessageHub("h")
    hub.update_info_dict({"train_iter": 3, "envstep": 600})
    hub.update_info("env", object(), resumed=False)  # a per-process handle: not saved
    hub.update_info("lr", [0.1])
    assert hub.resumed_keys == ["train_iter", "envstep", "lr"]
    with pytest.raises(TypeError, match="key"):
        hub.update_info_dict({"ok": 1, 3: 2})
    assert hub.get_info("ok") is None  # checked first: nothing set
    with pytest.raises(TypeError, match="mapping"):
        hub.update_info_dict([("a", 1)])
    assert hub.pop_info("lr") == [0.1] and hub.get_info("lr") is None
    assert hub.pop_info("lr", None) is None and hub.pop_info("missing", 5) == 5
    with pytest.raises(KeyError, match=r"no info 'envstp'.*Did you mean 'envstep'"):
        hub.pop_info("envstp")
    hub.update_info("train_iter", 4, resumed=False)  # switching a key off removes it from the state
    state = hub.state_dict()
    assert state["runtime_info"] == {"envstep": 600}

    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    other = MessageHub("restored")
    other.update_info("kept", 1, resumed=False)
    other.load_state_dict(torch.load(buffer, weights_only=True))  # plain containers: safe loading works
    assert dict(other.runtime_info) == {"kept": 1, "envstep": 600}
    assert other.resumed_keys == ["envstep"]


def test_load_state_dict_rejects_corrupt_state_without_changes():
    hub = MessageHub("h")
    hub.update_info("iter", 3)
    good = hub.state_dict()
    corrupt_states = [
        ({"log_scalars": {}}, KeyError, "runtime_info"),
        ({"runtime_info": {}}, KeyError, "log_scalars"),
        ({"log_scalars": {}, "runtime_info": []}, TypeError, "mapping"),
        ({"log_scalars": {}, "runtime_info": {3: 1}}, TypeError, "key"),
        ({"log_scalars": {"x": {"max_length": 2}}, "runtime_info": {}}, KeyError, "log_history"),
    ]
    target = MessageHub("target")
    target.update_info("iter", 70)
    for state, error, match in corrupt_states:
        with pytest.raises(error, match=match):
            target.load_state_dict(state)
    assert dict(target.runtime_info) == {"iter": 70} and not target.log_scalars
    target.load_state_dict(good)
    assert target.get_info("iter") == 3


def test_state_dict_skips_runtime_info_that_cannot_be_copied():
    hub = MessageHub("h")
    hub.update_info("lock", __import__("threading").Lock())
    hub.update_info("iter", 1)
    with pytest.warns(UserWarning, match="'lock' is not saved"):
        state = hub.state_dict()
    assert state["runtime_info"] == {"iter": 1}


def test_a_bad_scalar_names_its_key_and_leaves_no_history():
    hub = MessageHub("h")
    with pytest.raises(TypeError, match="'new_key'"):
        hub.update_scalar("new_key", "not a number")
    with pytest.raises(ValueError, match="count of 'other'"):
        hub.update_scalar("other", 1.0, count=0)
    assert not hub.log_scalars  # no empty HistoryBuffer was left behind
    hub.update_scalar("loss", 2.0, count=4)
    assert hub.get_scalar("loss").mean() == 0.5
    with pytest.raises(KeyError, match=r"no scalar 'los'\. Did you mean 'loss'"):
        hub.get_scalar("los")
