"""rlearn.registry.Registry: registration forms, look-up errors, building from config dicts."""

import pytest

from rlearn.registry import HOOKS, Registry, RegistryError


def make_registry():
    reg = Registry("widget")

    @reg.register
    class Plain:
        def __init__(self, size=1):
            self.size = size

    @reg.register("named")
    class Named:
        def __init__(self, a, b=2):
            self.a, self.b = a, b

    @reg.register(name="kw")
    class Keyword:
        pass

    def factory(x):
        return ("built", x)

    reg.register(factory, name="from_factory")
    return reg, Plain, Named, Keyword


def test_register_forms_and_lookup():
    reg, Plain, Named, Keyword = make_registry()
    assert reg.names() == ["Plain", "from_factory", "kw", "named"]
    assert reg.get("Plain") is Plain and reg.get("named") is Named and reg.get("kw") is Keyword
    assert "named" in reg and "Named" not in reg and len(reg) == 4
    assert list(reg) == reg.names()
    assert "widget" in repr(reg)


def test_build_passes_the_other_keys_and_does_not_modify_the_config():
    reg, Plain, Named, _ = make_registry()
    cfg = {"type": "named", "a": 1}
    obj = reg.build(cfg)
    assert isinstance(obj, Named) and (obj.a, obj.b) == (1, 2)
    assert cfg == {"type": "named", "a": 1}
    assert reg.build({"type": "Plain"}, size=5).size == 5  # overrides
    assert reg.build({"type": Plain, "size": 3}).size == 3  # a registered class as the type
    assert reg.build({"type": "from_factory", "x": 9}) == ("built", 9)


def test_unknown_type_lists_the_known_names_and_suggests():
    reg, *_ = make_registry()
    with pytest.raises(KeyError) as info:
        reg.build({"type": "nmaed"})
    message = str(info.value)
    assert message == (
        "unknown widget type 'nmaed'. Did you mean 'named'? Known widget types: Plain, from_factory, kw, named"
    )
    with pytest.raises(ValueError, match="unknown widget type 'zzz'. Known widget types"):  # also a ValueError
        reg.get("zzz")
    with pytest.raises(RegistryError, match="no 'type' key"):
        reg.build({"size": 3})
    with pytest.raises(RegistryError, match="must be a registered name"):
        reg.build({"type": 3})
    with pytest.raises(RegistryError, match="must be a registered name"):
        reg.build({"type": dict})  # a class, but not a registered one
    empty = Registry("thing")
    with pytest.raises(KeyError, match=r"\(none registered\)"):
        empty.get("x")


def test_bad_arguments_name_the_type():
    reg, *_ = make_registry()
    with pytest.raises(TypeError, match=r"cannot build widget 'named' from \{'type': 'named', 'c': 1\}.*'c'"):
        reg.build({"type": "named", "c": 1})
    with pytest.raises(TypeError, match="must be a dict with a 'type' key"):
        reg.build(["named"])
    with pytest.raises(TypeError, match="names are strings"):
        reg.get(3)


def test_duplicate_registration_is_an_error_unless_forced():
    reg, Plain, *_ = make_registry()

    class Other:
        pass

    with pytest.raises(ValueError, match=r"'Plain' is already taken by .*Plain"):
        reg.register(Other, name="Plain")
    assert reg.get("Plain") is Plain
    reg.register(Plain)  # registering the same object again under the same name is harmless
    reg.register(Other, name="Plain", force=True)
    assert reg.get("Plain") is Other


def test_bad_registrations():
    reg = Registry("widget")
    with pytest.raises(TypeError, match="classes or callables"):
        reg.register(3, name="three")
    with pytest.raises(TypeError, match="non-empty str"):
        reg.register(lambda: None, name="")
    with pytest.raises(TypeError, match="give the name once"):
        reg.register("a", name="b")
    with pytest.raises(TypeError, match="non-empty str"):
        Registry("")


def test_hooks_registry_holds_the_built_in_hooks():
    import rlearn.hooks  # noqa: F401 - importing registers them

    assert {"LRSchedulerHook", "TimerHook"} <= set(HOOKS.names())


# ------------------------------------------------------------------------------------------- policies
def test_rlearn_never_imports_policies_at_import_time():
    """rlearn's registry and config (which policies.base imports) load without importing ``policies``: no
    circle at import time; ``policies`` comes in where a policy type is resolved."""
    import subprocess
    import sys

    code = ("import sys, rlearn.registry, rlearn.config, rlearn.config.loading, rlearn.config.docs\n"
            "assert not [m for m in sys.modules if m == 'policies' or m.startswith('policies.')], sorted(sys.modules)\n"
            "from rlearn.registry import get_policy_class\n"
            "cls = get_policy_class('td3')\n"
            "assert cls.__module__ == 'policies.td3' and 'policies' in sys.modules\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_bundled_policies_register_themselves_like_a_users():
    """Every bundled name is a class put there by its module's @register_policy (no table of import strings);
    a user's policy registers the same way and can take a name over only by registering again."""
    import policies
    from rlearn.registry import POLICIES, get_policy_class, register_policy, registered_policies

    bundled = {"td3": policies.TD3Policy, "sac": policies.SACPolicy, "ppo": policies.PPOPolicy,
               "ppg": policies.PPGPolicy, "dqn": policies.DQNPolicy}
    assert set(bundled) <= set(registered_policies())
    for name, cls in bundled.items():
        assert POLICIES.get(name) is cls and get_policy_class(name) is cls

    @register_policy("registry_test_policy")
    class Mine(policies.DQNPolicy):
        pass

    try:
        assert get_policy_class("registry_test_policy") is Mine and "registry_test_policy" in registered_policies()
        with pytest.raises(TypeError, match="expects a Policy subclass"):
            register_policy("not_a_policy")(dict)
        with pytest.raises(KeyError, match="unknown policy type 'td4'; registered: .*td3"):
            get_policy_class("td4")
        with pytest.raises(TypeError, match="not a policies.Policy subclass"):
            get_policy_class("collections:OrderedDict")
    finally:
        POLICIES._entries.pop("registry_test_policy", None)
