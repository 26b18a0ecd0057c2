"""The one scalar conversion (rlearn.monitor.scalars) and the modules that use it."""

from fractions import Fraction

import numpy as np
import pytest
import torch

from policies import is_scalar as policy_is_scalar
from rlearn.logging import HistoryBuffer
from rlearn.monitor import TickMonitor, is_scalar, to_float, to_floats
from rlearn.monitor import scalars

ACCEPTED = [
    (3, 3.0), (True, 1.0), (2**70, float(2**70)), (np.float32(1.5), 1.5), (np.int64(-4), -4.0),
    (np.bool_(False), 0.0), (np.array(2.5), 2.5), (np.array([[6.0]]), 6.0), (torch.tensor(0.25), 0.25),
    (torch.tensor([7], dtype=torch.int32), 7.0), (torch.tensor(2.0, requires_grad=True) * 2, 4.0),
    (Fraction(1, 4), 0.25), (float("nan"), None),
]
REFUSED = [
    ("high", "str"), (None, "NoneType"), ([1.0], "list"), (1 + 2j, "complex"),
    (np.array([1.0, 2.0]), r"shape \(2,\)"), (np.array(["a"]), "dtype <U1"), (np.complex64(1), "complex64"),
    (torch.zeros(2, 2), r"shape \(2, 2\)"), (torch.tensor(1 + 1j), "complex"),
]


@pytest.mark.parametrize("value, expected", ACCEPTED)
def test_accepted_everywhere_the_same(value, expected):
    got = to_float(value, "k")
    assert type(got) is float and (got == expected or expected is None and got != got)
    assert is_scalar(value) and policy_is_scalar(value)
    assert to_floats([("k", value)])[0][1] == got or expected is None
    monitor = TickMonitor()
    monitor.update({"k": value})
    assert monitor.last("k") == got or expected is None
    buffer = HistoryBuffer()
    if not isinstance(value, int) or abs(value) < 1e290:
        buffer.update(value)
        assert buffer.current() == got or expected is None


@pytest.mark.parametrize("value, detail", REFUSED)
def test_refused_everywhere_with_the_key_and_type(value, detail):
    with pytest.raises(TypeError, match=rf"'my_key'.*{detail}"):
        to_float(value, "my_key")
    with pytest.raises(TypeError, match=rf"'my_key'.*{detail}"):
        to_floats([("ok", 1.0), ("my_key", value)])
    with pytest.raises(TypeError, match=rf"'my_key'.*{detail}"):
        TickMonitor().update({"my_key": value})
    with pytest.raises(TypeError, match=detail):
        HistoryBuffer().update(value)
    assert not is_scalar(value) and not policy_is_scalar(value)


def test_int_too_large_for_a_float():
    with pytest.raises(ValueError, match="'huge'.*too large"):
        to_float(10**400, "huge")
    assert not is_scalar(10**400)


def test_accelerator_tensors_take_one_copy_per_device(monkeypatch):
    monkeypatch.setattr(scalars, "CPU_DIRECT", False)
    copies = []
    real = scalars.batched_to_floats

    def counting(tensors):
        copies.append(len(tensors))
        return real(tensors)

    monkeypatch.setattr(scalars, "batched_to_floats", counting)
    out = to_floats([(f"k{i}", torch.tensor(float(i))) for i in range(5)] + [("plain", 2)])
    assert copies == [5] and out == [(f"k{i}", float(i)) for i in range(5)] + [("plain", 2.0)]
